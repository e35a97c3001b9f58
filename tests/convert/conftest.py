"""A tiny random BERT with a fast WordPiece tokenizer, and small text files, for the
conversion tests."""

from __future__ import annotations

import pytest

from tests.tiny_bert import save_tiny_bert


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert-convert"), "BertModel")


@pytest.fixture(scope="session")
def texts(tmp_path_factory) -> tuple[str, str]:
    """(train file, eval file) of Penn Treebank sentences."""
    from tisa.data.corpus import ptb_lines

    path = tmp_path_factory.mktemp("texts")
    train, test = path / "train.txt", path / "test.txt"
    train.write_text("\n".join(ptb_lines("train")[:400]) + "\n")
    test.write_text("\n".join(ptb_lines("test")[:100]) + "\n")
    return str(train), str(test)
