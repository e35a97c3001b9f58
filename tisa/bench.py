"""Benchmarks measured side by side: every figure is a ratio against a baseline run in the
same process, repetitions interleaved so that machine noise hits all variants alike.

``tisa bench attention`` times attention with the RBF scorer on each backend (and the
straightforward dense construction of the bias) against
:func:`torch.nn.functional.scaled_dot_product_attention` without any positional bias.

Peak memory on CPU is read from the kernel (``VmHWM`` in ``/proc/self/status``, reset
through ``/proc/self/clear_refs`` before each measurement). Memory is measured after all
timings, with glibc's mmap threshold lowered to 64 KiB so that every tensor is mapped on
allocation and unmapped on release: freed memory then cannot hide the next variant's
allocations. Timings run with the default allocator, since a low threshold turns every
allocation into page faults and would penalise allocation-heavy variants.
"""

from __future__ import annotations

import ctypes
import gc
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F

from tisa import bias as bias_lib
from tisa import scoring
from tisa._validate import check_int
from tisa.attention import attention

# ------------------------------------------------------------------ measurement


def _status(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            m = re.search(rf"{field_name}:\s+(\d+) kB", f.read())
    except OSError:
        return None
    return int(m.group(1)) * 1024 if m else None


def peak_memory(fn: Callable[[], object]) -> int | None:
    """Extra resident memory (bytes) at the peak of ``fn()``; None where unmeasurable."""
    gc.collect()
    _trim()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the high-water mark
    except OSError:
        fn()
        return None
    before = _status("VmRSS")
    fn()
    hwm = _status("VmHWM")
    if before is None or hwm is None:
        return None
    return max(0, hwm - before)


_M_MMAP_THRESHOLD = -3  # glibc mallopt parameter


def _set_mmap_threshold(nbytes: int) -> bool:
    """Sets glibc's mmap threshold; False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, int(nbytes)))
    except (OSError, AttributeError):
        return False


def _trim() -> None:
    """Returns free heap memory to the system (glibc), so it cannot hide new allocations."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def interleaved_samples(
    fns: dict[str, Callable[[], object]], repeats: int, clock: str = "wall"
) -> dict[str, list[float]]:
    """Seconds of each call of each function, after one warm-up: ``repeats`` rounds, each
    calling every function once, so that the i-th times of two functions are neighbours.

    ``clock="cpu"`` counts the process's CPU time instead of the wall clock: with one
    thread on a machine shared with other work it leaves out the time spent waiting for
    a core (with more threads it also counts threads that spin while they wait).
    """
    now = CLOCKS[clock]
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = now()
            fn()
            times[name].append(now() - start)
    return times


def round_ratios(samples: dict[str, list[float]], baseline: str) -> dict[str, dict[str, float]]:
    """Per function: the ratio of its time to the baseline's in the same round, summarised
    over rounds: ``median``, ``low`` and ``high`` (min and max). Pairing by round cancels
    drift of the machine's speed that hits neighbouring calls alike."""
    base = samples[baseline]
    out = {}
    for name, times in samples.items():
        ratios = [t / b for t, b in zip(times, base, strict=True)]
        out[name] = {
            "median": statistics.median(ratios),
            "low": min(ratios),
            "high": max(ratios),
        }
    return out


# ------------------------------------------------------------------- variants


def dense_pairwise_rbf(scorer: scoring.RBFScoring, length: int) -> torch.Tensor:
    """The RBF bias evaluated on every (i, j) pair: what a direct reading of the formula does.

    (H, S, L, L) kernel evaluations instead of (H, S, 2L-1): the baseline the table beats.
    """
    pos = torch.arange(length, device=scorer.amplitude.device)
    k = (pos[None, :] - pos[:, None]).to(scorer.amplitude.dtype)  # (L, L), k = j - i
    d = k[None, None] - scorer.offset[..., None, None]  # (H, S, L, L)
    kern = torch.exp(-scorer.sharpness.abs()[..., None, None] * d.square())
    return (scorer.amplitude[..., None, None] * kern).sum(1)  # (H, L, L)


def _x_transformers_biases(heads: int):
    """x-transformers' relative-position (T5) and ALiBi biases, if the package is installed."""
    try:
        from x_transformers.x_transformers import AlibiPositionalBias, RelativePositionBias
    except ImportError:
        return {}
    return {
        "x-transformers T5 rel. bias + sdpa": RelativePositionBias(
            scale=1.0, causal=False, heads=heads, num_buckets=32, max_distance=128
        ),
        "x-transformers ALiBi + sdpa": AlibiPositionalBias(heads=heads, total_heads=heads),
    }


#: every variant of the attention benchmark (the baseline is always measured)
VARIANTS: tuple[str, ...] = (
    "sdpa, no bias (baseline)",
    "eager + rbf",
    "sdpa + rbf",
    "sdpa + constant mask (limit)",
    "flex + rbf",
    "dense pairwise rbf + sdpa",
    "x-transformers T5 rel. bias + sdpa",
    "x-transformers ALiBi + sdpa",
    "rbf bias only: table + expand",
    "rbf bias only: dense pairwise",
)


@dataclass(frozen=True)
class AttentionBenchConfig:
    """Sizes of the attention benchmark (defaults: the full benchmark; validated).

    Attributes:
        lengths: sequence lengths timed forward and backward (and forward only).
        forward_only_lengths: further lengths timed forward only.
        batch: batch size B.
        heads: attention heads H.
        head_dim: head size D.
        repeats: timed rounds (each calls every variant once); a ratio is the median over
            rounds of the variant's time over the baseline's in the same round.
        seed: seed of the inputs and the RBF scorer.
        variants: variants to run besides the baseline (default: all; names as in
            :data:`VARIANTS`, e.g. 'sdpa + rbf').
        threads: torch threads while measuring (default: torch's own).
        clock: ``wall`` clock, or the process's ``cpu`` time (steadier with one thread on a
            shared machine).
    """

    lengths: tuple[int, ...] = field(default=(128, 512, 2048), metadata={"cli": {"nargs": "*"}})
    forward_only_lengths: tuple[int, ...] = field(default=(8192,), metadata={"cli": {"nargs": "*"}})
    batch: int = 8
    heads: int = 12
    head_dim: int = 64
    repeats: int = 3
    seed: int = 0
    variants: tuple[str, ...] = field(
        default=(), metadata={"cli": {"nargs": "*", "metavar": "NAME"}}
    )
    threads: int | None = None
    clock: Literal["wall", "cpu"] = "wall"

    def __post_init__(self) -> None:
        for name in ("lengths", "forward_only_lengths", "variants"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("batch", "heads", "head_dim", "repeats"):
            check_int(getattr(self, name), name)
        check_int(self.seed, "seed", minimum=0)
        for length in (*self.lengths, *self.forward_only_lengths):
            check_int(length, "lengths", minimum=1)
        if not (self.lengths or self.forward_only_lengths):
            raise ValueError("lengths and forward_only_lengths are both empty: give a length")
        if self.threads is not None:
            check_int(self.threads, "threads", minimum=1)
        if self.clock not in CLOCKS:
            raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {self.clock!r}")
        unknown = sorted(set(self.variants) - set(VARIANTS))
        if unknown:
            raise ValueError(f"unknown variants {unknown}; choose from {list(VARIANTS)}")


def _variants(cfg: AttentionBenchConfig, length: int, backward: bool):
    b, h, d = cfg.batch, cfg.heads, cfg.head_dim
    gen = torch.Generator().manual_seed(cfg.seed)
    q, k, v = (torch.randn(b, h, length, d, generator=gen) for _ in range(3))
    if backward:
        q, k, v = (t.requires_grad_() for t in (q, k, v))
    torch.manual_seed(cfg.seed)
    rbf = scoring.build("rbf", num_heads=h)
    if not backward:
        rbf.requires_grad_(False)

    def run(fn):
        def call():
            for t in (q, k, v, *rbf.parameters()):
                t.grad = None
            if backward:
                fn().sum().backward()
            else:
                with torch.no_grad():
                    fn()

        return call

    variants: dict[str, Callable[[], object]] = {
        "sdpa, no bias (baseline)": run(lambda: F.scaled_dot_product_attention(q, k, v)),
    }
    quadratic_ok = length <= 4096  # (B, H, L, L) fp32 tensors beyond that exceed memory
    if quadratic_ok:
        variants["eager + rbf"] = run(lambda: attention(q, k, v, rbf, backend="eager"))
    variants["sdpa + rbf"] = run(lambda: attention(q, k, v, rbf, backend="sdpa"))
    if quadratic_ok:
        # The limit of any SDPA with a bias: the fused kernel reading a constant float mask
        # that already exists (built outside the timed call, not trained).
        with torch.no_grad():
            constant = bias_lib.expand(bias_lib.table(rbf, length), length, length)[None]
        variants["sdpa + constant mask (limit)"] = run(
            lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=constant)
        )
    if not backward or q.device.type == "cuda":
        variants["flex + rbf"] = run(lambda: attention(q, k, v, rbf, backend="flex"))
    if quadratic_ok:
        variants["dense pairwise rbf + sdpa"] = run(
            lambda: F.scaled_dot_product_attention(
                q, k, v, attn_mask=dense_pairwise_rbf(rbf, length)[None]
            )
        )
        for name, module in _x_transformers_biases(h).items():
            variants[name] = run(
                lambda m=module: F.scaled_dot_product_attention(
                    q, k, v, attn_mask=m(length, length)[None]
                )
            )
    if backward:
        # the bias alone: table + expansion against the pairwise construction
        variants["rbf bias only: table + expand"] = run(
            lambda: bias_lib.expand(bias_lib.table(rbf, length), length, length)
        )
        variants["rbf bias only: dense pairwise"] = run(lambda: dense_pairwise_rbf(rbf, length))
    if cfg.variants:
        keep = set(cfg.variants) | {"sdpa, no bias (baseline)"}
        variants = {n: f for n, f in variants.items() if n in keep}
    return variants


def run_attention_benchmark(cfg: AttentionBenchConfig, progress: bool = True) -> list[dict]:
    """Times and peak memory of every variant; one row per (variant, length, pass).

    All timings come first (default allocator), then all memory readings (see the module
    docstring), so the two never disturb each other.
    """
    if cfg.clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {cfg.clock!r}")
    if cfg.threads is None:
        return _run_attention_benchmark(cfg, progress)
    before = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        return _run_attention_benchmark(cfg, progress)
    finally:
        torch.set_num_threads(before)


def _run_attention_benchmark(cfg: AttentionBenchConfig, progress: bool) -> list[dict]:
    from tqdm.auto import tqdm

    jobs = [(n, True) for n in cfg.lengths] + [(n, False) for n in cfg.lengths]
    jobs += [(n, False) for n in cfg.forward_only_lengths]
    rows = []
    for length, backward in tqdm(jobs, desc="attention benchmark: time", disable=not progress):
        fns = _variants(cfg, length, backward)
        samples = interleaved_samples(fns, cfg.repeats, cfg.clock)
        times = {name: statistics.median(t) for name, t in samples.items()}
        ratios = round_ratios(samples, "sdpa, no bias (baseline)")
        pair_t = times.get("rbf bias only: dense pairwise")
        for name in fns:
            bias_only = pair_t is not None and name.startswith("rbf bias only")
            rows.append(
                {
                    "variant": name,
                    "length": length,
                    "pass": "fwd+bwd" if backward else "fwd",
                    "seconds": times[name],
                    "time_ratio": ratios[name]["median"],
                    "time_ratio_low": ratios[name]["low"],
                    "time_ratio_high": ratios[name]["high"],
                    "speedup_vs_pairwise": pair_t / times[name] if bias_only else None,
                    "peak_bytes": None,
                    "memory_ratio": None,
                }
            )
        del fns
        gc.collect()
    exact = _set_mmap_threshold(64 << 10)
    try:
        for length, backward in tqdm(
            jobs, desc="attention benchmark: memory", disable=not progress
        ):
            fns = _variants(cfg, length, backward)
            mems = {name: peak_memory(fn) for name, fn in fns.items()}
            base_m = mems["sdpa, no bias (baseline)"]
            pas = "fwd+bwd" if backward else "fwd"
            for r in rows:
                if r["length"] == length and r["pass"] == pas and r["variant"] in mems:
                    m = mems[r["variant"]]
                    r["peak_bytes"] = m
                    r["memory_ratio"] = m / base_m if m is not None and base_m else None
                    r["memory_exact"] = exact
            del fns
            gc.collect()
    finally:
        _set_mmap_threshold(32 << 20)  # glibc's largest dynamic threshold
    return rows


def format_table(rows: list[dict]) -> str:
    """A Markdown table of benchmark rows."""
    from tisa.reports.markdown import markdown_table

    lines = []
    for r in rows:
        mem = "n/a" if r["peak_bytes"] is None else _fmt_bytes(r["peak_bytes"])
        mratio = "" if r["memory_ratio"] is None else f"{r['memory_ratio']:.2f}x"
        extra = (
            f" ({r['speedup_vs_pairwise']:.1f}x faster than pairwise)"
            if r.get("speedup_vs_pairwise") and "table" in r["variant"]
            else ""
        )
        low, high = r.get("time_ratio_low"), r.get("time_ratio_high")
        spread = "" if low is None or low == high else f"{low:.2f}-{high:.2f}"
        lines.append(
            [
                r["pass"],
                r["length"],
                r["variant"],
                f"{r['time_ratio']:.2f}x{extra}",
                spread,
                mem,
                mratio,
            ]
        )
    columns = ["pass", "L", "variant", "time / baseline", "range over rounds"]
    columns += ["peak memory", "memory / baseline"]
    return markdown_table(columns, lines, align="lrlrrrr")


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
