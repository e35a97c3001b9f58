"""The distillation's word-order and attention-map terms: twins, the batch layout and the
losses."""

from __future__ import annotations

import math

import pytest
import torch

import tisa.hf
from tisa.convert.distill import (
    DistillSettings,
    LengthSampler,
    attention_loss,
    distillation_loss,
    order_loss,
    windowed_states,
)


def _sampler(order_weight: float, **overrides) -> LengthSampler:
    stream = torch.arange(1000) % 97 + 5  # no two equal neighbours
    settings = DistillSettings(
        tokens_per_batch=512, min_length=130, max_length=130, order_weight=order_weight,
        **overrides,
    )
    return LengthSampler(stream, first=1, last=2, settings=settings)


def test_twins_swap_disjoint_adjacent_pairs_of_each_row():
    body = torch.stack([torch.randperm(200) for _ in range(4)])
    twins = LengthSampler.twins(body, torch.Generator().manual_seed(0))
    for row, twin in zip(body, twins):
        assert sorted(row.tolist()) == sorted(twin.tolist())
        moved = (row != twin).nonzero().flatten().tolist()
        assert len(moved) == 2 * (200 // 64)  # three pairs
        pairs = [moved[k : k + 2] for k in range(0, len(moved), 2)]
        for i, j in pairs:
            assert j == i + 1 and row[i] == twin[j] and row[j] == twin[i]
    again = LengthSampler.twins(body, torch.Generator().manual_seed(0))
    assert torch.equal(twins, again)  # reproducible from the generator


def test_twins_skip_pairs_of_equal_tokens():
    body = torch.tensor([[7, 7, 7, 8, 8]])
    twin = LengthSampler.twins(body, torch.Generator().manual_seed(0))
    assert twin.tolist() == [[7, 7, 8, 7, 8]]  # the only pair that differs
    same = torch.tensor([[4, 4, 4]])
    assert torch.equal(LengthSampler.twins(same, torch.Generator()), same)


def test_batch_is_blocks_then_their_twins():
    plain, paired = _sampler(0.0).batch(3), _sampler(0.5).batch(3)
    assert plain.shape == (512 // 130, 130)
    n = (512 // 130) // 2
    assert paired.shape == (2 * n, 130)
    assert (paired[:, 0] == 1).all() and (paired[:, -1] == 2).all()
    blocks, twins = paired[:n], paired[n:]
    for block, twin in zip(blocks, twins):
        assert block[1] + 1 == block[2] or block[2] == 5  # a slice of the stream
        assert (block != twin).sum() == 2 * (128 // 64)
    assert torch.equal(paired, _sampler(0.5).batch(3))  # the same batch on a resumed run


def test_order_loss_compares_the_reactions_to_reordering():
    g = torch.Generator().manual_seed(0)
    teacher = [torch.randn(4, 6, 8, generator=g) for _ in range(3)]
    assert order_loss(teacher, teacher).item() == 0
    # a student that does not react to the twins scores 1 at every layer
    flat = [torch.cat([t[:2], t[:2]]) for t in teacher]
    assert order_loss(flat, teacher).item() == pytest.approx(1.0)
    # each layer weighs the same whatever its scale
    scaled = [t * 10 for t in teacher]
    assert order_loss([torch.cat([t[:2], t[:2]]) for t in scaled], scaled).item() == (
        pytest.approx(1.0)
    )
    with pytest.raises(ValueError, match="even number of rows"):
        order_loss([t[:3] for t in teacher], [t[:3] for t in teacher])
    loss, parts = distillation_loss(teacher, teacher, 1.0)
    assert loss.item() == pytest.approx(0.0, abs=1e-6) and "order" not in parts


@pytest.mark.parametrize("name", ["order_weight", "attention_weight", "long_weight"])
def test_term_weights_are_checked(name):
    with pytest.raises(ValueError, match=f"{name} must be >= 0"):
        DistillSettings(**{name: -0.5})


def _tiny_convert(tiny_bert, texts, out, *flags: str) -> dict:
    """``tisa convert`` of the tiny BERT, two distillation steps with ``flags``; its
    metrics.json."""
    import json

    from tisa.cli import main

    args = ["convert", tiny_bert, "--output-dir", str(out), "--steps", "2", "--no-progress"]
    args += ["--fit-length", "32", "--fit-blocks", "2", "--eval-texts", "10", "--lengths", "128"]
    args += ["--tokens-per-batch", "256", "--max-length", "64", *flags]
    args += ["--train-file", texts[0], "--eval-file", texts[1], "--max-sts-pairs", "20"]
    assert main(args) == 0
    return json.loads((out / "metrics.json").read_text())


def test_convert_with_the_order_term_records_it(tiny_bert, texts, tmp_path):
    metrics = _tiny_convert(tiny_bert, texts, tmp_path / "ordered", "--order-weight", "0.5")
    assert metrics["settings"]["distill"]["order_weight"] == 0.5
    curve = metrics["distillation"]
    assert len(curve) == 2
    for point in curve:
        assert point["order"] > 0
        assert point["loss"] == pytest.approx(
            point["hidden"] + (1 - point["pooled_cosine"]) + 0.5 * point["order"], rel=1e-4
        )


def test_a_checkpoint_from_before_the_order_term_resumes(tiny_bert, texts, tmp_path, caplog):
    """Checkpoints saved before ``order_weight`` and ``attention_weight`` existed carry no
    such settings: they were made without the terms, so a run without them continues."""
    from transformers import AutoModel

    import tisa.hf
    from tisa.convert import distill as distill_lib

    model = AutoModel.from_pretrained(tiny_bert)
    student = tisa.hf.add_tisa(AutoModel.from_pretrained(tiny_bert), position_embeddings="remove")
    stream = torch.randint(5, 60, (400,))
    settings = DistillSettings(steps=2, tokens_per_batch=128, max_length=32, save_every=1)
    sampler = LengthSampler(stream, first=2, last=3, settings=settings)
    folder = tmp_path / "checkpoint"
    distill_lib.distill(model, student, sampler, settings, checkpoint_dir=folder, progress=False)
    state = torch.load(folder / "state.pt", weights_only=True)
    del state["settings"]["order_weight"], state["settings"]["attention_weight"]
    state["step"] = 1
    torch.save(state, folder / "state.pt")
    with caplog.at_level("WARNING"):
        distill_lib.distill(
            model, student, sampler, settings, checkpoint_dir=folder, progress=False
        )
    assert "convert: resuming distillation from step 1 of 2" in caplog.messages
    other = DistillSettings(steps=2, tokens_per_batch=128, max_length=32, save_every=1,
                            order_weight=1.0)
    with pytest.raises(ValueError, match="made with other settings"):
        distill_lib.distill(model, student, sampler, other, checkpoint_dir=folder, progress=False)


def test_attention_loss_is_the_mean_row_kl_from_the_teacher():
    g = torch.Generator().manual_seed(0)
    teacher = [torch.randn(2, 3, 5, 5, generator=g).softmax(-1) for _ in range(2)]
    assert attention_loss(teacher, teacher).item() == pytest.approx(0.0, abs=1e-6)
    uniform = [torch.full_like(t, 1 / 5) for t in teacher]
    # KL(p || uniform) = log 5 - H(p), averaged over rows, then layers
    entropy = [-(t * t.log()).sum(-1).mean() for t in teacher]
    want = sum(math.log(5) - h.item() for h in entropy) / 2
    assert attention_loss(uniform, teacher).item() == pytest.approx(want, rel=1e-5)
    assert attention_loss(teacher, uniform).item() != pytest.approx(want)  # not symmetric
    with pytest.raises(ValueError, match="same number of layers"):
        attention_loss(teacher[:1], teacher)


def test_convert_with_the_attention_term_records_it_and_restores_sdpa(tiny_bert, texts, tmp_path):
    from transformers import AutoModel

    import tisa.hf
    from tisa.convert import distill as distill_lib

    metrics = _tiny_convert(tiny_bert, texts, tmp_path / "maps", "--attention-weight", "2")
    assert metrics["settings"]["distill"]["attention_weight"] == 2
    for point in metrics["distillation"]:
        assert point["attention"] > 0 and "order" not in point
        assert point["loss"] == pytest.approx(
            point["hidden"] + (1 - point["pooled_cosine"]) + 2 * point["attention"], rel=1e-4
        )
    # the models run eager attention for the term and their own implementation after it
    teacher = AutoModel.from_pretrained(tiny_bert, attn_implementation="sdpa")
    student = tisa.hf.add_tisa(AutoModel.from_pretrained(tiny_bert), position_embeddings="remove")
    before = student.config._attn_implementation
    settings = DistillSettings(steps=3, tokens_per_batch=128, max_length=32, save_every=1,
                               attention_weight=1.0, train="scoring")
    sampler = LengthSampler(torch.randint(5, 60, (400,)), first=2, last=3, settings=settings)
    curve = distill_lib.distill(teacher, student, sampler, settings,
                                checkpoint_dir=tmp_path / "ck", progress=False)
    assert teacher.config._attn_implementation == "sdpa"
    assert student.config._attn_implementation == before
    assert curve[-1]["attention"] < curve[0]["attention"]  # the term is what is trained


def test_a_long_block_needs_to_be_longer_than_the_short_ones():
    with pytest.raises(ValueError, match=r"long_length \(512\) must exceed max_length \(512\)"):
        DistillSettings(long_weight=1.0, long_length=512)
    DistillSettings(long_length=512)  # no long term: the length is not used


def test_the_long_block_is_reproducible_and_leaves_the_short_blocks_as_they_were():
    short = _sampler(0.0)
    sampler = _sampler(0.0, long_weight=1.0, long_length=300)
    a, b = sampler.long_batch(3), sampler.long_batch(3)
    assert a.shape == (1, 300) and torch.equal(a, b)
    assert a[0, 0] == 1 and a[0, -1] == 2
    stream = sampler.stream.tolist()
    body = a[0, 1:-1].tolist()
    assert any(stream[o : o + 298] == body for o in range(len(stream) - 297))
    assert not torch.equal(sampler.long_batch(4), a)
    assert torch.equal(sampler.batch(3), short.batch(3))


class _Recorder(torch.nn.Module):
    """A stand-in base model whose hidden states tag every token with (the block it was
    read in, its position there, its id), so a test can see where each state came from."""

    def forward(self, input_ids, output_hidden_states=True):
        from types import SimpleNamespace

        b, length = input_ids.shape
        block = torch.arange(b)[:, None].expand(b, length)
        row = torch.arange(length)[None].expand(b, length)
        tag = torch.stack([block, row, input_ids], -1).float()
        return SimpleNamespace(hidden_states=(tag, tag + 0.5))


def test_windowed_states_take_each_token_from_the_window_where_it_is_most_central():
    ids = torch.cat([torch.tensor([1]), torch.arange(10, 30), torch.tensor([2])])[None]  # 22
    states = windowed_states(_Recorder(), ids, window=10)  # 8 body tokens a window
    assert len(states) == 2 and states[0].shape == (1, 22, 3)
    block, row, token = states[0][0].long().unbind(-1)
    assert torch.equal(token, ids[0])  # every state is of its own token
    # windows start at body offsets 0, 4, 8, 12 (the last ends with the body): body token
    # t is taken where it is nearest the middle (3.5 + start)
    assert block.tolist() == [0, *[0] * 6, *[1] * 4, *[2] * 4, *[3] * 6, 3]
    assert torch.equal(row[1:-1], torch.arange(20) - torch.tensor([0, 4, 8, 12])[block[1:-1]] + 1)
    assert row[0] == 0 and row[-1] == 9 and block[-1] == 3
    assert torch.equal(states[1], states[0] + 0.5)
    short = ids[:, :9]  # one window: one ordinary pass
    assert torch.equal(windowed_states(_Recorder(), short, 10)[0],
                       _Recorder()(short).hidden_states[0])
    with pytest.raises(ValueError, match=r"ids: expected one block"):
        windowed_states(_Recorder(), torch.ones(2, 30, dtype=torch.long), 10)


def test_windowed_states_of_a_real_model_match_its_windows(tiny_bert):
    """On a tiny BERT: a token's stitched states are those of the window it came from."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(tiny_bert).eval()
    ids = torch.randint(5, 60, (1, 70), generator=torch.Generator().manual_seed(0))
    states = windowed_states(model, ids, window=32)
    assert len(states) == model.config.num_hidden_layers + 1
    body = ids[0, 1:-1]
    start = 15  # windows of 30 body tokens at 0, 15, 30, 38: token 25 is nearest 15's middle
    window = torch.cat([ids[0, :1], body[start : start + 30], ids[0, -1:]])[None]
    with torch.no_grad():
        direct = model(input_ids=window, output_hidden_states=True).hidden_states
    for got, want in zip(states, direct, strict=True):
        torch.testing.assert_close(got[0, 1 + 25], want[0, 1 + 25 - start])


def test_convert_with_the_long_term_records_it(tiny_bert, texts, tmp_path):
    metrics = _tiny_convert(tiny_bert, texts, tmp_path / "long", "--long-weight", "0.5",
                            "--long-length", "150")
    assert metrics["settings"]["distill"]["long_weight"] == 0.5
    for point in metrics["distillation"]:
        assert point["long"] > 0 and -1 <= point["long_pooled_cosine"] <= 1
        assert point["loss"] == pytest.approx(
            point["hidden"] + (1 - point["pooled_cosine"]) + 0.5 * point["long"], rel=1e-4
        )


def test_long_every_draws_the_long_block_on_every_kth_step_only(tiny_bert, texts, tmp_path):
    metrics = _tiny_convert(tiny_bert, texts, tmp_path / "every", "--long-weight", "0.5",
                            "--long-length", "150", "--long-every", "2", "--steps", "3")
    assert metrics["settings"]["distill"]["long_every"] == 2
    curve = metrics["distillation"]
    assert [("long" in p) for p in curve] == [True, False, True]  # steps 0 and 2
    for point in curve:
        assert point["loss"] == pytest.approx(
            point["hidden"] + (1 - point["pooled_cosine"]) + 0.5 * point.get("long", 0.0),
            rel=1e-4,
        )
    assert (tmp_path / "every" / "report.html").is_file()  # its figure takes the gaps
    with pytest.raises(ValueError, match="long_every must be an integer >= 1, got 0"):
        DistillSettings(long_every=0)


def test_convert_with_a_relative_content_term_learns_it(tiny_bert, texts, tmp_path):
    from transformers import AutoModel

    metrics = _tiny_convert(tiny_bert, texts, tmp_path / "content", "--content-offsets", "3",
                            "--content-beyond", "zero")
    assert metrics["settings"]["content_offsets"] == 3
    model = AutoModel.from_pretrained(tmp_path / "content" / "model")
    assert model.config.tisa["content_offsets"] == 3
    assert model.config.tisa["content_beyond"] == "zero"
    vectors = list(model.base_model.tisa_content.parameters())
    assert len(vectors) == 4 and all(float(v.detach().abs().max()) > 0 for v in vectors)
    counted = metrics["positional_parameters"]["converted"]["tisa"]
    assert counted == tisa.hf.positional_parameters(model)["tisa"]


@pytest.mark.parametrize(
    "flags",
    [["--content-offsets", "0"], ["--content-offsets", "two"], ["--content-beyond", "zero"]],
)
def test_bad_content_options_get_one_line(tiny_bert, tmp_path, capsys, flags):
    from tisa.cli import main

    code = main(["convert", tiny_bert, "--output-dir", str(tmp_path / "x"), *flags])
    assert code != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "content_" in err[0], err
