"""Corpora, WordPiece tokenizers, fixed-length blocks and masked-LM masking."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from tisa.data.corpus import load_corpus, load_texts, ptb_lines
from tisa.data.mlm import (
    MaskedBlocks,
    block_content_length,
    build_blocks,
    collate_blocks,
    mask_blocks,
    token_stream,
)
from tisa.data.tokenizer import (
    SPECIAL_TOKENS,
    cached_wordpiece,
    corpus_fingerprint,
    load_tokenizer,
    train_wordpiece,
)


@pytest.fixture(scope="module")
def tokenizer():
    return train_wordpiece(ptb_lines("train")[:3000], vocab_size=800, show_progress=False)


@pytest.fixture(scope="module")
def blocks(tokenizer):
    return build_blocks(ptb_lines("valid")[:2000], tokenizer, seq_len=64, progress=False)


# ----------------------------------------------------------------------------- corpora


def test_ptb_lines_rewrite_unk():
    lines = ptb_lines("test")
    assert len(lines) > 3000
    assert all(line and line == line.strip() for line in lines[:500])
    text = "\n".join(lines)
    assert "<unk>" not in text and "[UNK]" in text
    assert ptb_lines("valid") == ptb_lines("validation")
    with pytest.raises(ValueError, match="split"):
        ptb_lines("dev")


def test_ptb_corpus_splits():
    corpus = load_corpus()
    assert set(corpus) == {"train", "validation", "test"}
    assert corpus["train"].column_names == ["text"]
    assert len(corpus["train"]) == len(ptb_lines("train"))


def test_text_files(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("one line\n\n  \nanother line\nthird\n")
    valid = tmp_path / "valid.txt"
    valid.write_text("held out\n")
    corpus = load_corpus(train_file=train, validation_file=valid)
    assert corpus["train"]["text"] == ["one line", "another line", "third"]
    assert corpus["validation"]["text"] == ["held out"]


def test_text_file_without_validation_holds_out_a_share(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("".join(f"line {i}\n" for i in range(100)))
    corpus = load_corpus(train_file=train, validation_fraction=0.1, seed=1)
    assert len(corpus["train"]) == 90 and len(corpus["validation"]) == 10
    assert not set(corpus["train"]["text"]) & set(corpus["validation"]["text"])


def test_missing_file_names_the_argument(tmp_path):
    with pytest.raises(ValueError, match="train_file"):
        load_corpus(train_file=tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="validation_file"):
        load_corpus(train_file=__file__, validation_file=tmp_path / "nope.txt")
    with pytest.raises(ValueError, match="eval_file"):
        load_texts(tmp_path / "nope.txt")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is empty, expected text"),
        (b"\n  \n\t\n", "is empty, expected text"),
        (b"text\x00\x01\x02 more", r"is a binary file \(NUL bytes\)"),
        (b"caf\xe9 au lait\n", r"is not UTF-8 text \(byte 3: invalid continuation byte\)"),
    ],
)
def test_empty_or_binary_text_files_name_the_argument_and_file(tmp_path, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(content)
    good = tmp_path / "good.txt"
    good.write_text("a line\n")
    with pytest.raises(ValueError, match=rf"train_file: '.*bad.txt' {message}"):
        load_corpus(train_file=bad)
    with pytest.raises(ValueError, match=rf"validation_file: '.*bad.txt' {message}"):
        load_corpus(train_file=good, validation_file=bad)
    with pytest.raises(ValueError, match=rf"eval_file: '.*bad.txt' {message}"):
        load_texts(bad)
    with pytest.raises(ValueError, match=r"train_file: '.*' is a folder"):
        load_corpus(train_file=tmp_path)


def test_a_bad_byte_beyond_the_checked_start_still_names_the_files(tmp_path):
    late = tmp_path / "late.txt"
    late.write_bytes(b"a line of text\n" * 80_000 + b"caf\xe9\n")  # past the first MiB
    with pytest.raises(ValueError, match=r"text files \(train_file '.*late.txt'\) cannot be read"):
        load_corpus(train_file=late)
    with pytest.raises(ValueError, match=r"eval_file '.*late.txt' is not UTF-8 text"):
        load_texts(late)


def test_hf_dataset_folder_with_configs(tmp_path):
    """The Hub layout of wikitext (README configs + parquet per config), loaded locally."""
    import datasets

    root = tmp_path / "wikitext"
    for config, prefix in (("wikitext-103-raw-v1", "big"), ("wikitext-2-raw-v1", "small")):
        folder = root / config
        folder.mkdir(parents=True)
        for split, n in (("train", 6), ("validation", 3), ("test", 2)):
            rows = [f" {prefix} {split} {i} \n" if i % 2 == 0 else "" for i in range(2 * n)]
            datasets.Dataset.from_dict({"text": rows}).to_parquet(
                str(folder / f"{split}-00000-of-00001.parquet")
            )
    configs = "".join(
        f"- config_name: {c}\n  data_files:\n"
        + "".join(f"  - split: {s}\n    path: {c}/{s}-*\n" for s in ("train", "validation", "test"))
        for c in ("wikitext-103-raw-v1", "wikitext-2-raw-v1")
    )
    (root / "README.md").write_text(f"---\nconfigs:\n{configs}---\n")
    corpus = load_corpus(dataset=str(root), dataset_config="wikitext-103-raw-v1")
    assert set(corpus) == {"train", "validation", "test"}
    assert len(corpus["train"]) == 6 and len(corpus["test"]) == 2  # empty rows dropped
    assert all(t.strip().startswith("big train") for t in corpus["train"]["text"])
    other = load_corpus(dataset=str(root), dataset_config="wikitext-2-raw-v1")
    assert other["validation"]["text"][0].strip() == "small validation 0"
    with pytest.raises(ValueError, match="text_column"):
        load_corpus(dataset=str(root), dataset_config="wikitext-2-raw-v1", text_column="body")
    with pytest.raises(ValueError, match="could not be loaded"):
        load_corpus(dataset=str(tmp_path / "absent"), dataset_config="x")


# ----------------------------------------------------------------------------- tokenizer


def test_tokenizer_special_tokens_and_frame(tokenizer):
    assert [tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert (tokenizer.pad_token, tokenizer.mask_token) == ("[PAD]", "[MASK]")
    enc = tokenizer("The Stock [UNK] fell")["input_ids"]
    assert enc[0] == tokenizer.cls_token_id and enc[-1] == tokenizer.sep_token_id
    assert tokenizer.unk_token_id in enc  # [UNK] in raw text is the special token
    tokens = tokenizer.convert_ids_to_tokens(enc)
    assert "the" in tokens  # lower-cased by the BERT normaliser
    assert len(tokenizer) <= 800


def test_tokenizer_save_and_reload(tokenizer, tmp_path):
    tokenizer.save_pretrained(tmp_path / "tok")
    again = load_tokenizer(tmp_path / "tok")
    text = ["mr. smith bought n shares of [UNK] corp.", "unbelievably"]
    assert again(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert again.mask_token_id == tokenizer.mask_token_id


def test_tokenizer_cache_trains_once_per_corpus_and_settings(tmp_path):
    lines = ptb_lines("valid")[:1500]
    reads = []

    def texts():
        reads.append(1)
        return iter(lines)

    first, folder = cached_wordpiece(texts, cache_dir=tmp_path, vocab_size=300, show_progress=False)
    assert len(reads) == 2  # fingerprint + training
    again, folder_again = cached_wordpiece(texts, cache_dir=tmp_path, vocab_size=300)
    assert len(reads) == 3  # fingerprint only: loaded from the cache
    assert folder_again == folder and again.get_vocab() == first.get_vocab()
    _, other = cached_wordpiece(texts, cache_dir=tmp_path, vocab_size=400, show_progress=False)
    assert other != folder
    assert corpus_fingerprint(lines) != corpus_fingerprint(lines[:-1])
    assert not [p for p in (tmp_path / "tokenizers").iterdir() if p.name.startswith(".")]


def test_a_damaged_cached_tokenizer_is_trained_again_and_said(tmp_path, caplog):
    lines = ptb_lines("valid")[:300]
    first, folder = cached_wordpiece(
        lambda: iter(lines), cache_dir=tmp_path, vocab_size=200, show_progress=False
    )
    saved = folder / "tokenizer.json"
    saved.write_bytes(saved.read_bytes()[:1000])  # cut short
    with caplog.at_level("WARNING"):
        again, folder_again = cached_wordpiece(
            lambda: iter(lines), cache_dir=tmp_path, vocab_size=200, show_progress=False
        )
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("tokenizer cache: ")
    assert "does not load" in said[0] and said[0].endswith("training it again")
    assert folder_again == folder and again.get_vocab() == first.get_vocab()
    assert load_tokenizer(folder).get_vocab() == first.get_vocab()  # repaired for later runs
    assert not [p for p in (tmp_path / "tokenizers").iterdir() if p.name.startswith(".")]


def test_an_unwritable_tokenizer_cache_is_one_line(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TISA_CACHE_DIR", str(tmp_path / "file" / "cache"))  # below a file
    with pytest.raises(ValueError, match=r"^TISA_CACHE_DIR: cannot write the tokenizer cache in"):
        cached_wordpiece(lambda: iter(["a b c"] * 10), vocab_size=50, show_progress=False)
    with pytest.raises(ValueError, match=r"^cache_dir: cannot write"):
        cached_wordpiece(lambda: iter(["a b"]), cache_dir=tmp_path / "file", vocab_size=50)
    if os.geteuid() != 0:  # permissions do not bind root
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        monkeypatch.setenv("TISA_CACHE_DIR", str(locked))
        with pytest.raises(ValueError, match="Permission denied; set TISA_CACHE_DIR"):
            cached_wordpiece(lambda: iter(["a b c"] * 10), vocab_size=50, show_progress=False)


def test_tokenizer_bad_input(tmp_path):
    with pytest.raises(ValueError, match="vocab_size"):
        train_wordpiece(["a b c"], vocab_size=5)
    with pytest.raises(ValueError, match="no such folder"):
        load_tokenizer(tmp_path / "missing")


# ----------------------------------------------------------------------------- blocks


def test_blocks_cls_sep(tokenizer):
    texts = ptb_lines("valid")[:300]
    stream = token_stream(texts, tokenizer, progress=False)
    out = build_blocks(texts, tokenizer, seq_len=32, progress=False)
    assert out.shape == (len(stream) // 30, 32)
    assert (out[:, 0] == tokenizer.cls_token_id).all()
    assert (out[:, -1] == tokenizer.sep_token_id).all()
    np.testing.assert_array_equal(out[:, 1:-1].reshape(-1), stream[: out.shape[0] * 30])


def test_blocks_plain_and_limits(tokenizer):
    texts = ptb_lines("valid")[:300]
    stream = token_stream(texts, tokenizer, progress=False)
    out = build_blocks(stream, tokenizer, seq_len=32, block_format="plain", max_blocks=5)
    assert out.shape == (5, 32)
    np.testing.assert_array_equal(out.reshape(-1), stream[:160])
    assert block_content_length(32, "cls_sep") == 30
    with pytest.raises(ValueError, match="block_format"):
        build_blocks(stream, tokenizer, seq_len=32, block_format="docs")
    with pytest.raises(ValueError, match="fewer than one block"):
        build_blocks(["just a few words"], tokenizer, seq_len=64, progress=False)
    with pytest.raises(ValueError, match="seq_len"):
        build_blocks(stream, tokenizer, seq_len=2)


# ----------------------------------------------------------------------------- masking


def test_masking_statistics(tokenizer, blocks):
    inputs, labels = mask_blocks(blocks, tokenizer, seed=0)
    original = torch.as_tensor(blocks)
    special = torch.isin(original, torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id]))
    selected = labels != -100
    assert not (selected & special).any()  # special tokens are never masked
    assert torch.equal(inputs[special], original[special])
    assert torch.equal(labels[selected], original[selected])
    assert torch.equal(inputs[~selected], original[~selected])
    n = int((~special).sum())
    assert n > 20000
    rate = selected.sum().item() / n
    assert abs(rate - 0.15) < 0.01
    chosen = selected.sum().item()
    as_mask = (inputs[selected] == tokenizer.mask_token_id).sum().item() / chosen
    unchanged = (inputs[selected] == original[selected]).sum().item() / chosen
    other = 1 - as_mask - unchanged
    assert abs(as_mask - 0.8) < 0.025
    assert abs(unchanged - 0.1) < 0.02  # includes the rare random draw of the same id
    assert abs(other - 0.1) < 0.02


def test_eval_masks_are_seeded_per_block(tokenizer, blocks):
    a = mask_blocks(blocks, tokenizer, seed=5)
    b = mask_blocks(blocks, tokenizer, seed=5)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    prefix = mask_blocks(blocks[:10], tokenizer, seed=5)  # independent of the block count
    assert torch.equal(prefix[1], a[1][:10])
    c = mask_blocks(blocks, tokenizer, seed=6)
    assert not torch.equal(a[1], c[1])


def test_training_masks_change_with_epoch_only(tokenizer, blocks):
    data = MaskedBlocks(blocks, tokenizer, seed=3)
    first = [data[i]["labels"] for i in (0, 7)]
    assert torch.equal(data[7]["labels"], first[1])  # same block, same epoch: same mask
    data.set_epoch(1)
    assert not torch.equal(data[0]["labels"], first[0])
    data.set_epoch(0)
    assert torch.equal(data[0]["labels"], first[0])
    eval_inputs, eval_labels = mask_blocks(blocks[:8], tokenizer, seed=3)
    assert torch.equal(eval_labels[7], first[1])


def test_collate(tokenizer, blocks):
    data = MaskedBlocks(blocks[:4], tokenizer)
    batch = collate_blocks([data[i] for i in range(4)])
    assert batch["input_ids"].shape == batch["labels"].shape == (4, 64)
    assert batch["token_type_ids"].eq(0).all()
    short = {"input_ids": torch.zeros(10, dtype=torch.long), "labels": torch.zeros(10)}
    with pytest.raises(ValueError, match="same length"):
        collate_blocks([data[0], short])
