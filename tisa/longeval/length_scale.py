"""Whether a converted model reads long documents better with log-n attention scaling,
decided on held-out draws of the long-input tasks (run by ``experiments/length_scale.py``).

    tisa convert sentence-transformers/all-MiniLM-L6-v2 --output-dir runs/convert
    python experiments/length_scale.py runs/convert --output-dir runs/length-scale

The converted model (``CONVERT_DIR/model``) is scored by ``tisa longeval`` as it is and
with each other ``--values`` setting of ``length_scale`` (``none``: no scaling; a number N:
logits of a query that sees n > N keys multiplied by log n / log N), each a copy of the
model folder with only ``config.json`` changed. The tasks are drawn with seeds that the
reported tables do not use (``--seeds``, default 100, 101 and 102: other passkeys, needles and
text windows than seeds 0, 1, 2), at lengths past the table. ``OUTPUT_DIR/selection.json``
(and ``selection.md``) holds every variant's mean Acc@1 per task and length, the paired
differences against the unscaled model from ``tisa longeval``'s comparisons (Holm over
all of them), and the chosen setting: the highest mean Acc@1 over every held-out cell.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from pathlib import Path

from tisa.files import replace_folder, write_atomic, write_json
from tisa.longeval.config import LongEvalConfig
from tisa.longeval.run import longeval
from tisa.provenance import run_metadata, sha256_file
from tisa.reports.markdown import markdown_table
from tisa.stats import holm


def _value(text: str) -> int | None:
    if text.strip().lower() == "none":
        return None
    value = int(text)
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected 'none' or a number >= 2, got {text!r}")
    return value


def _variant(model: Path, folder: Path, value: int | None) -> Path:
    """A copy of ``model`` in ``folder`` whose config sets ``length_scale`` to ``value``
    (an existing copy is kept only if it has the same weights and the same config)."""
    config = json.loads((model / "config.json").read_text())
    config["tisa"]["length_scale"] = value
    weights = "model.safetensors"
    if (folder / "config.json").is_file() and (folder / weights).is_file():
        same_config = json.loads((folder / "config.json").read_text()) == config
        if same_config and sha256_file(folder / weights) == sha256_file(model / weights):
            return folder
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(model, staging)
    write_json(staging / "config.json", config)
    return replace_folder(staging, folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("convert_dir", type=Path, help="a finished tisa convert folder")
    parser.add_argument("--output-dir", type=Path, default=Path("runs/length-scale"))
    parser.add_argument("--values", nargs="+", type=_value, default=[None, 512],
                        help="length_scale settings to compare (default: none 512)")
    parser.add_argument("--lengths", nargs="+", type=int, default=[2048, 4096])
    parser.add_argument("--seeds", nargs="+", type=int, default=[100, 101, 102])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    args = parser.parse_args(argv)
    model = args.convert_dir / "model"
    if not (model / "config.json").is_file():
        parser.error(f"convert_dir: {args.convert_dir} holds no converted model (model/)")
    if None not in args.values:
        parser.error("--values: include 'none', the model without scaling, to compare with")
    if len(set(args.values)) != len(args.values):
        parser.error(f"--values: each setting once, got {args.values}")

    names = {v: "unscaled" if v is None else f"scale-{v}" for v in args.values}
    folders = {
        v: str(_variant(model, args.output_dir / "models" / names[v], v)) for v in args.values
    }
    config = LongEvalConfig(
        models=tuple(folders.values()),
        output_dir=str(args.output_dir / "longeval"),
        lengths=tuple(args.lengths),
        strategies=("truncate",),  # not used: every model here is a TISA model
        seeds=tuple(args.seeds),
        threads=args.threads,
        progress=args.progress,
    )
    results = longeval(config).results

    by_model: dict[str, dict[str, list[float]]] = {}
    for cell in results["cells"]:
        key = f"{cell['task']} @ {cell['length']}"
        by_model.setdefault(cell["model"], {}).setdefault(key, []).append(cell["acc1"])
    means = {
        names[v]: {
            **{k: statistics.fmean(x) for k, x in by_model[folders[v]].items()},
            "all": statistics.fmean([a for x in by_model[folders[v]].values() for a in x]),
        }
        for v in args.values
    }
    chosen = max(args.values, key=lambda v: (means[names[v]]["all"], v is None))
    against_unscaled = [
        {**row, "model": Path(row["model"]).name}
        for row in results["comparisons"]
        if row["against"] == folders[None]
    ]
    # Holm over these comparisons only (longeval's p_holm counts every pair both ways)
    for row, adjusted in zip(against_unscaled, holm([r["p"] for r in against_unscaled]),
                             strict=True):
        row["p_holm"] = adjusted
    selection = {
        "values": [names[v] for v in args.values],
        "chosen": names[chosen],
        "chosen_length_scale": chosen,
        "mean_acc1": means,
        "against_unscaled": against_unscaled,
        # the weights each variant was scored with (its copy of the model folder)
        "weights_sha256": {
            names[v]: sha256_file(Path(folders[v]) / "model.safetensors") for v in args.values
        },
        "settings": {"lengths": args.lengths, "seeds": args.seeds,
                     "depths": list(config.depths), "candidates": config.candidates},
        "provenance": run_metadata(),
    }
    write_json(args.output_dir / "selection.json", selection)
    keys = sorted(next(iter(means.values())), key=lambda k: (k == "all", k))
    rows = [[name, *(f"{100 * means[name][k]:.1f}" for k in keys)] for name in means]
    text = markdown_table(["length_scale", *keys], rows, align="l" + "r" * len(keys))
    write_atomic(args.output_dir / "selection.md", text + f"\n\nchosen: {names[chosen]}\n")
    print(text)
    print(f"chosen: {names[chosen]}")
    return 0
