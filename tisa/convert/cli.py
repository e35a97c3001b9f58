"""``tisa convert MODEL --output-dir DIR``: the command line of :mod:`tisa.convert`."""

from __future__ import annotations

import argparse
import sys

HELP = "Convert a pretrained encoder's position table into TISA scoring functions (any length)."


def _optional_int(text: str) -> int | None:
    return None if text.lower() == "none" else int(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from tisa.convert.distill import DistillSettings

    d = DistillSettings()
    parser.add_argument("model", help="HF model id or folder (BERT, RoBERTa, ALBERT, ELECTRA)")
    parser.add_argument("--output-dir", default="runs/convert", help="default: runs/convert")
    g = parser.add_argument_group("fit")
    g.add_argument("--num-kernels", type=int, default=5, help="RBF kernels per head (default 5)")
    g.add_argument(
        "--fit-layers",
        default="all",
        choices=["all", "first", "none"],
        help="layers whose scorers are fitted to their measured positional term before "
        "distillation; the others start at zero (default: all)",
    )
    g.add_argument(
        "--fold-positions",
        type=_optional_int,
        default=128,
        metavar="N|none",
        help="fold the mean of the first N position rows into the token-type embeddings "
        "(default 128)",
    )
    g.add_argument("--fit-length", type=int, default=256, help="tokens per fit block (256)")
    g.add_argument("--fit-blocks", type=int, default=16, help="fit blocks (default 16)")
    g = parser.add_argument_group("distillation")
    g.add_argument("--steps", type=int, default=d.steps, help=f"0 skips it (default {d.steps})")
    g.add_argument(
        "--train",
        default=d.train,
        choices=["scoring", "all"],
        help=f"parameters trained: the scoring functions only, or all (default {d.train})",
    )
    g.add_argument("--learning-rate", type=float, default=d.learning_rate)
    g.add_argument("--tisa-learning-rate", type=float, default=d.tisa_learning_rate)
    g.add_argument("--tokens-per-batch", type=int, default=d.tokens_per_batch)
    g.add_argument("--min-length", type=int, default=d.min_length)
    g.add_argument(
        "--max-length", type=int, default=d.max_length, help="capped at the model's positions"
    )
    g.add_argument(
        "--pooled-weight",
        type=float,
        default=d.pooled_weight,
        help="weight of the mean-pooled embedding in the loss (0 for models that are not "
        f"sentence encoders; default {d.pooled_weight})",
    )
    g.add_argument("--save-every", type=int, default=d.save_every, help="checkpoint interval")
    g = parser.add_argument_group("evaluation")
    g.add_argument("--eval-texts", type=int, default=1000, help="PTB test sentences (1000)")
    g.add_argument(
        "--lengths", type=int, nargs="+", default=[1024, 2048, 4096], help="long-input lengths"
    )
    g.add_argument("--glue-dir", default=None, help="glue_data folder for STS-B dev")
    g.add_argument("--max-sts-pairs", type=int, default=None, help="default: all 1,500")
    g.add_argument(
        "--train-file", default=None, help="text to fit and distil on (default: Penn Treebank)"
    )
    g.add_argument(
        "--eval-file", default=None, help="text to evaluate on (default: Penn Treebank test)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="redo a finished conversion")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def config_from_args(args: argparse.Namespace):
    from tisa.convert.convert import ConvertConfig
    from tisa.convert.distill import DistillSettings

    return ConvertConfig(
        model=args.model,
        output_dir=args.output_dir,
        num_kernels=args.num_kernels,
        fit_layers=args.fit_layers,
        fold_positions=args.fold_positions,
        fit_length=args.fit_length,
        fit_blocks=args.fit_blocks,
        distill=DistillSettings(
            steps=args.steps,
            train=args.train,
            learning_rate=args.learning_rate,
            tisa_learning_rate=args.tisa_learning_rate,
            tokens_per_batch=args.tokens_per_batch,
            min_length=args.min_length,
            max_length=args.max_length,
            pooled_weight=args.pooled_weight,
            save_every=args.save_every,
            seed=args.seed,
        ),
        eval_texts=args.eval_texts,
        lengths=tuple(args.lengths),
        glue_dir=args.glue_dir,
        max_sts_pairs=args.max_sts_pairs,
        train_file=args.train_file,
        eval_file=args.eval_file,
        seed=args.seed,
        overwrite=args.overwrite,
        progress=not args.no_progress,
    )


def run(args: argparse.Namespace) -> int:
    from tisa.convert.convert import convert

    try:
        result = convert(config_from_args(args))
    except (ValueError, FileNotFoundError) as err:
        print(f"tisa convert: error: {err}", file=sys.stderr)
        return 2
    m = result.metrics
    conv, orig = m["converted"], m["original"]
    if "sts_spearman" in orig:
        print(
            f"STS-B dev Spearman: original {orig['sts_spearman']:.4f}, converted "
            f"{conv['sts_spearman']:.4f} ({100 * m['sts_relative']:.1f}%)"
        )
    print(f"fidelity (mean cosine of embeddings): {conv['fidelity']['mean']:.4f}")
    pos = m["positional_parameters"]
    print(
        f"positional parameters: {pos['original']['total']:,} -> {pos['converted']['total']:,} "
        f"({pos['converted']['absolute']} absolute)"
    )
    print(f"model: {result.model_dir}\nreport: {result.report}")
    return 0
