"""Training precision that fits the machine: bfloat16 only where it is computed natively.

bfloat16 autocast halves the bytes moved and, on hardware with bf16 arithmetic, doubles
the matrix-multiplication rate: on a CPU with AVX512-BF16 the masked-LM training step of
``benchmarks/mlm_throughput.py`` runs about twice as fast as in float32. Without it, the
CPU converts every bf16 operand in software and the same step is about 20 times *slower*
than float32 (2,617 against 126 tokens/s measured on an AVX2 machine). So bf16 is chosen
from a capability check (:func:`bf16_support`), never assumed:

* CUDA: ``torch.cuda.is_bf16_supported()`` (compute capability 8.0 and newer);
* x86 CPUs: the AVX512-BF16 or AMX instructions (CPUID, as PyTorch reads it) *and*
  PyTorch's kernels dispatched at the AVX512 level (``torch.backends.cpu.
  get_cpu_capability()``, which ``ATEN_CPU_CAPABILITY`` lowers);
* Arm CPUs: the ``bf16`` feature in ``/proc/cpuinfo``;
* anything else: float32.

:func:`resolve_bf16` turns a setting into the decision: ``None`` (the default of
``tisa pretrain``) follows the check, ``True`` is kept but warned about where bf16 would
be emulated, ``False`` is float32.
"""

from __future__ import annotations

import functools
import logging
import platform
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Bf16Support", "bf16_support", "resolve_bf16"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Bf16Support:
    """What :func:`bf16_support` found.

    Attributes:
        native: bf16 arithmetic runs in hardware (bf16 autocast is fast).
        device: ``"cuda"`` or ``"cpu"``: the device training runs on.
        reason: what the decision rests on, for messages.
    """

    native: bool
    device: str
    reason: str


def _cpuinfo_flags() -> set[str]:
    """CPU feature flags of the first processor in ``/proc/cpuinfo`` (empty elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            return set(value.split())
    return set()


def _x86_bf16_instructions() -> list[str]:
    """Names of the bf16 instruction sets this x86 CPU has (CPUID through PyTorch)."""
    import torch

    found = []
    checks = (
        ("AVX512-BF16", "_is_avx512_bf16_supported", "avx512_bf16"),
        ("AMX", "_is_amx_tile_supported", "amx_bf16"),
    )
    flags = None
    for name, probe, flag in checks:
        check = getattr(torch.cpu, probe, None)
        if check is not None:
            present = bool(check())
        else:  # older PyTorch: read the kernel's flags instead
            flags = _cpuinfo_flags() if flags is None else flags
            present = flag in flags
        if present:
            found.append(name)
    return found


@functools.cache
def bf16_support() -> Bf16Support:
    """Whether this machine computes bfloat16 natively (checked once per process).

    Returns:
        The decision and what it rests on (see the module docstring).
    """
    import torch

    if torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        if torch.cuda.is_bf16_supported():
            return Bf16Support(True, "cuda", f"GPU {name} supports bf16")
        return Bf16Support(False, "cuda", f"GPU {name} has no bf16 arithmetic")
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64", "i386", "i686"):
        have = _x86_bf16_instructions()
        level = torch.backends.cpu.get_cpu_capability()
        if not have:
            return Bf16Support(
                False, "cpu", f"CPU without AVX512-BF16 or AMX (kernels at {level} level)"
            )
        if level not in ("AVX512",):
            return Bf16Support(
                False,
                "cpu",
                f"CPU has {' and '.join(have)}, but PyTorch's kernels run at the {level} "
                "level (ATEN_CPU_CAPABILITY)",
            )
        return Bf16Support(True, "cpu", f"CPU with {' and '.join(have)}")
    if machine in ("aarch64", "arm64"):
        if "bf16" in _cpuinfo_flags():
            return Bf16Support(True, "cpu", "Arm CPU with the bf16 extension")
        return Bf16Support(False, "cpu", "Arm CPU without the bf16 extension (or not detected)")
    return Bf16Support(False, "cpu", f"no bf16 check for {machine or 'this'} CPU")


def resolve_bf16(requested: bool | None, *, name: str = "bf16") -> bool:
    """Whether to train under bf16 autocast.

    Args:
        requested: ``None`` follows :func:`bf16_support`; ``True`` / ``False`` are kept.
            ``True`` where bf16 would be emulated logs a warning (it is far slower than
            float32 there).
        name: the setting's name, for the warning.

    Returns:
        True for bf16 autocast, False for float32.
    """
    support = bf16_support()
    if requested is None:
        return support.native
    if requested and not support.native:
        logger.warning(
            "%s: bfloat16 is emulated on this machine (%s) and trains many times slower "
            "than float32 (about 20x on an AVX2 CPU); leave %s unset for float32",
            name,
            support.reason,
            name,
        )
    return bool(requested)
