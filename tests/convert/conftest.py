"""A tiny random BERT with a fast WordPiece tokenizer, and small text files, for the
conversion tests."""

from __future__ import annotations

import string

import pytest

WORDS = "the a an of to in is was and that it for on with as by at from be are not has he".split()
HEADS, LAYERS, POSITIONS, HIDDEN = 4, 2, 64, 16


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    from transformers import BertConfig, BertModel, BertTokenizerFast, set_seed

    path = tmp_path_factory.mktemp("tiny-bert-convert")
    chars = string.ascii_lowercase + string.digits
    vocab = list(
        dict.fromkeys(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *string.punctuation]
            + [f"##{c}" for c in chars]
            + WORDS
        )
    )
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True).save_pretrained(path)
    set_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=32,
        max_position_embeddings=POSITIONS,
    )
    BertModel(config).save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def texts(tmp_path_factory) -> tuple[str, str]:
    """(train file, eval file) of Penn Treebank sentences."""
    from tisa.data.corpus import ptb_lines

    path = tmp_path_factory.mktemp("texts")
    train, test = path / "train.txt", path / "test.txt"
    train.write_text("\n".join(ptb_lines("train")[:400]) + "\n")
    test.write_text("\n".join(ptb_lines("test")[:100]) + "\n")
    return str(train), str(test)
