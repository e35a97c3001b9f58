"""The GLUE protocol's committed results (benchmarks/results/glue): every finished run there
was made with the protocol's settings, names its model portably and is scored where the
stage says (the sweep on held-out training data, never on a dev set)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _protocol():
    from tisa.glue import protocol

    return protocol


def _results(stage: str) -> list[tuple[Path, dict]]:
    pattern = "runs/*/*/seed-*/result.json"
    if stage == "sweep":  # one folder per candidate
        pattern = "*/" + pattern
    found = sorted((_protocol().RESULTS / stage).glob(pattern))
    return [(p, json.loads(p.read_text())) for p in found]


def test_results_live_in_the_repository():
    assert _protocol().RESULTS == ROOT / "benchmarks" / "results" / "glue"


@pytest.mark.parametrize("stage", ["sweep", "protocol", "converted"])
def test_committed_runs_have_the_protocol_settings(stage):
    protocol = _protocol()
    for path, run in _results(stage):
        settings = run["settings"]
        where = path.relative_to(ROOT)
        for key, value in protocol.COMMON.items():
            if key in settings:
                assert settings[key] == value, f"{where}: {key}"
        assert settings["epochs"] == 3.0, where
        assert not Path(settings["model"]).is_absolute(), f"{where}: a machine path as model"
        if stage == "converted":  # by name: its path differs between clones
            assert settings["model"] == f"{protocol._model(None)} (tisa convert)", where
        assert run["evaluated_on"] == ("heldout" if stage == "sweep" else "dev"), where
        assert (run["task"], run["variant"], f"seed-{run['seed']}") == path.parts[-4:-1], where


def test_sweep_candidates_match_their_settings():
    protocol = _protocol()
    candidates = {name: (variant, start, lr) for name, variant, start, lr in protocol.SWEEP}
    runs = _results("sweep")
    assert runs, "no committed sweep runs (a .gitignore rule that hides runs/ folders?)"
    for path, run in runs:
        name = path.relative_to(protocol.RESULTS / "sweep").parts[0]
        variant, start, lr = candidates[name]
        assert run["variant"] == variant
        assert run["settings"]["max_train_samples"] == protocol.SWEEP_CAP
        if variant != "none":
            assert run["settings"]["tisa_start"] == start
            assert run["settings"]["tisa_learning_rate"] == lr


def test_converted_runs_refuse_a_model_with_other_weights(tmp_path):
    protocol = _protocol()
    model, runs = tmp_path / "model", tmp_path / "converted"
    with pytest.raises(ValueError, match="no saved model"):
        protocol._check_converted_model(model, runs)
    model.mkdir()
    (model / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no weight files"):
        protocol._check_converted_model(model, runs)
    (model / "model.safetensors").write_bytes(b"weights one")
    protocol._check_converted_model(model, runs)  # records the hash
    protocol._check_converted_model(model, runs)  # the same weights: accepted
    (model / "model.safetensors").write_bytes(b"weights two")
    with pytest.raises(ValueError, match="another --converted-dir"):
        protocol._check_converted_model(model, runs)


def test_converted_model_record_names_how_it_was_made(tmp_path):
    """model.json keeps the conversion's torch and thread count (the weights repeat bit for
    bit only with both) and its settings without machine paths."""
    protocol = _protocol()
    model, runs = tmp_path / "convert" / "model", tmp_path / "converted"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights one")
    made = {
        "environment": {"torch": "2.13.0+cpu", "threads": 2, "cpu": "Some CPU"},
        "settings": {"model": "/somewhere/minilm", "output_dir": "runs/convert", "seed": 0},
    }
    (model.parent / "metrics.json").write_text(json.dumps(made))
    protocol._check_converted_model(model, runs)
    record = json.loads((runs / "model.json").read_text())
    assert record["environment"] == {"torch": "2.13.0+cpu", "threads": 2, "cpu": "Some CPU"}
    assert record["settings"] == {"seed": 0}
    (model / "model.safetensors").write_bytes(b"weights two")
    with pytest.raises(ValueError, match="torch 2.13.0.cpu on 2 threads on Some CPU: .* and CPU"):
        protocol._check_converted_model(model, runs)


def test_select_picks_the_best_complete_candidate_on_held_out_scores(tmp_path, capsys):
    protocol = _protocol()
    scores = {"none": 0.50, "paper-5e-05": 0.49, "paper-1e-02": 0.52, "spread-1e-02": 0.51}
    for name, variant, *_ in protocol.SWEEP:
        for task in protocol.SWEEP_TASKS:
            for seed in protocol.SWEEP_SEEDS:
                folder = tmp_path / name / "runs" / task / variant / f"seed-{seed}"
                folder.mkdir(parents=True)
                score = scores[name] + 0.01 * seed
                (folder / "result.json").write_text(json.dumps({"score": score}))
    args = protocol.argparse.Namespace(sweep_dir=tmp_path)
    assert protocol.select(args) == 0
    text = (tmp_path / "selection.md").read_text()
    assert "Selected: paper-1e-02 (--tisa-start paper --tisa-learning-rate 0.01)" in text
    assert "| paper-1e-02 | 53.50 | 53.50 | 53.50 | 53.50 | +2.00 |" in text
    # one seed of one task missing: not comparable, nothing selected
    (tmp_path / "spread-1e-02/runs/stsb/keep/seed-2/result.json").unlink()
    assert protocol.select(args) == 1
    text = (tmp_path / "selection.md").read_text()
    assert "52.00 (1)" in text and "Not finished: spread-1e-02" in text
    assert "Selected" not in text


def test_summary_says_which_seeds_are_missing():
    progress = _protocol()._progress
    runs = [
        {"variant": v, "task": t, "seed": s}
        for v in ("none", "keep")
        for t in ("cola", "rte")
        for s in (1, 2)
    ]
    assert progress(runs, ("cola", "rte"), (1, 2)) == ""
    line = progress(runs[:-1], ("cola", "rte"), (1, 2))  # keep rte seed 2 missing
    assert line.startswith("**Not finished**") and "keep rte 1/2" in line
    assert "none cola" not in line
    assert "none rte 2/3" in progress(runs, ("cola", "rte"), (1, 2, 3))
