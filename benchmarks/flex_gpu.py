"""FlexAttention with TISA on CUDA: parity checks, then timings. One script, a few minutes.

    python benchmarks/flex_gpu.py                      # checks + timings -> table, JSON
    python benchmarks/flex_gpu.py --json flex_gpu.json --lengths 1024 4096 8192
    python benchmarks/flex_gpu.py --device cpu --quick  # the same logic, forward only

Checks, each against the eager backend on the same device (fp32 unless noted; a tensor's
difference is divided by the reference's largest magnitude when that is above 1, and each
tensor's error is recorded); any failure makes the script exit with status 1 after
printing what failed:

- forward + backward parity of ``backend="flex"``: output, dq, dk, dv and the gradient of
  every RBF parameter, causal and not, with a padding mask, at awkward lengths;
- the gradient of a plain (H, Lq + Lk - 1) table passed in instead of a scorer;
- rows with no key at all (a sequence that is all padding; left padding under a causal
  mask): output 0, gradients finite and equal to eager's;
- dropout: flex refuses ``dropout_p > 0`` with a ValueError; ``auto`` trains with dropout
  (through eager) and the dropped output differs from the undropped one;
- bf16: flex's error against the fp32 oracle within twice eager-in-bf16's error.

Timings, forward + backward (CUDA events, medians, variants interleaved), B=8, H=12, D=64,
RBF scorer evaluated on the 2L-1 offsets every step as in training, bf16 and fp32:
flex with the TISA score_mod, flex without score_mod, and SDPA with a dense (1, H, L, L)
bias that trains. ``speed vs flex`` is the throughput of TISA flex relative to flex
without score_mod (target: at least 0.85).

Exit status: 0 all checks passed, 1 a check failed, 2 no CUDA device (nothing was run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from tisa import bias, scoring
from tisa.attention import attention, resolve_backend
from tisa.provenance import run_metadata

CHECK_LENGTHS = (1, 97, 257, 1025)
TIME_LENGTHS = (1024, 4096)
DENSE_MAX_LENGTH = 4096  # SDPA with a trained (1, H, L, L) bias: beyond this, skipped


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu (forward only)")
    p.add_argument("--lengths", type=int, nargs="+", default=list(TIME_LENGTHS))
    p.add_argument("--check-lengths", type=int, nargs="+", default=list(CHECK_LENGTHS))
    p.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    p.add_argument("--json", default="flex_gpu.json", help="where to write all results")
    args = p.parse_args(argv)
    for name in ("batch", "heads", "head_dim", "repeats"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1")
    if min(args.lengths + args.check_lengths) < 1:
        p.error("lengths must be >= 1")
    for name in args.dtypes:
        if name not in ("bfloat16", "float32", "float16"):
            p.error(f"--dtypes: unknown dtype {name!r} (bfloat16, float32, float16)")
    if args.quick:
        args.batch, args.heads, args.head_dim, args.repeats = 2, 3, 16, 2
        args.lengths, args.check_lengths = [56], [1, 56]
    return args


# ----------------------------------------------------------------------------- checks


def _record(checks: list[dict], name: str, error: float, tolerance: float) -> None:
    ok = bool(error <= tolerance)  # NaN fails
    checks.append({"check": name, "error": float(error), "tolerance": tolerance, "passed": ok})


def _inputs(b, h, lq, lk, d, device, dtype, seed, grad=True):
    g = torch.Generator(device="cpu").manual_seed(seed)
    return [
        torch.randn(b, h, n, d, generator=g).to(device=device, dtype=dtype).requires_grad_(grad)
        for n in (lq, lk, lk)
    ]


def _run(q, k, v, bias_, backend, train, **kw):
    """Output and gradients (q, k, v, then every tensor of ``bias_``) of one backend."""
    leaves = [q, k, v] + (list(bias_.parameters()) if hasattr(bias_, "parameters") else [bias_])
    for t in leaves:
        t.grad = None
    if not train:
        with torch.no_grad():
            return [attention(q, k, v, bias_, backend=backend, **kw).float()]
    out = attention(q, k, v, bias_, backend=backend, **kw)
    g = torch.Generator(device="cpu").manual_seed(1)
    out.backward(torch.randn(out.shape, generator=g).to(out.device, out.dtype))
    return [out.detach().float()] + [t.grad.float() for t in leaves]


def _max_error(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    """The largest difference of any tensor pair, each divided by the reference's largest
    magnitude when that is above 1 (typically the gradients of scorer parameters, which
    sum B*H*L^2 terms, so their rounding grows with their size); absolute below 1."""
    return max(_errors(a, b))


def _errors(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[float]:
    """Each pair's error as :func:`_max_error` measures it (out, dq, dk, dv, parameters)."""
    return [
        (x - y).abs().max().item() / max(1.0, y.abs().max().item()) if x.numel() else 0.0
        for x, y in zip(a, b)
    ]


def run_checks(device: str, args: argparse.Namespace) -> list[dict]:
    """Every parity check of the module docstring; backward ones only where flex trains."""
    train = device == "cuda"
    checks: list[dict] = []
    h, d = args.heads, args.head_dim
    tol = 2e-4
    torch.manual_seed(0)
    scorer = scoring.build("rbf", num_heads=h, amplitude_mean=2.0, amplitude_std=1.0).to(device)
    for length in args.check_lengths:
        keep = torch.ones(2, 1, 1, length, dtype=torch.bool, device=device)
        keep[0, ..., max(1, length - length // 3) :] = False
        for causal in (False, True):
            q, k, v = _inputs(2, h, length, length, d, device, torch.float32, length)
            kw = dict(mask=keep, causal=causal)
            got = _run(q, k, v, scorer, "flex", train, **kw)
            expected = _run(q, k, v, scorer, "eager", train, **kw)
            what = "forward + backward" if train else "forward"
            _record(checks, f"{what}, L={length}, causal={causal}", _max_error(got, expected), tol)
            checks[-1]["errors"] = _errors(got, expected)  # out, dq, dk, dv, then parameters
    length = args.check_lengths[-1]
    q, k, v = _inputs(2, h, length, length, d, device, torch.float32, 7)
    table = (0.5 * torch.randn(h, 2 * length - 1)).to(device).requires_grad_()
    got, expected = (_run(q, k, v, table, b, train, causal=True) for b in ("flex", "eager"))
    _record(checks, f"table gradient, L={length}", _max_error(got, expected), tol)
    checks[-1]["errors"] = _errors(got, expected)

    # rows with no key: an all-padding sequence; left padding under a causal mask
    empty = torch.ones(2, 1, 1, length, dtype=torch.bool, device=device)
    empty[1] = False
    left = torch.ones(2, 1, 1, length, dtype=torch.bool, device=device)
    left[0, ..., : max(1, length // 4)] = False
    for name, mask, causal in (("all padding", empty, False), ("left padding", left, True)):
        got = _run(q, k, v, scorer, "flex", train, mask=mask, causal=causal)
        expected = _run(q, k, v, scorer, "eager", train, mask=mask, causal=causal)
        finite = all(bool(torch.isfinite(t).all()) for t in got)
        error = _max_error(got, expected) if finite else float("nan")
        _record(checks, f"rows without keys ({name}), L={length}", error, tol)
        checks[-1]["errors"] = _errors(got, expected)
    _record(
        checks,
        f"rows without keys are 0, L={length}",
        got[0][0, :, : max(1, length // 4)].abs().max().item(),
        0.0,
    )

    # dropout: refused by flex, applied by auto when training
    try:
        with torch.no_grad():
            attention(q, k, v, scorer, dropout_p=0.1, backend="flex")
        refused = False
    except ValueError:
        refused = True
    _record(checks, "flex refuses dropout_p > 0", 0.0 if refused else 1.0, 0.0)
    if train:
        chosen = resolve_backend("auto", q, k, v, bias.table(scorer, length), None, 0.1)
        torch.manual_seed(0)
        dropped = attention(q, k, v, scorer, dropout_p=0.1)
        plain = attention(q, k, v, scorer)
        ok = chosen == "eager" and not torch.allclose(dropped, plain)
        _record(checks, "auto trains with dropout (eager) and drops", 0.0 if ok else 1.0, 0.0)

    # bf16: within twice the error of eager in bf16, against the fp32 oracle
    if "bfloat16" in args.dtypes:
        length = args.check_lengths[-1]
        q, k, v = _inputs(2, h, length, length, d, device, torch.float32, 11)
        oracle = _run(q, k, v, scorer, "eager", train, causal=True)
        low = [t.detach().bfloat16().requires_grad_() for t in (q, k, v)]
        flex = _run(*low, scorer, "flex", train, causal=True)
        eager = _run(*low, scorer, "eager", train, causal=True)
        for i, part in enumerate(["out", "dq", "dk", "dv"][: len(flex)]):
            ref_err = (eager[i] - oracle[i]).abs().max().item()
            err = (flex[i] - oracle[i]).abs().max().item()
            _record(checks, f"bf16 {part} within 2x eager's error, L={length}", err, 2 * ref_err)
    return checks


# ----------------------------------------------------------------------------- timings


def _timer(device: str) -> Callable[[Callable[[], object]], float]:
    """Milliseconds of one call: CUDA events on CUDA, the wall clock elsewhere."""
    if device == "cuda":

        def cuda_ms(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end)

        return cuda_ms

    def wall_ms(fn):
        start = time.perf_counter()
        fn()
        return 1000 * (time.perf_counter() - start)

    return wall_ms


def run_timings(device: str, args: argparse.Namespace) -> list[dict]:
    """Median ms per forward + backward (forward only off CUDA) of each variant."""
    from torch.nn.attention.flex_attention import flex_attention

    plain_flex = torch.compile(flex_attention, dynamic=False)
    rows = []
    for dtype_name in args.dtypes:
        for length in args.lengths:
            rows += _time_length(device, args, getattr(torch, dtype_name), length, plain_flex)
            if device == "cuda":
                torch.cuda.empty_cache()
    return rows


def _time_length(device, args, dtype, length, plain_flex) -> list[dict]:
    train = device == "cuda"
    timer = _timer(device)
    b, h, d = args.batch, args.heads, args.head_dim
    q, k, v = _inputs(b, h, length, length, d, device, dtype, 0, grad=train)
    torch.manual_seed(0)
    scorer = scoring.build("rbf", num_heads=h).to(device).requires_grad_(train)

    def dense_bias():
        return bias.expand(bias.table(scorer, length), length, length)[None].to(dtype)

    def step(fn):
        def call():
            for t in (q, k, v, *scorer.parameters()):
                t.grad = None
            if train:
                fn().sum().backward()
            else:
                with torch.no_grad():
                    fn()

        return call

    variants = {
        "flex, no score_mod": step(lambda: plain_flex(q, k, v)),
        "flex + TISA": step(lambda: attention(q, k, v, scorer, backend="flex")),
    }
    if length <= DENSE_MAX_LENGTH:
        variants["sdpa + dense trained bias"] = step(
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense_bias())
        )
    times: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        for _ in range(3):  # compile and warm up
            fn()
    for _ in range(args.repeats):
        for name, fn in variants.items():
            times[name].append(timer(fn))
    medians = {name: statistics.median(t) for name, t in times.items()}
    base = medians["flex, no score_mod"]
    return [
        {
            "dtype": str(dtype).removeprefix("torch."),
            "length": length,
            "variant": name,
            "ms": ms,
            "speed_vs_flex": base / ms,
            "pass": "fwd+bwd" if train else "fwd",
        }
        for name, ms in medians.items()
    ]


# ----------------------------------------------------------------------------- output


def format_checks(checks: list[dict]) -> str:
    lines = ["| check | max error | tolerance | |", "|---|---:|---:|---|"]
    for c in checks:
        mark = "ok" if c["passed"] else "FAILED"
        lines.append(f"| {c['check']} | {c['error']:.2e} | {c['tolerance']:.2e} | {mark} |")
    return "\n".join(lines) + "\n"


def format_timings(rows: list[dict]) -> str:
    lines = [
        "| dtype | pass | L | variant | ms | speed vs flex without score_mod |",
        "|---|---|---:|---|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dtype']} | {r['pass']} | {r['length']} | {r['variant']} | {r['ms']:.2f} "
            f"| {r['speed_vs_flex']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print(
            "benchmarks/flex_gpu.py: no CUDA device here (torch.cuda.is_available() is "
            "False); nothing was run. Use --device cpu --quick for a forward-only dry run.",
            file=sys.stderr,
        )
        return 2
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (forward only)"
    print(f"torch {torch.__version__}, {name}; B={args.batch}, H={args.heads}, D={args.head_dim}")
    started = time.perf_counter()
    checks = run_checks(args.device, args)
    print(format_checks(checks))
    failed = [c for c in checks if not c["passed"]]
    rows = [] if failed else run_timings(args.device, args)
    if rows:
        print(format_timings(rows))
    result = {
        "provenance": run_metadata(None if argv is None else ["benchmarks/flex_gpu.py", *argv]),
        "torch": torch.__version__,
        "device": name,
        "sizes": {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim},
        "checks": checks,
        "timings": rows,
        "seconds": time.perf_counter() - started,
    }
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {args.json} ({result['seconds']:.0f} s)")
    if failed:
        print(f"FAILED: {len(failed)} check(s): " + "; ".join(c["check"] for c in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
