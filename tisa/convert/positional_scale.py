"""How large is the relative-position term a pretrained model already computes, next to
the one TISA adds in the GLUE ``keep`` variant?

    python experiments/positional_scale.py runs/convert            # a `tisa convert` output
    python experiments/positional_scale.py runs/convert --output benchmarks/results/glue/scale

The model's own term is what `tisa convert` measured while fitting (``fit.pt``): per layer
and head, the attention logits of the original minus those of the same model without its
position table (the layers below already fitted), centred per query row and projected onto
Toeplitz matrices, one profile over offsets j - i. TISA's term is f_h(j - i) of the RBF
scorers that ``tisa.hf.add_tisa(position_embeddings="keep")`` adds with the start the GLUE
protocol uses (``--start``, the paper's by default; ``--seed``). Both are measured over
offsets |j - i| <= ``--max-offset`` (the GLUE runs' inputs are at most 128 tokens): the
standard deviation over offsets and the range (largest minus smallest), the median over
heads, per layer; for the model's term also the median share of its variance that is
translation invariant (TI, from the same measurement).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import tisa.hf
from tisa.checkpoints import load_plain
from tisa.hf.install import iter_scorers
from tisa.hub import model_source
from tisa.provenance import save_result


def _spread(profiles, max_offset: int, offsets) -> tuple[list[float], list[float]]:
    """Median over heads of the std and of the range over offsets |k| <= max_offset, per
    layer, of a (layers, heads, offsets) tensor of profiles."""
    keep = offsets.abs() <= max_offset
    window = profiles[..., keep].double()
    std = window.std(-1).median(-1).values
    span = (window.amax(-1) - window.amin(-1)).median(-1).values
    return std.tolist(), span.tolist()


def measure(convert_dir: Path, *, start: str, seed: int, max_offset: int) -> dict:
    import torch
    from transformers import AutoConfig, AutoModel

    fit_file = convert_dir / "fit.pt"
    if not fit_file.is_file() or not (convert_dir / "metrics.json").is_file():
        raise FileNotFoundError(
            f"convert_dir: {str(convert_dir)!r} lacks fit.pt or metrics.json; pass the "
            "--output-dir of a finished `tisa convert`"
        )
    fit = load_plain(fit_file)["fit"]  # tensors and plain data only: nothing in it runs
    offsets = fit["original"]["offsets"]
    if max_offset > int(offsets.max()):
        raise ValueError(
            f"--max-offset: the profiles reach offset {int(offsets.max())}, got {max_offset}"
        )
    own_std, own_range = _spread(fit["target"], max_offset, offsets)
    own_ti = fit["original"]["ti"].median(-1).values.tolist()

    metrics = json.loads((convert_dir / "metrics.json").read_text())
    source = metrics["model"]

    config = AutoConfig.from_pretrained(model_source(source))
    model = AutoModel.from_config(config)  # only the shapes matter: scorers are new
    torch.manual_seed(seed)
    tisa.hf.add_tisa(model, position_embeddings="keep", start=start)
    k = torch.arange(-max_offset, max_offset + 1)
    with torch.no_grad():
        added = torch.stack([scorer(k) for _, scorer in iter_scorers(model)])
    add_std, add_range = _spread(added, max_offset, k)
    layers = [
        {
            "layer": i + 1,
            "model_std": own_std[i],
            "model_range": own_range[i],
            "model_ti": own_ti[i],
            "tisa_std": add_std[i],
            "tisa_range": add_range[i],
            # None: a zero start adds nothing (amplitudes 0)
            "ratio_std": own_std[i] / add_std[i] if add_std[i] > 0 else None,
        }
        for i in range(len(own_std))
    ]
    return {
        "model": source,
        "start": start,
        "seed": seed,
        "max_offset": max_offset,
        "layers": layers,
    }


def markdown(result: dict) -> str:
    head = (
        f"{result['model']}: the relative-position term it computes from its table "
        f"(measured by `tisa convert`) against TISA at the `{result['start']}` start "
        f"(seed {result['seed']}), offsets |j - i| <= {result['max_offset']}, logits, "
        "median over heads\n\n"
        "| layer | model: std | model: range | model: TI | TISA: std | TISA: range | "
        "std ratio |\n|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    rows = "".join(
        f"| {r['layer']} | {r['model_std']:.3f} | {r['model_range']:.2f} | {r['model_ti']:.2f} "
        f"| {r['tisa_std']:.3f} | {r['tisa_range']:.2f} | "
        + ("n/a" if r["ratio_std"] is None else f"{r['ratio_std']:.1f}x")
        + " |\n"
        for r in result["layers"]
    )
    return head + rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("convert_dir", type=Path, help="--output-dir of a tisa convert run")
    parser.add_argument("--start", default="paper", choices=["paper", "zero", "spread"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-offset", type=int, default=127)
    parser.add_argument("--output", type=Path, default=None, help="writes scale.{md,json}")
    args = parser.parse_args(argv)
    if args.max_offset < 1:
        parser.error("--max-offset must be >= 1")
    try:
        result = measure(
            args.convert_dir, start=args.start, seed=args.seed, max_offset=args.max_offset
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"positional_scale: error: {err}", file=sys.stderr)
        return 2
    text = markdown(result)
    print(text, end="")
    if args.output is not None:
        save_result(args.output, "scale", text, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
