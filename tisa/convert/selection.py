"""Conversion settings chosen on held-out data, never on the dev sets that are reported.

    tisa convert sentence-transformers/all-MiniLM-L6-v2 --output-dir runs/convert
    tisa convert sentence-transformers/all-MiniLM-L6-v2 --order-weight 1 \\
        --output-dir runs/convert-order-1
    python experiments/convert_selection.py runs/convert runs/convert-order-1 \\
        --glue-dir ../shared/data/glue --output-dir runs/convert-selection

Every ``tisa convert`` folder given (all conversions of the same original; the first is
the baseline) and the original itself are scored, frozen, on:

- **STS-B, held out**: zero-shot Spearman of the cosine of mean-pooled embeddings on
  ``--sts-pairs`` pairs split off STS-B *train* (seed 0; dev is not read), inputs cut at
  128 tokens; each conversion against the original as a ratio, and the difference with
  a paired bootstrap 95% interval over pairs;
- **CoLA, held out**: a logistic-regression probe on the mean-pooled last layer (the
  embedding a user gets; :func:`tisa.convert.word_order.probe`), fitted on CoLA train
  without the share ``--holdout`` split off with seed 0 (the split ``tisa glue --holdout``
  makes) and scored by MCC on that share; each conversion against the original paired
  over sentences (bootstrap 95% interval);
- **word order, held out**: 1 - cos of the embeddings of a held-out CoLA sentence and of
  the same sentence with two adjacent words swapped or all its words shuffled
  (:func:`tisa.convert.word_order.order_sensitivity`); the median over sentences of each
  conversion's value divided by the original's.

- **fidelity by length**: the mean cosine of each conversion's embedding of a held-out
  CoLA sentence to the original's, by the sentence's length in tokens ([CLS] and [SEP]
  counted; :data:`LENGTH_BINS`): whether short inputs are converted as well as longer ones.

The chosen conversion: the highest held-out CoLA probe MCC among the conversions whose
held-out STS-B Spearman is at least 99% of the original's (the baseline when none is, or
on a tie). ``OUTPUT_DIR/selection.json`` holds every figure and the provenance,
``selection.md`` the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tisa.convert.config import ConvertConfig, DistillSettings
from tisa.convert.convert import finished_conversion
from tisa.convert.evaluate import sentence_embeddings
from tisa.convert.word_order import order_sensitivity, probe
from tisa.data.glue import load_glue
from tisa.hf.architectures import num_positions
from tisa.hub import model_source
from tisa.provenance import save_result, weights_sha256
from tisa.reports.markdown import markdown_table

__all__ = ["choose", "main", "markdown", "measure", "settings_text"]

#: STS-B Spearman a chosen conversion keeps, as a share of the original's
STS_FLOOR = 0.99
#: upper ends (inclusive) of the token-length bins of the fidelity by length; the last
#: bin holds every longer sentence
LENGTH_BINS = (7, 11, 15)
#: tisa convert's default kernels per head
NUM_KERNELS = ConvertConfig.__dataclass_fields__["num_kernels"].default


def _bootstrap(statistic, n: int, *, resamples: int, seed: int) -> list[float]:
    """95% percentile interval of ``statistic(index)`` over ``resamples`` resamples of
    ``range(n)`` with replacement."""
    import numpy as np

    rng = np.random.default_rng(seed)
    values = [statistic(rng.integers(0, n, n)) for _ in range(resamples)]
    return [float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))]


def _conversion(folder: Path) -> tuple[str, Path, dict[str, Any]]:
    """(original's name, model folder, the run's settings) of a finished conversion."""

    source, model_dir = finished_conversion(folder, argument="runs")
    metrics = json.loads((folder / "metrics.json").read_text(encoding="utf-8"))
    return source, model_dir, metrics.get("settings", {})


def measure(
    runs: Sequence[Path],
    glue_dir: Path,
    *,
    holdout: float = 0.1,
    sts_pairs: int = 1500,
    seed: int = 1,
    bootstrap: int = 2000,
    max_train: int | None = None,
    max_length: int = 128,
    progress: bool = True,
) -> dict[str, Any]:
    """The held-out figures of the module docstring for every run and the original."""
    import numpy as np
    from scipy.stats import spearmanr
    from sklearn.metrics import matthews_corrcoef
    from torch.nn.functional import cosine_similarity
    from tqdm.auto import tqdm
    from transformers import AutoModel, AutoTokenizer


    if not runs:
        raise ValueError("runs: expected at least one tisa convert folder")
    if not 0 < holdout < 1:
        raise ValueError(f"holdout: expected a share in (0, 1), got {holdout!r}")
    names = [Path(r).name for r in runs]
    if len(set(names)) < len(names):
        raise ValueError(f"runs: expected folders of different names, got {names}")
    conversions = [_conversion(Path(r)) for r in runs]
    sources = {c[0] for c in conversions}
    if len(sources) > 1:
        raise ValueError(f"runs: expected conversions of one original, got {sorted(sources)}")
    source = conversions[0][0]

    sts_train = load_glue("stsb", glue_dir=glue_dir, splits=("train",))["train"]
    if not 10 <= sts_pairs < len(sts_train):
        raise ValueError(
            f"sts_pairs: expected 10 to {len(sts_train) - 1} pairs of STS-B train, got {sts_pairs}"
        )
    sts = sts_train.train_test_split(test_size=sts_pairs, seed=0)["test"]
    gold_sts = np.asarray(sts["label"], dtype=float)
    cola = load_glue("cola", glue_dir=glue_dir, splits=("train",))["train"]
    parts = cola.train_test_split(test_size=holdout, seed=0)
    train, held = parts["train"], parts["test"]
    if max_train is not None:  # a smaller run (the reported selection uses all of train)
        train = train.select(range(min(max_train, len(train))))
    gold_cola = np.asarray(held["label"])
    tokenizer = AutoTokenizer.from_pretrained(conversions[0][1])
    original = AutoModel.from_pretrained(model_source(source))
    max_length = min(max_length, num_positions(original))  # as tisa convert scores STS-B
    # tokens per held-out sentence (special tokens included), counted once
    tokens = [len(ids) for ids in tokenizer(list(held["sentence"]))["input_ids"]]
    order_texts = [
        s for s, n in zip(held["sentence"], tokens) if len(s.split()) >= 4 and n <= max_length
    ]

    # the original first, then every run in order
    models = [lambda: original]
    models += [lambda m=c[1]: AutoModel.from_pretrained(m) for c in conversions]
    scored: list[dict[str, Any]] = []
    for load in tqdm(models, desc="held-out scores", disable=not progress):
        model = load().eval()
        embed = {"max_length": max_length}
        pairs = sentence_embeddings(
            model, tokenizer, [*sts["sentence1"], *sts["sentence2"]], **embed
        )
        cos = cosine_similarity(pairs[:sts_pairs], pairs[sts_pairs:], dim=-1).numpy()
        train_x = sentence_embeddings(model, tokenizer, list(train["sentence"]), **embed)
        held_x = sentence_embeddings(model, tokenizer, list(held["sentence"]), **embed)
        predicted, c = probe(train_x.numpy(), train["label"], held_x.numpy(), seed=seed)
        order = order_sensitivity(model, tokenizer, order_texts, seed=seed, max_length=max_length)
        scored.append({
            "cos": cos,
            "held_x": held_x,
            "predicted": np.asarray(predicted),
            "sts_spearman": float(spearmanr(cos, gold_sts).statistic),
            "cola_mcc": float(matthews_corrcoef(gold_cola, predicted)),
            "probe_C": c,
            "order": {k: np.asarray(v["values"]) for k, v in order.items()},
        })
    base = scored[0]
    held_lengths = np.minimum(np.asarray(tokens), max_length)  # as embedded: truncated
    bins = np.searchsorted(np.asarray(LENGTH_BINS), held_lengths)  # 0 .. len(LENGTH_BINS)
    labels = _bin_labels()
    result: dict[str, Any] = {
        "model": source,
        "seed": seed,
        "holdout": holdout,
        "max_length": max_length,
        "sts_pairs": sts_pairs,
        "cola_train_sentences": len(train),
        "cola_heldout_sentences": len(held),
        "order_sentences": len(order_texts),
        "original": {
            "sts_spearman": base["sts_spearman"],
            "cola_mcc": base["cola_mcc"],
            "probe_C": base["probe_C"],
            "order_median": {k: float(np.median(v)) for k, v in base["order"].items()},
        },
        "runs": [],
    }
    for run, s, (_, model_dir, settings) in zip(runs, scored[1:], conversions):
        def sts_difference(i, s=s):
            a = spearmanr(s["cos"][i], gold_sts[i]).statistic
            return a - spearmanr(base["cos"][i], gold_sts[i]).statistic

        def cola_difference(i, s=s):
            return matthews_corrcoef(gold_cola[i], s["predicted"][i]) - matthews_corrcoef(
                gold_cola[i], base["predicted"][i]
            )

        keep = {k: base["order"][k] > 0 for k in base["order"]}
        result["runs"].append(
            {
                "run": Path(run).name,
                "num_kernels": settings.get("num_kernels"),
                "near_offsets": settings.get("near_offsets"),
                "content_offsets": settings.get("content_offsets"),
                "content_beyond": settings.get("content_beyond", "clip"),
                "distill": settings.get("distill", {}),
                "weights_sha256": weights_sha256(model_dir),
                "sts_spearman": s["sts_spearman"],
                "sts_relative": s["sts_spearman"] / base["sts_spearman"],
                "sts_difference": s["sts_spearman"] - base["sts_spearman"],
                "sts_interval95": _bootstrap(
                    sts_difference, sts_pairs, resamples=bootstrap, seed=seed
                ),
                "cola_mcc": s["cola_mcc"],
                "probe_C": s["probe_C"],
                "cola_difference": s["cola_mcc"] - base["cola_mcc"],
                "cola_interval95": _bootstrap(
                    cola_difference, len(gold_cola), resamples=bootstrap, seed=seed
                ),
                "order_median": {k: float(np.median(v)) for k, v in s["order"].items()},
                "fidelity_by_length": _by_bin(
                    cosine_similarity(s["held_x"], base["held_x"], dim=-1).numpy(), bins, labels
                ),
                "order_ratio": {
                    k: float(np.median(v[keep[k]] / base["order"][k][keep[k]]))
                    for k, v in s["order"].items()
                },
            }
        )
    result["chosen"] = choose(result["runs"])
    return result


def _bin_labels() -> list[str]:
    """``["<= 7", "8-11", "12-15", ">= 16"]`` for :data:`LENGTH_BINS` (7, 11, 15)."""
    ends = list(LENGTH_BINS)
    labels = [f"<= {ends[0]}"]
    labels += [f"{lo + 1}-{hi}" for lo, hi in zip(ends, ends[1:])]
    return [*labels, f">= {ends[-1] + 1}"]


def _by_bin(values, bins, labels: Sequence[str]) -> dict[str, dict[str, float | int]]:
    """Per length bin: the number of sentences and the mean of ``values`` (None if none)."""
    out: dict[str, dict[str, float | int]] = {}
    for b, label in enumerate(labels):
        chosen = values[bins == b]
        out[label] = {"sentences": int(chosen.size),
                      "mean": float(chosen.mean()) if chosen.size else None}
    return out


def choose(runs: Sequence[dict[str, Any]]) -> str:
    """The name of the chosen run (the rule of the module docstring)."""
    if not runs:
        raise ValueError("runs: expected at least one scored run")
    best = runs[0]
    for run in runs:
        if run["sts_relative"] >= STS_FLOOR and (
            best["sts_relative"] < STS_FLOOR or run["cola_mcc"] > best["cola_mcc"]
        ):
            best = run
    return best["run"]


def settings_text(
    distill: dict[str, Any],
    *,
    num_kernels: int | None = None,
    near_offsets: int | None = None,
    content_offsets: int | None = None,
    content_beyond: str = "clip",
) -> str:
    """What a conversion changed from the defaults, e.g. ``order_weight=1`` or
    ``num_kernels=10``: its scorers (kernels per head, a free table over short offsets),
    a relative content term and its distillation settings."""
    default = asdict(DistillSettings())
    changed = [] if num_kernels in (None, NUM_KERNELS) else [f"num_kernels={num_kernels}"]
    changed += [] if near_offsets is None else [f"near_offsets={near_offsets}"]
    changed += [] if content_offsets is None else [f"content_offsets={content_offsets}"]
    changed += [] if content_beyond == "clip" else [f"content_beyond={content_beyond}"]
    changed += [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                for k, v in distill.items() if k in default and default[k] != v]
    return ", ".join(changed) or "defaults"


def markdown(result: dict[str, Any]) -> str:

    o = result["original"]

    def interval(lo_hi: Sequence[float], scale: float) -> str:
        return f"[{scale * lo_hi[0]:+.1f}, {scale * lo_hi[1]:+.1f}]"

    rows = [
        [
            "original", "", f"{o['sts_spearman']:.4f}", "1", "", f"{100 * o['cola_mcc']:.1f}", "",
            "1", "1",
        ]
    ]
    for r in result["runs"]:
        rows.append(
            [
                r["run"] + (" (chosen)" if r["run"] == result["chosen"] else ""),
                settings_text(
                    r["distill"],
                    num_kernels=r.get("num_kernels"),
                    near_offsets=r.get("near_offsets"),
                    content_offsets=r.get("content_offsets"),
                    content_beyond=r.get("content_beyond", "clip"),
                ),
                f"{r['sts_spearman']:.4f}",
                f"{r['sts_relative']:.3f}",
                f"{1000 * r['sts_difference']:+.1f} {interval(r['sts_interval95'], 1000)}",
                f"{100 * r['cola_mcc']:.1f}",
                f"{100 * r['cola_difference']:+.1f} {interval(r['cola_interval95'], 100)}",
                f"{r['order_ratio']['swap']:.2f}",
                f"{r['order_ratio']['shuffle']:.2f}",
            ]
        )
    table = markdown_table(
        [
            "model", "settings", "STS-B held-out Spearman", "of the original's",
            "- original (x1000, 95%)", "CoLA held-out probe MCC x100", "- original (95%)",
            "swap sensitivity / original's", "shuffle / original's",
        ],
        rows,
        align="ll" + "r" * 7,
    )
    floor = f"{STS_FLOOR:.0%} of the original's held-out STS-B Spearman"
    if any(r["sts_relative"] >= STS_FLOOR for r in result["runs"]):
        why = f"the highest held-out CoLA probe MCC among the runs at or above {floor}"
    else:
        why = f"no run reaches {floor}, so the first run, the baseline, stands"
    fidelity = ""
    if result["runs"] and "fidelity_by_length" in result["runs"][0]:
        labels = list(result["runs"][0]["fidelity_by_length"])
        counts = [str(result["runs"][0]["fidelity_by_length"][k]["sentences"]) for k in labels]
        rows = [["sentences", *counts]] + [
            [r["run"], *(f"{v['mean']:.4f}" if v["mean"] is not None else "-"
                         for v in r["fidelity_by_length"].values())]
            for r in result["runs"]
        ]
        fidelity = "\nMean cosine to the original's embedding of a held-out CoLA sentence, by "
        fidelity += "its length in tokens ([CLS] and [SEP] counted):\n\n"
        fidelity += markdown_table(["model", *labels], rows, align="l" + "r" * len(labels))
    return (
        f"{result['model']}, frozen; STS-B: {result['sts_pairs']} pairs held out of train; "
        f"CoLA: probe fitted on {result['cola_train_sentences']} train sentences, scored on "
        f"{result['cola_heldout_sentences']} held out (word order on "
        f"{result['order_sentences']} of them); seed {result['seed']}\n\n{table}\n"
        f"Chosen: {result['chosen']} ({why}).\n{fidelity}"
    )


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", type=Path, nargs="+", help="tisa convert output folders")
    parser.add_argument("--glue-dir", type=Path, required=True, help="a glue_data folder")
    parser.add_argument("--output-dir", type=Path, default=None, help="writes selection.*")
    parser.add_argument("--holdout", type=float, default=0.1, help="share of CoLA train")
    parser.add_argument("--sts-pairs", type=int, default=1500, help="pairs of STS-B train")
    parser.add_argument("--max-train", type=int, default=None, help="first N CoLA train")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", type=int, default=2000, help="resamples, >= 100")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if args.bootstrap < 100:
        parser.error("--bootstrap must be >= 100")
    if not 0 < args.holdout < 1:
        parser.error("--holdout must be a share in (0, 1)")
    if args.output_dir is not None and args.output_dir.is_file():
        parser.error(f"--output-dir: {args.output_dir} is a file")
    try:
        result = measure(
            args.runs,
            args.glue_dir,
            holdout=args.holdout,
            sts_pairs=args.sts_pairs,
            seed=args.seed,
            bootstrap=args.bootstrap,
            max_train=args.max_train,
            progress=not args.no_progress,
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"convert_selection: error: {err}", file=sys.stderr)
        return 2
    text = markdown(result)
    print(text, end="")
    if args.output_dir is not None:
        save_result(args.output_dir, "selection", text, result)
    return 0
