"""FIRE and ALiBi with learned slopes: parity with the references, their defining
properties, the attention hook for a bias that depends on the query position, gradients
and pretraining."""

from __future__ import annotations

import pytest
import torch

from tisa import bias as bias_lib
from tisa.attention import attention, attention_with_weights
from tisa.scoring import ALiBiScoring, build


def _fire(**options):
    torch.manual_seed(0)
    scorer = build("fire", num_heads=3, **options)
    with torch.no_grad():  # away from the start, so that c and L matter
        scorer.c.fill_(0.37)
        scorer.l_multiplier.fill_(1.3)
    return scorer


def _paper_fire(scorer, length: int) -> torch.Tensor:
    """FIRE's bias as the paper's code writes it (positions 0 .. L-1): (H, L, L)."""
    positions = torch.arange(length, dtype=torch.float)
    rel_distance = positions[:, None] - positions[None, :]
    threshold = torch.abs(scorer.l_multiplier * scorer.init_threshold)
    pos_normalizer = torch.max(positions, threshold)[:, None]
    rel_distance = torch.log(torch.abs(scorer.c * rel_distance) + 1)
    pos_normalizer = torch.log(torch.abs(scorer.c * pos_normalizer) + 1) + scorer.eps
    normalized = rel_distance / pos_normalizer
    return scorer.mlp(normalized.unsqueeze(-1)).permute(2, 0, 1)


# ------------------------------------------------------------------------------- FIRE


def test_fire_matches_the_paper_and_depends_on_the_query_beyond_its_threshold():
    scorer = _fire(init_threshold=6.0)  # threshold 7.8 tokens
    with torch.no_grad():
        dense = scorer.position_bias(20, 20)
        torch.testing.assert_close(dense, _paper_fire(scorer, 20))
        # the causal rows of queries up to the threshold are f of k alone: score()
        table = scorer(torch.arange(-19, 1))  # (H, 20): k = -19 .. 0
        for i in range(8):
            torch.testing.assert_close(dense[:, i, : i + 1], table[:, 19 - i :])
        # beyond it the normaliser grows with i: the same offset, another bias
        assert not torch.allclose(dense[:, 12, 9], dense[:, 18, 15])
        assert not scorer.translation_invariant
        # a key/value cache: the last query's row, whatever came before
        torch.testing.assert_close(scorer.position_bias(1, 20)[:, 0], dense[:, -1])
        torch.testing.assert_close(scorer.position_bias(5, 20), dense[:, -5:])


def test_fire_length_variant_is_toeplitz_and_keeps_the_direction():
    scorer = _fire(normalizer="length", init_threshold=16.0)
    assert scorer.translation_invariant
    with torch.no_grad():
        dense = scorer.position_bias(25, 25)
        torch.testing.assert_close(dense, bias_lib.toeplitz_projection(dense))  # Toeplitz
        torch.testing.assert_close(dense, bias_lib.expand(bias_lib.table(scorer, 25), 25, 25))
        k = torch.arange(1, 10)
        assert not torch.allclose(scorer(k), scorer(-k))  # sign(k) psi(|k|) / psi(L)
        # the normaliser is psi(L) for every query
        c, threshold = scorer.c.abs(), scorer.threshold()
        u = torch.log(c * 5 + 1) / (torch.log(c * threshold + 1) + scorer.eps)
        expected = scorer.mlp(u.reshape(1, 1))[0]
        torch.testing.assert_close(scorer(torch.tensor([5]))[:, 0], expected)


@pytest.mark.parametrize("normalizer", ["query", "length"])
@pytest.mark.parametrize("backend", ["eager", "sdpa", "auto"])
def test_fire_attention_adds_its_bias_and_trains_it(normalizer, backend):
    scorer = _fire(normalizer=normalizer, init_threshold=4.0)
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 3, 11, 8, generator=g, requires_grad=True) for _ in range(3))
    padding = torch.ones(2, 1, 1, 11, dtype=torch.bool)
    padding[1, ..., -2:] = False  # every query still sees key 0
    out = attention(q, k, v, scorer, mask=padding, causal=True, backend=backend)
    # the reference: softmax(q k^T / sqrt(D) + paper bias + masks) v
    scores = q @ k.transpose(-1, -2) / 8**0.5 + scorer.position_bias(11, 11)[None]
    keep = padding & torch.ones(11, 11, dtype=torch.bool).tril()
    expected = torch.softmax(scores.masked_fill(~keep, float("-inf")), -1) @ v
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    out.square().sum().backward()
    for name, p in scorer.named_parameters():
        assert p.grad is not None and bool(p.grad.abs().sum() > 0), name
    _, probs = attention_with_weights(q, k, v, scorer, causal=True)
    assert probs.shape == (2, 3, 11, 11)


def test_fire_bad_options_name_the_argument():
    with pytest.raises(ValueError, match="normalizer"):
        build("fire", num_heads=2, normalizer="key")
    with pytest.raises(ValueError, match="init_c"):
        build("fire", num_heads=2, init_c=0.0)
    with pytest.raises(ValueError, match="init_threshold"):
        build("fire", num_heads=2, init_threshold=-1)
    with pytest.raises(ValueError, match="mlp_width"):
        build("fire", num_heads=2, mlp_width=0)
    scorer = build("fire", num_heads=2, mlp_width=4, normalizer="length")
    again = build(**scorer.config())
    again.load_state_dict(scorer.state_dict())
    k = torch.arange(-5, 6)
    torch.testing.assert_close(again(k), scorer(k))
    assert scorer.num_positional_parameters() == (2 * 4 + 4 * 2 + 2) + 2


# ----------------------------------------------------------------------- alibi_learned


def test_alibi_learned_starts_as_alibi_and_learns_nonnegative_slopes():
    k = torch.arange(-40, 41)
    for heads in (4, 6, 12):
        learned = build("alibi_learned", num_heads=heads)
        torch.testing.assert_close(learned(k), ALiBiScoring(num_heads=heads)(k))
        assert learned.num_positional_parameters() == heads
    learned = build("alibi_learned", num_heads=4, slope_scale=2.0)
    torch.testing.assert_close(learned.slopes(), 2 * ALiBiScoring(num_heads=4).slopes)
    (learned(k) * torch.randn(4, 81)).sum().backward()
    assert learned.raw_slope.grad is not None and bool(learned.raw_slope.grad.abs().sum() > 0)
    with torch.no_grad():
        learned.raw_slope.fill_(-30.0)  # any raw value: a slope >= 0
    assert bool((learned.slopes() >= 0).all()) and bool((learned(k) <= 0).all())
    with pytest.raises(ValueError, match="slope_scale"):
        build("alibi_learned", num_heads=4, slope_scale=0)


# ----------------------------------------------------------------------- pretraining


@pytest.mark.parametrize("arch", ["albert", "gpt2"])
@pytest.mark.parametrize("position", ["fire", "alibi_learned"])
def test_schemes_build_and_train_their_positional_parameters(arch, position):
    from tisa.hf import iter_scorers, parameter_groups, scoring_parameter_names
    from tisa.pretrain.build import build_model
    from tisa.pretrain.masked_lm import masked_lm_forward

    model = build_model(arch=arch, size="tiny", position=position, vocab_size=50, seed=0)
    scorers = [s for _, s in iter_scorers(model)]
    assert scorers and all(s.family == position for s in scorers)
    if position == "fire":  # the paper's normaliser in a decoder, ours in an encoder
        expected = "query" if arch == "gpt2" else "length"
        assert {s.normalizer for s in scorers} == {expected}
    ids = torch.randint(5, 50, (2, 12), generator=torch.Generator().manual_seed(0))
    if arch == "gpt2":
        loss = model(input_ids=ids, labels=ids).loss
    else:
        labels = torch.full_like(ids, -100)
        labels[:, ::3] = ids[:, ::3]
        loss = masked_lm_forward(model, labels=labels, input_ids=ids).loss
    loss.backward()
    names = scoring_parameter_names(model)
    params = dict(model.named_parameters())
    owned = {f"{n}" for n, _ in model.named_parameters() if ".tisa_scorers." in f".{n}"}
    assert set(names) == owned and names  # every parameter of every scorer, MLPs included
    for name in names:
        assert params[name].grad is not None and bool(params[name].grad.abs().sum() > 0), name
    groups = {
        g["name"]: g for g in parameter_groups(model, learning_rate=1e-3, tisa_learning_rate=3e-2)
    }
    ids_of = {id(p): n for n, p in model.named_parameters()}
    assert {ids_of[id(p)] for p in groups["tisa"]["params"]} == set(names)
    assert groups["tisa"]["lr"] == 3e-2


def test_pretrain_fire_starts_its_threshold_at_the_training_length(tmp_path, monkeypatch):
    from tisa.hf import iter_scorers
    from tisa.pretrain.causal_lm import load_causal_lm
    from tisa.pretrain.run import PretrainConfig, pretrain

    monkeypatch.setenv("TISA_CACHE_DIR", str(tmp_path / "cache"))
    run = pretrain(
        PretrainConfig(
            output_dir=str(tmp_path / "fire"),
            arch="gpt2",
            position="fire",
            size="tiny",
            seq_len=16,
            batch_size=4,
            max_steps=2,
            save_steps=2,
            eval_steps=2,
            max_train_blocks=16,
            max_eval_blocks=2,
            vocab_size=300,
            progress=False,
            tensorboard=False,
        )
    )
    model = load_causal_lm(run / "model")
    scorers = [s for _, s in iter_scorers(model)]
    assert {(s.normalizer, s.init_threshold) for s in scorers} == {("query", 16.0)}


@pytest.mark.parametrize(
    "family",
    ["rbf", "t5", "kerple_log", "free", "rbf_linear", "rbf_log", "rbf_logdist", "alibi_learned"]
    + ["fire"],
)
def test_the_positional_rate_group_holds_exactly_the_familys_parameters(family):
    """tisa_learning_rate applies to every family's learned positional parameters."""
    from transformers import BertConfig, BertForMaskedLM

    import tisa.hf as th

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=24,
        max_position_embeddings=32,
    )
    model = th.add_tisa(BertForMaskedLM(config), scoring=family)
    scorers = [s for _, s in th.iter_scorers(model)]
    own = {id(p) for s in scorers for p in s.parameters()}
    assert own and all(s.family == family for s in scorers)
    groups = {
        g["name"]: g
        for g in th.parameter_groups(model, learning_rate=1e-4, tisa_learning_rate=2e-2)
    }
    assert {id(p) for p in groups["tisa"]["params"]} == own
    assert groups["tisa"]["lr"] == 2e-2 and groups["tisa"]["weight_decay"] == 0.0
    others = [p for k, g in groups.items() if k != "tisa" for p in g["params"]]
    assert not any(id(p) in own for p in others)
    counted = th.positional_parameters(model)["tisa"]
    assert counted == sum(p.numel() for p in groups["tisa"]["params"])


# ----------------------------------------------------------------------- clipped offsets


@pytest.mark.parametrize("name", ["alibi", "rbf_linear", "fire_length"])
def test_clipped_offsets_read_every_offset_beyond_k_as_k(name):
    from tisa.scoring import ClippedOffsets

    scorer = _fire(normalizer="length") if name == "fire_length" else build(name, num_heads=3)
    clipped = ClippedOffsets(scorer, 5)
    k = torch.arange(-20, 21)
    expected = scorer(k.clamp(-5, 5))
    torch.testing.assert_close(clipped(k), expected)
    torch.testing.assert_close(clipped(k)[:, 15:26], scorer(k)[:, 15:26])  # |k| <= 5 kept
    assert clipped.translation_invariant and clipped.family == scorer.family
    # the scorer's own parameters, the same tensors (not copies), and nothing added
    assert [id(p) for p in clipped.parameters()] == [id(p) for p in scorer.parameters()]
    torch.testing.assert_close(  # the dense bias is its Toeplitz expansion
        clipped.position_bias(4, 12), bias_lib.expand(bias_lib.table(clipped, 4, 12), 4, 12))
    if name == "alibi":  # -m |k| floors at -m K
        slopes = ALiBiScoring(num_heads=3).slopes
        torch.testing.assert_close(clipped(torch.tensor([-50])),
                                   -5 * slopes[:, None].to(torch.float32))
    else:  # trainable through the clip
        clipped(k).sum().backward()
        assert all(p.grad is not None for p in scorer.parameters())


def test_clipped_offsets_of_a_scorer_is_one_object_outside_its_state():
    from tisa.scoring import ClippedOffsets

    scorer = build("rbf_linear", num_heads=3)
    keys = list(scorer.state_dict())
    first = ClippedOffsets.of(scorer, 7)
    assert ClippedOffsets.of(scorer, 7) is first  # every forward pass: the same object
    assert ClippedOffsets.of(scorer, 9) is not first and first.clip_distance == 7
    assert list(scorer.state_dict()) == keys and not list(scorer.children())
    torch.testing.assert_close(first(torch.tensor([-30, 30])), scorer(torch.tensor([-7, 7])))


def test_clipped_fire_with_the_query_normaliser_sees_no_query_past_k():
    from tisa.scoring import ClippedOffsets

    scorer = _fire()  # threshold 1.3 * 512: lower it below the lengths used here
    with torch.no_grad():
        scorer.l_multiplier.fill_(4 / 512)
    clipped = ClippedOffsets(scorer, 6)
    assert not clipped.translation_invariant
    full = scorer.position_bias(7, 7)
    torch.testing.assert_close(clipped.position_bias(7, 7), full)  # up to K + 1 tokens: same
    long = clipped.position_bias(20, 20)  # (H, 20, 20)
    torch.testing.assert_close(long[:, :7, :7], full)  # the first K + 1 queries: as they were
    for i in range(7, 20):  # every later query: the row of query K on distances up to K
        for j in range(20):
            torch.testing.assert_close(long[:, i, j], full[:, 6, 6 - min(abs(i - j), 6)])
    with pytest.raises(ValueError, match="clip_distance"):
        ClippedOffsets(scorer, 0)


# ---------------------------------------------------------------------- windowed offsets


@pytest.mark.parametrize("name", ["rbf", "rbf_linear", "fire_length"])
def test_windowed_offsets_mask_every_offset_beyond_w(name):
    from tisa.scoring import WindowedOffsets

    scorer = _fire(normalizer="length") if name == "fire_length" else build(name, num_heads=3)
    keys = list(scorer.state_dict())
    windowed = WindowedOffsets.of(scorer, 4)
    assert WindowedOffsets.of(scorer, 4) is windowed and list(scorer.state_dict()) == keys
    k = torch.arange(-20, 21)
    values = windowed(k)
    torch.testing.assert_close(values[:, 16:25], scorer(k)[:, 16:25])  # |k| <= 4 kept
    assert torch.isneginf(values[:, :16]).all() and torch.isneginf(values[:, 25:]).all()
    assert windowed.config() == scorer.config() and windowed.family == scorer.family
    assert [id(p) for p in windowed.parameters()] == [id(p) for p in scorer.parameters()]
    dense = windowed.position_bias(6, 15)  # (H, 6, 15): queries at 9..14
    far = (torch.arange(15)[None] - torch.arange(9, 15)[:, None]).abs() > 4
    assert torch.isneginf(dense[:, far]).all()
    torch.testing.assert_close(dense[:, ~far], scorer.position_bias(6, 15)[:, ~far])
    with pytest.raises(ValueError, match="attention_window"):
        WindowedOffsets(scorer, 0)
