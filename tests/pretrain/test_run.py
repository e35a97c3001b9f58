"""``tisa pretrain`` runs: configs, checkpoints, resume, reuse and data parallelism."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.pretrain.tiny import (
    TINY,
    tokenizer_cache,  # noqa: F401  (module-wide fixture)
)
from tisa.analysis.positional_ti import position_table_ti
from tisa.checkpoints import latest_checkpoint
from tisa.cli.args import field_help
from tisa.files import LOCK_FILE, read_jsonl
from tisa.pretrain.masked_lm import load_masked_lm
from tisa.pretrain.run import PretrainConfig, pretrain, pretrain_or_reuse
from tisa.pretrain.schemes import POSITIONS

REPO = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------------------- configs


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"position": "relative"}, "position"),
        ({"size": "large"}, "size"),
        ({"arch": "roberta"}, "arch"),
        ({"seq_len": 1024, "max_positions": 512}, "max_positions"),
        ({"position": "absolute+tisa", "seq_len": 600}, "max_positions"),
        ({"batch_size": 0}, "batch_size"),
        ({"learning_rate": -1.0}, "learning_rate"),
        ({"block_format": "docs"}, "block_format"),
        ({"resume": True, "overwrite": True}, "exclude"),
    ],
)
def test_config_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PretrainConfig(output_dir="run", **kwargs)


def test_position_help_names_every_scheme():
    listed = field_help(PretrainConfig)["position"].split(":")[-1]
    named = {word.strip(" .") for word in listed.split(",")}
    assert named == set(POSITIONS)


def test_config_allows_long_sequences_without_absolute_table():
    PretrainConfig(output_dir="run", position="tisa", seq_len=1024, max_positions=512)


def test_cli_reports_bad_input(tmp_path, capsys):
    from tisa.cli import main

    assert main(["pretrain", "--output-dir", str(tmp_path / "r"), "--position", "foo"]) == 2
    assert "position must be one of" in capsys.readouterr().err
    args = ["pretrain", "--output-dir", str(tmp_path / "r"), "--train-file", "missing.txt"]
    assert main(args) == 2
    assert "train_file" in capsys.readouterr().err


# ----------------------------------------------------------------------------- runs


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "tiny"
    config = PretrainConfig(output_dir=str(out), max_steps=6, save_steps=3, eval_steps=3, **TINY)
    assert pretrain(config, ti_measure=position_table_ti) == out
    return out


def test_tiny_run_writes_checkpoints_and_metrics(tiny_run):
    run = tiny_run
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-3", "checkpoint-6"]
    assert not (run / ".staging").exists()
    for ckpt in ("checkpoint-3", "checkpoint-6"):
        names = {p.name for p in (run / ckpt).iterdir()}
        assert {
            "model.safetensors",
            "optimizer.pt",
            "trainer_state.json",
            "tokenizer.json",
        } <= names
    assert (run / "model" / "config.json").is_file() and (
        run / "tokenizer" / "tokenizer.json"
    ).is_file()
    rows = read_jsonl(run / "metrics.jsonl")
    train = [r for r in rows if "loss" in r]
    evals = [r for r in rows if "eval_loss" in r]
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    assert all(r["tokens_per_s"] > 0 for r in train)
    assert [r["step"] for r in evals] == [3, 6]
    csv_lines = (run / "metrics.csv").read_text().splitlines()
    assert csv_lines[0].startswith("step,epoch,loss,eval_loss")
    assert len(csv_lines) == 1 + len(rows)
    results = json.loads((run / "results.json").read_text())
    assert results["step"] == 6 and results["eval_loss"] == pytest.approx(evals[-1]["eval_loss"])
    facts = json.loads((run / "pretrain_config.json").read_text())
    assert facts["config"]["position"] == "absolute" and facts["tokens_per_step"] == 8 * 32
    assert facts["positional_parameters"]["absolute"] == 64 * 16


def test_tiny_run_records_translation_invariance(tiny_run):
    rows = read_jsonl(tiny_run / "ti.jsonl")
    assert [r["step"] for r in rows] == [3, 6]
    evals = {
        r["step"]: r["eval_loss"]
        for r in read_jsonl(tiny_run / "metrics.jsonl")
        if "eval_loss" in r
    }
    for r in rows:
        assert r["eval_loss"] == pytest.approx(evals[r["step"]])
        assert r["positions"] == 32
        assert len(r["ti_fp_raw_heads"]) == 2
        assert r["ti_fp_raw"] == pytest.approx(sum(r["ti_fp_raw_heads"]) / 2)
        for key in ("ti_gram", "ti_fp_raw", "ti_fp_ln"):
            assert 0.0 <= r[key] <= 1.0
    # the value is recomputable from the saved checkpoint
    from tisa import metrics
    from tisa.analysis import extract

    model = load_masked_lm(tiny_run / "checkpoint-6")
    gram = extract.extract(model, max_positions=32).gram
    assert float(metrics.translation_invariance(gram)) == pytest.approx(rows[-1]["ti_gram"])


def test_existing_run_needs_resume_or_overwrite(tiny_run):
    with pytest.raises(ValueError, match="--resume"):
        pretrain(PretrainConfig(output_dir=str(tiny_run), max_steps=6, **TINY))
    other = dict(TINY, position="tisa")
    with pytest.raises(ValueError, match="other settings.*position"):
        pretrain(PretrainConfig(output_dir=str(tiny_run), max_steps=6, resume=True, **other))


def test_crash_during_save_leaves_no_checkpoint(tmp_path, monkeypatch):
    """A save that dies half-way never produces a folder named checkpoint-<step>."""
    from transformers import Trainer

    original = Trainer._save_rng_state
    calls = []

    def dying(self, output_dir):
        calls.append(output_dir)
        if len(calls) == 2:
            raise RuntimeError("simulated crash while saving")
        return original(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_rng_state", dying)
    run = tmp_path / "run"
    config = PretrainConfig(output_dir=str(run), max_steps=4, save_steps=2, eval_steps=2, **TINY)
    with pytest.raises(RuntimeError, match="simulated"):
        pretrain(config)
    assert sorted(p.name for p in run.glob("checkpoint-*")) == ["checkpoint-2"]
    partial = run / ".staging" / "checkpoint-4"
    assert (partial / "model.safetensors").is_file()  # written, but never renamed
    assert latest_checkpoint(run) == run / "checkpoint-2"


_KILL_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from transformers import TrainerCallback
    from tisa.analysis.positional_ti import position_table_ti
    from tisa.pretrain.run import PretrainConfig, pretrain

    class KillAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == int(sys.argv[2]):
                os.kill(os.getpid(), signal.SIGKILL)

    config = PretrainConfig(output_dir=sys.argv[1], **eval(sys.argv[3]))
    pretrain(config, callbacks=[KillAt()], ti_measure=position_table_ti)
    """
)


@pytest.mark.slow  # a killed subprocess and its resume; the slow tier (CI runs it)
def test_resume_after_kill_matches_uninterrupted_run(tmp_path, caplog):
    settings = dict(TINY, max_steps=8, save_steps=4, eval_steps=4, seed=7)
    straight = tmp_path / "straight"
    pretrain(PretrainConfig(output_dir=str(straight), **settings))

    killed = tmp_path / "killed"
    script = tmp_path / "kill.py"
    script.write_text(_KILL_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run(
        [sys.executable, str(script), str(killed), "6", repr(settings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert sorted(p.name for p in killed.glob("checkpoint-*")) == ["checkpoint-4"]
    assert not (killed / "model").exists()
    logged = [r["step"] for r in read_jsonl(killed / "metrics.jsonl") if "loss" in r]
    assert max(logged) >= 5  # it had trained past the checkpoint when it died
    # Debris a crash could leave: a half-written staged save and a foreign incomplete folder.
    (killed / ".staging" / "checkpoint-8").mkdir(parents=True)
    (killed / "checkpoint-7").mkdir()
    (killed / "checkpoint-7" / "config.json").write_text("{}")

    # the killed run's lock file is still there, its lock gone with the process
    assert (killed / LOCK_FILE).read_text().strip() != str(os.getpid())
    with caplog.at_level("WARNING", logger="tisa.pretrain.run"):
        pretrain(
            PretrainConfig(output_dir=str(killed), resume=True, **settings),
            ti_measure=position_table_ti,
        )
    said = [r.getMessage() for r in caplog.records if r.name == "tisa.pretrain.run"]
    assert said == [f"resume: continuing from {killed / 'checkpoint-4'} (step 4 of 8)"]
    a = json.loads((straight / "results.json").read_text())
    b = json.loads((killed / "results.json").read_text())
    assert b["resumed_from"] == "checkpoint-4" and a["step"] == b["step"] == 8
    # time: this process's part, and every part (the first up to its checkpoint at step 4)
    assert a["train_wall_total_s"] == a["train_wall_s"]
    part_one = max(
        r["elapsed_total_s"] for r in read_jsonl(killed / "metrics.jsonl") if r["step"] <= 4
    )
    assert b["train_wall_total_s"] == pytest.approx(b["train_wall_s"] + part_one, abs=2e-3)
    late = [r for r in read_jsonl(killed / "metrics.jsonl") if r["step"] > 4]
    assert late and all(
        r["elapsed_total_s"] == pytest.approx(r["elapsed_s"] + part_one, abs=2e-3) for r in late
    )
    assert b["eval_loss"] == pytest.approx(a["eval_loss"], rel=1e-6)
    assert b["last_train_loss"] == pytest.approx(a["last_train_loss"], rel=1e-6)
    rows_a, rows_b = read_jsonl(straight / "metrics.jsonl"), read_jsonl(killed / "metrics.jsonl")
    assert [r["step"] for r in rows_a] == [r["step"] for r in rows_b]  # nothing logged twice
    for ra, rb in zip(rows_a, rows_b, strict=True):
        for key in ("loss", "eval_loss"):
            if key in ra:
                assert rb[key] == pytest.approx(ra[key], rel=1e-6)
    assert [r["step"] for r in read_jsonl(killed / "ti.jsonl")] == [4, 8]


_DDP_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    import torch
    from transformers import TrainerCallback
    from tisa.pretrain.run import PretrainConfig, pretrain

    class Record(TrainerCallback):
        def on_train_end(self, args, state, control, model=None, **kwargs):
            flat = torch.cat([p.detach().reshape(-1).double() for p in model.parameters()])
            path = os.path.join(sys.argv[1], f"rank{args.process_index}.json")
            with open(path, "w") as f:
                json.dump({"mode": str(args.parallel_mode), "world": args.world_size,
                           "sum": float(flat.sum()), "norm": float(flat.norm())}, f)

    pretrain(PretrainConfig(output_dir=sys.argv[1], **eval(sys.argv[2])), callbacks=[Record()])
    """
)


@pytest.mark.slow  # two processes under torchrun; the slow tier (CI runs it)
def test_data_parallel_with_torchrun(tmp_path):
    """Two gloo processes train one model: identical weights on both ranks afterwards."""
    torchrun = shutil.which("torchrun") or str(Path(sys.executable).with_name("torchrun"))
    if not Path(torchrun).exists():
        pytest.skip("torchrun not found")
    script = tmp_path / "ddp.py"
    script.write_text(_DDP_SCRIPT)
    run = tmp_path / "ddp"
    settings = dict(TINY, max_steps=4, batch_size=4, save_steps=2, eval_steps=2)
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [torchrun, "--nproc_per_node", "2", str(script), str(run), repr(settings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    ranks = [json.loads((run / f"rank{i}.json").read_text()) for i in (0, 1)]
    assert all(r["mode"].endswith("DISTRIBUTED") and r["world"] == 2 for r in ranks)
    assert ranks[0]["sum"] == ranks[1]["sum"] and ranks[0]["norm"] == ranks[1]["norm"]
    assert {"rng_state_0.pth", "rng_state_1.pth"} <= {
        p.name for p in (run / "checkpoint-4").iterdir()
    }
    facts = json.loads((run / "pretrain_config.json").read_text())
    assert facts["world_size"] == 2 and facts["tokens_per_step"] == 2 * 4 * 32
    state = json.loads((run / "checkpoint-4" / "trainer_state.json").read_text())
    assert state["epoch"] == pytest.approx(4 * 2 * 4 / 48, abs=1e-3)  # data split over ranks


def test_pretrain_or_reuse_reuses_a_finished_run(tiny_run):
    config = PretrainConfig(output_dir=str(tiny_run), max_steps=6, save_steps=3, **TINY)
    before = (tiny_run / "results.json").stat().st_mtime_ns
    assert pretrain_or_reuse(config, must_match=("max_steps", "seq_len")) == tiny_run
    assert (tiny_run / "results.json").stat().st_mtime_ns == before  # nothing trained
    longer = PretrainConfig(output_dir=str(tiny_run), max_steps=60, **TINY)
    with pytest.raises(ValueError, match="max_steps=6; use another output folder"):
        pretrain_or_reuse(longer, must_match=("max_steps",))


def test_pretrain_or_reuse_compares_bf16_as_trained(tiny_run):
    """bf16=None is the machine's choice: a run trained with it matches the explicit value
    the machine chose (and an older run that saved bf16=True matches None there)."""
    from tisa.hf.precision import resolve_bf16

    native = resolve_bf16(None)
    for bf16 in (None, native):
        config = PretrainConfig(
            output_dir=str(tiny_run), max_steps=6, save_steps=3, bf16=bf16, **TINY
        )
        assert pretrain_or_reuse(config, must_match=("max_steps", "bf16")) == tiny_run
    other = PretrainConfig(output_dir=str(tiny_run), max_steps=6, bf16=not native, **TINY)
    with pytest.raises(ValueError, match=f"bf16={native}; use another output folder"):
        pretrain_or_reuse(other, must_match=("bf16",))


def test_tensorboard_logs_go_to_the_run_folder(tmp_path):
    """The Trainer's output_dir is the staging folder; TensorBoard still logs under runs/."""
    pytest.importorskip("tensorboard")
    from tisa.pretrain.callbacks import tensorboard_callbacks

    config = PretrainConfig(output_dir=str(tmp_path), tensorboard=True)
    (callback,) = tensorboard_callbacks(config, tmp_path)
    assert Path(callback.logging_dir).parent == tmp_path / "runs"
    assert tensorboard_callbacks(dataclasses.replace(config, tensorboard=False), tmp_path) == []


# ----------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tisa_learning_rate": 0.0}, "tisa_learning_rate"),
        ({"position": "tisa", "scoring_options": ("sharpness",)}, "KEY=VALUE"),
        ({"position": "tisa", "scoring_options": ("tail_scale=2",)}, "tail_scale"),
        ({"position": "absolute", "scoring_options": ("far_offset=8",)}, "no scoring function"),
        ({"position": "rbf_log", "scoring_options": ("num_kernels=3",)}, "--num-kernels"),
        ({"position": "tisa", "mixed_lengths": (300,)}, "divide"),
        ({"position": "tisa", "mixed_lengths": (128,)}, "longer than seq_len"),
        ({"position": "absolute", "mixed_lengths": (1024,)}, "longest of mixed_lengths"),
        ({"arch": "gpt2", "block_format": "cls_sep"}, "plain"),
    ],
)
def test_config_rejects_bad_options(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PretrainConfig(output_dir="run", **kwargs)


def test_config_parses_scoring_options_and_block_format():
    config = PretrainConfig(
        output_dir="run",
        position="rbf_linear",
        scoring_options=["learn_tail=false", "far_offset=127", "far_slope=0.5"],
    )
    assert config.scoring_options_dict() == {
        "learn_tail": False,
        "far_offset": 127,
        "far_slope": 0.5,
    }
    assert config.block_format == "cls_sep" and not config.causal
    causal = PretrainConfig(output_dir="run", arch="gpt2")
    assert causal.block_format == "plain" and causal.causal
    assert json.loads(json.dumps(config.to_dict()))["scoring_options"][0] == "learn_tail=false"


class _Groups(__import__("transformers").TrainerCallback):
    """Records the optimiser's parameter groups when training begins."""

    def on_train_begin(self, args, state, control, optimizer=None, model=None, **kwargs):
        names = {id(p): n for n, p in model.named_parameters()}
        self.groups = [
            {
                "lr": g["lr"],
                "initial_lr": g.get("initial_lr", g["lr"]),
                "weight_decay": g["weight_decay"],
                "names": [names[id(p)] for p in g["params"]],
            }
            for g in optimizer.param_groups
        ]


def test_scoring_parameters_train_at_their_own_rate_over_mixed_lengths(tmp_path):
    """tisa_learning_rate puts exactly the scoring parameters on that rate without weight
    decay; results.json says how far they moved; mixed-length batches train."""
    from tisa.hf import scoring_parameter_names

    groups = _Groups()
    run = tmp_path / "tisa"
    config = PretrainConfig(
        output_dir=str(run),
        position="rbf_log",
        num_kernels=3,
        tisa_learning_rate=0.05,
        mixed_lengths=(64,),
        mixed_share=0.5,
        max_steps=4,
        save_steps=4,
        eval_steps=4,
        **TINY,
    )
    pretrain(config, callbacks=[groups])
    tisa_groups = [g for g in groups.groups if g["initial_lr"] == 0.05]
    assert len(tisa_groups) == 1 and tisa_groups[0]["weight_decay"] == 0.0
    model = load_masked_lm(run / "model")
    assert sorted(tisa_groups[0]["names"]) == sorted(scoring_parameter_names(model))
    others = [g for g in groups.groups if g is not tisa_groups[0]]
    assert all(g["initial_lr"] == config.learning_rate for g in others)
    assert not any(n in scoring_parameter_names(model) for g in others for n in g["names"])
    moved = json.loads((run / "results.json").read_text())["scoring_movement"]
    assert set(moved) == {"amplitude", "sharpness", "offset", "raw_r1", "raw_r2"}
    assert moved["offset"]["count"] == 3 * 2 * 2  # S x H x layers
    assert all(m["mean_abs_change"] > 0 for m in moved.values())
    facts = json.loads((run / "pretrain_config.json").read_text())
    assert facts["positional_parameters"]["tisa"] == (3 * 3 + 2) * 2 * 2
    assert facts["config"]["mixed_lengths"] == [64] and facts["tokens_per_step"] == 8 * 32
    rows = read_jsonl(run / "metrics.jsonl")
    assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]


def test_causal_lm_run(tmp_path):
    """arch=gpt2: next-token loss on plain blocks, TI of its table on the causal triangle."""
    import math

    from tisa.pretrain.causal_lm import load_causal_lm

    run = tmp_path / "gpt2"
    config = PretrainConfig(
        output_dir=str(run), arch="gpt2", max_steps=4, save_steps=2, eval_steps=2, **TINY
    )
    pretrain(config, ti_measure=position_table_ti)
    results = json.loads((run / "results.json").read_text())
    assert results["step"] == 4 and math.isfinite(results["eval_loss"])
    assert results["eval_loss"] < math.log(600) + 0.5  # about uniform over the vocabulary
    model = load_causal_lm(run / "model")
    assert type(model).__name__ == "GPT2LMHeadModel"
    rows = read_jsonl(run / "ti.jsonl")
    assert [r["step"] for r in rows] == [2, 4]
    assert all(0.0 <= r["ti_fp_raw_offdiag"] <= 1.0 for r in rows)
    assert set(rows[0]["nulls"]) == {"gram_offdiag", "cos_offdiag", "fp_raw_offdiag"}


def test_rbf_schemes_of_a_masked_lm_default_to_their_own_scoring_rate(tmp_path):
    """Unset, tisa_learning_rate is DEFAULT_RBF_LEARNING_RATE where it was measured (the
    RBF schemes of a masked LM, rbf_linear's included) and the backbone's elsewhere; a
    given rate is kept."""
    from tisa.pretrain.config import DEFAULT_RBF_LEARNING_RATE

    def rate(**kw):
        return PretrainConfig(output_dir=str(tmp_path), **kw).tisa_learning_rate

    assert DEFAULT_RBF_LEARNING_RATE == 0.1
    assert rate(position="tisa") == rate(position="absolute+tisa") == 0.1
    assert rate(position="rbf_linear") == 0.1
    assert rate(position="tisa", tisa_learning_rate=2e-3) == 2e-3
    for position in ("t5", "kerple_log", "rbf_log", "rbf_logdist", "alibi", "absolute"):
        assert rate(position=position) is None  # the backbone's
    assert rate(position="tisa", arch="gpt2") is None
