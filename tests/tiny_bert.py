"""A tiny random BERT (2 layers, hidden 16, 4 heads, 64 positions) with a WordPiece
vocabulary of letters, digits, punctuation and a few words, saved with its tokenizer:
the model the conversion and GLUE tests run on."""

from __future__ import annotations

import string
from pathlib import Path

WORDS = "the a an of to in is was and that it for on with as by at from be are not has he".split()
HEADS, LAYERS, POSITIONS, HIDDEN = 4, 2, 64, 16


def save_tiny_bert(path: Path, model_class: str, *, words=WORDS) -> str:
    """Saves a seeded random ``transformers.<model_class>`` and its tokenizer in ``path``."""
    import transformers
    from transformers import BertConfig, set_seed

    chars = string.ascii_lowercase + string.digits
    vocab = list(
        dict.fromkeys(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *chars, *string.punctuation]
            + [f"##{c}" for c in chars]
            + list(words)
        )
    )
    # (transformers 5 ignores a vocab_file argument here: the vocabulary goes in as a dict)
    tokenizer = transformers.BertTokenizer(
        vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True
    )
    assert tokenizer.tokenize("The cat") == ["the", "c", "##a", "##t"]
    tokenizer.save_pretrained(path)
    set_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=32,
        max_position_embeddings=POSITIONS,
    )
    getattr(transformers, model_class)(config).save_pretrained(path)
    return str(path)
