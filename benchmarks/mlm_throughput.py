"""Masked-LM training throughput: our masked-only model against stock AlbertForMaskedLM.

One training step = forward, backward and an AdamW update, on the same batch and from the
same weights, at the "small" size (hidden 256, 4 layers, 4 heads, intermediate 1024,
embedding 128), length 128, batch 32 and a 30000-token vocabulary by default. The
variants are timed interleaved (round-robin, several rounds, median per variant) in one
process, so machine load affects them alike; the script prints tokens/s of each and its
ratio to the stock model, by wall clock and by process CPU time (the latter is steadier on
a shared machine).

Variants:

``stock``        ``AlbertForMaskedLM`` (albert-v2 config: ``gelu_new``), full-vocabulary head
                 over all B x L positions, ``torch.optim.AdamW`` defaults.
``masked_only``  the same model and optimiser, but the head runs on the masked positions
                 only (:class:`tisa.pretrain.masked_lm.AlbertForMaskedOnlyLM`).
``ours``         what ``tisa pretrain`` runs: masked-only head, fused tanh-GELU
                 (``gelu_pytorch_tanh``, the same function as ``gelu_new``) and fused AdamW
                 (the Trainer's default ``adamw_torch_fused``).
``ours_bf16``    ``ours`` under bfloat16 autocast (``tisa pretrain --bf16``).
``stock_bf16``   ``stock`` under the same autocast: the like-for-like baseline of
                 ``ours_bf16`` (the script prints that ratio as well).
``ours_compile`` ``ours`` through ``torch.compile`` (only with ``--compile``).

Usage::

    python benchmarks/mlm_throughput.py                 # CPU, defaults above
    python benchmarks/mlm_throughput.py --device cuda --rounds 10 --steps 10
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch


def _batch(vocab: int, batch: int, length: int, mask_id: int, device, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    chosen = torch.rand(batch, length, generator=g) < 0.15
    chosen[:, 0] = chosen[:, -1] = False
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    inputs = torch.where(chosen, torch.full_like(ids, mask_id), ids)
    return inputs.to(device), labels.to(device)


def _step_fn(
    model: torch.nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    fused: bool,
    bf16: bool,
    compile_model: bool,
) -> Callable[[], float]:
    device_type = inputs.device.type
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=fused or None)
    forward = torch.compile(model) if compile_model else model
    token_types = torch.zeros_like(inputs)

    def step() -> float:
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=bf16):
            out = forward(input_ids=inputs, labels=labels, token_type_ids=token_types)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss.detach().item()

    return step


def main() -> None:
    from transformers import AlbertForMaskedLM

    from tisa.pretrain.build import build_config
    from tisa.pretrain.masked_lm import AlbertForMaskedOnlyLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="small")
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--vocab-size", type=int, default=30000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per variant and round")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per variant")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--attn", default="sdpa", help="attention implementation (sdpa, eager)")
    parser.add_argument("--no-bf16", action="store_true", help="skip the bf16 variant")
    parser.add_argument("--compile", action="store_true", help="add a torch.compile variant")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)

    torch.manual_seed(0)
    common = dict(size=args.size, vocab_size=args.vocab_size, max_positions=max(512, args.seq_len))
    stock_config = build_config(**common, hidden_act="gelu_new")  # albert-base-v2's activation
    ours_config = build_config(**common)  # gelu_pytorch_tanh, as tisa pretrain builds it
    for config in (stock_config, ours_config):
        config._attn_implementation = args.attn
    stock = AlbertForMaskedLM(stock_config)
    weights = stock.state_dict()
    inputs, labels = _batch(args.vocab_size, args.batch_size, args.seq_len, 4, device)

    def ours_model(config):
        model = AlbertForMaskedOnlyLM(config)
        model.load_state_dict(weights)
        return model.to(device).train()

    stock.to(device).train()
    variants: dict[str, Callable[[], float]] = {
        "stock": _step_fn(stock, inputs, labels, fused=False, bf16=False, compile_model=False),
        "masked_only": _step_fn(
            ours_model(stock_config), inputs, labels, fused=False, bf16=False, compile_model=False
        ),
        "ours": _step_fn(
            ours_model(ours_config), inputs, labels, fused=True, bf16=False, compile_model=False
        ),
    }
    if not args.no_bf16:
        variants["ours_bf16"] = _step_fn(
            ours_model(ours_config), inputs, labels, fused=True, bf16=True, compile_model=False
        )
        stock_bf16 = AlbertForMaskedLM(stock_config)
        stock_bf16.load_state_dict(weights)
        variants["stock_bf16"] = _step_fn(
            stock_bf16.to(device).train(),
            inputs,
            labels,
            fused=False,
            bf16=True,
            compile_model=False,
        )
    if args.compile:
        variants["ours_compile"] = _step_fn(
            ours_model(ours_config), inputs, labels, fused=True, bf16=False, compile_model=True
        )

    first = {name: step() for name, step in variants.items()}  # same weights, same batch
    for name, loss in first.items():
        print(f"first-step loss {name:13s} {loss:.6f}")
    for _ in range(args.warmup - 1):
        for step in variants.values():
            step()

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    wall: dict[str, list[float]] = {name: [] for name in variants}
    cpu: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, step in variants.items():
            sync()
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.steps):
                step()
            sync()
            wall[name].append((time.perf_counter() - w0) / args.steps)
            cpu[name].append((time.process_time() - c0) / args.steps)

    from tisa.hf.precision import bf16_support

    support = bf16_support()
    tokens = args.batch_size * args.seq_len
    print(
        f"\nbf16 here: {'native' if support.native else 'emulated'} ({support.reason}); "
        f"tisa pretrain defaults to {'bf16' if support.native else 'float32'}"
    )
    print(
        f"size={args.size} L={args.seq_len} B={args.batch_size} V={args.vocab_size} "
        f"device={device} threads={torch.get_num_threads()} attn={args.attn} "
        f"rounds={args.rounds} x steps={args.steps}"
    )
    print(
        f"{'variant':13s} {'tokens/s':>10s} {'x stock':>8s} {'CPU-tokens/s':>13s} {'x stock':>8s}"
    )
    base_w = statistics.median(wall["stock"])
    base_c = statistics.median(cpu["stock"])
    for name in variants:
        w, c = statistics.median(wall[name]), statistics.median(cpu[name])
        print(
            f"{name:13s} {tokens / w:10.0f} {base_w / w:8.2f} {tokens / c:13.0f} {base_c / c:8.2f}"
        )
    if "stock_bf16" in variants:
        ratio = statistics.median(wall["stock_bf16"]) / statistics.median(wall["ours_bf16"])
        print(f"\nours_bf16 / stock_bf16 (both under bfloat16 autocast): {ratio:.2f}x (wall)")
    best = max(variants, key=lambda n: base_w / statistics.median(wall[n]))
    print(f"\nbest: {best}, {base_w / statistics.median(wall[best]):.2f}x the stock model (wall)")


if __name__ == "__main__":
    main()
