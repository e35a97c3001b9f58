import csv
import json
import math

import pytest
import torch

from tisa import demo, scoring


def test_scoring_function_values_cover_every_family():
    k, values = demo.scoring_function_values(num_heads=4, max_offset=8)
    assert k.tolist() == list(range(-8, 9))
    assert set(values) == set(scoring.REGISTRY)
    assert all(v.shape == (4, 17) for v in values.values())
    # ALiBi is fixed: -m_h |k|, zero at k = 0 and symmetric
    torch.testing.assert_close(values["alibi"], values["alibi"].flip(-1))
    assert values["alibi"][:, 8].abs().max() == 0


def test_demo_end_to_end_writes_report(tmp_path):
    from tisa.cli import main

    out = tmp_path / "demo"
    assert (
        main(["demo", "--output-dir", str(out), "--pretrain-steps", "4", "--glue-steps", "2"]) == 0
    )
    html = (out / "report.html").read_text()
    for heading in (
        "Positional scoring functions",
        "Translation invariance of",
        "Attention speed",
        "Pretraining and length extrapolation",
        "GLUE fine-tuning",
    ):
        assert heading in html
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
