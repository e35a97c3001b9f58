"""``tisa longeval`` end to end on tiny models: files, resume, scores and bad input."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import torch

from tisa.cli import main
from tisa.longeval import run as run_lib
from tisa.longeval.config import LongEvalConfig
from tisa.longeval.results import CSV_COLUMNS, compare, retrieval_scores
from tisa.longeval.run import _cell_key, _read_cell, cell_path, load_encoder, longeval
from tisa.provenance import sha256_file
from tisa.stats import paired_difference

SMALL = dict(
    lengths=(96, 128),
    depths=(0.0, 1.0),
    seeds=(0,),
    candidates=3,
    passage_tokens=16,
    progress=False,
    threads=1,
)


def test_scores_share_ties_and_find_the_right_document():
    docs = torch.eye(3)
    assert retrieval_scores(docs, docs) == {"acc1": 1.0, "mrr": 1.0, "ranks": [1.0, 1.0, 1.0]}
    swapped = retrieval_scores(docs[[1, 0, 2]], docs)
    # query 0 ranks below document 1 and ties with document 2: ranks 2 and 3 shared
    assert swapped["acc1"] == pytest.approx(1 / 3) and swapped["ranks"][0] == 2.5
    same = retrieval_scores(torch.randn(3, 4), torch.ones(3, 4))  # every document alike
    assert same["acc1"] == pytest.approx(1 / 3) and same["ranks"] == [2.0, 2.0, 2.0]
    with pytest.raises(ValueError, match="queries, documents"):
        retrieval_scores(torch.ones(2, 4), torch.ones(3, 4))


def test_compare_pairs_tisa_with_every_alternative_by_seed():
    keys = [(0.0, 0), (1.0, 0), (0.0, 1), (1.0, 1), (0.0, 2), (1.0, 2)]

    def cells(model, strategy, scores, length=512):
        return [
            {"model": model, "strategy": strategy, "task": "passkey", "length": length,
             "depth": d, "seed": s, "acc1": v}
            for (d, s), v in zip(keys, scores)
        ]

    models = [{"name": "orig", "positions": 512}, {"name": "tisa", "positions": None}]
    rows = compare(
        cells("tisa", "native", [1.0, 0.9, 1.0, 1.0, 0.9, 1.0])
        + cells("orig", "chunk", [0.5, 0.5, 0.75, 0.5, 0.5, 0.5])
        + cells("orig", "truncate", [1.0, 1.0, 0.1, 0.1, 0.5, 0.5])
        + cells("orig", "chunk", [0.2, 0.3], length=1024)  # no TISA cells at 1024
        + cells("tisa", "native", [1.0, 1.0], length=2048)  # one seed is no comparison
        + cells("orig", "chunk", [1.0, 0.5], length=2048),
        models,
    )
    assert [(r["against_strategy"], r["length"]) for r in rows] == [
        ("chunk", 512),
        ("truncate", 512),
    ]
    chunk, truncate = rows
    # the unit is the seed: each seed's depths averaged, then paired over the three seeds
    want = paired_difference([0.95, 1.0, 0.95], [0.5, 0.625, 0.5])
    assert chunk["mean"] == pytest.approx(want.mean) and chunk["low"] == pytest.approx(want.low)
    assert chunk["n"] == 3 and chunk["cells"] == 6
    assert chunk["acc1"] == pytest.approx(5.8 / 6) and chunk["against_acc1"] == pytest.approx(
        3.25 / 6)
    assert chunk["low"] > 0 and chunk["best"] and not truncate["best"]  # 0.5417 > 0.5333
    assert truncate["low"] < 0 < truncate["high"]
    # Holm over the two: the smaller p doubled, the larger kept (but not below it)
    small, large = sorted([chunk["p"], truncate["p"]])
    assert sorted(r["p_holm"] for r in rows) == pytest.approx([2 * small, max(2 * small, large)])


def test_compare_pairs_cells_when_every_cell_was_drawn_on_its_own():
    def cells(model, scores):
        return [{"model": model, "strategy": "native" if model == "tisa" else "chunk",
                 "task": "passkey", "length": 4096, "depth": d, "seed": s, "acc1": v}
                for (s, v) in zip((0, 1), scores) for d in (0.0, 0.5, 1.0)]

    models = [{"name": "orig", "positions": 512}, {"name": "tisa", "positions": None}]
    both = cells("tisa", [1.0, 0.6]) + cells("orig", [0.5, 0.5])
    (row,) = compare(both, models, unit="cell")
    assert row["n"] == row["cells"] == 6 and row["unit"] == "cell"
    want = paired_difference([1.0] * 3 + [0.6] * 3, [0.5] * 6)
    assert row["low"] == pytest.approx(want.low) and row["low"] > 0
    assert compare(both, models)[0]["unit"] == "seed"
    with pytest.raises(ValueError, match="unit: expected seed or cell"):
        compare(both, models, unit="depth")


def test_compare_means_are_over_the_pairs_when_a_seed_lacks_a_depth():
    def cells(model, strategy, rows):
        return [{"model": model, "strategy": strategy, "task": "passkey", "length": 4096,
                 "depth": d, "seed": s, "acc1": v} for d, s, v in rows]

    models = [{"name": "orig", "positions": 512}, {"name": "tisa", "positions": None}]
    # seed 0 has two depths, seed 1 one: seed means 0.75 and 0.2 (cells would give 0.567)
    tisa = cells("tisa", "native", [(0.0, 0, 1.0), (1.0, 0, 0.5), (0.0, 1, 0.2)])
    orig = cells("orig", "chunk", [(0.0, 0, 0.5), (1.0, 0, 0.5), (0.0, 1, 0.1)])
    (row,) = compare(tisa + orig, models)
    assert row["acc1"] == pytest.approx(0.475) and row["against_acc1"] == pytest.approx(0.3)
    assert row["acc1"] - row["against_acc1"] == pytest.approx(row["mean"])
    assert row["n"] == 2 and row["cells"] == 3


def test_compare_counts_the_depths_of_a_seed_once():
    # depths that agree within each seed but seeds that disagree: 6 cells, 2 pairs
    def cells(model, scores):
        return [{"model": model, "strategy": "native" if model == "tisa" else "chunk",
                 "task": "passkey", "length": 4096, "depth": d, "seed": s, "acc1": v}
                for (s, v) in zip((0, 1), scores) for d in (0.0, 0.5, 1.0)]

    models = [{"name": "orig", "positions": 512}, {"name": "tisa", "positions": None}]
    (row,) = compare(cells("tisa", [1.0, 0.6]) + cells("orig", [0.5, 0.5]), models)
    assert row["n"] == 2 and row["cells"] == 6
    # over the six cells the interval would exclude 0; over the two seeds it does not
    assert paired_difference([1.0] * 3 + [0.6] * 3, [0.5] * 6).low > 0
    assert row["low"] < 0 < row["high"]


def test_compare_marks_the_best_alternative_among_other_models_only():
    def cells(model, strategy, scores):
        return [{"model": model, "strategy": strategy, "task": "passkey", "length": 4096,
                 "depth": 0.5, "seed": s, "acc1": v} for s, v in zip((0, 1, 2), scores)]

    models = [{"name": "orig", "positions": 512}, {"name": "tisa", "positions": None}]
    rows = compare(cells("tisa", "native", [1.0, 1.0, 1.0])
                   + cells("tisa", "chunk-2048", [0.9, 0.8, 0.9])
                   + cells("orig", "chunk", [0.5, 0.6, 0.5])
                   + cells("orig", "truncate", [0.4, 0.1, 0.1]), models)
    got = {(r["strategy"], r["against"], r["against_strategy"]): r["best"] for r in rows}
    # the windows' own whole-document reading scores highest but is no alternative
    assert got == {("native", "orig", "chunk"): True, ("native", "orig", "truncate"): False,
                   ("chunk-2048", "orig", "chunk"): True,
                   ("chunk-2048", "orig", "truncate"): False,
                   ("chunk-2048", "tisa", "native"): False}


def test_cli_writes_results_csv_and_report(tiny_bert, tiny_tisa, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "longeval",
        tiny_bert,
        tiny_tisa,
        "--lengths",
        "96",
        "--depths",
        "0",
        "--seeds",
        "0",
        "1",
        "--candidates",
        "3",
        "--tasks",
        "passkey",
        "--threads",
        "1",
        "--strategies",
        "truncate",
        "--no-progress",
        "--output-dir",
        str(out),
    ]
    assert main(argv) == 0
    assert "cells: 4 (4 computed, 0 kept)" in capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    prov = results["provenance"]
    assert prov["command"] == "tisa " + " ".join(argv) and prov["threads"] == 1
    assert {"commit", "torch", "cpu", "cpu_count", "transformers"} <= set(prov)
    assert [m["strategies"] for m in results["models"]] == [["truncate"], ["native"]]
    # which weights were read: the digest tisa convert records for its model/ folder
    assert [m["weights_sha256"] for m in results["models"]] == [
        sha256_file(Path(folder) / "model.safetensors") for folder in (tiny_bert, tiny_tisa)]
    cells = results["cells"]
    assert len(cells) == 4 and all(0 <= c["acc1"] <= 1 for c in cells)
    assert all(84 <= c["tokens_max"] <= 96 and c["seconds_per_document"] > 0 for c in cells)
    with open(out / "results.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and tuple(rows[0]) == CSV_COLUMNS
    assert [r["strategy"] for r in rows] == ["truncate", "truncate", "native", "native"]
    assert len(results["summary"]) == 2
    (row,) = results["comparisons"]  # TISA against the one alternative, over 2 seeds
    assert (row["model"], row["against"], row["against_strategy"]) == (
        tiny_tisa, tiny_bert, "truncate"
    )
    assert row["n"] == row["cells"] == 2 and row["best"]
    assert row["low"] <= row["mean"] <= row["high"]
    html = (out / "report.html").read_text()
    assert "Where the evidence sits" in html and "Cost per document" in html
    assert "Paired comparisons" in html
    assert html.count("data:image/png;base64,") == 3  # accuracy, a heatmap, cost


def test_a_tisa_model_runs_chunk_w_beside_native(tiny_bert, tiny_tisa, tmp_path, monkeypatch):
    from tisa.longeval import run as run_lib

    monkeypatch.setattr(run_lib, "write_longeval_report", lambda path, results: path)
    config = LongEvalConfig(models=(tiny_bert, tiny_tisa), output_dir=str(tmp_path),
                            tasks=("passkey",), strategies=("chunk", "chunk-100"),
                            **{**SMALL, "lengths": (128,), "depths": (1.0,), "seeds": (0, 1)})
    results = longeval(config).results
    # the table of 64 rows cannot read windows of 100 tokens; the TISA model can
    assert [m["strategies"] for m in results["models"]] == [["chunk"], ["native", "chunk-100"]]
    got = {(c["model"], c["strategy"]) for c in results["cells"]}
    assert got == {(tiny_bert, "chunk"), (tiny_tisa, "native"), (tiny_tisa, "chunk-100")}
    assert cell_path(tmp_path, tiny_tisa, "chunk-100", "passkey", 128, 1.0, 0).is_file()
    pairs = {(r["strategy"], r["against"], r["against_strategy"]) for r in results["comparisons"]}
    # its own two strategies compared once: windows against the whole document
    assert pairs == {("chunk-100", tiny_bert, "chunk"), ("native", tiny_bert, "chunk"),
                     ("chunk-100", tiny_tisa, "native")}


@pytest.mark.slow
def test_every_task_and_strategy_end_to_end(tiny_bert, tiny_tisa, tmp_path):
    config = LongEvalConfig(
        models=(tiny_bert, tiny_tisa),
        output_dir=str(tmp_path),
        strategies=("truncate", "chunk", "interpolate", "copy"),
        **SMALL,
    )
    result = longeval(config)
    cells = result.results["cells"]
    # 2 lengths x 3 tasks x 2 depths x 1 seed, for 5 (model, strategy) pairs
    assert result.computed == len(cells) == 60
    assert all(c["tokens_max"] <= c["length"] and 0 <= c["acc1"] <= 1 for c in cells)
    html = result.report.read_text()
    assert html.count("data:image/png;base64,") == 1 + 3 + 1  # accuracy, 3 heatmaps, cost


def test_a_rerun_skips_finished_cells(tiny_bert, tmp_path, monkeypatch):
    from tisa.longeval import run as run_lib

    # the report is another test's business; drawing it twice would take most of the time
    monkeypatch.setattr(run_lib, "write_longeval_report", lambda path, results: path)
    config = LongEvalConfig(
        models=(tiny_bert,),
        output_dir=str(tmp_path),
        tasks=("passkey",),
        strategies=("chunk",),
        **SMALL,
    )
    first = longeval(config)
    assert first.computed == 4
    path = cell_path(tmp_path, tiny_bert, "chunk", "passkey", 128, 1.0, 0)
    saved = json.loads(path.read_text())
    saved["acc1"] = 0.123  # a marker: a kept cell is read, not recomputed
    path.write_text(json.dumps(saved))
    cell_path(tmp_path, tiny_bert, "chunk", "passkey", 96, 0.0, 0).unlink()  # interrupted
    again = longeval(config)
    assert again.computed == 1
    kept = [c for c in again.results["cells"] if c["length"] == 128 and c["depth"] == 1.0]
    assert kept[0]["acc1"] == 0.123
    # a cell saved with other settings, or of another model in the same folder, is not
    # taken for this one
    other = LongEvalConfig(**{**config.__dict__, "candidates": 4})
    where = dict(model=tiny_bert, strategy="chunk", task="passkey", length=128, depth=1.0, seed=0)
    facts = load_encoder(tiny_bert)[1]
    assert _read_cell(path, _cell_key(config, facts, **where)) is not None
    assert _read_cell(path, _cell_key(other, facts, **where)) is None
    changed = {**facts, "fingerprint": facts["fingerprint"][::-1]}
    assert _read_cell(path, _cell_key(config, changed, **where)) is None
    # a strategy revised since (its version) is computed again; version 1 keys as before
    # (the fields of a key written before versions, draws and text digests were added)
    assert set(_cell_key(config, facts, 1, **where)) == {
        *where, "model_fingerprint", "pooling", "tasks_version", "candidates",
        "passage_tokens", "text_file", "batch_size"}
    assert _read_cell(path, _cell_key(config, facts, 1, **where)) is not None
    assert _read_cell(path, _cell_key(config, facts, 2, **where)) is None
    # documents drawn per cell are other documents
    per_cell = LongEvalConfig(**{**config.__dict__, "draw": "cell"})
    assert _read_cell(path, _cell_key(per_cell, facts, **where)) is None


def test_a_text_file_is_keyed_by_its_content(tmp_path):
    text = tmp_path / "text.txt"
    text.write_text("one two three\n")
    config = LongEvalConfig(models=("m",), output_dir=str(tmp_path / "out"),
                            text_file=str(text))
    facts = {"fingerprint": "f", "pooling": "mean"}
    before = _cell_key(config, facts)
    text.write_text("one two four\n")
    run_lib._text_sha256.cache_clear()
    assert _cell_key(config, facts) != before


def test_a_model_changed_in_its_folder_is_evaluated_again(tiny_tisa, tmp_path, monkeypatch):
    """The cells are keyed by the model's weights and config, not only its path: a
    converted model given log-n scaling in the same folder is scored anew."""
    import shutil

    from tisa.longeval import run as run_lib

    monkeypatch.setattr(run_lib, "write_longeval_report", lambda path, results: path)
    folder = tmp_path / "model"
    shutil.copytree(tiny_tisa, folder)
    config = LongEvalConfig(
        models=(str(folder),), output_dir=str(tmp_path / "run"), tasks=("passkey",), **SMALL
    )
    assert longeval(config).computed == 4
    assert longeval(config).computed == 0
    settings = json.loads((folder / "config.json").read_text())
    settings["tisa"]["length_scale"] = 64
    (folder / "config.json").write_text(json.dumps(settings))
    assert longeval(config).computed == 4


def _error(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith("tisa longeval: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--lengths", "0", "128"], "lengths must be an integer >= 1, got 0"),
        (
            ["--tasks", "passkey", "poem"],
            "tasks: expected distinct names from passkey, needle, "
            "passage; got ['passkey', 'poem'] ('poem' unknown)",
        ),
        (["--strategies", "stretch"], "('stretch' unknown)"),
        (["--strategies", "chunk-x"], "from truncate, chunk, interpolate, copy, "
         "context-extension, chunk-W; got ['chunk-x'] ('chunk-x' unknown)"),
        (["--strategies", "chunk-2048"], "reads at most 64 tokens and can run none of chunk-2048"),
        (["--strategies", "chunk-2"], "chunk-2: a window must hold more than the 2 special"),
        (["--depths", "1.5"], "depths: expected numbers in [0, 1], got 1.5"),
        (["--draw", "depth"], "draw: expected seed or cell, got 'depth'"),
        (["--depths", "0.1", "0.1001"], "depths: expected depths that differ in the first "
         "three decimals, got [0.1, 0.1001]"),
        (["--strategies", "chunk-0032", "chunk-32"], "strategies: expected distinct names"),
        (["--lengths", "8"], "lengths: 8 tokens cannot hold a needle"),
        (["--text-file", "nowhere.txt"], "text_file: no such file: 'nowhere.txt'"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument(tiny_bert, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    assert main(["longeval", tiny_bert, "--output-dir", str(out), "--no-progress", *extra]) == 2
    assert message in _error(capsys)
    assert not out.exists()  # nothing written


def test_a_text_too_short_for_the_longest_length_fails_before_any_cell(
        tiny_bert, tmp_path, capsys):
    text = tmp_path / "short.txt"
    text.write_text(" ".join(["word"] * 150) + "\n")  # enough for 96 tokens, not 4,096
    out = tmp_path / "out"
    argv = ["longeval", tiny_bert, "--output-dir", str(out), "--no-progress", "--tasks",
            "needle", "--text-file", str(text), "--lengths", "96", "4096"]
    assert main(argv) == 2
    assert "text_file: 150 words; the needle task needs 4112" in _error(capsys)
    assert not out.exists()


def test_bad_models_and_folders(tiny_bert, tmp_path, capsys):
    taken = tmp_path / "file"
    taken.write_text("x")
    assert main(["longeval", tiny_bert, "--output-dir", str(taken)]) == 2
    assert "--output-dir: " in _error(capsys)
    assert main(["longeval", str(tmp_path / "none"), "--output-dir", str(tmp_path / "o")]) == 2
    assert "models: " in (err := _error(capsys)) and "no such folder" in err
    with pytest.raises(ValueError, match="models: each model once"):
        LongEvalConfig(models=(tiny_bert, tiny_bert))
