"""tisa.glue.lengths: token lengths of GLUE examples and the share within K + 1 tokens."""

from __future__ import annotations

import pytest

from tisa.glue import lengths


class Words:
    """A tokenizer stand-in: a word a token, plus [CLS] and [SEP] (and one [SEP] more for
    a pair), as a BERT tokenizer frames one text or two."""

    def __call__(self, first, second=None, truncation=False):
        pairs = zip(first, second) if second is not None else ((t, None) for t in first)
        return {"input_ids": [[0] * (len(a.split()) + 2 + (0 if b is None else len(b.split()) + 1))
                              for a, b in pairs]}


def _cola(folder, sentences):
    (folder / "CoLA").mkdir(parents=True)
    for split in ("train", "dev"):
        rows = [f"src\t1\t\t{s}" for s in sentences]
        (folder / "CoLA" / f"{split}.tsv").write_text("\n".join(rows) + "\n")


def test_counts_tokens_and_the_share_within_k_plus_one(tmp_path):
    # 1 + 2, 3 + 2 and 6 + 2 tokens: with K = 4 the first two have every offset within +-4
    _cola(tmp_path, ["a", "a b c", "a b c d e f"])
    result = lengths.count(tmp_path, Words(), tasks=("cola",), offsets=4)
    assert result["offsets"] == 4
    train = next(r for r in result["rows"] if r["split"] == "train")
    assert train["examples"] == 3 and train["max"] == 8 and train["median"] == 5
    assert train["within"] == pytest.approx(2 / 3)
    # K = 2: offsets up to 2 fit only the 3-token example
    again = lengths.count(tmp_path, Words(), tasks=("cola",), offsets=2)
    assert again["rows"][0]["within"] == pytest.approx(1 / 3)
    text = lengths.markdown({"model": "m", **result})
    assert text.startswith("m: tokens per example")
    assert "at most 5 tokens (every offset within ±4)" in text and "66.7%" in text


def test_bad_arguments_get_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit):
        lengths.main(["--glue-dir", str(tmp_path), "--offsets", "0"])
    assert "--offsets must be >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        lengths.main(["--glue-dir", str(tmp_path / "absent")])
    assert "--glue-dir: no folder" in capsys.readouterr().err
