"""Training-step throughput of a TISA ALBERT against the same ALBERT with absolute positions.

One step = forward + masked-LM loss + backward + AdamW update, on a random batch. Both
models are built from one seed and measured in one process, interleaved (warm-up, then
alternating repetitions); the script prints median tokens/s of each model and the ratio
TISA / absolute throughput: the median over repetitions of the paired ratio (the two steps
of one repetition run back to back, so slow drifts in machine load cancel), with its
quartiles.

    python benchmarks/hf_train_step.py                       # L = 128 and 512, CPU or CUDA
    python benchmarks/hf_train_step.py --lengths 128 --repeats 20 --backend sdpa

Models: ALBERT, hidden 256, 4 layers, 4 heads, intermediate 1024, embedding 128, vocabulary
30,000. "absolute": stock ALBERT (learned absolute position embeddings, attention
implementation "sdpa"). "tisa": RBF scoring functions (S = 5), absolute embeddings removed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AlbertConfig, AlbertForMaskedLM, AutoModelForMaskedLM

import tisa.hf

TARGETS = {128: 0.95, 512: 0.9}


def build_models(max_length: int, backend: str, device: torch.device, seed: int):
    """The two models, same weights where they share parameters."""
    config = AlbertConfig(
        vocab_size=30000,
        embedding_size=128,
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        max_position_embeddings=max_length,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    torch.manual_seed(seed)
    absolute = AlbertForMaskedLM._from_config(config, attn_implementation="sdpa")
    tisa_config = tisa.hf.tisa_config(
        config, scoring="rbf", position_embeddings="remove", backend=backend
    )
    torch.manual_seed(seed)
    tisa_model = AutoModelForMaskedLM.from_config(tisa_config)
    return {"absolute": absolute.to(device).train(), "tisa": tisa_model.to(device).train()}


def mlm_batch(batch_size: int, length: int, device: torch.device, seed: int):
    """Random token ids (B, L) and MLM labels (15% of positions, -100 elsewhere)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 30000, (batch_size, length), generator=g)
    chosen = torch.rand(batch_size, length, generator=g) < 0.15
    labels = ids.masked_fill(~chosen, -100)
    ids = ids.masked_fill(chosen, 4)  # "[MASK]"
    return ids.to(device), labels.to(device)


def step_time(model, optimizer, ids, labels, device: torch.device) -> float:
    """Seconds for one forward + backward + AdamW step."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    optimizer.step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure(length: int, args: argparse.Namespace, device: torch.device) -> dict[str, float]:
    """Median tokens/s of both models and the paired throughput ratio at one length."""
    models = build_models(length, args.backend, device, args.seed)
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-4) for k, m in models.items()}
    ids, labels = mlm_batch(args.batch_size, length, device, args.seed)
    for _ in range(args.warmup):
        for name, model in models.items():
            step_time(model, optimizers[name], ids, labels, device)
    times: dict[str, list[float]] = {name: [] for name in models}
    for rep in tqdm(range(args.repeats), desc=f"L={length}", leave=False):
        order = list(models) if rep % 2 == 0 else list(reversed(models))  # alternate first
        for name in order:
            times[name].append(step_time(models[name], optimizers[name], ids, labels, device))
    tokens = args.batch_size * length
    result = {name: tokens / statistics.median(t) for name, t in times.items()}
    paired = [a / t for a, t in zip(times["absolute"], times["tisa"])]  # tisa/absolute tok/s
    q1, median, q3 = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 3
    result.update(ratio=statistics.median(paired), q1=q1, q3=q3)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--backend", default="auto", choices=["auto", "eager", "sdpa", "flex"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None,
                        help="write every length's figures and the provenance to this JSON file")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(
        f"device {device} ({torch.get_num_threads()} CPU threads), batch {args.batch_size}, "
        f"TISA backend {args.backend!r}, {args.warmup} warm-up + {args.repeats} interleaved "
        "repetitions, medians"
    )
    header = f"{'L':>5} {'absolute tok/s':>15} {'tisa tok/s':>11} {'tisa/absolute':>14}"
    print(f"{header} {'quartiles':>13} {'target':>8}")
    rows = []
    for length in args.lengths:
        r = measure(length, args, device)
        rows.append({"length": length, **r, "target": TARGETS.get(length)})
        target = TARGETS.get(length)
        verdict = "" if target is None else (">= " if r["ratio"] >= target else "<  ") + str(target)
        print(
            f"{length:>5} {r['absolute']:>15.0f} {r['tisa']:>11.0f} {r['ratio']:>14.3f} "
            f"{r['q1']:>6.3f}-{r['q3']:.3f} {verdict:>8}"
        )
    if args.output is not None:
        from tisa.files import write_json
        from tisa.provenance import run_metadata

        settings = {k: v for k, v in vars(args).items() if k != "output"}
        write_json(args.output, {"settings": settings, "rows": rows, "provenance": run_metadata()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
