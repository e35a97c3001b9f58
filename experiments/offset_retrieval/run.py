"""Offset retrieval: does a position scheme keep a precise offset beyond its training length?

    python experiments/offset_retrieval/run.py --output-dir runs/offset-retrieval
    python experiments/offset_retrieval/run.py --positions alibi fire --steps 200 \\
        --size tiny --train-length 32 --eval-lengths 32 128 --output-dir runs/or-smoke

Each position scheme trains a causal LM (GPT-2 of ``--size``, ``tisa pretrain``'s
schemes) from scratch on the task of :mod:`tisa.data.offset_task`: after a marker naming
an offset d (one of ``--offsets``), every token must be predicted as the content token d
positions back. Training uses sequences of ``--train-length`` tokens; evaluation scores
fresh sequences of every ``--eval-lengths`` length (the same sequences for every scheme):
accuracy and loss over all scored positions, and accuracy over the positions at or beyond
the training length alone (the ones no training sequence had). Chance is
1 / ``--vocab-size``. Same seed, batches, steps and optimiser for every scheme (AdamW,
constant rate after a linear warm-up; the positional parameters at
``--tisa-learning-rate`` when given). Absolute positions cannot represent the longer
lengths: n/a.

Outputs in ``--output-dir``: ``results.json`` (settings, command, torch version, and per
scheme and length: accuracy, loss, accuracy beyond the training length, scored tokens) and
``results.md`` (accuracy table).
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path
from typing import Any

DEFAULT_POSITIONS = ("absolute", "tisa", "alibi", "alibi_learned", "kerple_log", "t5", "fire")


def train_and_evaluate(
    position: str,
    *,
    size: str = "small",
    train_length: int = 128,
    eval_lengths: tuple[int, ...] = (128, 256, 512, 1024),
    offsets: tuple[int, ...] = (1, 3, 8, 32),
    vocab_size: int = 64,
    steps: int = 2000,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    tisa_learning_rate: float | None = None,
    warmup: int = 100,
    eval_sequences: int = 64,
    seed: int = 0,
    device: str = "cpu",
) -> dict[str, Any]:
    """Trains one scheme on the task and scores it at every evaluation length.

    Returns:
        ``{"position", "final_train_loss", "eval": {length: {"status", "accuracy",
        "loss", "accuracy_beyond_train", "tokens"}}}``.
    """
    import torch
    import torch.nn.functional as F

    from tisa.data.offset_task import offset_batch, total_vocab
    from tisa.hf import parameter_groups
    from tisa.pretrain.build import build_model
    from tisa.pretrain.schemes import scoring_family

    options = {"init_threshold": float(train_length)} if scoring_family(position) == "fire" else {}
    model = build_model(
        arch="gpt2",
        size=size,
        position=position,
        vocab_size=total_vocab(vocab_size, offsets),
        max_positions=train_length,
        scoring_options=options,
        seed=seed,
    ).to(device)
    groups = parameter_groups(
        model, learning_rate=learning_rate, tisa_learning_rate=tisa_learning_rate
    )
    optimizer = torch.optim.AdamW(groups, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / max(1, warmup))
    )
    gen = torch.Generator().manual_seed(seed)
    task = dict(vocab_size=vocab_size, offsets=offsets)
    model.train()
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        x, y = offset_batch(batch_size=batch_size, length=train_length, generator=gen, **task)
        x, y = x.to(device), y.to(device)
        logits = model(input_ids=x).logits  # (B, L, V): position t predicts labels[t]
        scored = y != -100
        loss = F.cross_entropy(logits[scored].float(), y[scored])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    model.eval()
    out: dict[str, Any] = {"position": position, "final_train_loss": float(loss), "eval": {}}
    for length in eval_lengths:
        if position in ("absolute", "absolute+tisa") and length > train_length:
            out["eval"][length] = {"status": "n/a", "reason": f"{train_length} positions"}
            continue
        eval_gen = torch.Generator().manual_seed(10_000 + seed * 7919 + length)
        x, y = offset_batch(batch_size=eval_sequences, length=length, generator=eval_gen, **task)
        total = correct = beyond = beyond_correct = 0
        nll = 0.0
        batch = max(1, 16384 // length)
        with torch.inference_mode():
            for start in range(0, eval_sequences, batch):
                xb, yb = x[start : start + batch].to(device), y[start : start + batch].to(device)
                logits = model(input_ids=xb).logits.float()
                scored = yb != -100
                hit = (logits.argmax(-1) == yb) & scored
                late = scored & (torch.arange(length, device=device)[None, :] >= train_length)
                nll += float(F.cross_entropy(logits[scored], yb[scored], reduction="sum"))
                total += int(scored.sum())
                correct += int(hit.sum())
                beyond += int(late.sum())
                beyond_correct += int((hit & late).sum())
        out["eval"][length] = {
            "status": "ok",
            "accuracy": correct / total,
            "loss": nll / total,
            "accuracy_beyond_train": beyond_correct / beyond if beyond else None,
            "tokens": total,
        }
    return out


def markdown(results: dict[str, Any]) -> str:
    """Accuracy per scheme and length (beyond the training length in brackets)."""
    settings = results["settings"]
    lengths = settings["eval_lengths"]
    lines = [
        f"Offset retrieval: accuracy on fresh sequences (trained at {settings['train_length']}; "
        f"offsets {settings['offsets']}; chance {1 / settings['vocab_size']:.3f}). In brackets: "
        "accuracy on the positions at or beyond the training length alone.",
        "",
        "| position | " + " | ".join(map(str, lengths)) + " |",
        "|---|" + "---:|" * len(lengths),
    ]
    for position, run in results["runs"].items():
        cells = []
        for n in lengths:
            r = run["eval"].get(n) or run["eval"][str(n)]  # int keys, or str after JSON
            if r["status"] != "ok":
                cells.append(r["status"])
            elif r["accuracy_beyond_train"] is None:
                cells.append(f"{r['accuracy']:.3f}")
            else:
                cells.append(f"{r['accuracy']:.3f} ({r['accuracy_beyond_train']:.3f})")
        lines.append(f"| {position} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", nargs="+", default=list(DEFAULT_POSITIONS))
    parser.add_argument("--output-dir", type=Path, default=Path("runs/offset-retrieval"))
    parser.add_argument("--size", default="small")
    parser.add_argument("--train-length", type=int, default=128)
    parser.add_argument("--eval-lengths", type=int, nargs="+", default=[128, 256, 512, 1024])
    parser.add_argument("--offsets", type=int, nargs="+", default=[1, 3, 8, 32])
    parser.add_argument("--vocab-size", type=int, default=64)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--tisa-learning-rate", type=float, default=None)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--eval-sequences", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)

    import torch

    from tisa.files import write_atomic, write_json
    from tisa.pretrain.schemes import POSITIONS

    unknown = [p for p in args.positions if p not in POSITIONS]
    if unknown:
        raise SystemExit(f"--positions: unknown scheme(s) {unknown}; expected {POSITIONS}")
    if max(args.offsets) >= args.train_length - 1:
        raise SystemExit(f"--offsets must be < --train-length - 1 ({args.train_length - 1})")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    settings = {k: v for k, v in vars(args).items() if k not in ("positions", "output_dir")}
    results: dict[str, Any] = {
        "settings": settings | {"device": device},
        "command": " ".join(["python", "experiments/offset_retrieval/run.py", *sys.argv[1:]])
        if argv is None
        else " ".join(["python", "experiments/offset_retrieval/run.py", *argv]),
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "threads": torch.get_num_threads(),
        "runs": {},
    }
    for position in args.positions:
        print(f"== {position}", flush=True)
        results["runs"][position] = train_and_evaluate(
            position,
            size=args.size,
            train_length=args.train_length,
            eval_lengths=tuple(args.eval_lengths),
            offsets=tuple(args.offsets),
            vocab_size=args.vocab_size,
            steps=args.steps,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            tisa_learning_rate=args.tisa_learning_rate,
            warmup=args.warmup,
            eval_sequences=args.eval_sequences,
            seed=args.seed,
            device=device,
        )
    args.output_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.output_dir / "results.json", results)
    md = markdown(results)
    write_atomic(args.output_dir / "results.md", md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
