import csv
import json
import math

import pytest
import torch

from tisa import scoring
from tisa.demo import sections
from tisa.demo.config import DemoConfig


def test_scoring_function_values_cover_every_family():
    k, values = sections.scoring_function_values(num_heads=4, max_offset=8)
    assert k.tolist() == list(range(-8, 9))
    assert set(values) == set(scoring.REGISTRY)
    assert all(v.shape == (4, 17) for v in values.values())
    # ALiBi is fixed: -m_h |k|, zero at k = 0 and symmetric
    torch.testing.assert_close(values["alibi"], values["alibi"].flip(-1))
    assert values["alibi"][:, 8].abs().max() == 0


@pytest.mark.slow  # the whole job end to end; the slow tier (CI runs it)
def test_demo_end_to_end_writes_report(tmp_path, capfd):
    from tisa.cli import main

    out = tmp_path / "demo"
    args = ["--pretrain-steps", "4", "--glue-steps", "2", "--ti-steps", "6"]
    # the analysis nulls and the conversion are tested on their own (tests/analysis, slow)
    args += ["--convert-steps", "0", "--no-analysis-nulls"]
    assert main(["demo", "--output-dir", str(out), *args]) == 0
    html = (out / "report.html").read_text()
    for heading in (
        "Positional scoring functions",
        "Translation invariance of",
        "Attention speed",
        "Pretraining and length extrapolation",
        "Translation invariance of an absolute run over training",
        "GLUE fine-tuning",
    ):
        assert heading in html
    assert "Converting a pretrained model" not in html  # --convert-steps 0 skips it
    assert "null baselines were not computed" in html
    # the numbers behind the report, not only the files
    (model,) = json.loads((out / "analysis" / "metrics.json").read_text())["models"]
    emb = model["position_embeddings"]
    assert model["absolute_positions"] and emb["length"] == model["num_positions"]
    assert 0.0 < emb["ti_gram"] <= 1.0 and 0.0 < emb["ti_cosine"] <= 1.0
    ti = model["layer1"]["raw"]["ti"]
    assert len(ti) == model["num_heads"] and all(0.0 <= t <= 1.0 for t in ti)
    assert model["layer1"]["raw"]["ti_mean"] == pytest.approx(sum(ti) / len(ti))
    rows = list(csv.DictReader((out / "extrapolation" / "extrapolation.csv").open()))
    assert {r["run"] for r in rows} == {"absolute", "tisa"}
    for r in rows:
        if r["status"] == "ok":
            loss = float(r["loss"])
            assert 0.0 < loss < 20.0 and int(r["masked_tokens"]) > 0
            assert float(r["perplexity"]) == pytest.approx(math.exp(loss), rel=1e-9)
    # the absolute table ends at its length; TISA scores every length
    longest = max(int(r["length"]) for r in rows)
    status = {(r["run"], int(r["length"])): r["status"] for r in rows}
    assert all(status[("tisa", int(r["length"]))] == "ok" for r in rows)
    assert status[("absolute", longest)] == "n/a"
    # every checkpoint of the tiny run is kept and measured, each figure with its nulls
    checkpoints = sorted((out / "pretrain-ti" / "absolute").glob("checkpoint-*"))
    assert len(checkpoints) == 6
    assert "shuffled" in html and "off-diag." in html
    assert (out / "ti_over_training.png").stat().st_size > 1000
    # demo.json: the time of every stage, the TI over training and where they came from
    record = json.loads((out / "demo.json").read_text())
    assert set(record["stages_s"]) == {
        "scoring functions", "analysis", "attention benchmark", "pretraining",
        "TI over training", "GLUE",
    }
    assert record["elapsed_s"] >= sum(record["stages_s"].values()) - 0.1
    assert record["ti_over_training"]["steps"] == [1, 2, 3, 4, 5, 6]
    assert record["settings"]["ti_steps"] == 6 and record["provenance"]["command"]
    # a console a person can read: bars and one line per stage, no raw logs
    console = capfd.readouterr()
    text = console.out + console.err
    assert text.count("\n") < 60, text
    assert "Traceback" not in text and "{'loss'" not in text and "{'eval_loss'" not in text
    assert console.out.splitlines()[-1].startswith("report: ")  # the bars go to stderr


def test_ti_trend_text_follows_the_figures():
    from tisa.analysis.nulls import compare_to_nulls, gram_ti
    from tisa.analysis.training import TrainingTI

    torch.manual_seed(0)
    noise = torch.randn(32, 8)  # no order: every figure within its null
    k = torch.arange(32.0)[:, None] * torch.arange(1, 5)[None] / 32
    ordered = torch.cat([torch.sin(k), torch.cos(k)], 1)  # sinusoidal: TI near 1
    for tables, trend in (([noise, noise, noise], False), ([noise, ordered, ordered], True)):
        rows, nulls = [], []
        for step, t in zip((10, 20, 30), tables, strict=True):
            b = compare_to_nulls(t, lambda x: gram_ti(x, exclude_diagonal=True), draws=8)
            rows.append(
                dict(
                    step=step, ti_gram=0.5, ti_fp_raw=0.1, ti_fp_ln=0.1, ti_gram_offdiag=b.observed
                )
            )
            nulls.append({k: b for k in ("ti_gram", "ti_gram_offdiag", "ti_fp_raw", "ti_fp_ln")})
        text = sections._ti_trend_text(TrainingTI.from_rows("run", rows, nulls=nulls), 30)
        assert ("shows no trend" in text) is not trend
        if trend:
            assert (
                f"{rows[0]['ti_gram_offdiag']:.3f}" in text
                and f"{rows[-1]['ti_gram_offdiag']:.3f}" in text
            )


@pytest.mark.slow
def test_demo_conversion_section(tmp_path):
    rows = []
    section = sections.conversion_section(tmp_path, DemoConfig(convert_steps=2), rows)
    html = section.heading + str(section.tables)
    assert "Converting a pretrained model" in html
    assert any("1024 tokens" in r[0] for r in rows)
    assert (tmp_path / "convert" / "metrics.json").is_file()


def test_demo_refuses_a_pretraining_run_made_with_other_settings(tmp_path, monkeypatch):
    """The demo's pretraining reuses a finished run only if it was trained with the demo's
    steps, seed and scoring rate (pretrain_or_reuse's must_match)."""
    seen = []

    def record(config, *, must_match=(), ti_measure=None):
        seen.append(set(must_match))
        raise ValueError("stop")

    monkeypatch.setattr(sections, "pretrain_or_reuse", record)
    with pytest.raises(ValueError, match="stop"):
        sections.pretraining_section(tmp_path, DemoConfig(), [])
    assert seen and {"max_steps", "seed", "tisa_learning_rate"} <= seen[0]


@pytest.mark.slow
def test_demo_console_offline_is_short_and_says_why_glue_is_skipped(tmp_path, monkeypatch):
    """The demo from a folder without GLUE data, offline: under 60 lines, no warning, no
    raw log, no traceback, and one line saying why the GLUE step is skipped."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    from tisa.data.glue import find_glue_dir

    monkeypatch.delenv("GLUE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    if find_glue_dir() is not None:  # e.g. a shared/ folder beside the temporary folders
        pytest.skip(f"GLUE data is reachable from {tmp_path}: {find_glue_dir()}")

    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(repo), HF_HUB_OFFLINE="1")
    env.pop("GLUE_DIR", None)
    args = ["--pretrain-steps", "4", "--glue-steps", "2", "--ti-steps", "6"]
    args += ["--convert-steps", "2", "--no-analysis-nulls"]
    proc = subprocess.run(
        [sys.executable, "-m", "tisa.cli", "demo", "--output-dir", "demo", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=3600,
    )
    text = (proc.stdout + proc.stderr).decode()  # not text=True: it makes a newline of \r
    assert proc.returncode == 0, text[-3000:]
    assert text.count("\n") < 60, text
    assert "Traceback" not in text and "{'loss'" not in text
    assert not re.search(r"^.*:\d+: \w*Warning: ", text, flags=re.MULTILINE), text
    (skipped,) = [line for line in text.splitlines() if "GLUE step skipped" in line]
    assert "offline mode is on" in skipped
