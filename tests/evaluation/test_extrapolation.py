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


def test_causal_runs_score_next_tokens_at_each_length(runs, tmp_path):
    """A GPT-2 run: next-token loss (L - 1 predictions per block), n/a beyond wpe, any file."""
    import torch

    from tisa.data.mlm import build_blocks, token_stream
    from tisa.data.tokenizer import load_tokenizer
    from tisa.train.causal_lm import load_causal_lm

    root, absolute, _ = runs
    shared = str(absolute / "tokenizer")
    settings = dict(TINY, arch="gpt2", tokenizer=shared)
    causal = {
        name: pretrain(PretrainConfig(output_dir=str(root / name), position=position, **settings))
        for name, position in (("gpt2-abs", "absolute"), ("gpt2-alibi", "alibi"))
    }
    text = tmp_path / "notes.txt"
    text.write_text("\n".join(f"line {i} of a plain text file with words" for i in range(300)))
    results = extrapolate(
        list(causal.values()), [16, 64], eval_file=text, max_tokens=640, output_dir=tmp_path
    )
    assert {info.objective for info in results.runs} == {"causal"}
    assert results.row("gpt2-abs", 64).status == "n/a"  # wpe has 32 rows
    row = results.row("gpt2-alibi", 64)
    assert row.status == "ok" and row.blocks == 10 and row.masked_tokens == 10 * 63
    # the loss is the token-weighted next-token cross-entropy of the plain blocks
    tokenizer = load_tokenizer(shared)
    blocks = build_blocks(
        token_stream(text.read_text().splitlines(), tokenizer, progress=False),
        tokenizer,
        seq_len=64,
        block_format="plain",
        max_blocks=10,
    )
    model = load_causal_lm(causal["gpt2-alibi"] / "model")
    ids = torch.as_tensor(blocks)
    with torch.no_grad():
        expected = model(input_ids=ids, labels=ids).loss
    assert row.loss == pytest.approx(float(expected), rel=1e-5)
    assert "Next-token loss" in (tmp_path / "extrapolation.md").read_text()


def test_scoring_options_change_the_scorers_only_for_evaluation(runs, tmp_path):
    root, absolute, tisa = runs
    lengths = [16, 64]
    plain = extrapolate([tisa], lengths, max_tokens=2048, output_dir=None, progress=False)
    ramp = extrapolate(
        [tisa],
        lengths,
        max_tokens=2048,
        scoring_options=("far_offset=15", "far_slope=2.0"),
        output_dir=None,
        progress=False,
    )
    # offsets within the training length are untouched; beyond it the ramp acts
    assert ramp.row("tisa", 16).loss == pytest.approx(plain.row("tisa", 16).loss, rel=1e-6)
    assert ramp.row("tisa", 64).loss != plain.row("tisa", 64).loss
    import torch

    from tisa.evaluation.extrapolation import with_scoring_options
    from tisa.hf import iter_scorers
    from tisa.train.masked_lm import load_masked_lm

    model = load_masked_lm(tisa / "model")
    k = torch.arange(-40, 41)
    with torch.no_grad():
        before = [s(k) for _, s in iter_scorers(model)]
        with_scoring_options(model, {"far_offset": 15, "far_slope": 2.0})
        after = [s(k) for _, s in iter_scorers(model)]
    ramp_values = -2.0 * (k.abs() - 15).clamp(min=0)
    for b, a in zip(before, after, strict=True):
        torch.testing.assert_close(a, b + ramp_values)
    assert model.config.tisa["scoring"]["far_offset"] == 15
    with pytest.raises(ValueError, match="no TISA scoring functions"):
        extrapolate([absolute], [16], scoring_options=("far_offset=15",), output_dir=None)
    with pytest.raises(ValueError, match="change the learned parameters"):
        extrapolate([tisa], [16], scoring_options=("num_kernels=2",), output_dir=None)
    with pytest.raises(ValueError, match="unknown option"):
        extrapolate([tisa], [16], scoring_options=("tail=log",), output_dir=None)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        ExtrapolateConfig(runs=(str(tisa),), scoring_options=("far_offset",))
