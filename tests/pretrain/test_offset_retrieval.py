"""The offset-retrieval summary: mean ± sd over seeds and the paired comparisons."""

from __future__ import annotations

import pytest

from tisa.pretrain.offset_retrieval import (
    choose_rate,
    extrapolates,
    has_positional_parameters,
    markdown,
    summarise,
)


def _run(accuracy: float, beyond: float | None, *, status: str = "ok") -> dict:
    if status != "ok":
        return {"eval": {"8": {"status": "ok", "accuracy": accuracy,
                               "accuracy_beyond_train": None},
                         "32": {"status": "n/a"}}}
    return {"eval": {"8": {"status": "ok", "accuracy": accuracy, "accuracy_beyond_train": None},
                     "32": {"status": "ok", "accuracy": accuracy,
                            "accuracy_beyond_train": beyond}}}


def _runs() -> dict:
    return {
        seed: {
            "rbf_linear": _run(0.9, 0.9 + 0.01 * seed),
            "alibi": _run(0.5, 0.3 + 0.02 * seed),
            "fire": _run(0.6, 0.5 - 0.01 * seed),
            "absolute": _run(0.95, None, status="n/a"),
        }
        for seed in (0, 1, 2)
    }


def test_mean_sd_and_comparisons_paired_by_seed_with_holm():
    summary = summarise(_runs(), train_length=8, eval_lengths=(8, 32))
    assert summary["seeds"] == [0, 1, 2]
    beyond = summary["schemes"]["alibi"][32]["accuracy_beyond_train"]
    assert beyond["mean"] == pytest.approx(0.32) and beyond["sd"] == pytest.approx(0.02)
    assert summary["schemes"]["alibi"][8]["accuracy_beyond_train"] is None
    assert summary["schemes"]["absolute"][32] == {"status": "n/a"}
    # only the TISA family is compared, only past the training length, only where the other
    # scheme reads the length
    pairs = [(c["family"], c["other"], c["length"]) for c in summary["comparisons"]]
    assert pairs == [("rbf_linear", "alibi", 32), ("rbf_linear", "fire", 32)]
    alibi, fire = summary["comparisons"]
    assert alibi["mean"] == pytest.approx(0.6 - 0.01) and alibi["n"] == 3
    assert fire["mean"] == pytest.approx(0.42) and fire["low"] < fire["mean"] < fire["high"]
    # Holm over 2: the smaller p doubled, the larger at least that
    smaller, larger = sorted((alibi, fire), key=lambda c: c["p"])
    assert smaller["p_holm"] == pytest.approx(min(1.0, 2 * smaller["p"]))
    assert larger["p_holm"] >= smaller["p_holm"]
    table = markdown(summary, settings={"eval_lengths": [8, 32], "train_length": 8,
                                        "offsets": [1, 3], "vocab_size": 16})
    assert "| alibi | 50.0 ± 0.0 | 50.0 ± 0.0 (32.0 ± 2.0) |" in table
    assert "| absolute | 95.0 ± 0.0 | n/a |" in table
    assert "| 32 | rbf_linear | fire | +42.0 [" in table


def test_one_seed_gives_means_and_no_comparison():
    summary = summarise({0: _runs()[0]}, train_length=8, eval_lengths=(8, 32))
    assert summary["schemes"]["fire"][32]["accuracy"]["sd"] is None
    assert summary["comparisons"] == []
    table = markdown(summary, settings={"eval_lengths": [8, 32], "train_length": 8,
                                        "offsets": [1], "vocab_size": 16})
    assert "| fire | 60.0 | 60.0 (50.0) |" in table and "paired by seed" not in table


def test_seeds_with_other_positions_are_refused():
    runs = _runs()
    del runs[1]["fire"]
    with pytest.raises(ValueError, match="seed 1 has positions"):
        summarise(runs, train_length=8, eval_lengths=(8, 32))
    with pytest.raises(ValueError, match="at least one seed"):
        summarise({}, train_length=8, eval_lengths=(8,))


def test_which_schemes_read_past_their_training_length():
    assert extrapolates("tisa") and extrapolates("alibi") and extrapolates("rope")
    assert not extrapolates("absolute") and not extrapolates("absolute+tisa")


def test_the_rate_with_the_lowest_finite_loss_is_chosen_ties_to_the_smaller():
    assert choose_rate({0.1: 1.0, 0.01: 0.5, 0.001: 0.7}) == 0.01
    assert choose_rate({0.1: 0.5, 0.01: 0.5}) == 0.01
    assert choose_rate({0.1: float("nan"), 0.01: 2.0}) == 0.01  # a diverged run is not chosen
    with pytest.raises(ValueError, match="finite"):
        choose_rate({0.1: float("inf")})


def test_schemes_with_learned_positional_parameters():
    assert has_positional_parameters("rbf_linear") and has_positional_parameters("fire")
    assert not has_positional_parameters("alibi") and not has_positional_parameters("absolute")


def test_causal_configs_carry_no_gpt2_token_ids_into_other_vocabularies():
    from tisa.pretrain.build import build_causal_config

    config = build_causal_config(size="tiny", vocab_size=68, pad_token_id=None)
    assert config.bos_token_id is None and config.eos_token_id is None
    assert config.pad_token_id is None
    given = build_causal_config(size="tiny", vocab_size=68, bos_token_id=2, eos_token_id=3)
    assert (given.bos_token_id, given.eos_token_id, given.pad_token_id) == (2, 3, 0)
