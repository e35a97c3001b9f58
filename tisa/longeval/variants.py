"""Evaluation-time settings of a converted model, chosen on held-out draws of the
long-input tasks: log-n attention scaling (``experiments/length_scale.py``) and an
attention window beyond the original's length (``experiments/far_window.py``), a hard
attention window within it (``experiments/attention_window.py``), and reading in windows
of W tokens (``experiments/chunk_windows.py``).

    tisa convert sentence-transformers/all-MiniLM-L6-v2 --output-dir runs/convert
    python experiments/length_scale.py runs/convert --output-dir runs/length-scale
    python experiments/far_window.py runs/convert --output-dir runs/far-window

Each ``--variants`` entry is ``NAME`` (the model as converted, the baseline),
``NAME=@FOLDER``, a copy of another converted model folder (another conversion's weights,
e.g. one made with other distillation settings), or ``NAME=KEY=VALUE[,KEY=VALUE...]``, a
copy of the converted model (``CONVERT_DIR/model``) whose ``config.json`` changes only
those settings (the weights stay):

- ``length_scale=N`` (or ``none``): logits of a query that sees n > N keys multiplied by
  log n / log N (:class:`tisa.hf.TisaSettings`);
- ``attention_window=W`` (or ``none``): each query sees only the keys within +-W tokens
  (:class:`tisa.hf.TisaSettings`), a hard window;
- ``far_offset=K`` (or ``none``) and ``far_slope=S``: the far-field ramp
  ``-S * max(|j - i| - K, 0)`` added to every head's scores (:func:`tisa.scoring.far_ramp`),
  a soft attention window of +-K tokens.

With ``--strategies chunk-W [...]`` every variant is also read in windows of W tokens,
embedded alone and averaged (``tisa longeval``'s ``chunk-W``), scored as ``NAME+chunk-W``
beside ``NAME`` (the whole document at once).

Every variant is scored by ``tisa longeval`` on tasks drawn with seeds that the reported
tables do not use (``--seeds``, default 100, 101 and 102: other passkeys, needles and text
windows than seeds 0, 1, 2), at lengths past the original's table. ``OUTPUT_DIR/selection.json``
(and ``selection.md``) holds every variant's mean Acc@1 per task and length, the paired
differences against the baseline from ``tisa longeval``'s comparisons (Holm over all of
them), and the chosen variant: the highest mean Acc@1 over every held-out cell (the
baseline on a tie).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tisa._validate import check_int
from tisa.files import replace_folder, write_atomic, write_json
from tisa.longeval.config import LongEvalConfig, chunk_window
from tisa.longeval.run import longeval
from tisa.provenance import run_metadata, sha256_file
from tisa.reports.markdown import markdown_table
from tisa.scoring.base import check_number
from tisa.stats import holm

__all__ = ["Variant", "main", "parse_variant", "variant_folder"]

#: the settings a variant may change, and where they live in ``config.json``'s ``tisa``
KEYS = {"length_scale": (), "attention_window": (), "far_offset": ("scoring",),
        "far_slope": ("scoring",)}


@dataclass(frozen=True)
class Variant:
    """A name and the settings it changes (empty: the model as converted), or another
    converted model folder to score in its place."""

    name: str
    changes: dict[str, Any] = field(default_factory=dict)
    folder: Path | None = None

    @property
    def is_baseline(self) -> bool:
        return not self.changes and self.folder is None


def _value(key: str, text: str) -> Any:
    if text.strip().lower() == "none":
        if key == "far_slope":
            raise ValueError("far_slope: expected a number > 0, got 'none'")
        return None
    try:
        number = float(text) if key == "far_slope" else int(text)
    except ValueError:
        kind = "a number" if key == "far_slope" else "an integer or 'none'"
        raise ValueError(f"{key}: expected {kind}, got {text!r}") from None
    if key == "far_slope":
        return check_number(number, key, minimum=0, strict=True)
    return check_int(number, key, minimum={"length_scale": 2, "attention_window": 1}.get(key, 0))


def parse_variant(spec: str) -> Variant:
    """``NAME``, ``NAME=@FOLDER`` or ``NAME=KEY=VALUE[,KEY=VALUE...]`` (see the module
    docstring); a ``ValueError`` names what is wrong."""
    name, _, rest = spec.partition("=")
    if not name or "/" in name or "\\" in name or name in (".", ".."):
        raise ValueError(
            f"{spec!r}: expected NAME, NAME=@FOLDER or NAME=KEY=VALUE[,KEY=VALUE...] (a NAME "
            "names a folder: not '.', '..', nor one with a slash)")
    if rest.startswith("@"):
        folder = Path(rest[1:])
        if not (folder / "config.json").is_file() or "tisa" not in json.loads(
                (folder / "config.json").read_text()):
            raise ValueError(f"{spec!r}: {folder} holds no converted model (config.json "
                             "with TISA settings)")
        if not (folder / "model.safetensors").is_file():
            raise ValueError(f"{spec!r}: {folder} holds no model.safetensors")
        return Variant(name, folder=folder)
    changes: dict[str, Any] = {}
    for item in filter(None, rest.split(",")):
        key, eq, text = item.partition("=")
        if key not in KEYS or not eq:
            raise ValueError(f"{spec!r}: expected KEY=VALUE with KEY one of {', '.join(KEYS)}")
        try:
            changes[key] = _value(key, text)
        except ValueError as err:
            raise ValueError(f"{spec!r}: {err}") from None
    return Variant(name, changes)


def _config(model: Path, variant: Variant) -> dict[str, Any]:
    config = json.loads((model / "config.json").read_text())
    for key, value in variant.changes.items():
        place = config["tisa"]
        for part in KEYS[key]:
            place = place[part]
        place[key] = value
    return config


def variant_folder(model: Path, folder: Path, variant: Variant) -> Path:
    """A copy of ``model`` (of ``variant.folder`` when it names one) in ``folder`` with
    ``variant``'s settings in its config (an existing copy is kept only if it has the same
    weights and the same config)."""
    if variant.folder is not None:
        model = variant.folder
    config = _config(model, variant)
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


def main(argv: list[str] | None = None, *, variants: Sequence[str] = (),
         strategies: Sequence[str] = (), output_dir: str = "runs/variants",
         description: str | None = None) -> int:
    """The command line; ``variants``, ``strategies`` and ``output_dir`` are its defaults."""
    parser = argparse.ArgumentParser(description=description or __doc__.split("\n\n")[0])
    parser.add_argument("convert_dir", type=Path, help="a finished tisa convert folder")
    parser.add_argument("--output-dir", type=Path, default=Path(output_dir))
    parser.add_argument("--variants", nargs="+", default=list(variants),
                        metavar="NAME[=KEY=VALUE,...]",
                        help=f"the settings to compare (default: {' '.join(variants)})")
    parser.add_argument("--lengths", nargs="+", type=int, default=[2048, 4096])
    parser.add_argument("--seeds", nargs="+", type=int, default=[100, 101, 102])
    parser.add_argument("--draw", default="seed", metavar="{seed,cell}",
                        help="documents drawn once per seed (default) or once per cell "
                             "(tisa longeval --draw)")
    parser.add_argument("--tasks", nargs="+", default=None,
                        help="only these tasks (default: every task of tisa longeval)")
    parser.add_argument("--strategies", nargs="+", default=list(strategies),
                        metavar="chunk-W",
                        help="also read each variant in windows of W tokens (scored as "
                             "NAME+chunk-W; default: "
                             f"{' '.join(strategies) or 'the whole document only'})")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--no-progress", dest="progress", action="store_false")
    args = parser.parse_args(argv)
    model = args.convert_dir / "model"
    if not (model / "config.json").is_file() or not (model / "model.safetensors").is_file():
        parser.error(f"convert_dir: {args.convert_dir} holds no converted model (model/ with "
                     "config.json and model.safetensors)")
    try:
        chosen_variants = [parse_variant(v) for v in args.variants]
    except ValueError as err:
        parser.error(f"--variants: {err}")
    names = [v.name for v in chosen_variants]
    if len(set(names)) != len(names):
        parser.error(f"--variants: each name once, got {names}")
    baselines = [v for v in chosen_variants if v.is_baseline]
    windows = [s for s in args.strategies if chunk_window(s) is None]
    if windows:
        parser.error(f"--strategies: expected chunk-W names (e.g. chunk-2048), got {windows}")
    # one spelling, as tisa longeval names them: chunk-0040 is chunk-40
    args.strategies = [f"chunk-{chunk_window(s)}" for s in args.strategies]
    if len(baselines) != 1 or len(chosen_variants) + len(args.strategies) < 2:
        parser.error("--variants: give the model as converted (a NAME without settings) "
                     "once, and at least one variant or chunk-W strategy to compare with it")
    baseline = baselines[0].name

    folders = {v.name: str(args.output_dir / "models" / v.name) for v in chosen_variants}
    try:
        config = LongEvalConfig(
            models=tuple(folders.values()),
            output_dir=str(args.output_dir / "longeval"),
            lengths=tuple(args.lengths),
            # every model here is a TISA model: it runs native and any chunk-W
            strategies=tuple(args.strategies) or ("truncate",),
            seeds=tuple(args.seeds),
            draw=args.draw,
            **({"tasks": tuple(args.tasks)} if args.tasks else {}),
            threads=args.threads,
            progress=args.progress,
        )
    except ValueError as err:
        parser.error(str(err))
    for v in chosen_variants:  # the copies, once the settings are known to be valid
        variant_folder(model, Path(folders[v.name]), v)
    results = longeval(config).results

    # each variant read whole (NAME) and in windows of W tokens (NAME+chunk-W)
    entries = {(folders[name], strategy): name if strategy == "native" else f"{name}+{strategy}"
               for name in names for strategy in ("native", *args.strategies)}
    by_entry: dict[str, dict[str, list[float]]] = {}
    for cell in results["cells"]:
        key = f"{cell['task']} @ {cell['length']}"
        entry = entries[(cell["model"], cell["strategy"])]
        by_entry.setdefault(entry, {}).setdefault(key, []).append(cell["acc1"])
    means = {
        entry: {
            **{k: statistics.fmean(x) for k, x in by_entry[entry].items()},
            "all": statistics.fmean([a for x in by_entry[entry].values() for a in x]),
        }
        for entry in entries.values()
    }
    chosen = max(means, key=lambda n: (means[n]["all"], n == baseline))
    against = [
        {**row, "model": entries[(row["model"], row["strategy"])]}
        for row in results["comparisons"]
        if (row["against"], row["against_strategy"]) == (folders[baseline], "native")
    ]
    # Holm over these comparisons only (longeval's p_holm counts every pair both ways)
    for row, adjusted in zip(against, holm([r["p"] for r in against]), strict=True):
        row["p_holm"] = adjusted
    selection = {
        "variants": list(means),
        "strategies": list(args.strategies),
        "changes": {v.name: v.changes for v in chosen_variants},
        "folders": {v.name: str(v.folder) for v in chosen_variants if v.folder is not None},
        "baseline": baseline,
        "chosen": chosen,
        "mean_acc1": means,
        "against_baseline": against,
        # the weights each variant was scored with (its copy of the model folder)
        "weights_sha256": {n: sha256_file(Path(folders[n]) / "model.safetensors") for n in names},
        "settings": {"lengths": args.lengths, "seeds": args.seeds, "draw": config.draw,
                     "tasks": list(config.tasks),
                     "depths": list(config.depths), "candidates": config.candidates},
        "provenance": run_metadata(),
    }
    write_json(args.output_dir / "selection.json", selection)
    keys = sorted(next(iter(means.values())), key=lambda k: (k == "all", k))
    rows = [[name, *(f"{100 * means[name][k]:.1f}" for k in keys)] for name in means]
    text = markdown_table(["variant", *keys], rows, align="l" + "r" * len(keys))
    write_atomic(args.output_dir / "selection.md", text + f"\n\nchosen: {chosen}\n")
    print(text)
    print(f"chosen: {chosen}")
    return 0
