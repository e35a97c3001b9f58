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
    assert (out / "analysis" / "metrics.json").is_file()
    assert (out / "extrapolation" / "extrapolation.csv").is_file()
