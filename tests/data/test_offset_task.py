"""The offset-retrieval task: its data, and the experiment on a tiny size."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

from tisa.data.offset_task import offset_batch, total_vocab

_FOLDER = Path(__file__).resolve().parents[2] / "experiments" / "offset_retrieval"


def _script(name: str, module: str):
    """The script ``experiments/offset_retrieval/NAME.py``, imported as ``module``."""
    spec = importlib.util.spec_from_file_location(module, _FOLDER / f"{name}.py")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(module, loaded)
    spec.loader.exec_module(loaded)
    return loaded


experiment = _script("run", "offset_retrieval")
profiles = _script("profiles", "offset_retrieval_profiles")
rescore = _script("rescore", "offset_retrieval_rescore")
figure = _script("figure", "offset_retrieval_figure")


def tiny_argv(out, positions, *, seeds=("0",), steps=2, eval_lengths=("16",), sequences=4):
    """The arguments of a tiny run of the experiment (GPT-2 tiny, 16 training tokens,
    offsets 1 and 4, 8 content tokens, no progress bars) into ``out``."""
    argv = ["--positions", *positions, "--size", "tiny", "--steps", str(steps)]
    argv += ["--seeds", *seeds, "--train-length", "16", "--eval-lengths", *eval_lengths]
    argv += ["--offsets", "1", "4", "--vocab-size", "8", "--eval-sequences", str(sequences)]
    return [*argv, "--output-dir", str(out), "--no-progress"]


def test_targets_are_the_tokens_d_positions_back():
    offsets = (1, 3, 8)
    x, y = offset_batch(
        batch_size=50, length=20, vocab_size=10, offsets=offsets, generator=torch.Generator()
    )
    assert x.shape == y.shape == (50, 20) and int(x.max()) < total_vocab(10, offsets)
    assert bool((x[:, 1:] >= len(offsets)).all())  # content after the marker
    for b in range(50):
        d = offsets[int(x[b, 0])]
        for t in range(20):
            assert int(y[b, t]) == (int(x[b, t - d]) if t - d >= 1 else -100)
    again = offset_batch(
        batch_size=50, length=20, vocab_size=10, offsets=offsets, generator=torch.Generator()
    )
    assert torch.equal(again[0], x)  # a pure function of the generator
    assert set(x[:, 0].tolist()) == {0, 1, 2}


def test_bad_input_names_the_argument():
    gen = torch.Generator()
    with pytest.raises(ValueError, match="offsets"):
        offset_batch(batch_size=2, length=8, vocab_size=4, offsets=(7,), generator=gen)
    with pytest.raises(ValueError, match="offsets"):
        offset_batch(batch_size=2, length=8, vocab_size=4, offsets=(2, 2), generator=gen)
    with pytest.raises(ValueError, match="vocab_size"):
        offset_batch(batch_size=2, length=8, vocab_size=1, offsets=(2,), generator=gen)


def test_experiment_on_a_tiny_size_resumes_and_summarises_seeds(tmp_path, capsys):
    out = tmp_path / "or"
    argv = tiny_argv(out, ["absolute", "alibi_learned", "tisa"], seeds=["0", "1"], steps=3,
                     eval_lengths=["16", "64"])
    assert experiment.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["provenance"]["command"].startswith("experiments/offset_retrieval/run.py")
    runs = results["runs"]
    assert set(runs) == {"0", "1"}
    assert runs["0"]["absolute"]["eval"]["64"]["status"] == "n/a"
    for length in ("16", "64"):
        r = runs["0"]["alibi_learned"]["eval"][length]
        assert r["status"] == "ok" and 0.0 <= r["accuracy"] <= 1.0 and r["tokens"] > 0
    assert runs["1"]["tisa"]["eval"]["64"]["accuracy_beyond_train"] is not None
    assert runs["1"]["tisa"]["eval"]["16"]["accuracy_beyond_train"] is None
    # the accuracy by block of 16 positions and by offset, each a split of the same hits
    cell = runs["1"]["tisa"]["eval"]["64"]
    assert len(cell["accuracy_by_block"]) == 4 and set(cell["accuracy_by_offset"]) == {"1", "4"}
    for part in (cell["accuracy_by_block"], list(cell["accuracy_by_offset"].values())):
        known = [a for a in part if a is not None]
        assert known and min(known) <= cell["accuracy"] + 1e-9 <= max(known) + 2e-9
    # 3 steps: one point of the loss curve (their mean), and the training's wall time
    assert len(runs["0"]["tisa"]["train_loss_curve"]) == 1
    assert runs["0"]["tisa"]["train_seconds"] > 0
    assert runs["0"]["tisa"]["trained_on"] == {"device": "cpu", "torch": torch.__version__,
                                               "gpu": None}
    summary = results["summary"]
    assert summary["seeds"] == [0, 1]
    # the one TISA family against the one other scheme that reads 64 tokens
    assert [(c["family"], c["other"], c["length"]) for c in summary["comparisons"]] == [
        ("tisa", "alibi_learned", 64)
    ]
    table = (out / "results.md").read_text()
    assert "| alibi_learned |" in table and "| 64 | tisa | alibi_learned |" in table
    # a rerun keeps every finished run
    capsys.readouterr()
    saved = (out / "seed-1" / "tisa.json").stat().st_mtime_ns
    assert experiment.main(argv) == 0
    assert capsys.readouterr().out.count("kept from") == 6
    assert (out / "seed-1" / "tisa.json").stat().st_mtime_ns == saved
    # ... and refuses to mix runs of other settings into the folder
    with pytest.raises(SystemExit, match="--output-dir: .*other settings"):
        experiment.main([*argv, "--steps", "4", "--seeds", "0"])  # the last value counts


def test_experiment_bad_input_names_the_argument(tmp_path):
    out = tmp_path / "or"
    with pytest.raises(SystemExit, match="--positions"):
        experiment.main(["--positions", "nope", "--output-dir", str(out)])
    with pytest.raises(SystemExit, match="--seeds"):
        experiment.main(["--seeds", "1", "1", "--output-dir", str(out)])
    with pytest.raises(SystemExit, match="--offsets"):
        experiment.main(["--train-length", "16", "--offsets", "15", "--output-dir", str(out)])
    for bad in (["--steps", "0"], ["--vocab-size", "1"], ["--offsets", "0", "2"],
                ["--offsets", "2", "2"], ["--learning-rate", "0"], ["--eval-sequences", "0"],
                ["--sweep-steps", "0"], ["--tisa-learning-rate", "0"]):
        with pytest.raises(SystemExit, match=bad[0]):
            experiment.main([*bad, "--output-dir", str(out)])
    (tmp_path / "file").write_text("")
    with pytest.raises(SystemExit, match="--output-dir"):
        experiment.main(["--output-dir", str(tmp_path / "file")])


def test_experiment_sweeps_the_positional_rate_of_learned_schemes_only(tmp_path):
    out = tmp_path / "or"
    argv = tiny_argv(out, ["alibi", "alibi_learned"], eval_lengths=["16", "32"])
    argv += ["--positional-lr-sweep", "1e-3", "1e-1"]
    argv += ["--sweep-steps", "3", "--sweep-seed", "7"]
    assert experiment.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    sweep = results["sweep"]
    assert list(sweep) == ["alibi_learned"]  # fixed slopes: nothing to tune
    losses = {float(r): v for r, v in sweep["alibi_learned"]["losses"].items()}
    assert set(losses) == {1e-3, 1e-1} and sweep["alibi_learned"]["chosen"] == min(
        sorted(losses), key=losses.get)
    saved = json.loads((out / "sweep" / "alibi_learned-lr0.1.json").read_text())
    assert saved["settings"]["steps"] == 3 and saved["settings"]["eval_lengths"] == [16]
    final = json.loads((out / "seed-0" / "alibi_learned.json").read_text())
    assert final["settings"]["tisa_learning_rate"] == sweep["alibi_learned"]["chosen"]
    assert final["settings"]["steps"] == 2
    assert results["settings"]["positional_rates"]["alibi"] is None
    assert "Positional learning rates: alibi_learned" in (out / "results.md").read_text()
    with pytest.raises(SystemExit, match="--sweep-seed"):
        experiment.main([*argv[:-2], "--sweep-seed", "0"])


def test_experiment_saves_the_weights_of_reported_runs(tmp_path):
    from tisa.pretrain.build import build_model

    out = tmp_path / "or"
    argv = [*tiny_argv(out, ["alibi_learned"]), "--save-models"]
    argv += ["--positional-lr-sweep", "1e-2", "--sweep-steps", "1"]
    assert experiment.main(argv) == 0
    assert not list((out / "sweep").glob("*.pt"))  # sweep runs keep no weights
    state = torch.load(out / "seed-0" / "alibi_learned.pt", weights_only=True)
    model = build_model(arch="gpt2", size="tiny", position="alibi_learned", seed=0,
                        vocab_size=total_vocab(8, [1, 4]), max_positions=16, pad_token_id=None)
    untrained = {n: t.clone() for n, t in model.state_dict().items()}
    model.load_state_dict(state)  # strict: the tensors of a model of the run's settings
    assert any(not torch.equal(state[n], untrained[n]) for n in untrained)  # trained ones


def test_profiles_of_saved_runs_give_each_scheme_its_learned_bias(tmp_path):
    from tisa.hf.install import iter_scorers
    from tisa.pretrain.offset_retrieval import build_task_model

    out = tmp_path / "or"
    argv = tiny_argv(out, ["absolute", "alibi_learned", "fire"], seeds=["3"],
                     eval_lengths=["16", "40"], sequences=2)
    with pytest.raises(SystemExit, match="run_dir: .*results.json not found"):
        profiles.main([str(out)])
    assert experiment.main(argv) == 0
    with pytest.raises(SystemExit, match="run_dir: no saved weights"):
        profiles.main([str(out)])
    assert experiment.main([*argv, "--save-models"]) == 0  # kept runs: still no weights
    for path in (out / "seed-3").glob("*.json"):
        path.unlink()
    assert experiment.main([*argv, "--save-models"]) == 0
    with pytest.raises(SystemExit, match="--seed: expected one of the run's seeds"):
        profiles.main([str(out), "--seed", "0"])
    assert profiles.main([str(out)]) == 0
    saved = json.loads((out / "profiles.json").read_text())
    assert (out / "profiles.png").stat().st_size > 0
    assert saved["seed"] == 3 and saved["length"] == 40 and saved["without_bias"] == ["absolute"]
    assert saved["distances"] == list(range(40))  # all of them up to 64
    assert set(saved["schemes"]) == {"alibi_learned", "fire"}
    # learned slopes: the bias is -slope_h * distance for the trained model's slopes
    model = build_task_model("alibi_learned", size="tiny", train_length=16, vocab_size=8,
                             offsets=(1, 4), seed=3)
    model.load_state_dict(torch.load(out / "seed-3" / "alibi_learned.pt", weights_only=True))
    _, scorer = next(iter_scorers(model))
    slopes = scorer.slopes().detach()  # (H,)
    layer0 = torch.tensor(saved["schemes"]["alibi_learned"][0])  # (H, distances)
    assert torch.allclose(layer0, -slopes[:, None] * torch.arange(40.0), atol=1e-4)
    assert profiles.kept_distances(3) == [0, 1, 2]
    far = profiles.kept_distances(4096)
    assert far[:65] == list(range(65)) and far[-1] == 4095 and len(far) < 65 + 7 * 33


def test_rescoring_with_scaling_or_clipping_changes_only_the_longer_lengths(tmp_path):
    out = tmp_path / "or"
    argv = tiny_argv(out, ["absolute", "alibi_learned", "fire"], seeds=["0", "1"], steps=3,
                     eval_lengths=["16", "48"])
    assert experiment.main(argv) == 0
    with pytest.raises(SystemExit, match="run_dir: no saved weights"):
        rescore.main([str(out)])
    for path in out.glob("seed-*/*.json"):
        path.unlink()
    assert experiment.main([*argv, "--save-models"]) == 0
    for bad, name in ((["--length-scale", "1"], "--length-scale"),
                      (["--clip-distance", "x"], "--clip-distance"),
                      (["--length-scale", "none"], "both are none")):
        with pytest.raises(SystemExit, match=name):
            rescore.main([str(out), *bad])
    before = json.loads((out / "results.json").read_text())["runs"]
    assert rescore.main([str(out)]) == 0  # N = the training length, 16
    assert rescore.main([str(out), "--length-scale", "none", "--clip-distance", "15"]) == 0
    assert rescore.main([str(out), "--clip-distance", "15"]) == 0
    for name in ("length-scale-16", "clip-15", "length-scale-16-clip-15"):
        changed = json.loads((out / f"{name}.json").read_text())
        for seed in ("0", "1"):
            for position in ("alibi_learned", "fire"):
                now, then = changed["runs"][seed][position]["eval"], before[seed][position]["eval"]
                assert now["16"] == then["16"]  # up to N keys and K + 1 tokens: nothing changes
                assert now["48"]["loss"] != then["48"]["loss"]  # beyond, it does
        assert changed["not_changed"] == ["absolute"]
        assert [(r["position"], r["length"]) for r in changed["against_trained"]] == [
            ("alibi_learned", 48), ("fire", 48)]
        assert all("p_holm" in r for r in changed["against_trained"])
    assert (changed["length_scale"], changed["clip_distance"]) == (16, 15)
    text = (out / "length-scale-16-clip-15.md").read_text()
    assert "With log-n scaling past 16 keys and offsets clipped at +-15 minus as trained" in text
    # lengths the run did not score: the models as trained are scored there too
    argv_far = [str(out), "--length-scale", "none", "--clip-distance", "15"]
    assert rescore.main([*argv_far, "--eval-lengths", "16", "48", "96"]) == 0
    far = json.loads((out / "clip-15-to96.json").read_text())
    assert far["eval_lengths"] == [16, 48, 96]
    for seed in ("0", "1"):
        as_trained = far["trained_runs"][seed]["fire"]["eval"]
        assert as_trained["48"] == before[seed]["fire"]["eval"]["48"]  # the run's own
        assert as_trained["96"]["status"] == "ok"  # scored here
        assert far["runs"][seed]["fire"]["eval"]["96"]["loss"] != as_trained["96"]["loss"]
    assert [(r["position"], r["length"]) for r in far["against_trained"]] == [
        ("alibi_learned", 48), ("alibi_learned", 96), ("fire", 48), ("fire", 96)]
    from tisa.doc_tables.pretrain import offset_accuracy_far, offset_far_comparisons

    table = offset_accuracy_far(tmp_path, "or")
    assert "| position | at inference | 16 | 48 | 96 |" in table
    assert "| alibi_learned | as trained |" in table and "|  | clipped at 15 |" in table
    assert "| 96 | clipped at 15 | fire: with minus as trained |" in offset_far_comparisons(
        tmp_path, "or")
    with pytest.raises(SystemExit, match="--eval-lengths"):
        rescore.main([*argv_far, "--eval-lengths", "1", "16"])
    # the figure of such a file: one line per scheme and variant, the file's means
    assert figure.main([str(out / "clip-15-to96.json")]) == 0
    assert (out / "clip-15-to96.png").stat().st_size > 1000
    ax = figure.draw(far).axes[0]
    lines = {line.get_label(): line for line in ax.get_lines() if not line.get_label()[0] == "_"}
    assert set(lines) == {"alibi_learned, as trained", "alibi_learned, clipped at 15",
                          "fire, as trained", "fire, clipped at 15"}
    mean = far["summary"]["schemes"]["fire"]["96"]["accuracy"]["mean"]
    assert list(lines["fire, clipped at 15"].get_ydata())[-1] == pytest.approx(100 * mean)
    assert lines["fire, as trained"].get_color() == lines["fire, clipped at 15"].get_color()
    # a results.json of run.py draws the schemes as trained, mean ± sd, with or without others
    assert figure.main([str(out / "results.json"), "--output", str(out / "as-trained.png")]) == 0
    assert (out / "as-trained.png").stat().st_size > 1000
    results = json.loads((out / "results.json").read_text())
    apart = results | {"settings": results["settings"] | {"device": "cuda"},
                       "summary": {**results["summary"], "schemes": {
                           "elsewhere": results["summary"]["schemes"]["fire"]}}}
    ax = figure.draw_results([results, apart]).axes[0]
    labels = {line.get_label() for line in ax.get_lines() if line.get_label()[0] != "_"}
    assert labels == {"absolute (cpu)", "alibi_learned (cpu)", "fire (cpu)", "elsewhere (cuda)"}
    with pytest.raises(SystemExit, match="drawn alone"):
        figure.main([str(out / "clip-15-to96.json"), str(out / "results.json")])
    (out / "other.json").write_text(json.dumps({"rows": []}))
    with pytest.raises(SystemExit, match="other.json is neither"):
        figure.main([str(out / "other.json")])


def test_doc_tables_by_offset_and_by_block_average_the_seeds_that_recorded_them(tmp_path):
    from tisa.doc_tables.pretrain import offset_accuracy_by_block, offset_accuracy_by_offset

    out = tmp_path / "or"
    argv = tiny_argv(out, ["absolute", "alibi"], seeds=["0", "1"], eval_lengths=["16", "40"],
                     sequences=8)
    assert experiment.main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    cells = [results["runs"][s]["alibi"]["eval"]["40"] for s in ("0", "1")]
    del results["runs"]["0"]["alibi"]["eval"]["40"]["accuracy_by_block"]  # an older run
    (out / "results.json").write_text(json.dumps(results))
    blocks = offset_accuracy_by_block(tmp_path, "or/results.json")
    assert "| position | 0-15 | 16-31 | 32-39 |" in blocks
    assert "| alibi | " + " | ".join(  # seed 1's blocks alone
        f"{100 * a:.1f}" for a in cells[1]["accuracy_by_block"]) + " |" in blocks
    assert "absolute" not in blocks.split("\n\n")[0]  # it cannot read 40 tokens
    assert "Fewer seeds recorded it for alibi (1 of 2)" in blocks
    offsets = offset_accuracy_by_offset(tmp_path, "or/results.json")
    mean = sum(c["accuracy_by_offset"]["4"] for c in cells) / 2
    assert "| alibi | 4 | " in offsets and f" {100 * mean:.1f} |" in offsets
    assert "| absolute | 1 | " in offsets and offsets.count("n/a") >= 2  # no 40 for absolute


def test_doc_table_of_bias_peaks_measures_each_offset_against_its_neighbours(tmp_path):
    from tisa.doc_tables.pretrain import offset_bias_peaks

    distances = list(range(10))
    ramp = [-0.5 * d for d in distances]  # falls with distance: no peak anywhere
    peaked = [0.0] * 10
    peaked[3] = 2.0  # one head of one layer peaks at -3
    (tmp_path / "profiles.json").write_text(json.dumps({
        "provenance": {"command": "profiles.py run"}, "settings": {"offsets": [1, 3, 9]},
        "seed": 1, "length": 10, "distances": distances, "without_bias": ["absolute"],
        "schemes": {"alibi": [[ramp]], "rbf": [[ramp], [ramp, peaked]]},
    }))
    text = offset_bias_peaks(tmp_path, "profiles.json")
    assert "| alibi | -0.50 | -0.50 | n/a |" in text  # no neighbour at -10
    assert "| rbf | +0.00 | +2.00 | n/a |" in text  # the flat head at -1
    assert "no positional bias: absolute" in text


def test_an_interrupted_run_goes_on_from_its_checkpoint_to_the_same_result(tmp_path, monkeypatch):
    out = tmp_path / "or"
    argv = [*tiny_argv(out, ["fire"], steps=6), "--checkpoint-every", "2", "--save-models"]
    assert experiment.main(argv) == 0
    whole = json.loads((out / "seed-0" / "fire.json").read_text())["run"]
    weights = torch.load(out / "seed-0" / "fire.pt", weights_only=True)
    assert not (out / "seed-0" / "fire.ckpt.pt").exists()  # removed once the run is kept
    (out / "seed-0" / "fire.json").unlink()

    real, calls = offset_batch, []

    def stops_at_the_fifth_batch(**kwargs):
        calls.append(1)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(**kwargs)

    monkeypatch.setattr("tisa.data.offset_task.offset_batch", stops_at_the_fifth_batch)
    with pytest.raises(KeyboardInterrupt):
        experiment.main(argv)
    checkpoint = torch.load(out / "seed-0" / "fire.ckpt.pt", weights_only=True)
    assert checkpoint["step"] == 4  # the last multiple of 2 before the interruption
    monkeypatch.undo()
    counted = []

    def counts_training_batches(**kwargs):
        counted.append(kwargs["batch_size"] == 32)  # training batches; 4 sequences to score
        return real(**kwargs)

    monkeypatch.setattr("tisa.data.offset_task.offset_batch", counts_training_batches)
    assert experiment.main(argv) == 0
    assert sum(counted) == 2  # steps 5 and 6 only
    again = json.loads((out / "seed-0" / "fire.json").read_text())["run"]
    assert again["train_loss_curve"] == whole["train_loss_curve"]
    assert again["final_train_loss"] == whole["final_train_loss"]
    assert again["eval"] == whole["eval"]
    resumed = torch.load(out / "seed-0" / "fire.pt", weights_only=True)
    assert all(torch.equal(resumed[n], weights[n]) for n in weights)
    assert not (out / "seed-0" / "fire.ckpt.pt").exists()
    # a checkpoint of other arguments is refused, naming the file
    (out / "seed-0" / "fire.json").unlink()
    torch.save({"args": {"steps": 99}}, out / "seed-0" / "fire.ckpt.pt")
    with pytest.raises(SystemExit, match="--output-dir: checkpoint .*fire.ckpt.pt.*other arg"):
        experiment.main(argv)
    with pytest.raises(SystemExit, match="--checkpoint-every"):
        experiment.main([*argv, "--checkpoint-every", "0"])
