"""The attention benchmark: variants, threads, outputs checked before the run."""

from __future__ import annotations

import json

import pytest
import torch

from tisa import bench, cli


def test_a_small_run_measures_the_chosen_variants(tmp_path):
    cfg = bench.AttentionBenchConfig(
        lengths=(33,),
        forward_only_lengths=(),
        batch=2,
        heads=3,
        head_dim=8,
        repeats=1,
        variants=("sdpa + rbf", "sdpa + constant mask (limit)"),
        threads=1,
    )
    before = torch.get_num_threads()
    rows = bench.run_attention_benchmark(cfg, progress=False)
    assert torch.get_num_threads() == before  # restored
    got = {(r["pass"], r["variant"]) for r in rows}
    assert got == {
        (p, v)
        for p in ("fwd+bwd", "fwd")
        for v in ("sdpa, no bias (baseline)", "sdpa + rbf", "sdpa + constant mask (limit)")
    }
    for r in rows:
        assert r["seconds"] > 0 and r["time_ratio"] > 0
        if r["variant"].startswith("sdpa, no bias"):
            assert r["time_ratio"] == 1.0
    assert "| fwd | 33 | sdpa + rbf |" in bench.format_table(rows)


def test_a_run_may_time_the_forward_only():
    cfg = bench.AttentionBenchConfig(
        lengths=(),
        forward_only_lengths=(600,),  # past the window variant's 2 * 255 + 1 keys
        batch=1,
        heads=3,
        head_dim=8,
        repeats=1,
        variants=("sdpa + rbf", "sdpa + rbf, window ±255"),
        threads=1,
    )
    rows = bench.run_attention_benchmark(cfg, progress=False)
    names = ("sdpa, no bias (baseline)", "sdpa + rbf", "sdpa + rbf, window ±255")
    assert {(r["pass"], r["variant"]) for r in rows} == {("fwd", v) for v in names}
    with pytest.raises(ValueError, match="both empty"):
        bench.AttentionBenchConfig(lengths=(), forward_only_lengths=())


def test_cli_checks_outputs_and_names_before_running(tmp_path, capsys):
    cases = [
        (["--output", str(tmp_path)], "is a folder"),
        (["--json", str(tmp_path / "missing" / "r.json")], "does not exist or is not writable"),
        (["--variants", "sdpa + magic"], "unknown variants ['sdpa + magic']"),
        (["--threads", "0"], "threads must be an integer >= 1, got 0"),
    ]
    for extra, message in cases:
        assert cli.main(["bench", "attention", *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("tisa bench: error: ") and message in err, err
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_cli_writes_table_and_json(tmp_path, capsys):
    md, js = tmp_path / "t.md", tmp_path / "t.json"
    args = ["bench", "attention", "--lengths", "17", "--forward-only-lengths", "--batch", "1"]
    args += [
        "--heads",
        "2",
        "--head-dim",
        "4",
        "--repeats",
        "1",
        "--threads",
        "1",
        "--clock",
        "cpu",
    ]
    args += ["--variants", "sdpa + rbf", "--output", str(md), "--json", str(js)]
    assert cli.main(args) == 0
    assert "1 threads, cpu clock" in capsys.readouterr().out
    assert "sdpa + rbf" in md.read_text()
    written = json.loads(js.read_text())
    assert {r["variant"] for r in written["rows"]} == {"sdpa, no bias (baseline)", "sdpa + rbf"}
    assert set(written["provenance"]) == {
        "commit", "dirty", "command", "torch", "transformers", "python", "cpu", "cpu_count",
        "threads", "gpu", "date",
    }
    assert written["provenance"]["threads"] == 1
    assert written["config"]["runs"] == 3 and written["config"]["layout"] == "bhld"
    for r in written["rows"]:  # the raw timings: 3 runs of 1 round
        assert [len(run) for run in r["samples"]] == [1, 1, 1]


def test_runs_and_layouts_give_the_median_over_runs():
    cfg = bench.AttentionBenchConfig(
        lengths=(),
        forward_only_lengths=(24,),
        batch=2,
        heads=3,
        head_dim=8,
        repeats=2,
        variants=("sdpa + rbf",),
        threads=1,
        runs=3,
        layout="both",
    )
    rows = bench.run_attention_benchmark(cfg, progress=False)
    assert {(r["layout"], r["variant"]) for r in rows} == {
        (layout, v) for layout in ("bhld", "hf") for v in ("sdpa, no bias (baseline)", "sdpa + rbf")
    }
    for r in rows:
        assert len(r["run_ratios"]) == 3 and [len(s) for s in r["samples"]] == [2, 2, 2]
        assert r["time_ratio"] == sorted(r["run_ratios"])[1]
        assert (r["time_ratio_low"], r["time_ratio_high"]) == (
            min(r["run_ratios"]),
            max(r["run_ratios"]),
        )
    assert "range over runs" in bench.format_table(rows)
    with pytest.raises(ValueError, match="layout must be one of"):
        bench.AttentionBenchConfig(layout="blhd")
    with pytest.raises(ValueError, match="runs must be an integer >= 1"):
        bench.AttentionBenchConfig(runs=0)


def test_run_metadata_names_the_code_and_the_machine():
    from tisa.provenance import run_metadata

    meta = run_metadata(["tisa", "bench", "attention", "--variants", "sdpa + rbf"])
    assert meta["command"] == "tisa bench attention --variants 'sdpa + rbf'"
    assert meta["torch"] == torch.__version__ and meta["threads"] == torch.get_num_threads()
    assert meta["commit"] is None or len(meta["commit"]) == 40
    assert meta["cpu"] and meta["date"].endswith("+00:00")


def test_round_ratios_pair_each_round_with_the_baseline():
    samples = {"base": [1.0, 2.0, 4.0], "slow": [1.1, 2.4, 4.4]}  # the machine drifts 4x
    ratios = bench.round_ratios(samples, "base")
    assert ratios["base"] == {"median": 1.0, "low": 1.0, "high": 1.0}
    assert ratios["slow"]["median"] == pytest.approx(1.1)
    assert (ratios["slow"]["low"], ratios["slow"]["high"]) == pytest.approx((1.1, 1.2))


def test_interleaved_samples_calls_in_rounds():
    calls = []
    fns = {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}
    samples = bench.interleaved_samples(fns, repeats=3)
    assert calls == ["a", "b"] * 4  # one warm-up, then three rounds
    assert [len(t) for t in samples.values()] == [3, 3]


def test_content_variants_time_the_band_in_inference_and_the_dense_term_in_training():
    names = ("sdpa + rbf + content ±16, band", "sdpa + rbf + content ±16, dense",
             "sdpa + rbf + content ±16 (zero beyond), band")
    cfg = bench.AttentionBenchConfig(lengths=(40,), forward_only_lengths=(), batch=2, heads=3,
                                     head_dim=8, repeats=1, variants=names, threads=1, runs=1)
    rows = bench.run_attention_benchmark(cfg, progress=False)
    base = "sdpa, no bias (baseline)"
    assert {(r["pass"], r["variant"]) for r in rows} == {
        *(("fwd", v) for v in (base, *names)), ("fwd+bwd", base), ("fwd+bwd", names[1])}


def test_the_band_and_the_dense_content_term_give_the_same_attention():
    gen = torch.Generator().manual_seed(0)
    content = bench._content(3, 8, "clip", gen)
    q, k, v = (torch.randn(2, 3, 40, 8, generator=gen) for _ in range(3))
    assert content.key_vectors.abs().sum() > 0  # random, not the zeros of a new term
    rbf = bench.scoring.build("rbf", num_heads=3)
    with torch.no_grad():
        banded = bench.attention(q, k, v, rbf, band_term=content.band(q, k, 8**-0.5),
                                 backend="sdpa")
        dense = bench.attention(q, k, v, rbf, mask=content(q, k, 8**-0.5), backend="sdpa")
        plain = bench.attention(q, k, v, rbf, backend="sdpa")
    torch.testing.assert_close(banded, dense)
    assert not torch.allclose(banded, plain, atol=1e-3)
