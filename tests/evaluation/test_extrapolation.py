"""``tisa extrapolate``: loss by evaluation length, n/a beyond an absolute table."""

from __future__ import annotations

import csv
import json
import math

import pytest

from tisa.evaluation.extrapolation import ExtrapolateConfig, extrapolate, resolve_run
from tisa.train.pretrain import PretrainConfig, pretrain

TINY = dict(
    size="tiny",
    seq_len=16,
    batch_size=8,
    max_steps=3,
    save_steps=3,
    eval_steps=3,
    max_train_blocks=48,
    max_eval_blocks=4,
    vocab_size=500,
    max_positions=32,
    progress=False,
    tensorboard=False,
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TISA_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield _train_runs(tmp_path_factory)


def _train_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("extrapolate")
    absolute = pretrain(PretrainConfig(output_dir=str(root / "absolute"), **TINY))
    shared = str(absolute / "tokenizer")  # same tokenizer: same tokens and masks
    tisa = pretrain(
        PretrainConfig(output_dir=str(root / "tisa"), position="tisa", tokenizer=shared, **TINY)
    )
    return root, absolute, tisa


def test_absolute_is_na_beyond_its_table_and_tisa_extrapolates(runs):
    root, absolute, tisa = runs
    out = root / "results"
    results = extrapolate(
        [absolute, tisa], [16, 32, 64], max_tokens=2048, output_dir=out, progress=False
    )
    a16, a32, a64 = (results.row("absolute", n) for n in (16, 32, 64))
    t16, t32, t64 = (results.row("tisa", n) for n in (16, 32, 64))
    assert a16.status == a32.status == "ok"
    assert a64.status == "n/a" and a64.loss is None and "32 positions" in a64.reason
    assert t16.status == t32.status == t64.status == "ok"  # 2x and 4x its training length
    for row in (a16, a32, t16, t32, t64):
        assert 0 < row.loss < 10 and row.perplexity == pytest.approx(math.exp(row.loss))
        assert row.masked_tokens > 0
    # one masking seed for all runs: same tokenizer -> the very same masked positions
    assert (a16.masked_tokens, a16.blocks) == (t16.masked_tokens, t16.blocks)
    assert a16.blocks == 2048 // 14 and t64.blocks == 2048 // 62
    assert not results.has_errors

    table = (out / "extrapolation.md").read_text()
    assert "| absolute | 16 |" in table and "n/a" in table
    rows = list(csv.DictReader((out / "extrapolation.csv").open()))
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok", "n/a"}
    data = json.loads((out / "extrapolation.json").read_text())
    assert data["config"]["lengths"] == [16, 32, 64] and len(data["rows"]) == 6
    assert (out / "extrapolation.png").stat().st_size > 1000

    again = extrapolate([tisa], [32], max_tokens=2048, output_dir=None, progress=False)
    assert again.row("tisa", 32).loss == pytest.approx(t32.loss, rel=1e-6)  # deterministic


def test_checkpoints_model_folders_and_eval_file(runs, tmp_path):
    root, absolute, tisa = runs
    text = tmp_path / "held_out.txt"
    text.write_text("\n".join(["the company said its profit rose n % in the quarter"] * 60))
    results = extrapolate(
        [absolute / "checkpoint-3", tisa / "model"],
        [16],
        eval_file=text,
        max_tokens=512,
        output_dir=None,
        progress=False,
    )
    assert [info.label for info in results.runs] == ["absolute/checkpoint-3", "tisa/model"]
    assert all(info.train_seq_len == 16 for info in results.runs)
    assert all(r.status == "ok" for r in results.rows)
    info = resolve_run(tisa)
    assert info.model_dir.endswith("model") and info.position == "tisa"


def test_bad_input(runs, tmp_path, capsys):
    root, absolute, _ = runs
    with pytest.raises(ValueError, match="no such folder"):
        extrapolate([tmp_path / "missing"], [16], output_dir=None)
    with pytest.raises(ValueError, match="holds no model"):
        extrapolate([tmp_path], [16], output_dir=None)
    with pytest.raises(ValueError, match="lengths"):
        ExtrapolateConfig(runs=(str(absolute),), lengths=(16, 1))
    with pytest.raises(ValueError, match="eval_file"):
        ExtrapolateConfig(runs=(str(absolute),), eval_file=str(tmp_path / "none.txt"))
    from tisa.cli import main

    assert main(["extrapolate", str(tmp_path / "missing"), "--lengths", "16"]) == 2
    assert "no such folder" in capsys.readouterr().err
