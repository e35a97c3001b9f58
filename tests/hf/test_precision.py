"""bfloat16 from what the machine computes natively: the capability check and the decision."""

from __future__ import annotations

import logging
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tisa.hf import precision
from tisa.hf.precision import Bf16Support, bf16_support, resolve_bf16

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def machine(monkeypatch):
    """Pretends to be a CPU with the given bf16 instructions and kernel level."""

    def pretend(instructions: list[str], level: str, arch: str = "x86_64") -> Bf16Support:
        bf16_support.cache_clear()
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(platform, "machine", lambda: arch)
        monkeypatch.setattr(precision, "_x86_bf16_instructions", lambda: list(instructions))
        monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: level)
        return bf16_support()

    yield pretend
    bf16_support.cache_clear()


@pytest.mark.parametrize(
    ("instructions", "level", "native"),
    [
        (["AVX512-BF16"], "AVX512", True),  # e.g. AMD Zen 4, Intel Cooper Lake
        (["AVX512-BF16", "AMX"], "AVX512", True),  # Intel Sapphire Rapids
        ([], "AVX512", False),  # AVX-512 without bf16 (Skylake-SP): emulated
        ([], "AVX2", False),  # the common AVX2 machine: about 20x slower in bf16
        (["AVX512-BF16"], "AVX2", False),  # kernels held at AVX2 (ATEN_CPU_CAPABILITY)
    ],
)
def test_x86_decision(machine, instructions, level, native):
    support = machine(instructions, level)
    assert support.native is native and support.device == "cpu"
    assert resolve_bf16(None) is native  # the default follows the check
    assert resolve_bf16(False) is False


def test_arm_reads_the_bf16_feature(machine, monkeypatch):
    monkeypatch.setattr(precision, "_cpuinfo_flags", lambda: {"fp", "asimd", "bf16"})
    assert machine([], "DEFAULT", arch="aarch64").native
    monkeypatch.setattr(precision, "_cpuinfo_flags", lambda: {"fp", "asimd"})
    assert not machine([], "DEFAULT", arch="aarch64").native


def test_asking_for_bf16_where_it_is_emulated_is_kept_and_warned_about(machine, caplog):
    machine([], "AVX2")
    with caplog.at_level(logging.WARNING, logger="tisa.hf.precision"):
        assert resolve_bf16(True, name="--bf16") is True
    assert "--bf16: bfloat16 is emulated on this machine (CPU without AVX512-BF16 or AMX" in (
        caplog.text
    )
    caplog.clear()
    machine(["AVX512-BF16"], "AVX512")
    with caplog.at_level(logging.WARNING, logger="tisa.hf.precision"):
        assert resolve_bf16(True) is True
    assert caplog.text == ""


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 CPU flags")
def test_this_machine_agrees_with_its_cpu_flags():
    """The check against the kernel's own list of CPU features (no mocks)."""
    flags = precision._cpuinfo_flags()
    if torch.cuda.is_available() or not flags:
        pytest.skip("a GPU decides here, or no /proc/cpuinfo")
    has = "avx512_bf16" in flags or "amx_bf16" in flags
    level = torch.backends.cpu.get_cpu_capability()
    bf16_support.cache_clear()
    assert bf16_support().native == (has and level == "AVX512")


@pytest.mark.skipif(platform.machine() != "x86_64", reason="x86 kernel levels")
def test_kernels_held_at_avx2_mean_float32():
    """ATEN_CPU_CAPABILITY=avx2, how an AVX2-only machine is emulated, decides float32."""
    code = "from tisa.hf.precision import bf16_support as s; print(s().native, s().reason)"
    env = dict(os.environ, ATEN_CPU_CAPABILITY="avx2", PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("False ") and ("AVX2" in out.stdout or "without" in out.stdout)
