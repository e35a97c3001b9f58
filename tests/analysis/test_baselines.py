"""Null tables through a model's own weights: F_P of any table, swapped position rows, and
the nulls of P P^T, cos(P) and F_P (tisa.analysis.baselines)."""

from __future__ import annotations

import pytest
import torch

from tests.analysis.test_extract import _configs, _tiny
from tisa import metrics
from tisa.analysis import baselines, extract, nulls

L = 12


def _sinusoidal(n: int, d: int) -> torch.Tensor:
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    freq = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


# --- F_P of an arbitrary table -------------------------------------------------------


@pytest.mark.parametrize("family", ["bert", "roberta", "albert", "gpt2"])
def test_fp_of_the_models_own_table_is_its_fp(family: str) -> None:
    model = _tiny(family)
    p = extract.position_embeddings(model, L)
    for variant in ("raw", "ln"):
        own = extract.positional_logits(model, max_positions=L, variant=variant)
        given = extract.positional_logits(model, table=p.double(), variant=variant)
        torch.testing.assert_close(given, own)


def test_fp_of_another_table_is_what_the_model_computes_with_it() -> None:
    """Written into the model, a table gives the same F_P as passed with ``table=``; and
    with word and type embeddings zeroed, softmax of that F_P (with the biases) is the
    model's own layer-1 attention."""
    model = _tiny("bert", seed=3)
    with torch.no_grad():
        model.embeddings.word_embeddings.weight.zero_()
        model.embeddings.token_type_embeddings.weight.zero_()
    other = torch.randn(L, 16, generator=torch.Generator().manual_seed(1))
    fp = extract.positional_logits(model, table=other, include_bias=True)  # (H, L, L)
    assert not torch.allclose(
        fp, extract.positional_logits(model, max_positions=L, include_bias=True)
    )
    with extract.swapped_positions(model, other):
        inside = extract.positional_logits(model, max_positions=L, include_bias=True)
        with torch.no_grad():
            out = model(input_ids=torch.full((1, L), 5), output_attentions=True)
    torch.testing.assert_close(inside, fp)
    torch.testing.assert_close(fp.softmax(-1), out.attentions[0][0], atol=1e-5, rtol=1e-4)


def test_layer1_inputs_checks_the_table() -> None:
    model = _tiny("albert")  # embedding size 8, hidden 16
    assert extract.layer1_inputs(model, torch.zeros(5, 8))["raw"].shape == (5, 16)
    with pytest.raises(ValueError, match=r"table must have shape \(L, 8\)"):
        extract.layer1_inputs(model, torch.zeros(5, 16))
    with pytest.raises(ValueError, match="table must be a torch.Tensor"):
        extract.layer1_inputs(model, [[0.0] * 8])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        extract.layer1_inputs(model, torch.full((3, 8), float("nan")))


# --- swapped position rows -----------------------------------------------------------


def test_swapped_positions_writes_the_rows_and_restores_them() -> None:
    model = _tiny("roberta")
    weight = model.embeddings.position_embeddings.weight
    before = weight.detach().clone()
    first = model.embeddings.padding_idx + 1
    rows = torch.randn(5, 16, dtype=torch.float64)
    with extract.swapped_positions(model, rows):
        torch.testing.assert_close(weight[first : first + 5].detach(), rows.float())
        torch.testing.assert_close(weight[:first].detach(), before[:first])  # padding rows kept
        torch.testing.assert_close(weight[first + 5 :].detach(), before[first + 5 :])
        torch.testing.assert_close(extract.position_embeddings(model, 5), rows.float())
    assert torch.equal(weight.detach(), before)
    with pytest.raises(RuntimeError, match="inside"):
        with extract.swapped_positions(model, rows):
            raise RuntimeError("inside")
    assert torch.equal(weight.detach(), before)  # restored after an error too
    too_many = torch.zeros(extract.num_positions(model) + 1, 16)
    with pytest.raises(ValueError, match="positions"):
        with extract.swapped_positions(model, too_many):
            pass


# --- nulls of the table figures ------------------------------------------------------


def test_table_nulls_match_a_hand_computation() -> None:
    model = _tiny("bert", seed=2)
    draws, seed = 3, 7
    found = baselines.table_nulls(model, max_positions=L, draws=draws, seed=seed)
    assert found.positions == L and found.draws == draws and found.seed == seed
    assert set(found.figures) == set(baselines.TABLE_FIGURES)
    terms = extract.extract(model, max_positions=L)
    ti = metrics.translation_invariance
    assert found.figures["gram"].observed == pytest.approx(float(ti(terms.gram)))
    assert found.figures["cosine_offdiag"].observed == pytest.approx(
        float(ti(terms.cosine, exclude_diagonal=True))
    )
    assert found.figures["fp_ln"].observed == pytest.approx(float(ti(terms.fp_ln).mean()), abs=1e-6)
    heads = ti(terms.fp_raw)
    assert [h.observed for h in found.heads["fp_raw"]] == pytest.approx(heads.tolist(), abs=1e-6)
    # the null draws: the same tables as nulls.*_tables, through the model's weights
    p = extract.position_embeddings(model, L)
    for null, make in (("random", nulls.random_tables), ("shuffled", nulls.shuffled_tables)):
        tables = make(p, draws, seed=seed)
        fp = [extract.positional_logits(model, table=t, variant="raw") for t in tables]
        expected = [float(ti(f, exclude_diagonal=True).mean()) for f in fp]
        got = getattr(found.figures["fp_raw_offdiag"], null).draws
        assert got == pytest.approx(expected, abs=1e-6)
        gram = [float(ti(t @ t.T, exclude_diagonal=True)) for t in tables]
        assert getattr(found.figures["gram_offdiag"], null).draws == pytest.approx(gram)
    plain = found.to_dict()
    assert plain["figures"]["gram"]["random"]["draws"] == draws
    assert len(plain["heads"]["fp_ln"]) == 4


def test_sinusoidal_table_stands_out_and_a_random_table_does_not() -> None:
    """Known answers: sinusoidal positions give P P^T and cos(P) TI 1 far above both nulls;
    a random table's TI(P P^T) with the diagonal is high, but so is its random null."""
    config = _configs()["bert"]
    config.max_position_embeddings = 48
    torch.manual_seed(0)
    import transformers as hf

    model = hf.BertModel(config, add_pooling_layer=False).eval()
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.copy_(_sinusoidal(48, 16).float())
    found = baselines.table_nulls(model, draws=8, seed=0).figures
    for key in ("gram_offdiag", "cosine_offdiag"):
        assert found[key].observed == pytest.approx(1.0, abs=1e-5)
        for b in (found[key].random, found[key].shuffled):
            assert b.mean < 0.2 and b.z > 20 and b.exceeded == 1.0
    with torch.no_grad():
        model.embeddings.position_embeddings.weight.normal_(0.0, 1.0)
    found = baselines.table_nulls(model, draws=16, seed=1).figures
    gram, off = found["gram"], found["gram_offdiag"]
    assert gram.observed > 0.15  # the diagonal of squared norms: about E / (E + L) = 0.25
    assert gram.random.mean == pytest.approx(gram.observed, abs=0.05)
    assert abs(gram.random.z) < 4 and off.observed < 0.1 and abs(off.random.z) < 4


def test_causal_models_are_measured_on_the_lower_triangle() -> None:
    model = _tiny("gpt2")
    found = baselines.table_nulls(model, max_positions=L, draws=2)
    fp = extract.positional_logits(model, max_positions=L)
    causal = metrics.translation_invariance(fp, causal=True).mean()
    assert found.figures["fp_ln"].observed == pytest.approx(float(causal), abs=1e-6)
    assert found.figures["fp_ln"].observed != pytest.approx(
        float(metrics.translation_invariance(fp).mean()), abs=1e-6
    )


def test_table_nulls_bad_arguments() -> None:
    model = _tiny("bert")
    with pytest.raises(ValueError, match="draws"):
        baselines.table_nulls(model, draws=1)
    with pytest.raises(ValueError, match="seed"):
        baselines.table_nulls(model, seed=-1)
