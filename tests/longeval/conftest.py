"""Tiny encoders for the long-input tests: a random BERT with 64 positions, the same as a
sentence-transformers folder (CLS pooling), and a TISA model without a position table."""

from __future__ import annotations

import pytest
import torch

from tests.tiny_bert import save_tiny_bert


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and do not fight over a shared machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory) -> str:
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert-longeval"), "BertModel")


@pytest.fixture(scope="session")
def tiny_tisa(tmp_path_factory, tiny_bert) -> str:
    """The tiny BERT with its table removed and TISA added, saved with its tokenizer and
    the sentence-transformers files (as ``tisa convert`` writes them)."""
    from transformers import AutoModel, AutoTokenizer

    import tisa.hf
    from tisa.hf.sentence_transformers import write_sentence_transformers_files

    path = tmp_path_factory.mktemp("tiny-tisa-longeval")
    model = tisa.hf.add_tisa(AutoModel.from_pretrained(tiny_bert), position_embeddings="remove")
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(tiny_bert).save_pretrained(path)
    write_sentence_transformers_files(path, hidden_size=16, max_seq_length=4096)
    return str(path)


@pytest.fixture(scope="session")
def tokenizer(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


@pytest.fixture(scope="session")
def text():
    from tisa.data.corpus import ptb_lines
    from tisa.longeval.tasks import TextSource

    return TextSource(ptb_lines("test", unk=None)[:3000])
