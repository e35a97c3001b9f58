"""The provenance record every result file carries."""

from __future__ import annotations

import hashlib
import re

import pytest
import torch

from tisa import provenance


def test_run_metadata_records_commit_command_builds_cpu_threads() -> None:
    meta = provenance.run_metadata(["tisa", "analyze", "a model", "--null-draws", "20"])
    assert set(meta) == {"commit", "dirty", "command", "torch", "transformers", "python",
                         "cpu", "cpu_count", "threads", "gpu", "date"}
    assert meta["command"] == "tisa analyze 'a model' --null-draws 20"
    assert meta["torch"] == torch.__version__ and meta["threads"] == torch.get_num_threads()
    assert meta["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", meta["commit"])
    assert meta["date"].endswith("+00:00")
    assert meta["gpu"] == (torch.cuda.get_device_name() if torch.cuda.is_available() else None)


def test_a_copy_without_git_names_its_commit_in_the_environment(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(provenance, "_REPO", tmp_path)  # not a git checkout
    for named, expected in ((None, None), ("A" * 40, "a" * 40), ("abc123", None)):
        if named is None:
            monkeypatch.delenv("TISA_SOURCE_COMMIT", raising=False)
        else:
            monkeypatch.setenv("TISA_SOURCE_COMMIT", named)
        provenance.git_commit.cache_clear()
        try:
            if named == "abc123":  # a short commit is named, not silently dropped
                with pytest.warns(UserWarning, match="TISA_SOURCE_COMMIT: expected a full"):
                    assert provenance.git_commit() == {"commit": None, "dirty": None}
            else:
                assert provenance.git_commit() == {"commit": expected, "dirty": None}
        finally:
            provenance.git_commit.cache_clear()


def test_program_names_carry_no_machine_paths() -> None:
    root = provenance._REPO
    assert provenance._program(str(root / "tisa" / "cli" / "__main__.py")) == "python -m tisa.cli"
    assert provenance._program(str(root / "benchmarks" / "x.py")) == "benchmarks/x.py"
    assert provenance._program("/some/venv/bin/tisa") == "tisa"
    # python -c: the code is not kept, so the record says how the program was started
    assert provenance._program("-c") == "python -c"


def test_weights_sha256_reads_a_folders_safetensors_or_says_none(tmp_path) -> None:
    assert provenance.weights_sha256(None) is None
    assert provenance.weights_sha256(tmp_path) is None  # no model.safetensors
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    assert provenance.weights_sha256(tmp_path) == hashlib.sha256(b"weights").hexdigest()


def test_sha256_file(tmp_path) -> None:
    path = tmp_path / "weights.bin"
    data = bytes(range(256)) * 5000
    path.write_bytes(data)
    assert provenance.sha256_file(path, chunk=1000) == hashlib.sha256(data).hexdigest()
