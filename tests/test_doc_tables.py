"""The README's and the docs' tables are what the committed result files give."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tisa import doc_tables
from tisa.doc_tables import ROOT


def test_every_table_matches_its_result_files() -> None:
    problems = doc_tables.check(ROOT)
    assert problems == [], "run `python -m tisa.doc_tables`:\n" + "\n".join(problems)


def test_every_result_file_is_read_by_a_table() -> None:
    assert doc_tables.unclaimed_files(ROOT) == []


def test_every_table_declares_files_that_exist() -> None:
    for table in doc_tables.TABLES.values():
        found = doc_tables._glob(ROOT, table.sources)
        assert found, f"table {table.name!r} reads no committed file"


def _mini_repo(tmp_path: Path) -> Path:
    """A copy of the pages and of the result files one table reads."""
    root = tmp_path / "repo"
    summary = Path(doc_tables.GLUE_SUMMARY)
    (root / summary.parent).mkdir(parents=True)
    shutil.copy(ROOT / summary, root / summary)
    (root / "docs").mkdir()
    (root / "README.md").write_text(
        "intro\n<!-- table: glue-paired -->\nold text\n<!-- /table -->\nafter\n"
    )
    return root


def test_check_finds_drift_and_update_rewrites_only_the_table(tmp_path: Path) -> None:
    root = _mini_repo(tmp_path)
    problems = doc_tables.check(root)
    assert "README.md: table 'glue-paired' differs from its result files" in problems
    assert (root / "README.md").read_text().count("old text") == 1  # check changes nothing
    doc_tables.update(root)
    text = (root / "README.md").read_text()
    assert text.startswith("intro\n<!-- table: glue-paired -->\n| variant |")
    assert text.endswith("<!-- /table -->\nafter\n")
    assert not [p for p in doc_tables.check(root) if "glue-paired" in p]


def test_a_changed_result_file_is_drift(tmp_path: Path) -> None:
    root = _mini_repo(tmp_path)
    doc_tables.update(root)
    path = root / doc_tables.GLUE_SUMMARY
    data = json.loads(path.read_text())
    row = next(r for r in data["summary"] if r["variant"] == "keep" and r["task"] == "cola")
    row["paired"]["mean_diff"] += 0.01  # one figure moves by 1 point
    path.write_text(json.dumps(data))
    assert "README.md: table 'glue-paired' differs from its result files" in doc_tables.check(root)


def test_unknown_marker_and_missing_file_are_named(tmp_path: Path) -> None:
    root = _mini_repo(tmp_path)
    (root / "docs" / "x.md").write_text("<!-- table: no-such-table -->\n<!-- /table -->\n")
    assert "docs/x.md: marker names no registered table: 'no-such-table'" in doc_tables.check(
        root
    )
    (root / doc_tables.GLUE_SUMMARY).unlink()
    with pytest.raises(FileNotFoundError, match="glue/summary/results.json"):
        doc_tables.check(root)


def test_cli_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _mini_repo(tmp_path)
    assert doc_tables.main(["--check", "--root", str(root)]) == 1
    assert "differs from its result files" in capsys.readouterr().out
    (root / doc_tables.GLUE_SUMMARY).write_text("{not json")
    assert doc_tables.main(["--check", "--root", str(root)]) == 2
    assert "not valid JSON" in capsys.readouterr().err


def test_offset_folders_of_other_settings_are_not_compared(tmp_path: Path) -> None:
    from tisa.doc_tables.pretrain import offset_across_folders

    settings = {"size": "small", "train_length": 128, "eval_lengths": [128, 256],
                "steps": 4000, "seeds": [0, 1, 2]}
    files = {"a": (4000, "alibi"), "b": (2000, "fire"), "c": (4000, "alibi"), "d": (4000, None)}
    for name, (steps, position) in files.items():
        runs = {} if position is None else {"0": {position: {}}}
        (tmp_path / f"{name}.json").write_text(
            json.dumps({"settings": settings | {"steps": steps}, "runs": runs}))
    with pytest.raises(ValueError, match=r"b.json: settings differ from a.json's: steps 2000 "
                                         r"\(not 4000\)"):
        offset_across_folders(tmp_path, "a.json", "b.json")
    with pytest.raises(ValueError, match="c.json: alibi is in a.json too"):
        offset_across_folders(tmp_path, "a.json", "c.json")
    with pytest.raises(ValueError, match="d.json: holds no runs"):
        offset_across_folders(tmp_path, "a.json", "d.json")



def test_longeval_comparisons_name_a_converted_models_reading_in_windows(
        tmp_path: Path) -> None:
    from tisa.doc_tables.longeval import longeval_comparisons

    def cells(model, strategy, per_seed):  # one depth, a cell per seed
        return [{"model": model, "strategy": strategy, "task": "passkey", "length": 4096,
                 "depth": 0.5, "seed": seed, "acc1": acc1}
                for seed, acc1 in enumerate(per_seed)]

    native = cells("conv", "native", [0.9, 0.91, 0.89])
    windows = cells("conv", "chunk-2048", [0.97, 0.99, 0.95])
    chunk = cells("orig", "chunk", [0.98, 0.98, 0.98])
    results = {"settings": {"tasks": ["passkey"]},
               "models": [{"name": "orig", "positions": 512},
                          {"name": "conv", "positions": None, "tisa": True}],
               "cells": native + windows + chunk}
    (tmp_path / "r.json").write_text(json.dumps(results))
    text = longeval_comparisons(tmp_path, path="r.json")
    assert "| converted, read as |" in text.splitlines()[0]
    assert ("| passkey | 4,096 | converted (TISA), chunk-2048 | converted (TISA), whole "
            "document | 97.0 | 90.0 |") in text
    assert ("| passkey | 4,096 | converted (TISA), whole document | original, chunk (best) | "
            "90.0 | 98.0 |") in text and "converted behind" in text
    # the comparisons are computed from the cells, paired by seed, not read from the file
    results["comparisons"] = [{"stale": True}]
    (tmp_path / "r.json").write_text(json.dumps(results))
    assert longeval_comparisons(tmp_path, path="r.json") == text
    # ... and paired as the run drew its documents (settings.draw): two depths of one seed
    two = [{**c, "depth": d, "seed": 0, "acc1": c["acc1"] + d / 100} for c in chunk[:1]
           + native[:1] for d in (0.0, 0.5)]
    by_cell = {**results, "cells": two, "settings": {"tasks": ["passkey"], "draw": "cell"}}
    (tmp_path / "c.json").write_text(json.dumps(by_cell))
    assert "| passkey | 4,096 | chunk (best) | 90.3 | 98.2 |" in longeval_comparisons(
        tmp_path, path="c.json")  # by seed there would be one pair, no comparison
    (tmp_path / "s.json").write_text(json.dumps({**by_cell, "settings": {"tasks": [
        "passkey"]}}))
    assert "chunk (best)" not in longeval_comparisons(tmp_path, path="s.json")
    # a run without windows keeps the table as it was: no reading column
    results["cells"] = native + chunk
    (tmp_path / "r.json").write_text(json.dumps(results))
    plain = longeval_comparisons(tmp_path, path="r.json")
    assert "reading |" in plain and "converted, read as" not in plain
    assert "| passkey | 4,096 | chunk (best) | 90.0 | 98.0 |" in plain
    # alternatives with the same scores share a row, marked best when any of them is
    results["cells"] = cells("conv", "native", [0.98] * 3) + windows + chunk
    (tmp_path / "r.json").write_text(json.dumps(results))
    tied = longeval_comparisons(tmp_path, path="r.json")
    assert "| converted (TISA), whole document = original, chunk (best) |" in tied


def test_a_target_with_tasks_still_running_is_not_yet_known(tmp_path: Path) -> None:
    """The per-model GLUE target: unknown while a task lacks seeds, unless a finished task
    already fails it; met only when every task is finished and none lies wholly below 0."""
    from tisa.doc_tables.glue import GLUE_PER_MODEL_RATES
    from tisa.doc_tables.targets import _glue_per_model

    def write(model: str, task: str, scores: list[float]) -> None:
        for seed, score in enumerate(scores, start=1):
            folder = tmp_path / GLUE_PER_MODEL_RATES[model] / "runs" / task / "none"
            (folder / f"seed-{seed}").mkdir(parents=True, exist_ok=True)
            (folder / f"seed-{seed}" / "result.json").write_text(
                json.dumps({"seed": seed, "score": score}))

    level = [0.50, 0.52, 0.49, 0.51, 0.50]
    for task in ("cola", "sst2", "mrpc", "stsb"):
        write("original", task, level)
        write("converted", task, [s + d for s, d in zip(level, (0.01, -0.01, 0, 0.02, -0.02))])
    row = _glue_per_model(tmp_path)
    assert row[2] == "not yet known" and "not finished: RTE" in row[1]
    write("original", "rte", level)
    write("converted", "rte", [s - 0.05 + d for s, d in zip(level, (0.01, 0, -0.01, 0, 0))])
    row = _glue_per_model(tmp_path)
    assert row[2] == "no" and "wholly below 0 on 1 of the 5 tasks" in row[1]
    write("converted", "rte", level)
    assert _glue_per_model(tmp_path)[2] == "yes"


def test_the_targets_table_names_every_windowed_run_it_reads() -> None:
    from tisa.doc_tables import TABLES
    from tisa.doc_tables.targets import WINDOWED

    assert set(WINDOWED) <= set(TABLES["convert-targets"].sources)


def test_conversion_against_pairs_other_files_by_seed_on_their_common_cells(
        tmp_path: Path) -> None:
    from tisa.doc_tables.longeval import conversion_against

    def run(name, per_seed, length=4096, strategy="native", tisa=True):
        cells = [{"model": name, "strategy": strategy, "task": "passkey", "length": length,
                  "depth": d, "seed": seed, "acc1": acc + d / 10}
                 for seed, acc in enumerate(per_seed) for d in (0.0, 0.5)]
        return {"models": [{"name": name, "tisa": tisa}], "cells": cells}

    (tmp_path / "v.json").write_text(json.dumps(run("v", [0.9, 0.8, 0.85])))
    default = run("d", [0.8, 0.8, 0.8])
    default["cells"] += run("d", [0.1, 0.1, 0.1], length=2048)["cells"]  # not in v.json
    chunked = run("o", [0.9, 0.8, 0.85], strategy="chunk", tisa=False)
    chunked["cells"] += run("o", [0.0, 0.0, 0.0])["cells"]  # the original read otherwise
    (tmp_path / "d.json").write_text(json.dumps(default))
    (tmp_path / "o.json").write_text(json.dumps(chunked))
    text = conversion_against(tmp_path, "v.json", [("default", "d.json", True, "native"),
                                                    ("chunk", "o.json", False, "chunk")])
    rows = [line for line in text.splitlines()[2:] if line]
    # 4,096 only; the variant's seed means 0.925, 0.825, 0.875 against 0.825 each; Holm
    # over the two rows (the chunk row has no spread: sign-flip p 0.25 for three seeds)
    assert rows == ["| passkey | 4,096 | default | 87.5 | 82.5 | +5.0 [-7.4, +17.4] | 0.45 | 3 |",
                    "| passkey | 4,096 | chunk | 87.5 | 87.5 | +0.0 [+0.0, +0.0] | 1 | 3 |"]
