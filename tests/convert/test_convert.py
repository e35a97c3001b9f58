"""``tisa convert`` end to end on a tiny BERT: files, reload, long inputs, resume, errors."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pickle
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModel, AutoTokenizer, GPT2Config, GPT2Model

import tisa.hf
from tisa.cli import main
from tisa.convert import distill as distill_lib
from tisa.convert.convert import ConvertConfig, convert
from tisa.convert.distill import DistillSettings
from tisa.provenance import cpu_model, sha256_file

GLUE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "glue"


def _config(model, texts, out, **overrides):
    settings = dict(
        model=model,
        output_dir=str(out),
        fit_length=32,
        fit_blocks=4,
        distill=DistillSettings(steps=4, tokens_per_batch=256, max_length=64, save_every=2),
        eval_texts=20,
        lengths=(128,),
        train_file=texts[0],
        eval_file=texts[1],
        glue_dir=str(GLUE_DIR) if GLUE_DIR.is_dir() else None,
        max_sts_pairs=100,
        progress=False,
    )
    settings.update(overrides)
    return ConvertConfig(**settings)


@pytest.fixture(scope="module")
def converted(tiny_bert, texts, tmp_path_factory):
    out = tmp_path_factory.mktemp("converted")
    return convert(_config(tiny_bert, texts, out)), out


def test_writes_a_model_that_reloads_and_runs_beyond_the_table(converted, tiny_bert):
    result, out = converted
    m = result.metrics
    assert json.loads((out / "metrics.json").read_text())["fit"] == m["fit"]
    assert m["positional_parameters"]["original"]["absolute"] == 64 * 16
    assert m["positional_parameters"]["converted"] == {"absolute": 0, "tisa": 120, "total": 120}
    assert len(m["distillation"]) == 4 and all(c["loss"] > 0 for c in m["distillation"])
    assert [p["length"] for p in m["lengths"]] == [64, 128]  # the table has 64 rows
    assert all(p["finite"] and -1 <= p["agreement"] <= 1 for p in m["lengths"])
    assert 0 < m["converted"]["fidelity"]["mean"] <= 1
    if GLUE_DIR.is_dir():
        assert -1 <= m["converted"]["sts_spearman"] <= 1
        assert m["sts_relative"] == pytest.approx(
            m["converted"]["sts_spearman"] / m["original"]["sts_spearman"]
        )
    html = result.report.read_text()
    assert "Fitted profiles" in html and "Distillation" in html and "Long inputs" in html
    assert html.count("data:image/png;base64,") == 3
    reloaded = AutoModel.from_pretrained(result.model_dir).eval()
    assert tisa.hf.is_tisa(reloaded)
    assert reloaded.config.tisa["length_scale"] is None  # no log-n scaling by default
    ids = torch.randint(5, 60, (1, 200))  # 200 tokens, the original stops at 64
    with torch.no_grad():
        hidden = reloaded(input_ids=ids).last_hidden_state
    assert hidden.shape == (1, 200, 16) and torch.isfinite(hidden).all()
    tokenizer = AutoTokenizer.from_pretrained(result.model_dir)
    assert tokenizer.model_max_length > 10**9  # no limit: the model has none
    # a sentence-transformers folder too, with the original's (default: mean) pooling
    from tisa.hf.sentence_transformers import read_pooling

    assert read_pooling(result.model_dir).mode == "mean"
    assert json.loads((result.model_dir / "sentence_bert_config.json").read_text()) == {
        "max_seq_length": 8192,
        "do_lower_case": False,
    }
    assert not (out / "checkpoint").exists()  # removed once the run is finished


def test_finished_conversion_is_kept_unless_overwritten(converted, tiny_bert, texts):
    result, out = converted
    again = convert(_config(tiny_bert, texts, out))
    assert again.metrics == result.metrics


def test_interrupted_distillation_resumes_where_it_stopped(
    converted, tiny_bert, texts, tmp_path, monkeypatch, caplog
):
    straight = converted[0].metrics["distillation"]  # the same settings, uninterrupted
    original_batch = distill_lib.LengthSampler.batch

    def fail_at_three(self, step):
        if step == 3:
            raise KeyboardInterrupt
        return original_batch(self, step)

    monkeypatch.setattr(distill_lib.LengthSampler, "batch", fail_at_three)
    with pytest.raises(KeyboardInterrupt):
        convert(_config(tiny_bert, texts, tmp_path / "resumed"))
    assert (tmp_path / "resumed" / "checkpoint" / "state.pt").is_file()  # saved at step 2
    assert (tmp_path / "resumed" / "fit.pt").is_file()
    monkeypatch.setattr(distill_lib.LengthSampler, "batch", original_batch)
    caplog.clear()
    with caplog.at_level("WARNING"):
        result = convert(_config(tiny_bert, texts, tmp_path / "resumed"))
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("convert: reusing the fitted student") for m in said), said
    assert "convert: resuming distillation from step 2 of 4" in said
    resumed = result.metrics["distillation"]
    assert [c["step"] for c in resumed] == [1, 2, 3, 4]
    for a, b in zip(resumed, straight):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)


def test_models_that_cannot_be_converted(tiny_bert, texts, tmp_path):
    with pytest.raises(ValueError, match="model: .*no such folder"):
        convert(_config(str(tmp_path / "missing"), texts, tmp_path / "a"))
    (tmp_path / "file.txt").write_text("not a model")
    with pytest.raises(ValueError, match="model: .*is a file"):
        convert(_config(str(tmp_path / "file.txt"), texts, tmp_path / "b"))
    gpt2 = tmp_path / "gpt2"
    GPT2Model(
        GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=32, vocab_size=64)
    ).save_pretrained(gpt2)
    with pytest.raises(ValueError, match="model: .*supports BERT, RoBERTa, ALBERT and ELECTRA"):
        convert(_config(str(gpt2), texts, tmp_path / "c"))
    removed = tmp_path / "removed"
    model = tisa.hf.add_tisa(AutoModel.from_pretrained(tiny_bert), position_embeddings="remove")
    model.save_pretrained(removed)
    with pytest.raises(ValueError, match="model: .*already has TISA"):
        convert(_config(str(removed), texts, tmp_path / "d"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "d").exists()  # nothing left behind


def test_bad_settings_and_outputs(tiny_bert, texts, tmp_path, capsys):
    (tmp_path / "taken").write_text("")
    with pytest.raises(ValueError, match="output_dir: .* is a file"):
        convert(_config(tiny_bert, texts, tmp_path / "taken"))
    with pytest.raises(ValueError, match="fit_layers: expected all, first or none"):
        _config(tiny_bert, texts, tmp_path, fit_layers="most")
    with pytest.raises(ValueError, match="train_file: .* is not a file"):
        convert(_config(tiny_bert, (str(tmp_path / "nope.txt"), texts[1]), tmp_path / "e"))
    with pytest.raises(ValueError, match="train must be 'scoring' or 'all'"):
        DistillSettings(train="some")
    capsys.readouterr()
    code = main(["convert", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "f")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("tisa convert: error: model:") and "Traceback" not in err


def test_command_line_defaults_are_the_configs():
    from tisa.cli import build_parser
    from tisa.cli.args import config_from_args

    def parsed(*argv):
        args = build_parser("convert").parse_args(["convert", *argv])
        return config_from_args(
            ConvertConfig, args, distill=config_from_args(DistillSettings, args)
        )

    assert parsed("m") == ConvertConfig(model="m")
    custom = parsed("m", "--fold-positions", "none", "--steps", "7", "--train", "scoring")
    assert custom.fold_positions is None
    assert custom.distill == DistillSettings(steps=7, train="scoring")
    with pytest.raises(ValueError, match="fold_positions: expected an integer or 'none'"):
        parsed("m", "--fold-positions", "many")
    assert parsed("m").near_offsets is None
    assert parsed("m", "--near-offsets", "16").near_offsets == 16
    assert parsed("m", "--near-offsets", "none").near_offsets is None
    with pytest.raises(ValueError, match="near_offsets: expected an integer or 'none'"):
        parsed("m", "--near-offsets", "near")
    with pytest.raises(ValueError, match=r"near_offsets: 254 reaches beyond .* \(at most 253\)"):
        parsed("m", "--near-offsets", "254")
    assert parsed("m").length_scale is None
    assert parsed("m", "--length-scale", "auto").length_scale == "auto"
    assert parsed("m", "--length-scale", "1024").length_scale == 1024
    for bad, message in (("long", "expected a number of tokens, 'auto' or 'none'"),
                         ("1", "length_scale must be an integer >= 2")):
        with pytest.raises(ValueError, match=message):
            parsed("m", "--length-scale", bad)


def test_steps_zero_saves_the_fitted_model_without_distillation(tiny_bert, texts, tmp_path):
    """``--steps 0``: the documented fit-only conversion runs and records no curve."""
    out = tmp_path / "fit-only"
    args = ["convert", tiny_bert, "--output-dir", str(out), "--steps", "0", "--no-progress"]
    args += ["--fit-length", "32", "--fit-blocks", "2", "--eval-texts", "10", "--lengths", "128"]
    args += ["--length-scale", "auto"]  # log-n scaling past the longest distillation length
    args += ["--num-kernels", "3", "--near-offsets", "2"]
    args += ["--train-file", texts[0], "--eval-file", texts[1], "--max-sts-pairs", "20"]
    if GLUE_DIR.is_dir():
        args += ["--glue-dir", str(GLUE_DIR)]
    assert main(args) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["distillation"] == []
    assert metrics["settings"]["distill"]["steps"] == 0
    assert metrics["positional_parameters"]["converted"]["absolute"] == 0
    # 3 kernels of 3 parameters and 5 near offsets for each of 4 heads in 2 layers
    assert metrics["positional_parameters"]["converted"]["tisa"] == 2 * 4 * (3 * 3 + 5)
    assert metrics["settings"]["near_offsets"] == 2
    assert metrics["environment"] == {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cpu": cpu_model(),
    }
    saved = json.loads((out / "model" / "config.json").read_text())
    assert saved["tisa"]["length_scale"] == 64  # the tiny BERT's table: the longest length
    assert metrics["weights_sha256"] == sha256_file(out / "model" / "model.safetensors")
    # without distillation the saved model's scorers are the fit, layer by layer, head by head
    fit = torch.load(out / "fit.pt", weights_only=True)["fit"]
    offsets = fit["original"]["offsets"]
    scorers = [s for _, s in tisa.hf.iter_scorers(AutoModel.from_pretrained(out / "model"))]
    assert len(scorers) == fit["fitted"].shape[0] == 2
    assert all(scorer.num_kernels == 3 and scorer.near_offsets == 2 for scorer in scorers)
    for layer, scorer in enumerate(scorers):
        with torch.no_grad():
            values = scorer(offsets).double()
        torch.testing.assert_close(values, fit["fitted"][layer], atol=1e-4, rtol=1e-4)
    with pytest.raises(ValueError, match="steps must be an integer >= 0, got -1"):
        DistillSettings(steps=-1)


def test_positional_scale_compares_the_models_term_with_tisas(converted, tmp_path):
    """tisa.convert.positional_scale: the model's measured term per layer, as in fit.pt,
    against the scorers that `keep` adds."""
    from tisa.convert import positional_scale as scale

    _, out = converted
    result = scale.measure(out, start="paper", seed=1, max_offset=16)
    fit = torch.load(out / "fit.pt", weights_only=True)["fit"]
    offsets = fit["original"]["offsets"]
    window = fit["target"][..., offsets.abs() <= 16].double()
    assert [r["layer"] for r in result["layers"]] == [1, 2]
    for i, row in enumerate(result["layers"]):
        assert row["model_std"] == pytest.approx(window[i].std(-1).median().item())
        assert row["tisa_std"] > 0 and row["tisa_range"] > 0  # the paper's start is not zero
        assert row["ratio_std"] == pytest.approx(row["model_std"] / row["tisa_std"])
    zero = scale.measure(out, start="zero", seed=1, max_offset=16)
    assert all(r["tisa_std"] == 0 and r["ratio_std"] is None for r in zero["layers"])
    assert "| 1 |" in scale.markdown(result) and "n/a |" in scale.markdown(zero)
    with pytest.raises(ValueError, match="--max-offset"):
        scale.measure(out, start="paper", seed=1, max_offset=10_000)
    assert scale.main([str(tmp_path)]) == 2  # no fit.pt there: an error, no traceback


def _script(name: str):
    from tests.scripts import load_script

    return load_script(f"benchmarks/{name}.py")


@pytest.mark.skipif(not GLUE_DIR.is_dir(), reason="needs the GLUE data beside the repository")
def test_word_order_probe_tells_the_models_apart(converted, tmp_path):
    """tisa.convert.word_order: a model without positions does not see a swap; the
    original does; the probe scores every layer and pairs the models."""
    import random

    from tisa.convert import word_order as wo
    rng = random.Random(0)
    sentence = "the cat sat on the mat today"
    for perm in (wo.swapped(sentence, rng), wo.shuffled(sentence, rng)):
        assert perm != sentence and sorted(perm.split()) == sorted(sentence.split())
    _, out = converted
    result = wo.measure(
        out, GLUE_DIR, max_train=60, max_dev=200, bootstrap=100, max_length=48, progress=False
    )
    models = result["models"]
    assert list(models) == ["original", "converted", "no positions"]
    blind = models["no positions"]["order"]
    assert max(blind["swap"]["values"]) < 1e-5 and max(blind["shuffle"]["values"]) < 1e-5
    assert models["original"]["order"]["swap"]["median"] > 1e-4
    for m in models.values():
        assert [r["layer"] for r in m["probe"]] == [0, 1, 2]
        assert all(-1 <= r["mcc"] <= 1 and r["C"] in wo.C_GRID for r in m["probe"])
    row = result["paired"]["converted - original"][2]
    assert row["difference"] == pytest.approx(
        models["converted"]["probe"][2]["mcc"] - models["original"]["probe"][2]["mcc"]
    )
    assert row["interval95"][0] <= row["interval95"][1]
    assert set(result["order_paired"]) == {"swap", "shuffle"}
    cmp = wo.order_comparison([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2.0, 4.0, 6.0, 8.0, 10.0, 12.0])
    assert cmp["median_ratio"] == 0.5 and cmp["share_lower"] == 1.0 and cmp["wilcoxon_p"] < 0.05
    assert "| no positions |" in wo.markdown(result)
    assert wo.paired_interval([0, 1, 1, 0], [0, 1, 0, 0], [0, 1, 0, 0], resamples=100, seed=1) == [
        0.0,
        0.0,
    ]
    assert wo.main([str(tmp_path), "--glue-dir", str(GLUE_DIR)]) == 2  # not a conversion
    # --holdout: a part of CoLA train takes dev's place, the probe is fitted on the rest
    held = wo.measure(
        out, GLUE_DIR, max_train=60, max_dev=100, bootstrap=100, max_length=48, holdout=0.1,
        progress=False,
    )
    assert held["evaluated_on"] == "heldout" and held["dev_sentences"] == 100
    assert result["evaluated_on"] == "dev"
    assert held["order_sentences"] <= 100 and "held-out train" in wo.markdown(held)
    with pytest.raises(SystemExit):
        wo.main([str(out), "--glue-dir", str(GLUE_DIR), "--holdout", "1"])


def test_converted_speed_times_both_models_inside_the_table(converted, tmp_path):
    """benchmarks/converted_speed.py: paired timings of the original and its conversions,
    forward and fine-tuning step, written with their provenance."""
    speed = _script("converted_speed")
    _, out = converted
    result = speed.measure(out, lengths=(16, 32), batch=2, rounds=2)
    assert [r["length"] for r in result["rows"]] == [16, 32] and result["mode"] == "forward"
    for r in result["rows"]:
        assert r["seconds"]["original"] > 0 and r["seconds"][out.name] > 0
        assert r["ratio_low"][out.name] <= r["ratio"][out.name] <= r["ratio_high"][out.name]
    assert "| 32 |" in speed.markdown(result)
    # two conversions of one original, fine-tuning steps: every model has its timings
    second = tmp_path / "second"
    shutil.copytree(out, second)
    written = tmp_path / "cost.json"
    assert speed.main([str(out), str(second), "--train", "--lengths", "16", "--batch", "2",
                       "--rounds", "3", "--output", str(written)]) == 0
    saved = json.loads(written.read_text())
    assert saved["mode"] == "train" and saved["provenance"]["command"]
    assert set(saved["rows"][0]["ratio"]) == {out.name, "second"}
    with pytest.raises(ValueError, match="--lengths"):
        speed.measure(out, lengths=(10_000,), batch=1, rounds=1)
    with pytest.raises(ValueError, match="names must differ"):
        speed.measure([out, out], lengths=(16,), batch=1, rounds=1)
    assert speed.main([str(tmp_path / "empty")]) == 2  # not a conversion: an error, no traceback


def test_finished_conversion_names_the_original_and_the_model(converted, tiny_bert, tmp_path):
    from tisa.convert import finished_conversion

    _, out = converted
    assert finished_conversion(out) == (tiny_bert, out / "model")
    with pytest.raises(FileNotFoundError, match="^where: .*tisa convert"):
        finished_conversion(tmp_path, argument="where")


class _Planted:
    """Unpickling this makes the folder ``marker``: evidence that code from a file ran."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def test_a_crafted_fit_file_is_refused_without_running_it(tiny_bert, texts, tmp_path, capsys):
    sanity = tmp_path / "pickle-runs-it"
    pickle.loads(pickle.dumps(_Planted(str(sanity))))
    assert sanity.is_dir()  # what a plain torch.load(weights_only=False) would have done
    marker = tmp_path / "ran"
    out = tmp_path / "crafted"
    out.mkdir()
    torch.save({"settings": {}, "fit": _Planted(str(marker))}, out / "fit.pt")
    args = ["convert", tiny_bert, "--output-dir", str(out), "--no-progress", "--steps", "0"]
    args += ["--fit-length", "32", "--fit-blocks", "2", "--eval-texts", "10"]
    args += ["--train-file", texts[0], "--eval-file", texts[1]]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("tisa convert: error: ") and "fit.pt: holds Python objects" in last
    assert not marker.exists()
    with open(out / "fit.pt", "wb") as fh:  # the legacy pickle format, not a zip archive
        pickle.dump({"fit": _Planted(str(marker))}, fh)
    with pytest.raises(ValueError, match="fit.pt: holds Python objects"):
        convert(_config(tiny_bert, texts, out, distill=DistillSettings(steps=0)))
    assert not marker.exists()


def test_a_crafted_distillation_checkpoint_is_refused_without_running_it(tmp_path):
    marker = tmp_path / "ran"
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    torch.save({"student": _Planted(str(marker))}, folder / "state.pt")
    (folder / "curve.json").write_text("[]")
    with pytest.raises(ValueError, match="state.pt: holds Python objects"):
        distill_lib._load(folder)
    assert not marker.exists()


def test_a_fit_file_that_cannot_be_reused_is_fitted_again_and_said(tmp_path, caplog):
    from tisa.convert.convert import _load_fit

    path = tmp_path / "fit.pt"
    settings = {"model": "m", "num_kernels": 5}
    torch.save({"settings": settings, "fit": {}}, path)
    with caplog.at_level("WARNING"):
        assert _load_fit(path, {**settings, "num_kernels": 3}) is None
    assert caplog.records[-1].getMessage().endswith("was fitted with other settings; fitting again")
    path.write_bytes(path.read_bytes()[:-40])  # killed while writing (before it was atomic)
    with caplog.at_level("WARNING"):
        assert _load_fit(path, settings) is None
    assert caplog.records[-1].getMessage().endswith("is damaged (cut short?); fitting again")
    assert _load_fit(tmp_path / "none.pt", settings) is None


_KILL_CONVERT = """
import os, signal, sys
from tisa.convert import distill
from tisa.convert.convert import ConvertConfig, convert
from tisa.convert.distill import DistillSettings

batch = distill.LengthSampler.batch

def dying(self, step):
    if step == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return batch(self, step)

distill.LengthSampler.batch = dying
settings = eval(sys.argv[1])
settings["distill"] = DistillSettings(**settings["distill"])
convert(ConvertConfig(**settings))
"""


@pytest.mark.slow  # a conversion in a subprocess; the resume itself is in the default tier
def test_a_killed_conversion_resumes_and_says_so(converted, tiny_bert, texts, tmp_path, caplog):
    import dataclasses
    import signal
    import subprocess
    import sys

    out = tmp_path / "killed"
    config = _config(tiny_bert, texts, out)
    settings = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    settings["distill"] = dataclasses.asdict(config.distill)
    script = tmp_path / "kill.py"
    script.write_text(_KILL_CONVERT)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, str(script), repr(settings)],
        env=dict(os.environ, PYTHONPATH=str(root)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert (out / "fit.pt").is_file() and (out / "checkpoint" / "state.pt").is_file()
    with caplog.at_level("WARNING"):
        resumed = convert(config).metrics["distillation"]  # the dead run's lock is gone
    said = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("convert: reusing the fitted student") for m in said), said
    assert "convert: resuming distillation from step 2 of 4" in said
    straight = converted[0].metrics["distillation"]
    assert [c["step"] for c in resumed] == [1, 2, 3, 4]
    for a, b in zip(resumed, straight):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)


def test_selection_scores_conversions_on_held_out_data(converted, tmp_path, capsys):
    """tisa.convert.selection: held-out STS-B and CoLA figures of each conversion against
    the original, and the rule that chooses among them."""
    import shutil

    from tisa.convert import selection

    if not GLUE_DIR.is_dir():
        pytest.skip("needs the GLUE data")
    _, out = converted
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)
    result = selection.measure(
        [out, twin], GLUE_DIR, sts_pairs=40, max_train=80, bootstrap=100, progress=False
    )
    assert result["cola_heldout_sentences"] == 856 and result["cola_train_sentences"] == 80
    first, second = result["runs"]
    assert first["run"] == out.name and second["run"] == "twin"
    for key in ("sts_spearman", "cola_mcc", "order_ratio", "sts_interval95"):
        assert first[key] == second[key]  # the same weights score the same
    assert first["sts_relative"] == pytest.approx(
        first["sts_spearman"] / result["original"]["sts_spearman"]
    )
    lo, hi = first["cola_interval95"]
    assert lo <= first["cola_difference"] <= hi or lo == hi
    assert result["chosen"] == out.name  # a tie goes to the first (the baseline)
    assert "| original |" in selection.markdown(result)
    # fidelity by length: every held-out sentence in one bin, each bin a mean cosine
    by_length = first["fidelity_by_length"]
    assert list(by_length) == ["<= 7", "8-11", "12-15", ">= 16"]
    assert sum(b["sentences"] for b in by_length.values()) == 856
    assert all(-1 <= b["mean"] <= 1 for b in by_length.values() if b["sentences"])
    assert by_length == second["fidelity_by_length"]
    assert "| twin |" in selection.markdown(result).split("by its length in tokens")[1]
    # the line under the table says which rule chose: the probe among those at the floor,
    # or the baseline when no run is at it
    low = result | {"runs": [r | {"sts_relative": 0.5} for r in result["runs"]]}
    assert "no run reaches 99% of the original's held-out STS-B Spearman, so the first run, " \
        "the baseline, stands" in selection.markdown(low)
    high = result | {"runs": [r | {"sts_relative": 1.0} for r in result["runs"]]}
    assert "the highest held-out CoLA probe MCC among the runs at or above 99%" in \
        selection.markdown(high)
    code = selection.main(
        [str(out), str(twin), "--glue-dir", str(GLUE_DIR), "--output-dir", str(tmp_path / "s"),
         "--sts-pairs", "40", "--max-train", "80", "--bootstrap", "100", "--no-progress"]
    )
    assert code == 0
    saved = json.loads((tmp_path / "s" / "selection.json").read_text())
    assert saved["chosen"] == out.name and saved["provenance"]["command"]
    capsys.readouterr()
    assert selection.main([str(tmp_path), "--glue-dir", str(GLUE_DIR)]) == 2
    assert capsys.readouterr().err.startswith("convert_selection: error: runs:")


def test_selection_rule_keeps_sts_and_then_takes_the_best_probe():
    from tisa.convert.selection import choose

    def run(name, sts, mcc):
        return {"run": name, "sts_relative": sts, "cola_mcc": mcc}

    assert choose([run("a", 1.0, 0.2), run("b", 0.995, 0.3), run("c", 0.98, 0.5)]) == "b"
    assert choose([run("a", 0.98, 0.2), run("b", 0.99, 0.1)]) == "b"  # a is below the floor
    assert choose([run("a", 0.9, 0.2), run("b", 0.9, 0.4)]) == "a"  # none qualifies
    with pytest.raises(ValueError, match="runs: expected at least one"):
        choose([])


def test_logit_terms_split_a_difference_into_orthogonal_shares(converted, tmp_path):
    from tisa.bias import expand
    from tisa.convert import logit_terms as lt

    g = torch.Generator().manual_seed(0)
    n = 6
    offset_part = expand(torch.randn(2, 2 * n - 1, generator=g, dtype=torch.float64), n, n)
    # a Toeplitz difference that is the same in every block: all of it is "offset"
    same = offset_part.expand(4, 2, n, n)
    shares = lt.split(same)
    torch.testing.assert_close(shares["offset"], torch.ones(2, dtype=torch.float64))
    # plus noise that differs by block, and a fixed part that is not Toeplitz
    noisy = same + torch.randn(4, 2, n, n, generator=g, dtype=torch.float64)
    fixed = same + torch.triu(torch.ones(n, n, dtype=torch.float64))[None, None] * torch.arange(
        n, dtype=torch.float64
    )
    for d in (noisy, fixed):
        s = lt.split(d)
        torch.testing.assert_close(s["offset"] + s["absolute"] + s["content"],
                                   torch.ones(2, dtype=torch.float64))
        assert (s["rms"] > 0).all()
    assert (lt.split(noisy)["content"] > 0.1).all() and (lt.split(fixed)["absolute"] > 0).all()
    assert (lt.split(fixed)["content"] < 1e-12).all()
    # the divergence: 0 for the same logits or a shift of a row; log N from a one-hot
    # attention (a large logit gap) to a uniform one
    torch.testing.assert_close(lt.kl(noisy, noisy + 3.0), torch.zeros(2, dtype=torch.float64))
    peaked = torch.zeros(1, 2, n, n, dtype=torch.float64)
    peaked[..., 0] = 50.0
    torch.testing.assert_close(lt.kl(peaked, torch.zeros_like(peaked)),
                               torch.full((2,), math.log(n), dtype=torch.float64))
    assert (lt.kl(torch.zeros_like(peaked), peaked) > 30).all()  # not symmetric
    import shutil

    _, out = converted
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)
    result = lt.measure([out, twin], blocks=3, length=24, progress=False)
    effect = result["differences"]["position effect"]
    assert [r["layer"] for r in effect] == [1, 2] and len(effect[0]["offset"]) == 4  # heads
    assert list(result["differences"]) == ["position effect", f"missed by {out.name}",
                                           "missed by twin"]
    assert result["differences"]["missed by twin"] == result["differences"][
        f"missed by {out.name}"]  # the same weights miss the same
    assert "| position effect | 1 |" in lt.markdown(result)
    assert all(k >= 0 for r in effect for k in r["kl"])
    with pytest.raises(ValueError, match="different names"):
        lt.measure([out, out], blocks=3, length=24, progress=False)
    assert lt.main([str(out), "--blocks", "3", "--length", "24", "--output",
                    str(tmp_path / "terms"), "--no-progress"]) == 0
    saved = json.loads((tmp_path / "terms" / "logit_terms.json").read_text())
    assert saved["provenance"]["command"] and saved["blocks"] == 3
    assert lt.main([str(tmp_path), "--no-progress"]) == 2  # not a conversion


def test_settings_text_names_what_a_conversion_changed():
    from tisa.convert.selection import settings_text

    defaults = dataclasses.asdict(DistillSettings())
    assert settings_text(defaults, num_kernels=5) == "defaults"
    changed = {**defaults, "order_weight": 1.0}
    assert settings_text(changed, num_kernels=10, near_offsets=32) == (
        "num_kernels=10, near_offsets=32, order_weight=1"
    )
