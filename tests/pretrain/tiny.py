"""Settings and the tokenizer-cache fixture shared by the tests that run tiny pretraining."""

from __future__ import annotations

import pytest

#: A run that takes a few seconds: tiny model, short blocks, a slice of Penn Treebank.
TINY = dict(
    size="tiny",
    seq_len=32,
    batch_size=8,
    max_train_blocks=48,
    max_eval_blocks=8,
    vocab_size=600,
    max_positions=64,
    logging_steps=1,
    progress=False,
    tensorboard=False,
)


@pytest.fixture(scope="module", autouse=True)
def tokenizer_cache(tmp_path_factory):
    """Runs of a module that imports this share one tokenizer cache (one tokenizer) in tmp."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TISA_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        yield
