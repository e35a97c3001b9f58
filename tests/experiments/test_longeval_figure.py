"""experiments/longeval_figure.py: the figure from results files, and one line for bad input."""

from __future__ import annotations

import json

import pytest

from tests.scripts import load_script


@pytest.fixture(scope="module")
def figure():
    return load_script("experiments/longeval_figure.py")


RESULTS = {
    "settings": {"tasks": ["passkey"], "candidates": 4},
    "models": [{"name": "orig", "positions": 512}, {"name": "conv", "positions": None,
                                                   "tisa": True}],
    "summary": [{"model": m, "strategy": s, "task": "passkey", "length": n, "acc1": a}
                for m, s, a in (("orig", "chunk", 0.9), ("conv", "native", 0.8))
                for n in (512, 1024)],
}


def _error(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(lines)
    return lines[-1]


def test_draws_the_figure(figure, tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps(RESULTS))
    out = tmp_path / "fig.png"
    assert figure.main([str(tmp_path / "r.json"), "--output", str(out)]) == 0
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("content, message", [
    ("[1, 2]", "is not a results.json of tisa longeval"),
    ("{not json", "cannot read"),
    (json.dumps({**RESULTS, "summary": [{"model": "orig"}]}), "is not a results.json"),
    (json.dumps({**RESULTS, "models": [{"name": "orig"}]}), "is not a results.json"),
])
def test_bad_results_get_one_line(figure, tmp_path, capsys, content, message):
    (tmp_path / "r.json").write_text(content)
    with pytest.raises(SystemExit):
        figure.main([str(tmp_path / "r.json"), "--output", str(tmp_path / "fig.png")])
    assert message in _error(capsys)


def test_an_output_folder_gets_one_line(figure, tmp_path, capsys):
    (tmp_path / "r.json").write_text(json.dumps(RESULTS))
    with pytest.raises(SystemExit):
        figure.main([str(tmp_path / "r.json"), "--output", str(tmp_path)])
    line = _error(capsys)
    assert "--output: " in line and "is a folder" in line
