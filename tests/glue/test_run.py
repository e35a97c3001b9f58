"""``tisa glue``: a few steps on RTE with a tiny random BERT, resuming, custom files, the
summary maths and bad input."""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from transformers import TrainerCallback

from tests.tiny_bert import HEADS, HIDDEN, LAYERS, POSITIONS, save_tiny_bert
from tests.tiny_bert import WORDS as TINY_WORDS
from tisa.checkpoints import checkpoint_problems
from tisa.glue.results import parity_comparison, parity_markdown, seedwise_parity
from tisa.glue.run import (
    GlueConfig,
    paired_comparison,
    relative_error_reduction,
    run_dir,
    run_glue,
    summarize,
    summary_markdown,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

REPO = Path(__file__).resolve().parents[2]
GLUE_DIR = REPO.parent / "shared" / "data" / "glue"
needs_glue = pytest.mark.skipif(not GLUE_DIR.is_dir(), reason="shared GLUE data not present")

WORDS = (*TINY_WORDS, "she")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A random 2-layer BERT (hidden 16, 4 heads, 64 positions) for sequence
    classification, saved with its WordPiece tokenizer."""
    return save_tiny_bert(
        tmp_path_factory.mktemp("tiny-bert"),
        "BertForSequenceClassification",
        words=WORDS,
    )


def _rte_config(model: str, out: Path, **overrides) -> GlueConfig:
    settings = dict(
        model=model,
        tasks=("rte",),
        seeds=(1, 2),
        output_dir=str(out),
        glue_dir=str(GLUE_DIR),
        max_steps=4,
        batch_size=8,
        max_length=POSITIONS,
        max_train_samples=64,
        max_eval_samples=48,
        save_steps=2,
        logging_steps=2,
    )
    settings.update(overrides)
    return GlueConfig(**settings)


class _CountTraining(TrainerCallback):
    """Counts training starts (a skipped run never starts)."""

    def __init__(self) -> None:
        self.starts = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.starts += 1


@pytest.fixture(scope="module")
def rte_run(tiny_model, tmp_path_factory):
    if not GLUE_DIR.is_dir():
        pytest.skip("shared GLUE data not present")
    out = tmp_path_factory.mktemp("rte-run")
    config = _rte_config(tiny_model, out)
    return config, run_glue(config)


# ------------------------------------------------------------------------- end to end
@needs_glue
def test_rte_end_to_end_writes_results(rte_run):
    config, results = rte_run
    assert [(r["task"], r["variant"], r["seed"]) for r in results.runs] == [
        ("rte", "none", 1),
        ("rte", "none", 2),
    ]
    for seed in (1, 2):
        folder = run_dir(config.output_dir, "rte", "none", seed)
        stored = json.loads((folder / "result.json").read_text())
        assert stored["global_step"] == 4 and stored["train_samples"] == 64
        assert stored["eval_samples"] == {"validation": 48}
        assert 0.0 <= stored["metrics"]["accuracy"] <= 1.0
        assert stored["score"] == stored["metrics"]["accuracy"]
        # 48 examples: accuracy is a multiple of 1/48
        assert round(stored["score"] * 48) == pytest.approx(stored["score"] * 48)
        assert math.isfinite(stored["eval_loss"]["validation"])
        assert stored["positional_parameters"] == {
            "absolute": POSITIONS * HIDDEN,
            "tisa": 0,
            "total": POSITIONS * HIDDEN,
        }
        assert not (folder / "checkpoints").exists()  # removed once the result is safe
    # different seeds start from different classifier heads
    assert results.runs[0]["train_loss"] != results.runs[1]["train_loss"]

    (row,) = results.summary
    scores = sorted(r["score"] for r in results.runs)
    assert row["score"] == pytest.approx(sum(scores) / 2)  # median of two
    assert (row["score_min"], row["score_max"]) == (scores[0], scores[1])
    assert math.isnan(row["relative_error_reduction"])  # the baseline itself
    out = Path(config.output_dir)
    assert set(results.files) == {"markdown", "csv", "json", "plot", "report"}
    lo, hi, median = 100 * scores[0], 100 * scores[1], 100 * row["score"]
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "<h1>GLUE fine-tuning</h1>" in report and f"{median:.2f}" in report
    line = f"| rte | none | 2 | accuracy {median:.2f} | {median:.2f} | {lo:.2f} - {hi:.2f} |"
    assert line in (out / "results.md").read_text()
    stored = json.loads((out / "results.json").read_text())
    assert [r["score"] for r in stored["summary"]] == pytest.approx([row["score"]])
    # the plot: a drawn image, whose one bar is the median score in percent
    from matplotlib.image import imread

    from tisa.reports.charts import glue_results

    pixels = imread(out / "results.png")
    assert pixels.ndim == 3 and min(pixels.shape[:2]) > 100 and pixels.std() > 0.05
    (panel,) = glue_results(results.summary).axes
    assert [p.get_height() for p in panel.patches] == pytest.approx([median])
    (csv_row,) = list(csv.DictReader((out / "results.csv").open()))
    assert csv_row["task"] == "rte" and csv_row["seeds"] == "1 2"
    assert float(csv_row["score"]) == pytest.approx(row["score"])
    assert int(csv_row["positional_absolute"]) == POSITIONS * HIDDEN


@needs_glue
def test_rerun_skips_finished_seeds(rte_run):
    config, first = rte_run
    files = [run_dir(config.output_dir, "rte", "none", s) / "result.json" for s in (1, 2)]
    before = [f.stat().st_mtime_ns for f in files]
    counter = _CountTraining()
    again = run_glue(config, callbacks=[counter])
    assert counter.starts == 0
    assert [f.stat().st_mtime_ns for f in files] == before
    assert again.runs == first.runs

    # one more seed: only that one trains
    counter = _CountTraining()
    more = run_glue(
        _rte_config(config.model, Path(config.output_dir), seeds=(1, 2, 3)), callbacks=[counter]
    )
    assert counter.starts == 1 and [r["seed"] for r in more.runs] == [1, 2, 3]
    assert more.summary[0]["seeds"] == [1, 2, 3]


@needs_glue
def test_interrupted_run_resumes_from_its_checkpoint(rte_run, tmp_path):
    class Interrupt(Exception):
        pass

    class StopAtStep3(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:  # checkpoint-2 is on disk by now
                raise Interrupt

    reference, finished = rte_run
    config = _rte_config(reference.model, tmp_path, seeds=(1,))
    with pytest.raises(Interrupt):
        run_glue(config, callbacks=[StopAtStep3()])
    folder = run_dir(tmp_path, "rte", "none", 1)
    assert not (folder / "result.json").exists()
    assert (folder / "checkpoints" / "checkpoint-2").is_dir()

    class CountSteps(TrainerCallback):
        steps = 0

        def on_step_end(self, args, state, control, **kwargs):
            CountSteps.steps += 1

    (resumed,) = run_glue(config, callbacks=[CountSteps()]).runs
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["global_step"] == 4
    assert CountSteps.steps == 2  # steps 3 and 4 only
    # the resumed run ends where the uninterrupted one with the same seed ended
    uninterrupted = finished.runs[0]
    assert resumed["metrics"] == uninterrupted["metrics"]
    assert resumed["eval_loss"]["validation"] == pytest.approx(
        uninterrupted["eval_loss"]["validation"], rel=1e-5
    )


_SHARED_WORKER = """
import sys
from pathlib import Path
from tests.glue.test_run import _rte_config
from tisa.glue.run import run_glue
run_glue(_rte_config(sys.argv[1], Path(sys.argv[2]), seeds=(int(sys.argv[3]),)))
"""


@needs_glue
def test_processes_with_a_shared_output_fill_one_folder_together(rte_run, tmp_path):
    """``TISA_GLUE_SHARED_OUTPUT=1`` (glue_protocol.py --parallel): two processes train
    their own seeds into one folder at once; a run another process holds is refused."""
    config, finished = rte_run
    env = {**os.environ, "PYTHONPATH": str(REPO), "TISA_GLUE_SHARED_OUTPUT": "1"}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _SHARED_WORKER, config.model, str(tmp_path), str(seed)],
            env=env,
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    for worker in workers:
        _, err = worker.communicate(timeout=300)
        assert worker.returncode == 0, err[-2000:]
    both = run_glue(_rte_config(config.model, tmp_path))  # nothing left to train
    assert both.trained == 0
    assert [r["metrics"] for r in both.runs] == [r["metrics"] for r in finished.runs]


@needs_glue
def test_a_shared_output_refuses_a_run_another_process_trains(rte_run, tmp_path, monkeypatch):
    from tests.test_files import _holder

    config, _ = rte_run
    holder = _holder(run_dir(tmp_path, "rte", "none", 1))  # as if training seed 1
    try:
        monkeypatch.setenv("TISA_GLUE_SHARED_OUTPUT", "1")
        with pytest.raises(ValueError, match=rf"in use by another run \(process {holder.pid}\)"):
            run_glue(_rte_config(config.model, tmp_path, seeds=(1,)))
    finally:
        holder.kill()
        holder.wait()


@needs_glue
def test_other_settings_in_the_same_output_folder_are_refused(rte_run):
    config, _ = rte_run
    changed = _rte_config(config.model, Path(config.output_dir), learning_rate=1e-3)
    with pytest.raises(ValueError, match=r"learning_rate: 2e-05 there, 0.001 now"):
        run_glue(changed)


@needs_glue
def test_per_task_training_caps(tiny_model, tmp_path):
    from tisa.cli import main

    config = _rte_config(
        tiny_model, tmp_path, seeds=(1,), max_steps=1, max_train_samples={"RTE": 24, "sst2": 5}
    )
    assert config.max_train_samples == {"rte": 24, "sst2": 5}
    (run,) = run_glue(config).runs
    assert run["train_samples"] == 24
    with pytest.raises(ValueError, match=r"max_train_samples\['rte'\] must be an integer"):
        GlueConfig(model="m", tasks=("rte",), max_train_samples={"rte": 0})
    code = main(
        [
            "glue",
            "--model",
            tiny_model,
            "--task",
            "rte",
            "--max-train-samples",
            "rte=x",
            "--output-dir",
            str(tmp_path / "bad"),
        ]
    )
    assert code == 2


def test_tisa_settings_are_checked_per_variant(tmp_path):
    """A folder of baseline runs takes TISA variants with any TISA settings; once a TISA
    variant has runs there, its settings are fixed."""
    from tisa.glue.run import _check_settings

    base = dict(model="m", tasks=("rte",), output_dir=str(tmp_path))
    _check_settings(GlueConfig(**base, variants=("none",)), write=True)
    keep = GlueConfig(**base, variants=("none", "keep"), tisa_learning_rate=1e-2)
    _check_settings(keep, write=True)
    _check_settings(GlueConfig(**base, variants=("keep",), tisa_learning_rate=1e-2))
    _check_settings(GlueConfig(**base, variants=("remove",), tisa_learning_rate=3e-3))
    with pytest.raises(ValueError, match=r"keep.tisa_learning_rate: 0.01 there, 0.001 now"):
        _check_settings(GlueConfig(**base, variants=("keep",), tisa_learning_rate=1e-3))
    with pytest.raises(ValueError, match=r"keep.tisa_start: 'paper' there, 'spread' now"):
        _check_settings(
            GlueConfig(**base, variants=("keep",), tisa_start="spread", tisa_learning_rate=1e-2)
        )


def test_model_name_is_recorded_instead_of_the_path(tmp_path):
    """A model recorded by name resumes from another path; another name is refused."""
    from tisa.glue.run import _check_settings

    base = dict(tasks=("rte",), output_dir=str(tmp_path), model_name="minilm (converted)")
    first = GlueConfig(model=str(tmp_path / "a" / "model"), **base)
    assert first.settings()["model"] == "minilm (converted)"
    _check_settings(first, write=True)
    saved = json.loads((tmp_path / "settings.json").read_text())
    assert saved["model"] == "minilm (converted)"
    _check_settings(GlueConfig(model="elsewhere/model", **base))
    other = GlueConfig(model="elsewhere/model", **{**base, "model_name": "other"})
    with pytest.raises(ValueError, match=r"model: 'minilm \(converted\)' there, 'other' now"):
        _check_settings(other)
    assert GlueConfig(model="m", tasks=("rte",)).settings()["model"] == "m"
    with pytest.raises(ValueError, match="model_name: expected a non-empty name"):
        GlueConfig(model="m", tasks=("rte",), model_name=" ")


def test_tisa_defaults_are_the_sweeps_choice():
    """The held-out sweep chose the paper's start with the scoring parameters at the
    backbone's learning rate (docs/glue.md): the defaults follow the backbone's rate."""
    config = GlueConfig(model="m", tasks=("rte",), learning_rate=3e-5)
    assert config.tisa_learning_rate == 3e-5 and config.tisa_start == "paper"
    assert GlueConfig(model="m", tasks=("rte",), scoring="alibi").tisa_start == "paper"
    own = GlueConfig(model="m", tasks=("rte",), tisa_learning_rate=1e-2, tisa_start="spread")
    assert own.tisa_learning_rate == 1e-2 and own.tisa_start == "spread"


@needs_glue
def test_cli_prints_the_table_of_finished_runs(rte_run, capsys):
    from tisa.cli import main

    config, _ = rte_run
    argv = ["glue", "--task", "rte", "--model", config.model, "--glue-dir", str(GLUE_DIR)]
    argv += ["--seeds", "1", "2", "--max-steps", "4", "--batch-size", "8", "--max-length"]
    argv += [str(POSITIONS), "--max-train-samples", "64", "--max-eval-samples", "48"]
    argv += ["--output-dir", config.output_dir]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| rte | none | 2 | accuracy" in printed and "results.csv" in printed


@needs_glue
def test_tisa_keep_and_remove_variants(tiny_model, tmp_path):
    config = _rte_config(tiny_model, tmp_path, seeds=(1,), variants=("none", "keep", "remove"))
    results = run_glue(config)
    pos = {r["variant"]: r["positional_parameters"] for r in results.runs}
    rbf = 3 * 5 * HEADS * LAYERS  # 3 parameters per kernel, 5 kernels, per head and layer
    assert pos["none"] == {"absolute": POSITIONS * HIDDEN, "tisa": 0, "total": POSITIONS * HIDDEN}
    assert pos["keep"] == {
        "absolute": POSITIONS * HIDDEN,
        "tisa": rbf,
        "total": POSITIONS * HIDDEN + rbf,
    }
    assert pos["remove"] == {"absolute": 0, "tisa": rbf, "total": rbf}
    rows = {r["variant"]: r for r in results.summary}
    base = rows["none"]["score"]
    assert 0.0 <= base < 1.0  # accuracy on 48 examples; the error rate 1 - base is > 0
    for variant in ("keep", "remove"):
        # (err_base - err) / err_base with err = 1 - accuracy, written out
        expected = ((1 - base) - (1 - rows[variant]["score"])) / (1 - base)
        assert rows[variant]["relative_error_reduction"] == pytest.approx(expected)


@needs_glue
def test_tisa_learning_rate_and_start_reach_the_scorers(tiny_model, tmp_path):
    """The scoring parameters start as asked and move by about their own learning rate
    per step (AdamW), whatever the backbone's learning rate; results record how far."""
    moved = {}
    for lr in (1e-1, 1e-6):
        config = _rte_config(
            tiny_model,
            tmp_path / f"lr-{lr}",
            seeds=(1,),
            variants=("none", "keep"),
            tisa_start="spread",
            tisa_learning_rate=lr,
            warmup_ratio=0.0,
        )
        runs = {r["variant"]: r for r in run_glue(config).runs}
        assert runs["none"]["tisa_movement"] == {}
        moved[lr] = runs["keep"]["tisa_movement"]
        assert runs["keep"]["settings"]["tisa_learning_rate"] == lr
    fast, slow = moved[1e-1], moved[1e-6]
    assert set(fast) == {"amplitude", "sharpness", "offset"}
    assert fast["amplitude"]["count"] == 5 * HEADS * LAYERS
    assert fast["amplitude"]["mean_abs_start"] == 0.0  # spread: zero amplitudes ...
    assert fast["offset"]["mean_abs_start"] == pytest.approx(6.0)  # ... offsets -10, -5, .., 10
    # 4 AdamW steps at lr 0.1 on a decaying schedule: each step moves by up to ~lr
    assert 0.05 < fast["amplitude"]["max_abs_change"] <= 0.4 + 1e-6
    assert slow["amplitude"]["max_abs_change"] < 1e-5


class _Movement(TrainerCallback):
    """How far each named parameter moved in training (max |end - start|)."""

    def __init__(self) -> None:
        self.start: dict = {}
        self.moved: dict[str, float] = {}

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.start = {n: p.detach().clone() for n, p in model.named_parameters()}

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.moved = {
            n: (p.detach() - self.start[n]).abs().max().item() for n, p in model.named_parameters()
        }


@needs_glue
def test_position_learning_rate_freezes_or_speeds_the_models_own_positions(tiny_model, tmp_path):
    """0 leaves the position table as loaded while the rest trains; a rate of its own moves
    it by about that rate per AdamW step, whatever the backbone's; runs record it."""
    table = "bert.embeddings.position_embeddings.weight"
    moved = {}
    for rate in (0.0, 1e-1):
        watch = _Movement()
        config = _rte_config(
            tiny_model,
            tmp_path / f"rate-{rate}",
            seeds=(1,),
            position_learning_rate=rate,
            learning_rate=1e-6,
            warmup_ratio=0.0,
        )
        (run,) = run_glue(config, callbacks=[watch]).runs
        assert run["settings"]["position_learning_rate"] == rate
        moved[rate] = watch.moved
    assert moved[0.0][table] == 0.0
    assert 0 < moved[0.0]["bert.embeddings.word_embeddings.weight"] < 1e-5
    assert 0.05 < moved[1e-1][table] <= 0.4 + 1e-6  # 4 steps at about lr each
    assert moved[1e-1]["bert.embeddings.word_embeddings.weight"] < 1e-5
    # a folder of runs at one position rate refuses runs at another
    with pytest.raises(ValueError, match="position_learning_rate: 0.1 there, 0.0 now"):
        run_glue(
            _rte_config(
                tiny_model,
                tmp_path / "rate-0.1",
                seeds=(1,),
                position_learning_rate=0.0,
                learning_rate=1e-6,
                warmup_ratio=0.0,
            )
        )


@needs_glue
def test_position_learning_rate_of_a_converted_model_reaches_its_scorers(tiny_model, tmp_path):
    """Under the variant none, a saved TISA model's scorers are its own positions; with
    the variant remove the model has none of its own, which is refused before training."""
    from transformers import AutoModelForSequenceClassification

    import tisa.hf

    converted = tmp_path / "converted"
    model = AutoModelForSequenceClassification.from_pretrained(tiny_model)
    tisa.hf.add_tisa(model, position_embeddings="remove", start="spread")
    model.save_pretrained(converted)
    for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (Path(tiny_model) / name).is_file():
            (converted / name).write_bytes((Path(tiny_model) / name).read_bytes())
    watch = _Movement()
    config = _rte_config(
        str(converted),
        tmp_path / "runs",
        seeds=(1,),
        position_learning_rate=1e-1,
        learning_rate=1e-6,
        warmup_ratio=0.0,
    )
    run_glue(config, callbacks=[watch])
    # (the spread start has zero amplitudes, so the amplitudes move first)
    amplitudes = [n for n in watch.moved if n.endswith("amplitude")]
    assert amplitudes and all(0.05 < watch.moved[n] <= 0.4 + 1e-6 for n in amplitudes)
    assert watch.moved["bert.embeddings.word_embeddings.weight"] < 1e-5
    with pytest.raises(ValueError, match="has no positional parameters of its own"):
        run_glue(
            _rte_config(
                tiny_model,
                tmp_path / "remove",
                seeds=(1,),
                variants=("remove",),
                position_learning_rate=0.0,
            )
        )


def test_position_learning_rate_is_checked():
    with pytest.raises(ValueError, match="position_learning_rate: expected a number >= 0"):
        GlueConfig(model="m", tasks=("rte",), position_learning_rate=-1e-3)
    assert GlueConfig(model="m", tasks=("rte",)).position_learning_rate is None


# ---------------------------------------------------------------------- custom tasks
def test_custom_csv_classification_task(tiny_model, tmp_path):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    good, bad = ["good fun", "a great film", "nice"], ["bad", "awful, dull", "not good"]
    rows = [(t, "pos") for t in good] + [(t, "neg") for t in bad]
    for path, n in ((train, 4), (dev, 2)):
        with path.open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["review", "sentiment"])
            writer.writerows(rows * n)
    config = GlueConfig(
        model=tiny_model,
        train_file=str(train),
        validation_file=str(dev),
        text_columns=("review",),
        label_column="sentiment",
        seeds=(7,),
        output_dir=str(tmp_path / "out"),
        max_steps=3,
        batch_size=8,
        max_length=32,
        plot=False,
    )
    assert config.tasks == ("custom",)
    (result,) = run_glue(config).runs
    assert result["task"] == "custom" and result["eval_samples"] == {"validation": 12}
    assert set(result["metrics"]) == {"accuracy"}
    assert result["metrics"]["accuracy"] * 12 == pytest.approx(
        round(result["metrics"]["accuracy"] * 12)
    )
    assert (tmp_path / "out" / "runs" / "custom" / "none" / "seed-7" / "result.json").is_file()
    assert not (tmp_path / "out" / "results.png").exists()


def test_custom_jsonl_regression_pair_task(tiny_model, tmp_path):
    rows = [{"a": f"the {w}", "b": f"a {w}", "y": i / 3} for i, w in enumerate(WORDS[:12])]
    for name in ("train.jsonl", "dev.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = GlueConfig(
        model=tiny_model,
        train_file=str(tmp_path / "train.jsonl"),
        validation_file=str(tmp_path / "dev.jsonl"),
        text_columns=("a", "b"),
        label_column="y",
        seeds=(1,),
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        batch_size=4,
        max_length=32,
        plot=False,
    )
    (result,) = run_glue(config).runs
    assert set(result["metrics"]) == {"pearson", "spearman"}
    assert -1.0 <= result["metrics"]["spearman"] <= 1.0
    assert result["score"] == pytest.approx(
        (result["metrics"]["pearson"] + result["metrics"]["spearman"]) / 2
    )


# ------------------------------------------------------------------------ summary maths
def _run(task, variant, seed, score, metrics=None):
    return {
        "task": task,
        "variant": variant,
        "seed": seed,
        "metrics": metrics or {"accuracy": score},
        "score": score,
        "positional_parameters": {
            "absolute": 10,
            "tisa": 0 if variant == "none" else 3,
            "total": 0,
        },
    }


def test_relative_error_reduction():
    assert relative_error_reduction(0.84, 0.80) == pytest.approx(0.2)  # (0.2 - 0.16) / 0.2
    assert relative_error_reduction(0.70, 0.80) == pytest.approx(-0.5)
    assert math.isnan(relative_error_reduction(0.9, 1.0))


def test_summary_medians_glue_average_and_error_reduction():
    runs = [
        _run("rte", "none", 1, 0.60),
        _run("rte", "none", 2, 0.70),
        _run("rte", "none", 3, 0.64),
        _run("rte", "keep", 1, 0.68),
        _run("rte", "keep", 2, 0.62),
        _run("rte", "keep", 3, 0.73),
        _run("cola", "none", 1, 0.40, {"matthews_corr": 0.40}),
        _run("cola", "keep", 1, 0.46, {"matthews_corr": 0.46}),
    ]
    rows = {(r["task"], r["variant"]): r for r in summarize(runs, "none")}
    assert rows[("rte", "none")]["score"] == pytest.approx(0.64)  # median of 3 seeds
    assert rows[("rte", "keep")]["score"] == pytest.approx(0.68)
    assert rows[("rte", "keep")]["score_min"] == 0.62 and rows[("rte", "keep")]["score_max"] == 0.73
    assert rows[("rte", "keep")]["relative_error_reduction"] == pytest.approx((0.36 - 0.32) / 0.36)
    # the GLUE average: over the seeds that have every task (seed 1: CoLA has no other)
    assert rows[("glue", "none")]["score"] == pytest.approx((0.60 + 0.40) / 2)
    assert rows[("glue", "keep")]["score"] == pytest.approx((0.68 + 0.46) / 2)
    assert rows[("glue", "keep")]["relative_error_reduction"] == pytest.approx((0.50 - 0.43) / 0.50)
    for row in rows.values():  # a score lies inside its own range
        assert row["score_min"] <= row["score"] <= row["score_max"]
    table = summary_markdown(list(rows.values()))
    assert "rel. error reduction vs none" in table
    assert "| rte | keep | 3 | accuracy 68.00 | 68.00 | 62.00 - 73.00 |" in table
    assert f"{100 * (0.36 - 0.32) / 0.36:+.1f}%" in table


def test_paired_comparison_known_values():
    base = {1: 0.60, 2: 0.70, 3: 0.64, 4: 0.50, 5: 0.80}
    mine = {1: 0.62, 2: 0.71, 3: 0.64, 4: 0.55, 5: 0.78, 6: 0.99}  # seed 6 has no pair
    p = paired_comparison(mine, base)
    assert p["seeds"] == [1, 2, 3, 4, 5] and p["n"] == 5
    diffs = [0.02, 0.01, 0.0, 0.05, -0.02]
    assert p["mean_diff"] == pytest.approx(sum(diffs) / 5)
    assert p["median_diff"] == pytest.approx(0.01)
    assert (p["wins"], p["losses"], p["ties"]) == (3, 1, 1)
    assert p["sign_test_p"] == pytest.approx(0.625)  # 2 * P(X >= 3), X ~ Bin(4, 1/2)
    sd = (sum((d - 0.012) ** 2 for d in diffs) / 4) ** 0.5
    half = 2.7764451051977987 * sd / 5**0.5  # t(0.975, 4)
    assert p["ci95"] == pytest.approx([0.012 - half, 0.012 + half])
    # per seed (mine - base) / (1 - base): 0.05, 1/30, 0, 0.1, -0.1; the median is 1/30
    assert p["median_rer"] == pytest.approx(1 / 30)
    all_wins = paired_comparison({s: 0.9 for s in range(5)}, {s: 0.8 for s in range(5)})
    assert all_wins["sign_test_p"] == pytest.approx(0.0625)  # 2 / 2**5


def test_summary_error_reduction_compares_the_same_seeds():
    runs = [
        _run("rte", "none", 1, 0.50),
        _run("rte", "none", 2, 0.60),
        _run("rte", "none", 3, 0.90),  # keep has no seed 3: not in the comparison
        _run("rte", "keep", 1, 0.55),
        _run("rte", "keep", 2, 0.65),
    ]
    keep = next(r for r in summarize(runs, "none") if r["variant"] == "keep")
    assert keep["score"] == pytest.approx(0.60)  # the cell: keep's own seeds
    # medians over seeds 1 and 2: 0.60 against 0.55, not against none's 0.60 over 1-3
    assert keep["relative_error_reduction"] == pytest.approx((0.45 - 0.40) / 0.45)


def test_undefined_scores_show_in_cells_and_leave_the_pairing():
    nan = float("nan")
    p = paired_comparison({1: 0.7, 2: nan, 3: 0.6}, {1: 0.6, 2: 0.5, 3: 0.6})
    assert p["seeds"] == [1, 3] and p["n"] == 2 and p["undefined"] == 1
    assert p["mean_diff"] == pytest.approx(0.05) and (p["wins"], p["ties"]) == (1, 1)
    runs = [
        _run("stsb", "none", 1, 0.80, {"pearson": 0.8}),
        _run("stsb", "none", 2, 0.82, {"pearson": 0.82}),
        _run("stsb", "keep", 1, 0.81, {"pearson": 0.81}),
        _run("stsb", "keep", 2, nan, {"pearson": nan}),
    ]
    keep = next(r for r in summarize(runs, "none") if r["variant"] == "keep")
    assert math.isnan(keep["score"])  # a failed seed is not hidden by the median
    table = summary_markdown(summarize(runs, "none"))
    assert "| stsb | keep | 1 (1 undefined) | +1.00 |" in table


def test_summary_pairs_seeds_for_tasks_and_the_glue_average():
    runs = [
        _run(t, v, s, score)
        for t, v, s, score in [
            ("rte", "none", 1, 0.60),
            ("rte", "none", 2, 0.70),
            ("rte", "keep", 1, 0.65),
            ("rte", "keep", 2, 0.69),
            ("cola", "none", 1, 0.40),
            ("cola", "none", 2, 0.20),
            ("cola", "keep", 1, 0.44),
            ("cola", "keep", 2, 0.30),
        ]
    ]
    rows = {(r["task"], r["variant"]): r for r in summarize(runs, "none")}
    assert rows[("rte", "none")]["paired"] is None
    rte = rows[("rte", "keep")]["paired"]
    assert rte["mean_diff"] == pytest.approx((0.05 - 0.01) / 2)
    assert (rte["wins"], rte["losses"]) == (1, 1)
    glue = rows[("glue", "keep")]["paired"]  # per-seed averages: (0.545, 0.495) vs (0.5, 0.45)
    assert glue["mean_diff"] == pytest.approx(0.045) and glue["wins"] == 2
    assert rows[("glue", "keep")]["score_min"] == pytest.approx(0.495)
    partial = summarize(runs + [_run("rte", "none", 3, 0.66)], "none")
    glue_none = next(r for r in partial if r["task"] == "glue" and r["variant"] == "none")
    assert glue_none["seeds"] == [1, 2]  # seed 3 has no CoLA run: not in the average's spread
    table = summary_markdown(list(rows.values()))
    assert "| glue | keep | 2 | +4.50 [" in table


# --------------------------------------------------------------------------- bad input
def test_config_rejects_bad_input(tmp_path):
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'"):
        GlueConfig(model="m", tasks=("squad",))
    with pytest.raises(ValueError, match="tasks"):
        GlueConfig(model="m")
    with pytest.raises(ValueError, match="variants"):
        GlueConfig(model="m", tasks=("rte",), variants=("none", "absolute"))
    with pytest.raises(ValueError, match="baseline"):
        GlueConfig(model="m", tasks=("rte",), variants=("keep",), baseline="none")
    with pytest.raises(ValueError, match="seeds"):
        GlueConfig(model="m", tasks=("rte",), seeds=(1, 1))
    with pytest.raises(ValueError, match="validation_file"):
        GlueConfig(model="m", train_file="t.csv", text_columns=("x",))
    with pytest.raises(ValueError, match="batch_size"):
        GlueConfig(model="m", tasks=("rte",), batch_size=0)
    with pytest.raises(ValueError, match="warmup_ratio"):
        GlueConfig(model="m", tasks=("rte",), warmup_ratio=1.0)
    config = GlueConfig(model="m", tasks=("all",), variants=("keep", "remove"))
    assert len(config.tasks) == 9 and config.baseline_variant == "keep"
    assert GlueConfig(model="m", tasks=("RTE", "rte")).tasks == ("rte",)


def test_unknown_task_on_the_command_line(capsys):
    from tisa.cli import main

    with pytest.raises(SystemExit) as info:
        main(["glue", "--task", "squad", "--model", "m"])
    assert info.value.code == 2
    assert "invalid choice: 'squad'" in capsys.readouterr().err


def test_missing_glue_folder_on_the_command_line(tiny_model, tmp_path, capsys):
    from tisa.cli import main

    argv = ["glue", "--task", "rte", "--model", tiny_model, "--glue-dir", str(tmp_path / "x")]
    assert main([*argv, "--output-dir", str(tmp_path / "out"), "--max-length", "64"]) == 2
    err = capsys.readouterr().err
    assert "tisa glue: error:" in err and "download_glue_data.py" in err and "nyu-mll/glue" in err


@needs_glue
def test_max_length_beyond_the_position_table(tiny_model, tmp_path):
    with pytest.raises(ValueError, match="max_length: 128 exceeds the 64 positions"):
        run_glue(_rte_config(tiny_model, tmp_path, max_length=128))
    assert not (tmp_path / "settings.json").exists()  # nothing recorded: free to fix it


@needs_glue
def test_labels_that_do_not_match_the_task_stop_before_training(tiny_model, tmp_path):
    header = "index\tsentence1\tsentence2\tlabel\n"
    (tmp_path / "glue" / "RTE").mkdir(parents=True)
    (tmp_path / "glue" / "RTE" / "train.tsv").write_text(header + "0\ta\tb\tentailment\n")
    (tmp_path / "glue" / "RTE" / "dev.tsv").write_text(header + "0\ta\tb\tcontradiction\n")
    counter = _CountTraining()
    config = _rte_config(tiny_model, tmp_path / "out", glue_dir=str(tmp_path / "glue"))
    with pytest.raises(
        ValueError, match=r"dev.tsv: labels 'contradiction' do not match task 'rte'"
    ):
        run_glue(config, callbacks=[counter])
    assert counter.starts == 0


# ---------------------------------------------------------------- faults and resuming
_KILL_DURING_SAVE = textwrap.dedent(
    """
    import os, signal, sys
    from transformers import Trainer
    from tisa.glue.run import GlueConfig, run_glue

    original, calls = Trainer._save_rng_state, []

    def dying(self, output_dir):  # the last file of a checkpoint: the rest is written
        calls.append(output_dir)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return original(self, output_dir)

    Trainer._save_rng_state = dying
    run_glue(GlueConfig(**eval(sys.argv[1])))
    """
)


@needs_glue
def test_kill_during_a_save_leaves_only_complete_checkpoints_and_resumes(rte_run, tmp_path, caplog):
    """SIGKILL while the second checkpoint is written: no partial checkpoint-4 appears,
    and the rerun resumes from checkpoint-2 (skipping a partial folder an older version
    left) and ends where the uninterrupted run ended."""
    reference, finished = rte_run
    settings = dict(
        model=reference.model,
        tasks=("rte",),
        seeds=(1,),
        output_dir=str(tmp_path / "out"),
        glue_dir=str(GLUE_DIR),
        max_steps=4,
        batch_size=8,
        max_length=POSITIONS,
        max_train_samples=64,
        max_eval_samples=48,
        save_steps=2,
        logging_steps=2,
    )
    script = tmp_path / "kill.py"
    script.write_text(_KILL_DURING_SAVE)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, str(script), repr(settings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    checkpoints = run_dir(tmp_path / "out", "rte", "none", 1) / "checkpoints"
    assert [p.name for p in checkpoints.glob("checkpoint-*")] == ["checkpoint-2"]
    assert checkpoint_problems(checkpoints / "checkpoint-2") == []
    assert (checkpoints / ".staging" / "checkpoint-4" / "model.safetensors").is_file()
    # what the stock Trainer, writing file by file, used to leave after such a kill
    (checkpoints / "checkpoint-3").mkdir()
    (checkpoints / "checkpoint-3" / "model.safetensors").write_bytes(b"")

    with caplog.at_level(logging.WARNING, logger="tisa.checkpoints"):
        (resumed,) = run_glue(GlueConfig(**settings)).runs
    assert f"skipping checkpoint {checkpoints / 'checkpoint-3'}" in caplog.text
    assert "model.safetensors is empty" in caplog.text
    assert resumed["resumed_from"] == "checkpoint-2" and resumed["global_step"] == 4
    assert resumed["metrics"] == finished.runs[0]["metrics"]
    # the loss over the whole run, as the uninterrupted run has it, and over the part here
    straight = finished.runs[0]
    assert straight["resumed_part"] is None
    assert resumed["train_loss"] == pytest.approx(straight["train_loss"], rel=1e-6)
    assert resumed["resumed_part"]["steps"] == 2
    assert resumed["resumed_part"]["train_loss"] != pytest.approx(straight["train_loss"])
    assert not checkpoints.exists()  # removed once the result is written


def test_an_empty_or_cut_result_counts_as_not_done(tiny_model, tmp_path, caplog):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    for path in (train, dev):
        path.write_text("text,label\n" + "".join(f"{w},{i % 2}\n" for i, w in enumerate(WORDS)))
    config = GlueConfig(
        model=tiny_model,
        train_file=str(train),
        validation_file=str(dev),
        text_columns=("text",),
        seeds=(1, 2),
        output_dir=str(tmp_path / "out"),
        max_steps=1,
        batch_size=8,
        max_length=16,
        plot=False,
    )
    first = run_glue(config)
    assert first.trained == 2
    result = run_dir(config.output_dir, "custom", "none", 1) / "result.json"
    full = result.read_text()
    for broken in ("", full[: len(full) // 2], "{}"):
        result.write_text(broken)
        counter = _CountTraining()
        with caplog.at_level(logging.WARNING, logger="tisa.glue.run"):
            again = run_glue(config, callbacks=[counter])
        assert counter.starts == 1 and again.trained == 1  # seed 1 again, seed 2 kept
        assert f"{result} " in caplog.text and "counts as not done" in caplog.text
        assert json.loads(result.read_text())["metrics"] == first.runs[0]["metrics"]
        assert [r["seed"] for r in again.runs] == [1, 2]
        caplog.clear()
    assert run_glue(config).trained == 0


def _bad_model(tmp_path: Path, kind: str, tiny_model: str) -> str:
    if kind == "missing":
        return str(tmp_path / "no" / "such" / "model")
    if kind == "text file":
        (tmp_path / "model.txt").write_text("not a model")
        return str(tmp_path / "model.txt")
    folder = tmp_path / kind.replace(" ", "-")
    folder.mkdir()
    if kind == "folder without config":
        (folder / "notes.txt").write_text("hello")
    else:  # weights cut short, as an interrupted copy leaves them
        for f in Path(tiny_model).iterdir():
            (folder / f.name).write_bytes(f.read_bytes())
        weights = folder / "model.safetensors"
        data = weights.read_bytes()
        header = 8 + int.from_bytes(data[:8], "little")
        weights.write_bytes(data[: header + 1000])  # the header and 1,000 bytes of tensors
    return str(folder)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "model: no such folder"),
        ("text file", "model.txt' is a file; expected a model folder"),
        ("folder without config", "holds no config.json"),
        ("cut weights", r"model.safetensors is cut short \([\d,]+ of [\d,]+ bytes\)"),
    ],
)
def test_a_model_that_cannot_be_loaded_fails_before_any_work(
    tiny_model, tmp_path, capsys, kind, message
):
    from tisa.cli import main

    model = _bad_model(tmp_path, kind, tiny_model)
    argv = ["glue", "--model", model, "--task", "rte", "--output-dir", str(tmp_path / "out")]
    assert main([*argv, "--glue-dir", str(tmp_path / "no-data")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tisa glue: error: model: ") and re.search(message, err), err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()  # nothing written


def test_output_dir_that_is_a_file_fails_at_once(tiny_model, tmp_path):
    taken = tmp_path / "taken"
    taken.write_text("results of something else")
    with pytest.raises(ValueError, match=r"output_dir: '.*taken' is a file, expected a folder"):
        run_glue(GlueConfig(model=tiny_model, tasks=("rte",), output_dir=str(taken)))
    assert taken.read_text() == "results of something else"


def test_parity_against_reference_figures():
    runs = [
        _run("rte", "none", 1, 0.545),
        _run("rte", "none", 2, 0.567),
        _run("rte", "none", 3, 0.556),
        _run("rte", "keep", 1, 0.90),  # another variant: not compared
        _run("cola", "none", 1, 0.20, {"matthews_corr": 0.20}),
    ]
    reference = {
        "rte": {"accuracy": (0.558, 0.008, 3)},
        "cola": {"matthews_corr": (0.294, None, 1)},
        "stsb": {"pearson": (0.849, None, 1)},  # no runs: no row
    }
    rows = {r["task"]: r for r in parity_comparison(runs, "none", reference)}
    assert set(rows) == {"rte", "cola"}
    rte = rows["rte"]
    assert rte["seeds"] == 3 and rte["mean"] == pytest.approx(0.556)
    assert rte["sd"] == pytest.approx(0.011)
    assert rte["diff"] == pytest.approx(-0.002)
    assert rte["noise"] == pytest.approx(2 * (0.011**2 / 3 + 0.008**2 / 3) ** 0.5)
    assert rte["within_noise"] is True
    far = parity_comparison(
        [_run("rte", "none", s, 0.70 + s / 1000) for s in (1, 2, 3)], "none", reference
    )
    assert far[0]["within_noise"] is False  # 14 points above a spread of about 1
    assert rows["cola"]["within_noise"] is None  # one seed: no spread known
    table = parity_markdown(list(rows.values()), "stock Trainer")
    assert "| rte | accuracy | 55.6 ± 1.1 (3) | 55.8 ± 0.8 (3) | -0.2 |" in table
    assert "n/a (one seed)" in table


def test_seedwise_parity_pairs_task_and_seed_and_treats_nan_in_both_as_the_same():
    runs = [
        _run("cola", "none", 1, 0.3, {"matthews_corr": math.nan}),
        _run("cola", "none", 2, 0.3, {"matthews_corr": 0.31}),
        _run("cola", "keep", 1, 0.9, {"matthews_corr": 0.9}),  # another variant
    ]
    stock = [
        {"task": "cola", "seed": 1, "metrics": {"matthews_corr": None}},  # undefined in both
        {"task": "cola", "seed": 2, "metrics": {"matthews_corr": math.nan}},  # one side only
        {"task": "cola", "seed": 3, "metrics": {"matthews_corr": 0.2}},  # no run: no row
    ]
    rows = seedwise_parity(runs, "none", stock)
    assert [(r["seed"], r["identical"]) for r in rows] == [(1, True), (2, False)]


@needs_glue
def test_a_max_length_that_leaves_no_text_is_refused(tiny_model, tmp_path):
    out = tmp_path / "out"
    # RTE is a pair: [CLS] a [SEP] b [SEP] needs 5
    with pytest.raises(ValueError, match=r"max_length: 4 leaves no text in rte: .* at least 5"):
        run_glue(_rte_config(tiny_model, out, max_length=4))
    with pytest.raises(ValueError, match=r"max_length: 2 leaves no text in sst2: .* at least 3"):
        run_glue(_rte_config(tiny_model, out, tasks=("sst2",), max_length=2))
    assert not out.exists()  # refused before anything was written


def test_examples_left_without_text_are_counted_and_said(tiny_model, tmp_path, caplog):
    from datasets import Dataset, DatasetDict
    from transformers import AutoTokenizer

    from tisa.data.glue import get_task
    from tisa.glue.inputs import encode

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = _rte_config(tiny_model, tmp_path, tasks=("sst2",), max_length=8)
    sentences = ["the cat sat", "", "a dog", "", "on the mat", "it was"]  # 2 of 6 without text
    data = DatasetDict(
        {
            s: Dataset.from_dict({"sentence": sentences, "label": [0, 1] * 3})
            for s in ("train", "validation")
        }
    )
    with caplog.at_level("WARNING", logger="tisa.glue.run"):
        encoded = encode(config, get_task("sst2"), data, tokenizer)
    assert "tisa_no_text" not in encoded["train"].column_names
    said = [r.getMessage() for r in caplog.records]
    assert "sst2 train: 2 of 6 examples (33%) have no text left at max_length=8" in said[0]
    pair = DatasetDict(
        {
            s: Dataset.from_dict(
                {"sentence1": ["a b c"] * 20, "sentence2": ["d e"] * 19 + [""], "label": [0] * 20}
            )
            for s in ("train", "validation")
        }
    )
    caplog.clear()
    with caplog.at_level("WARNING", logger="tisa.glue.run"):
        encode(_rte_config(tiny_model, tmp_path, max_length=8), get_task("rte"), pair, tokenizer)
    assert not caplog.records  # 1 of 20 (5%): not worth a line
