"""``tisa extrapolate``: loss by evaluation length, n/a beyond an absolute table."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pytest

from tisa.pretrain.config import ExtrapolateConfig
from tisa.pretrain.extrapolation import extrapolate, resolve_run
from tisa.pretrain.run import PretrainConfig, pretrain

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
    # masks are per token of the text: every length scores the same masked tokens
    assert a16.masked_tokens == a32.masked_tokens == t32.masked_tokens == t64.masked_tokens
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


@pytest.fixture(scope="module")
def causal_runs(runs):
    """GPT-2 runs (absolute and ALiBi) on the masked runs' tokenizer."""
    root, absolute, _ = runs
    settings = dict(TINY, arch="gpt2", tokenizer=str(absolute / "tokenizer"))
    return {
        name: pretrain(PretrainConfig(output_dir=str(root / name), position=position, **settings))
        for name, position in (("gpt2-abs", "absolute"), ("gpt2-alibi", "alibi"))
    }


@pytest.fixture(scope="module")
def notes(tmp_path_factory):
    text = tmp_path_factory.mktemp("notes") / "notes.txt"
    text.write_text("\n".join(f"line {i} of a plain text file with words" for i in range(300)))
    return text


def test_causal_runs_score_next_tokens_at_each_length(runs, causal_runs, notes, tmp_path):
    """A GPT-2 run: next-token loss (L - 1 predictions per block), n/a beyond wpe, any file."""
    import torch

    from tisa.data.mlm import build_blocks, token_stream
    from tisa.data.tokenizer import load_tokenizer
    from tisa.pretrain.causal_lm import load_causal_lm

    root, absolute, _ = runs
    shared = str(absolute / "tokenizer")
    causal = causal_runs
    text = notes
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


def test_causal_stride_scores_every_token_once_with_long_context(causal_runs, notes):
    """--stride S: the Hugging Face perplexity guide's sliding windows; S = L: the blocks."""
    import torch

    from tisa.data.mlm import token_stream
    from tisa.data.tokenizer import load_tokenizer
    from tisa.pretrain.causal_lm import load_causal_lm

    run = causal_runs["gpt2-alibi"]
    common = dict(eval_file=notes, max_tokens=640, output_dir=None, progress=False)
    blocks = extrapolate([run], [64], **common).row("gpt2-alibi", 64)
    same = extrapolate([run], [64], stride=64, **common).row("gpt2-alibi", 64)
    assert same.loss == pytest.approx(blocks.loss, rel=1e-5)
    assert same.masked_tokens == blocks.masked_tokens == 10 * 63
    slid = extrapolate([run], [64], stride=16, **common).row("gpt2-alibi", 64)
    assert slid.status == "ok" and slid.masked_tokens == 640 - 1  # every token but the first
    # the guide's loop, written out: windows of L every S tokens, labels on the new tokens
    stream = token_stream(notes.read_text().splitlines(), load_tokenizer(run / "model"))
    ids = torch.as_tensor(stream[:640])
    model = load_causal_lm(run / "model")
    nll, count, previous = 0.0, 0, 0
    with torch.no_grad():
        for begin in range(0, 640, 16):
            end = min(begin + 64, 640)
            x = ids[begin:end][None]
            labels = x.clone()
            labels[:, : -(end - previous)] = -100
            n = int((labels[:, 1:] != -100).sum())
            nll += float(model(input_ids=x, labels=labels).loss) * n
            count += n
            previous = end
            if end == 640:
                break
    assert count == slid.masked_tokens
    assert slid.loss == pytest.approx(nll / count, rel=1e-5)
    with pytest.raises(ValueError, match="stride"):
        ExtrapolateConfig(runs=(str(run),), lengths=(16, 64), stride=32)


def test_context_curve_scores_the_same_spans_at_every_context(runs, causal_runs, tmp_path):
    root, absolute, tisa = runs
    run = causal_runs["gpt2-alibi"]
    results = extrapolate(
        [absolute, tisa, run],
        [16],
        max_tokens=512,
        context_curve=(8, 16, 32, 64),
        context_span=4,
        context_spans=40,
        output_dir=tmp_path,
        progress=False,
    )
    rows = {(r.run, r.context): r for r in results.context_rows}
    assert rows[("absolute", 64)].status == "n/a"  # beyond its 32 positions
    for label in ("tisa", "gpt2-alibi"):
        counts = {rows[(label, c)].tokens for c in (8, 16, 32, 64)}
        assert all(rows[(label, c)].status == "ok" for c in (8, 16, 32, 64))
        assert len(counts) == 1 and counts.pop() > 0  # the same targets at every context
    assert rows[("gpt2-alibi", 8)].tokens == 40 * 4  # causal: every token of every span
    slopes = results.context_slopes()
    assert slopes["tisa"] is not None and slopes["gpt2-alibi"] is not None
    points = [(c, rows[("tisa", c)].loss) for c in (16, 32, 64)]  # from the training length on
    assert slopes["tisa"] == pytest.approx(
        float(np.polyfit(np.log2([c for c, _ in points]), [v for _, v in points], 1)[0])
    )
    data = json.loads((tmp_path / "extrapolation.json").read_text())
    assert len(data["context_rows"]) == 12 and set(data["context_slopes"]) == {
        "absolute",
        "tisa",
        "gpt2-alibi",
    }
    assert "slope" in (tmp_path / "extrapolation.md").read_text()
    assert len(list(csv.DictReader((tmp_path / "context.csv").open()))) == 12
    assert (tmp_path / "context.png").stat().st_size > 1000
    with pytest.raises(ValueError, match="context_curve"):
        ExtrapolateConfig(runs=(str(tisa),), context_curve=(4,), context_span=4)


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

    from tisa.hf import iter_scorers
    from tisa.hf.install import with_scoring_options
    from tisa.pretrain.masked_lm import load_masked_lm

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


def test_clip_distance_and_length_scale_apply_to_tisa_runs_beyond_their_reach(
    runs, caplog, tmp_path
):
    import shutil

    import torch

    from tisa.hf import iter_scorers
    from tisa.pretrain.masked_lm import load_masked_lm

    root, absolute, trained = runs
    # a copy whose kernels are wide and tall: its bias still changes past offset 15, so
    # clipping there shows (the tiny run's own kernels barely move from their start);
    # its attention values are scaled up too, or what attention reads hardly reaches the
    # loss of a model trained for 3 steps (the change would round away in float32)
    tisa = tmp_path / "tisa"
    shutil.copytree(trained, tisa)
    model = load_masked_lm(tisa / "model")
    with torch.no_grad():
        for _, scorer in iter_scorers(model):
            scorer.amplitude.fill_(3.0)
            scorer.sharpness.fill_(0.002)
        for name, parameter in model.named_parameters():
            if name.endswith("attention.value.weight"):
                parameter.mul_(30.0)
    model.save_pretrained(tisa / "model")
    lengths = [16, 64]
    plain = extrapolate([absolute, tisa], lengths, max_tokens=2048, output_dir=None,
                        progress=False)
    with caplog.at_level("WARNING"):
        clipped = extrapolate([absolute, tisa], lengths, max_tokens=2048, clip_distance=15,
                              output_dir=None, progress=False)
    assert "absolute has no TISA attention: clip_distance do not apply" in caplog.text
    # 16 tokens have offsets up to 15: nothing to clip; 64 do
    assert clipped.row("tisa", 16).loss == pytest.approx(plain.row("tisa", 16).loss, rel=1e-6)
    assert clipped.row("tisa", 64).loss != plain.row("tisa", 64).loss
    assert clipped.row("absolute", 16).loss == pytest.approx(plain.row("absolute", 16).loss)
    both = extrapolate([tisa], lengths, max_tokens=2048, clip_distance=15, length_scale=16,
                       output_dir=None, progress=False)
    assert both.row("tisa", 16).loss == pytest.approx(plain.row("tisa", 16).loss, rel=1e-6)
    assert both.row("tisa", 64).loss not in (plain.row("tisa", 64).loss,
                                              clipped.row("tisa", 64).loss)
    assert both.config.clip_distance == 15 and both.config.length_scale == 16
    scored = "Scored with log-n scaling past 16 keys and offsets clipped at +-15"
    assert scored in both.to_markdown()
    assert "Scored with" not in plain.to_markdown()
    for bad in ({"clip_distance": 0}, {"length_scale": 1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            ExtrapolateConfig(runs=(str(tisa),), **bad)
