"""How tisa.glue.protocol shares its runs among parallel processes: one job per
unfinished (seed, task), the longest first, protocol and converted in one pool."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest


@pytest.fixture
def protocol():
    from tisa.glue import protocol as module

    return module


def _args(tmp_path, **given):
    values = dict(
        seeds=None,
        tasks=None,
        variants=None,
        tisa_start="paper",
        tisa_learning_rate=5e-5,
        protocol_dir=tmp_path / "protocol",
        converted_dir=tmp_path / "converted",
        sweep_dir=tmp_path / "sweep",
        converted_model=None,
        parallel=2,
        glue_dir=None,
        epochs=None,
        model=None,
        stock_dir=tmp_path / "stock",
        position_learning_rate=None,
        position_learning_rates=None,
        learning_rate=None,
        learning_rates=None,
        rate_sweep_dir=tmp_path / "rate-sweep",
    )
    values.update(given)
    return argparse.Namespace(**values)


def _finish(folder: Path, task: str, variant: str, seed: int) -> None:
    run = folder / "runs" / task / variant / f"seed-{seed}"
    run.mkdir(parents=True)
    (run / "result.json").write_text('{"metrics": {"accuracy": 0.5}, "score": 0.5}')


def _pairs(jobs):
    """(stage, seed, task) of each job, in order."""
    return [(j[0], int(j[j.index("--seeds") + 1]), j[j.index("--tasks") + 1]) for j in jobs]


def test_finished_pairs_are_left_out_and_the_longest_start_first(protocol, tmp_path):
    args = _args(tmp_path, seeds=[1, 2])
    _finish(args.protocol_dir, "cola", "none", 1)
    _finish(args.protocol_dir, "cola", "keep", 1)  # cola seed 1: done
    _finish(args.protocol_dir, "mrpc", "none", 1)  # mrpc seed 1: keep still to run
    jobs = protocol._longest_first(protocol._protocol_jobs(args))
    assert _pairs(jobs) == [
        ("protocol", 1, "stsb"),
        ("protocol", 2, "stsb"),
        ("protocol", 1, "rte"),
        ("protocol", 2, "rte"),
        ("protocol", 1, "sst2"),
        ("protocol", 1, "mrpc"),
        ("protocol", 2, "sst2"),
        ("protocol", 2, "mrpc"),
        ("protocol", 2, "cola"),
    ]
    job = jobs[0]
    assert job[job.index("--variants") + 1 : job.index("--variants") + 3] == ["none", "keep"]
    assert job[job.index("--tisa-start") + 1] == "paper"
    assert float(job[job.index("--tisa-learning-rate") + 1]) == 5e-5


def test_a_position_learning_rate_reaches_every_job_and_run(protocol, tmp_path):
    args = _args(tmp_path, seeds=[1], tasks=["cola"], variants=["none"])
    (job,) = protocol._longest_first(protocol._protocol_jobs(args))
    assert "--position-learning-rate" not in job
    args.position_learning_rate = 0.0
    (job,) = protocol._longest_first(protocol._protocol_jobs(args))
    assert job[job.index("--position-learning-rate") + 1] == "0.0"
    config = protocol._protocol_config(args, "m", ("none",), args.protocol_dir)
    assert config.position_learning_rate == 0.0


def test_protocol_spawns_only_the_unfinished_pairs(protocol, tmp_path, monkeypatch):
    args = _args(tmp_path, seeds=[3], tasks=["rte", "cola", "mrpc"])
    _finish(args.protocol_dir, "rte", "none", 3)
    _finish(args.protocol_dir, "rte", "keep", 3)
    _finish(args.protocol_dir, "mrpc", "none", 3)
    cut_short = args.protocol_dir / "runs" / "mrpc" / "keep" / "seed-3"
    cut_short.mkdir(parents=True)
    (cut_short / "result.json").write_text("")  # as tisa glue sees it: not done
    spawned = []
    monkeypatch.setattr(protocol, "_spawn", lambda args, jobs: spawned.append(jobs))

    class Done:
        summary = []

    monkeypatch.setattr(protocol, "run_glue", lambda config: Done())
    monkeypatch.setattr(protocol, "_glue_dir", lambda given: "glue")
    assert protocol.protocol(args) == 0
    assert [_pairs(jobs) for jobs in spawned] == [
        [("protocol", 3, "mrpc"), ("protocol", 3, "cola")]
    ]


def test_all_runs_protocol_and_converted_as_one_pool(protocol, tmp_path, monkeypatch):
    model = tmp_path / "convert" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    args = _args(tmp_path, seeds=[1], tasks=["cola", "stsb"], converted_model=str(model))
    args.tisa_start = args.tisa_learning_rate = None  # all takes the sweep's choice
    calls = []
    monkeypatch.setattr(protocol, "sweep", lambda a: calls.append("sweep") or 0)
    monkeypatch.setattr(protocol, "_selected", lambda folder: ("paper-1e-02", "paper", 1e-2))
    monkeypatch.setattr(protocol, "_spawn", lambda a, jobs: calls.append(_pairs(jobs)))
    for stage in ("protocol", "converted", "summary"):
        monkeypatch.setattr(protocol, stage, lambda a, stage=stage: calls.append(stage) or 0)
    assert protocol.run_all(args) == 0
    assert calls == [
        "sweep",
        [("protocol", 1, "stsb"), ("converted", 1, "stsb"), ("protocol", 1, "cola")]
        + [("converted", 1, "cola")],
        "protocol",
        "converted",
        "summary",
    ]


def test_rate_sweep_chooses_the_best_held_out_pair_of_rates(protocol, tmp_path, monkeypatch):
    import json

    model = tmp_path / "convert" / "model"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights")
    args = _args(
        tmp_path,
        converted_model=str(model),
        learning_rates=[5e-5, 2e-4],
        position_learning_rates=[5e-5, 1e-2],
        tasks=["cola", "mrpc"],
    )
    held_out = {  # (learning rate, position rate) -> task -> score
        (5e-5, 5e-5): {"cola": 0.20, "mrpc": 0.80},
        (5e-5, 1e-2): {"cola": 0.30, "mrpc": 0.75},
        (2e-4, 5e-5): {"cola": 0.25, "mrpc": 0.79},
        (2e-4, 1e-2): {"cola": 0.10, "mrpc": 0.70},
    }
    configs, spawned = [], []

    class Done:
        def __init__(self, config):
            scores = held_out[config.learning_rate, config.position_learning_rate]
            self.runs = [
                {"task": t, "seed": s, "score": scores[t]}
                for t in config.tasks
                for s in config.seeds
            ]

    def run(config):
        configs.append(config)
        return Done(config)

    monkeypatch.setattr(protocol, "run_glue", run)
    monkeypatch.setattr(protocol, "_spawn", lambda a, jobs: spawned.extend(jobs))
    monkeypatch.setattr(protocol, "_glue_dir", lambda given: "glue")
    assert protocol.rate_sweep(args) == 0
    assert len(spawned) == 4 * 2  # (pair, seed)
    assert spawned[0][:7] == [
        "rate-sweep",
        "--learning-rates",
        "5e-05",
        "--position-learning-rates",
        "5e-05",
        "--seeds",
        "1",
    ]
    assert all(c.holdout == 0.1 and c.variants == ("none",) for c in configs)
    assert [(c.learning_rate, c.position_learning_rate) for c in configs] == list(held_out)
    assert configs[0].model_name.endswith("(tisa convert)")
    assert Path(configs[1].output_dir).name == "lr-5e-05-position-0.01"
    chosen = json.loads((args.rate_sweep_dir / "selection.json").read_text())
    assert chosen["selected"] == {"learning_rate": 5e-5, "position_learning_rate": 1e-2}
    text = (args.rate_sweep_dir / "selection.md").read_text()
    assert "Selected: --learning-rate 5e-05 --position-learning-rate 0.01." in text
    # the backbone's rate alone, and a tie: the first given wins, and it is said
    args = _args(tmp_path, learning_rates=[1e-4, 3e-4], tasks=["cola"], parallel=1)
    monkeypatch.setattr(
        protocol,
        "run_glue",
        lambda c: type(
            "R", (), {"runs": [{"task": "cola", "seed": s, "score": 0.0} for s in c.seeds]}
        )(),
    )
    protocol.rate_sweep(args)
    text = (args.rate_sweep_dir / "selection.md").read_text()
    assert "Selected: --learning-rate 0.0001 (a tie of 2: the first given)." in text
    with pytest.raises(ValueError, match="expected distinct rates >= 0"):
        protocol.rate_sweep(_args(tmp_path, position_learning_rates=[1e-3, 1e-3]))
    with pytest.raises(ValueError, match="expected distinct rates > 0"):
        protocol.rate_sweep(_args(tmp_path, learning_rates=[0.0]))


def test_protocol_runs_take_the_chosen_learning_rate(protocol, tmp_path):
    args = _args(tmp_path, seeds=[1], tasks=["cola"], variants=["none"], learning_rate=2e-4)
    (job,) = protocol._longest_first(protocol._protocol_jobs(args))
    assert job[job.index("--learning-rate") + 1] == "0.0002"
    assert protocol._protocol_config(args, "m", ("none",), args.protocol_dir).learning_rate == 2e-4
    args.learning_rate = None
    assert protocol._protocol_config(args, "m", ("none",), args.protocol_dir).learning_rate == 5e-5


def test_converted_jobs_check_the_model_first(protocol, tmp_path):
    args = _args(tmp_path, converted_model=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="no saved model"):
        protocol._converted_jobs(args)
    with pytest.raises(ValueError, match="pass --converted-model"):
        protocol._converted_jobs(_args(tmp_path))


def test_summary_of_chosen_seeds_and_tasks(protocol, tmp_path):
    """`summary --seeds 1 2` is the table of those seeds alone (e.g. the seeds every task
    has finished), whatever else the folders hold."""
    import json

    args = _args(tmp_path, seeds=[1, 2], summary_dir=tmp_path / "summary", model="m")
    for task in ("rte", "cola"):
        for variant in ("none", "keep"):
            for seed in (1, 2, 3):
                run = args.protocol_dir / "runs" / task / variant / f"seed-{seed}"
                run.mkdir(parents=True)
                score = 0.5 + 0.01 * seed + (0.02 if variant == "keep" else 0.0)
                result = {
                    "task": task,
                    "variant": variant,
                    "seed": seed,
                    "metrics": {"accuracy": score},
                    "score": score,
                    "positional_parameters": {"absolute": 8, "tisa": 0, "total": 8},
                }
                (run / "result.json").write_text(json.dumps(result))
    assert protocol.summary(args) == 0
    kept = json.loads((args.summary_dir / "results.json").read_text())
    assert sorted({r["seed"] for r in kept["runs"]}) == [1, 2]
    glue = {r["variant"]: r for r in kept["summary"] if r["task"] == "glue"}
    assert glue["none"]["score"] == pytest.approx(0.515)  # seeds 1 and 2: 0.51, 0.52
    args.tasks, args.seeds = ["cola"], None
    assert protocol.summary(args) == 0
    kept = json.loads((args.summary_dir / "results.json").read_text())
    assert {r["task"] for r in kept["runs"]} == {"cola"} and len(kept["runs"]) == 6
    args.tasks, args.seeds = None, [9]
    with pytest.raises(ValueError, match="for the --seeds / --tasks given"):
        protocol.summary(args)


def test_summary_compares_none_with_the_stock_runs_seed_by_seed(protocol, tmp_path, capsys):
    """parity.md and results.json set `none` beside experiments/glue_stock.py's run of the
    same task and seed; a missing --stock-dir is said, and a stock file that does not parse
    is named, not skipped."""
    import json
    import statistics

    args = _args(tmp_path, summary_dir=tmp_path / "summary")
    for seed, score in ((1, 0.5451263537906137), (2, 0.5667870036101083)):
        run = args.protocol_dir / "runs" / "rte" / "none" / f"seed-{seed}"
        run.mkdir(parents=True)
        result = {
            "task": "rte",
            "variant": "none",
            "seed": seed,
            "metrics": {"accuracy": score},
            "score": score,
            "positional_parameters": {"absolute": 8, "tisa": 0, "total": 8},
        }
        (run / "result.json").write_text(json.dumps(result))
    stock = {1: 0.5451263537906137, 2: 0.5703971119133574, 3: 0.56}  # seed 3: no none run
    (args.stock_dir / "rte").mkdir(parents=True)
    for seed, score in stock.items():
        path = args.stock_dir / "rte" / f"seed-{seed}.json"
        path.write_text(json.dumps({"task": "rte", "seed": seed, "metrics": {"accuracy": score}}))
    assert protocol.summary(args) == 0
    kept = json.loads((args.summary_dir / "results.json").read_text())
    rows = {r["seed"]: r for r in kept["parity_seedwise"]}
    assert sorted(rows) == [1, 2]
    assert rows[1]["identical"] is True and rows[1]["diff"] == 0.0
    assert rows[2]["identical"] is False
    assert rows[2]["diff"] == pytest.approx(0.5667870036101083 - 0.5703971119133574)
    parity = (args.summary_dir / "parity.md").read_text()
    assert "1 of 2 scores identical" in parity
    same = "| rte | 1 | accuracy | 0.5451263537906137 | 0.5451263537906137 | +0.0000 | yes |"
    other = "| rte | 2 | accuracy | 0.5667870036101083 | 0.5703971119133574 | -0.3610 | no |"
    assert same in parity and other in parity
    # over seeds, the reference is the stock runs themselves: mean and sd of their 3 seeds
    (over,) = kept["parity"]
    assert over["reference_seeds"] == 3
    assert over["reference_mean"] == pytest.approx(sum(stock.values()) / 3)
    assert over["reference_sd"] == pytest.approx(statistics.stdev(stock.values()))
    args.stock_dir = tmp_path / "elsewhere"  # no such folder: said, and no seed-by-seed table
    assert protocol.summary(args) == 0
    assert "--stock-dir" in capsys.readouterr().err
    assert not (args.summary_dir / "parity.md").exists()  # no stock runs, no parity
    assert json.loads((args.summary_dir / "results.json").read_text())["parity"] == []
    args.stock_dir = tmp_path / "stock"
    (args.stock_dir / "rte" / "seed-4.json").write_text('{"task": "rte"')  # cut short
    with pytest.raises(ValueError, match=r"--stock-dir: .*seed-4\.json is not a result"):
        protocol.summary(args)
