"""Benchmarks measured side by side: every figure is a ratio against a baseline run in the
same process, repetitions interleaved so that machine noise hits all variants alike.

``tisa bench attention`` times attention with the RBF scorer on each backend (and the
straightforward dense construction of the bias) against
:func:`torch.nn.functional.scaled_dot_product_attention` without any positional bias, with
q, k, v in either of two layouts: ``bhld``, contiguous (B, H, L, D) tensors, and ``hf``,
(B, L, H, D) tensors seen as (B, H, L, D) (the transposed views a Hugging Face attention
layer passes). Three variants add a relative content term over offsets +-16
(:class:`tisa.scoring.RelativeContent`, as ``tisa convert --content-offsets 16`` installs
it): from its band, in inference, and as a dense (B, H, L, L) mask, as in training. The
whole measurement is repeated ``runs`` times, each run a series of
interleaved rounds giving one median ratio; a figure is the median over runs, reported
with its range.

Peak memory on CPU is read from the kernel (``VmHWM`` in ``/proc/self/status``, reset
through ``/proc/self/clear_refs`` before each measurement). Memory is measured after all
timings, with glibc's mmap threshold lowered to 64 KiB so that every tensor is mapped on
allocation and unmapped on release: freed memory then cannot hide the next variant's
allocations. Each variant is called once before its measurement, as before its timings.
Timings run with the default allocator, since a low threshold turns every
allocation into page faults and would penalise allocation-heavy variants.
"""

from __future__ import annotations

import gc
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
from tisa.memory import peak_memory, set_mmap_threshold
from tisa.reports.markdown import markdown_table

# ------------------------------------------------------------------ measurement

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
    "sdpa + rbf, window ±255",
    "sdpa + rbf + content ±16, band",
    "sdpa + rbf + content ±16, dense",
    "sdpa + rbf + content ±16 (zero beyond), band",
    "sdpa + constant mask (limit)",
    "flex + rbf",
    "dense pairwise rbf + sdpa",
    "x-transformers T5 rel. bias + sdpa",
    "x-transformers ALiBi + sdpa",
    "rbf bias only: table + expand",
    "rbf bias only: dense pairwise",
)


#: the attention window of the windowed variant: 511 keys around each query, fewer than a
#: 512-position model's
WINDOW = 255

#: K of the content-term variants (tisa.scoring.RelativeContent, as `tisa convert
#: --content-offsets 16` installs it)
CONTENT_OFFSETS = 16

#: layouts of q, k, v: contiguous (B, H, L, D), or (B, L, H, D) transposed (Hugging Face)
LAYOUTS: tuple[str, ...] = ("bhld", "hf")


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
        runs: times the whole measurement is repeated (all lengths and layouts, then
            again); a ratio is the median over runs of each run's median over rounds.
        layout: q, k, v as contiguous (B, H, L, D) tensors (``bhld``), as (B, L, H, D)
            tensors transposed to (B, H, L, D) (``hf``, as in Hugging Face models), or
            ``both``.
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
    runs: int = 3
    layout: Literal["bhld", "hf", "both"] = "bhld"

    def __post_init__(self) -> None:
        for name in ("lengths", "forward_only_lengths", "variants"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("batch", "heads", "head_dim", "repeats", "runs"):
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
        if self.layout not in LAYOUTS + ("both",):
            raise ValueError(f"layout must be one of {[*LAYOUTS, 'both']}, got {self.layout!r}")
        unknown = sorted(set(self.variants) - set(VARIANTS))
        if unknown:
            raise ValueError(f"unknown variants {unknown}; choose from {list(VARIANTS)}")


def _content(heads: int, head_dim: int, beyond: str, gen: torch.Generator):
    """A RelativeContent with K = :data:`CONTENT_OFFSETS` and random vectors, frozen."""
    content = scoring.RelativeContent(heads, head_dim, CONTENT_OFFSETS, beyond)
    with torch.no_grad():
        for vectors in (content.key_vectors, content.query_vectors):
            vectors.copy_(0.1 * torch.randn(vectors.shape, generator=gen))
    return content.requires_grad_(False)


def _variants(cfg: AttentionBenchConfig, length: int, backward: bool, layout: str = "bhld"):
    b, h, d = cfg.batch, cfg.heads, cfg.head_dim
    gen = torch.Generator().manual_seed(cfg.seed)
    shape = (b, h, length, d) if layout == "bhld" else (b, length, h, d)
    leaves = [torch.randn(shape, generator=gen) for _ in range(3)]
    if backward:
        leaves = [t.requires_grad_() for t in leaves]
    # q, k, v (B, H, L, D): the leaves themselves, or views of (B, L, H, D) storage
    q, k, v = leaves if layout == "bhld" else (t.transpose(1, 2) for t in leaves)
    torch.manual_seed(cfg.seed)
    rbf = scoring.build("rbf", num_heads=h)
    if not backward:
        rbf.requires_grad_(False)
    clipped = _content(h, d, "clip", gen).requires_grad_(backward)

    def run(fn):
        def call():
            if backward:
                fn().sum().backward()
                # dropped within the call, so that a call starts without gradients and its
                # peak memory includes the ones it makes
                for t in (*leaves, *rbf.parameters(), *clipped.parameters()):
                    t.grad = None
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
    # an attention window (TisaSettings.attention_window): the forward reads the keys in
    # reach of each block of rows only; shorter inputs have every key in the window
    windowed = scoring.WindowedOffsets(rbf, WINDOW)
    variants["sdpa + rbf, window ±255"] = run(
        lambda: attention(q, k, v, windowed, backend="sdpa"))
    # A relative content term (RelativeContent, vectors drawn at random; the values do not
    # change the work): in inference the sdpa backend adds it from its band and sides,
    # block by block ("band"); a term that trains is laid into a (B, H, L, L) float mask
    # ("dense", what every pass computed before the band path, built inside the call).
    if not backward:
        zeroed = _content(h, d, "zero", gen)
        variants["sdpa + rbf + content ±16, band"] = run(
            lambda: attention(q, k, v, rbf, band_term=clipped.band(q, k, d**-0.5),
                              backend="sdpa"))
        variants["sdpa + rbf + content ±16 (zero beyond), band"] = run(
            lambda: attention(q, k, v, rbf, band_term=zeroed.band(q, k, d**-0.5),
                              backend="sdpa"))
    if quadratic_ok:
        variants["sdpa + rbf + content ±16, dense"] = run(
            lambda: attention(q, k, v, rbf, mask=clipped(q, k, d**-0.5), backend="sdpa"))
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

    layouts = LAYOUTS if cfg.layout == "both" else (cfg.layout,)
    passes = [(n, True) for n in cfg.lengths] + [(n, False) for n in cfg.lengths]
    passes += [(n, False) for n in cfg.forward_only_lengths]
    jobs = [(layout, n, backward) for layout in layouts for n, backward in passes]
    # samples[job][run][variant]: seconds of each round. Runs are the outer loop, so that
    # a slow moment of the machine falls on one run of every job rather than on all runs
    # of one job.
    samples: dict[tuple, list[dict[str, list[float]]]] = {job: [] for job in jobs}
    steps = tqdm(total=cfg.runs * len(jobs), desc="attention benchmark: time", disable=not progress)
    for _ in range(cfg.runs):
        for job in jobs:
            fns = _variants(cfg, job[1], job[2], job[0])
            samples[job].append(interleaved_samples(fns, cfg.repeats, cfg.clock))
            del fns
            gc.collect()
            steps.update()
    steps.close()
    base = "sdpa, no bias (baseline)"
    rows = []
    for (layout, length, backward), runs in samples.items():
        per_run = [round_ratios(run, base) for run in runs]
        pair = [
            statistics.median(run["rbf bias only: dense pairwise"])
            for run in runs
            if "rbf bias only: dense pairwise" in run
        ]
        for name in runs[0]:
            run_ratios = [r[name]["median"] for r in per_run]
            seconds = statistics.median(t for run in runs for t in run[name])
            bias_only = bool(pair) and name.startswith("rbf bias only")
            rows.append(
                {
                    "layout": layout,
                    "variant": name,
                    "length": length,
                    "pass": "fwd+bwd" if backward else "fwd",
                    "seconds": seconds,
                    "time_ratio": statistics.median(run_ratios),
                    "time_ratio_low": min(run_ratios),
                    "time_ratio_high": max(run_ratios),
                    "run_ratios": run_ratios,
                    "round_ratio_low": min(r[name]["low"] for r in per_run),
                    "round_ratio_high": max(r[name]["high"] for r in per_run),
                    "samples": [run[name] for run in runs],
                    "speedup_vs_pairwise": (
                        statistics.median(pair) / seconds if bias_only else None
                    ),
                    "peak_bytes": None,
                    "memory_ratio": None,
                }
            )
    exact = set_mmap_threshold(64 << 10)
    try:
        for layout, length, backward in tqdm(
            jobs, desc="attention benchmark: memory", disable=not progress
        ):
            fns = _variants(cfg, length, backward, layout)
            mems = {}
            for name, fn in fns.items():
                fn()  # a warm-up call, as for the timings: one-off allocations stay out
                mems[name] = peak_memory(fn)
            base_m = mems[base]
            pas = "fwd+bwd" if backward else "fwd"
            for r in rows:
                if (r["layout"], r["length"], r["pass"]) == (layout, length, pas) and (
                    r["variant"] in mems
                ):
                    m = mems[r["variant"]]
                    r["peak_bytes"] = m
                    r["memory_ratio"] = m / base_m if m is not None and base_m else None
                    r["memory_exact"] = exact
            del fns
            gc.collect()
    finally:
        set_mmap_threshold(32 << 20)  # glibc's largest dynamic threshold
    return rows


def format_table(rows: list[dict]) -> str:
    """A Markdown table of benchmark rows: time ratios as the median over runs with their
    range over runs (over rounds when there was one run)."""
    several = any(len(r.get("run_ratios", ())) > 1 for r in rows)
    lines = []
    for r in rows:
        mem = "n/a" if r["peak_bytes"] is None else _fmt_bytes(r["peak_bytes"])
        mratio = "" if r["memory_ratio"] is None else f"{r['memory_ratio']:.2f}x"
        extra = (
            f" ({r['speedup_vs_pairwise']:.1f}x faster than pairwise)"
            if r.get("speedup_vs_pairwise") and "table" in r["variant"]
            else ""
        )
        if several:
            low, high = r.get("time_ratio_low"), r.get("time_ratio_high")
        else:
            low, high = r.get("round_ratio_low"), r.get("round_ratio_high")
        spread = "" if low is None or low == high else f"{low:.2f}-{high:.2f}"
        lines.append(
            [
                r.get("layout", "bhld"),
                r["pass"],
                r["length"],
                r["variant"],
                f"{r['time_ratio']:.2f}x{extra}",
                spread,
                mem,
                mratio,
            ]
        )
    columns = ["layout", "pass", "L", "variant", "time / baseline"]
    columns += ["range over runs" if several else "range over rounds"]
    columns += ["peak memory", "memory / baseline"]
    return markdown_table(columns, lines, align="llrlrrrr")


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
