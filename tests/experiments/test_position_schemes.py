"""The position-scheme experiment's run specs, targets and TI-over-training summary."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tisa.analysis.training import ti_loss_curve
from tisa.pretrain import compare as ps

SCRIPT = Path(__file__).resolve().parents[2] / "experiments" / "position_schemes.py"


def test_specs_split_settings_from_scoring_options():
    assert ps.parse_spec("tisa") == ps.RunSpec("tisa", "tisa", {}, ())
    spec = ps.parse_spec(
        "mixed=rbf_linear:learn_tail=false:mixed_lengths=256,512:tisa_learning_rate=3e-3"
    )
    assert spec.label == "mixed" and spec.position == "rbf_linear"
    assert spec.settings == {"mixed_lengths": (256, 512), "tisa_learning_rate": 3e-3}
    assert spec.scoring_options == ("learn_tail=false",)
    for bad in ("=tisa", "a/b=tisa", "x=tisa:far_offset"):
        with pytest.raises(ValueError):
            ps.parse_spec(bad)


def _run(losses, params):
    return {
        "test_loss": dict(zip((128, 1024, 2048), losses)),
        "positional_parameters": {"total": params},
    }


def test_targets_follow_their_definitions():
    runs = {
        "absolute": _run((5.0, None, None), 65536),
        "alibi": _run((5.0, 5.3, 5.6), 0),
        "tisa": _run((4.9, 6.0, 7.0), 240),
        "good": _run((4.8, 4.9, 5.0), 300),  # +2.1% at 8x, +4.2% at 16x
        "big": _run((4.8, 4.9, 5.0), 700),  # over 1% of the table
    }
    out = ps.targets(runs, [128, 1024, 2048])
    assert "absolute" in out and out["absolute"]["rise_8x"] is None
    assert out["good"]["rise_8x"] == pytest.approx(4.9 / 4.8 - 1)
    assert out["good"]["all"] and not out["big"]["all"]
    assert not out["big"]["under_1pct_of_table"]
    assert not out["tisa"]["within_3pct_8x"] and not out["tisa"]["at_or_below_alibi"]
    assert out["tisa"]["at_or_below_rbf_at_train_length"]


def test_ti_curve_correlates_every_series_with_the_loss(tmp_path):
    rows = [
        {"step": s, "eval_loss": 6.0 - s / 100, "ti_gram": s / 1000, "ti_fp_raw": 0.0}
        | {"ti_gram_offdiag": 0.1 + s / 1000, "nulls": {"gram_offdiag": {}}}
        for s in (100, 200, 300, 400)
    ]
    rows.insert(1, {"step": 150, "ti_gram": 0.9})  # no eval: left out
    path = tmp_path / "ti.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    curve = ti_loss_curve(path)
    assert curve["steps"] == [100, 200, 300, 400]
    assert curve["spearman_ti_gram_vs_eval_loss"] == pytest.approx(-1.0)
    assert curve["spearman_ti_gram_offdiag_vs_eval_loss"] == pytest.approx(-1.0)
    assert curve["spearman_ti_fp_raw_vs_eval_loss"] is None  # constant: no correlation
    assert curve["spearman_ti_cos_offdiag_vs_eval_loss"] is None  # not logged
    assert not math.isnan(curve["spearman_ti_gram_vs_eval_loss_p"])


def test_summary_names_its_folder_relative_to_the_working_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert ps.shown(tmp_path / "runs" / "ps") == str(Path("runs") / "ps")
    assert ps.shown(Path("runs/ps")) == str(Path("runs") / "ps")
    elsewhere = tmp_path.parent / "other"
    assert ps.shown(elsewhere) == str(elsewhere)  # outside: as given


# ---------------------------------------------------------------- positional lr sweep


def test_the_sweep_tunes_every_scheme_with_positional_parameters():
    specs = [
        ps.parse_spec(s)
        for s in (
            "absolute",
            "none",
            "alibi",
            "rope",
            "tisa",
            "absolute+tisa",
            "t5",
            "kerple_log",
            "rbf_log",
            "fixed=rbf_linear:learn_tail=false",
            "rbf_logdist",
            "alibi_learned",
            "fire:mlp_width=8",
        )
    ]
    runs, plan = ps.sweep_specs(specs, [1e-3, 1e-2], None)
    fixed = {"absolute", "none", "alibi", "rope"}
    assert set(plan) == {s.label for s in specs} - fixed
    assert {r.label for r in runs} == fixed | {
        f"{label}-plr{rate:g}" for label in plan for rate in (1e-3, 1e-2)
    }
    fire = next(r for r in runs if r.label == "fire-plr0.01")
    assert fire.settings == {"tisa_learning_rate": 1e-2} and fire.scoring_options == (
        "mlp_width=8",
    )
    for args, match in (
        (([], None), "distinct rates"),
        (([1e-3, 1e-3], None), "distinct rates"),
        (([1e-3], 1e-2), "tisa-learning-rate"),
    ):
        with pytest.raises(ValueError, match=match):
            ps.sweep_specs(specs, *args)
    with pytest.raises(ValueError, match="chooses"):
        ps.sweep_specs([ps.parse_spec("t=tisa:tisa_learning_rate=1e-2")], [1e-3], None)


def test_the_sweep_chooses_the_lowest_validation_loss(tmp_path):
    specs = [ps.parse_spec(s) for s in ("alibi", "k=rbf_linear:learn_tail=false:num_kernels=3")]
    runs, plan = ps.sweep_specs(specs, [1e-3, 1e-2, 1e-1], None)
    losses = {"alibi": 5.5, "k-plr0.001": 5.2, "k-plr0.01": 5.0, "k-plr0.1": 5.1}
    folders = {}
    for label, value in losses.items():
        (tmp_path / label).mkdir()
        (tmp_path / label / "results.json").write_text(json.dumps({"eval_loss": value}))
        folders[label] = tmp_path / label
    selection = ps.select_rates(folders, plan, runs)
    k = selection["runs"]["k"]
    assert k["candidates"] == {"0.001": 5.2, "0.01": 5.0, "0.1": 5.1}
    assert k["chosen"] == 1e-2 and k["chosen_run"] == "k-plr0.01"
    again = ps.parse_spec(k["spec"])  # the spec trains the chosen run
    assert again.position == "rbf_linear" and again.scoring_options == ("learn_tail=false",)
    assert again.settings == {"num_kernels": 3, "tisa_learning_rate": 1e-2}
    assert selection["fixed"] == {"alibi": 5.5}
    md = ps.sweep_markdown(selection)
    assert "| k | rbf_linear | 5.200 | 5.000 | 5.100 | 0.01 |" in md and k["spec"] in md


@pytest.mark.slow
def test_sweep_smoke_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TISA_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "sweep"
    argv = ["--output-dir", str(out), "--size", "tiny", "--max-steps", "2", "--save-steps", "2"]
    argv += ["--seq-len", "16", "--batch-size", "4", "--positional-lr-sweep", "1e-3", "1e-1"]
    argv += ["--positions", "alibi", "alibi_learned"]
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parents[1]))
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    selection = json.loads((out / "lr_sweep.json").read_text())
    assert set(selection["runs"]) == {"alibi_learned"} and set(selection["fixed"]) == {"alibi"}
    chosen = selection["runs"]["alibi_learned"]
    assert chosen["chosen"] in (1e-3, 1e-1) and (out / chosen["chosen_run"]).is_dir()
    assert (out / "lr_sweep.md").is_file()


def _seed_run(val, losses):
    return {"final_validation_loss": val, "test_loss": dict(zip((128, 1024), losses))}


def test_seeds_are_compared_with_the_best_baseline_paired_by_seed():
    per_seed = {
        0: {"alibi": _seed_run(5.0, (5.0, 5.4)), "fire": _seed_run(5.0, (4.9, 5.6)),
            "rbf": _seed_run(4.9, (4.8, 5.0)), "absolute": _seed_run(5.1, (5.1, None))},
        1: {"alibi": _seed_run(5.1, (5.1, 5.5)), "fire": _seed_run(5.0, (5.0, 5.7)),
            "rbf": _seed_run(5.0, (4.95, 5.2)), "absolute": _seed_run(5.2, (5.2, None))},
        2: {"alibi": _seed_run(4.9, (4.9, 5.3)), "fire": _seed_run(5.1, (4.8, 5.5)),
            "rbf": _seed_run(4.8, (4.7, 4.95)), "absolute": _seed_run(5.0, (5.0, None))},
    }
    out = ps.seed_comparison(per_seed, [128, 1024], ["alibi", "fire", "absolute"])
    assert out["seeds"] == [0, 1, 2]
    assert out["runs"]["rbf"]["test"][128]["mean"] == pytest.approx((4.8 + 4.95 + 4.7) / 3)
    assert out["runs"]["absolute"]["test"][1024] == {"mean": None, "sd": None, "n": 0}
    # fire has the lowest mean at 128; at 1024 absolute cannot be read, alibi is best
    assert out["best_baseline"] == {128: "fire", 1024: "alibi"}
    rows = {(c["run"], c["length"]): c for c in out["comparisons"]}
    assert set(rows) == {("rbf", 128), ("rbf", 1024)}
    far = rows[("rbf", 1024)]
    assert far["against"] == "alibi" and far["n"] == 3
    assert far["mean"] == pytest.approx(((5.0 - 5.4) + (5.2 - 5.5) + (4.95 - 5.3)) / 3)
    assert far["high"] < 0 and far["p_holm"] >= far["p"]
    md = ps.seed_markdown(out, [128, 1024])
    assert "| rbf | alibi | 1024 |" in md and "Holm over the 2 comparisons" in md
    with pytest.raises(ValueError, match="at least 2"):
        ps.seed_comparison({0: per_seed[0]}, [128], ["alibi"])
    broken = {0: per_seed[0], 1: {k: v for k, v in per_seed[1].items() if k != "fire"}}
    with pytest.raises(ValueError, match="seed 1"):
        ps.seed_comparison(broken, [128], ["alibi"])


@pytest.mark.slow
def test_seeds_smoke_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TISA_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "seeds"
    argv = ["--output-dir", str(out), "--size", "tiny", "--max-steps", "2", "--save-steps", "2"]
    argv += ["--seq-len", "16", "--batch-size", "4", "--lengths", "16", "32",
             "--max-tokens", "256", "--eval-variants", "--seeds", "0", "1"]
    argv += ["--positions", "alibi", "rbf_linear"]
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parents[1]))
    done = subprocess.run([sys.executable, str(SCRIPT), *argv], env=env, capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads((out / "seeds.json").read_text())
    assert result["seeds"] == [0, 1] and result["baselines"] == ["alibi"]
    pairs = {(c["run"], c["against"], c["length"]) for c in result["comparisons"]}
    assert pairs == {("rbf_linear", "alibi", 16), ("rbf_linear", "alibi", 32)}
    for seed in (0, 1):
        config = json.loads((out / f"seed-{seed}" / "alibi" / "pretrain_config.json").read_text())
        assert config["config"]["seed"] == seed
        assert (out / f"seed-{seed}" / "summary.json").is_file()
    assert (out / "seeds.md").is_file()
    bad = subprocess.run([sys.executable, str(SCRIPT), *argv[:-3], "--baselines", "t5",
                          "--positions", "alibi", "rbf_linear"], env=env, capture_output=True)
    assert bad.returncode != 0 and b"--baselines: ['t5'] not among" in bad.stderr


@pytest.mark.slow
def test_units_carry_a_protocol_over_without_its_run_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("TISA_CACHE_DIR", str(tmp_path / "cache"))
    env = dict(os.environ, PYTHONPATH=str(SCRIPT.parents[1]), TISA_CACHE_DIR=str(
        tmp_path / "cache"))
    common = ["--size", "tiny", "--max-steps", "2", "--save-steps", "2", "--seq-len", "16",
              "--batch-size", "4", "--lengths", "16", "32", "--max-tokens", "256",
              "--eval-variants", "--context-curve", "40", "64", "--seeds", "0", "1",
              "--positions", "alibi", "rbf_linear"]

    def run(*extra):
        return subprocess.run([sys.executable, str(SCRIPT), *common, *extra], env=env,
                              capture_output=True, text=True)

    units = tmp_path / "units"
    first = run("--output-dir", str(tmp_path / "a"), "--units-dir", str(units))
    assert first.returncode == 0, first.stderr[-2000:]
    assert sorted(p.name for p in (units / "seed-1").iterdir()) == ["alibi.json",
                                                                      "rbf_linear.json"]
    # each run scored alone scores what it scores beside the others
    together = run("--output-dir", str(tmp_path / "b"))
    assert together.returncode == 0, together.stderr[-2000:]
    beside = json.loads((tmp_path / "b" / "seed-1" / "summary.json").read_text())["runs"]
    alone = json.loads((units / "seed-1" / "rbf_linear.json").read_text())["run"]
    assert alone["test_loss"] == beside["rbf_linear"]["test_loss"]  # both as JSON keeps them
    assert alone["context_curve"] == beside["rbf_linear"]["context_curve"]
    assert set(alone["context_curve"]) == {"40", "64"} and "context_slope" in alone
    # the units alone, no run folders: nothing is trained, the comparison is the same
    again = run("--output-dir", str(tmp_path / "c"), "--units-dir", str(units))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "training" not in again.stdout and not (tmp_path / "c" / "seed-0").exists()
    kept = json.loads((tmp_path / "c" / "seeds.json").read_text())["comparisons"]
    assert kept == json.loads((tmp_path / "a" / "seeds.json").read_text())["comparisons"]
    # a unit made with other settings is refused, with one line
    other = subprocess.run([sys.executable, str(SCRIPT), *common[:2], "--max-steps", "4",
                            *common[4:], "--output-dir", str(tmp_path / "d"), "--units-dir",
                            str(units)], env=env, capture_output=True, text=True)
    assert other.returncode != 0 and "holds a unit made with other settings" in other.stderr
    assert "Traceback" not in other.stderr


def test_units_need_seeds_and_scoring_settings_are_checked_first(tmp_path):
    with pytest.raises(SystemExit, match="--units-dir: only with --seeds"):
        _script().main(["--units-dir", str(tmp_path), "--output-dir", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="context_curve must be an integer >= 35, got 8"):
        _script().main(["--context-curve", "8", "--output-dir", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match=r"stride \(200\) must not exceed"):
        _script().main(["--stride", "200", "--output-dir", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()  # nothing trained


def _script():
    from tests.scripts import load_script

    return load_script("experiments/position_schemes.py")
