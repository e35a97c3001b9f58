"""WordPiece tokenizers for masked-LM pretraining: train on a corpus, save, reload.

A tokenizer trained here is BERT-style: the BERT normaliser (lower case by default,
accents stripped, control characters removed, CJK characters split), the BERT
pre-tokenizer (whitespace and punctuation), WordPiece with ``##`` continuation pieces,
and the special tokens ``[PAD] [UNK] [CLS] [SEP] [MASK]`` (ids 0-4 in that order); the
other pieces are numbered in sorted order (whole-word pieces, then ``##`` pieces).
Encoding a text with special tokens gives ``[CLS] ... [SEP]`` (``[CLS] a [SEP] b [SEP]``
for pairs). It is wrapped as a transformers fast tokenizer, so ``save_pretrained`` writes
it next to a model and ``AutoTokenizer.from_pretrained`` reloads it.

Reproducibility: the ``tokenizers`` WordPiece trainer breaks ties between equally frequent
merges in hash-map order, which changes from process to process, so two trainings on the
same text can end with a handful of different rare pieces. Runs meant to be compared
should therefore share one tokenizer: :func:`cached_wordpiece` trains once per corpus and
settings and reuses the result from a cache folder (``$TISA_CACHE_DIR``, else
``$XDG_CACHE_HOME/tisa``, else ``~/.cache/tisa``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from transformers import AutoTokenizer, PreTrainedTokenizerBase, PreTrainedTokenizerFast

from tisa._validate import check_int

__all__ = [
    "SPECIAL_TOKENS",
    "cached_wordpiece",
    "corpus_fingerprint",
    "default_cache_dir",
    "load_tokenizer",
    "train_wordpiece",
]

logger = logging.getLogger(__name__)

#: Bumped when the way tokenizers are trained changes (invalidates cached ones).
_FORMAT = "wordpiece-v1"

#: Special tokens in id order.
SPECIAL_TOKENS: tuple[str, ...] = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def train_wordpiece(
    texts: Iterable[str],
    *,
    vocab_size: int = 30000,
    min_frequency: int = 2,
    lowercase: bool = True,
    model_max_length: int = 512,
    length: int | None = None,
    show_progress: bool = True,
) -> PreTrainedTokenizerFast:
    """Trains a BERT-style WordPiece tokenizer on ``texts``.

    Args:
        texts: training text, e.g. the ``text`` column of a corpus split.
        vocab_size: largest vocabulary (special tokens included); a small corpus can end
            with fewer entries.
        min_frequency: pieces seen fewer times are not added.
        lowercase: lower-case (and strip accents) before splitting.
        model_max_length: stored in the tokenizer; informative only here.
        length: number of texts, for the progress bar.
        show_progress: show the trainer's progress bar.

    Returns:
        A fast tokenizer with ``[PAD] [UNK] [CLS] [SEP] [MASK]`` set.

    Raises:
        ValueError: vocab_size not larger than the number of special tokens, or
            min_frequency < 1.
    """
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from tokenizers.trainers import WordPieceTrainer

    check_int(vocab_size, "vocab_size", minimum=len(SPECIAL_TOKENS) + 1)
    check_int(min_frequency, "min_frequency")
    pad, unk, cls, sep, mask = SPECIAL_TOKENS
    tok = Tokenizer(models.WordPiece(unk_token=unk, continuing_subword_prefix="##"))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    trainer = WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        continuing_subword_prefix="##",
        show_progress=show_progress,
    )
    tok.train_from_iterator(iter(texts), trainer=trainer, length=length)
    # The trainer numbers pieces in hash-map order, which changes from process to
    # process; renumber them (specials first, then sorted) so that the same corpus always
    # gives the same ids, and runs with the same seed start from the same model.
    learned = [t for t in tok.get_vocab(with_added_tokens=False) if t not in SPECIAL_TOKENS]
    ordered = [*SPECIAL_TOKENS, *sorted(learned, key=lambda t: (t.startswith("##"), t))]
    tok.model = models.WordPiece(
        {t: i for i, t in enumerate(ordered)}, unk_token=unk, continuing_subword_prefix="##"
    )
    cls_id, sep_id = tok.token_to_id(cls), tok.token_to_id(sep)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{cls} $A {sep}",
        pair=f"{cls} $A {sep} $B:1 {sep}:1",
        special_tokens=[(cls, cls_id), (sep, sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=pad,
        unk_token=unk,
        cls_token=cls,
        sep_token=sep,
        mask_token=mask,
        model_max_length=model_max_length,
        do_lower_case=lowercase,
    )


def load_tokenizer(path: str | os.PathLike[str]) -> PreTrainedTokenizerBase:
    """Loads a saved tokenizer (a folder from ``save_pretrained``, or a Hub id).

    Raises:
        ValueError: it cannot be loaded, or it lacks a mask, padding, CLS or SEP token
            (all needed for masked-LM blocks).
    """
    name = str(path)
    if not Path(name).expanduser().exists() and name.startswith((".", "/", "~")):
        raise ValueError(f"tokenizer: no such folder: {name!r}")
    try:
        tok = AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"tokenizer {name!r} could not be loaded: {err}") from err
    missing = [
        attr
        for attr in ("mask_token", "pad_token", "cls_token", "sep_token")
        if getattr(tok, attr, None) is None
    ]
    if missing:
        raise ValueError(f"tokenizer {name!r} lacks {', '.join(missing)} (needed for masked LM)")
    return tok


def default_cache_dir() -> Path:
    """``$TISA_CACHE_DIR``, else ``$XDG_CACHE_HOME/tisa``, else ``~/.cache/tisa``."""
    if os.environ.get("TISA_CACHE_DIR"):
        return Path(os.environ["TISA_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "tisa"


def corpus_fingerprint(texts: Iterable[str]) -> str:
    """SHA-256 of the texts in order (one line each): identifies a training corpus."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def cached_wordpiece(
    texts: Callable[[], Iterable[str]],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    vocab_size: int = 30000,
    min_frequency: int = 2,
    lowercase: bool = True,
    model_max_length: int = 512,
    length: int | None = None,
    show_progress: bool = True,
) -> tuple[PreTrainedTokenizerBase, Path]:
    """A WordPiece tokenizer for a corpus, trained once and then reused from the cache.

    The cache key covers the corpus text (:func:`corpus_fingerprint`) and the training
    settings, so every run on the same corpus with the same settings gets the very same
    tokenizer. A new entry is written to a temporary folder and renamed into place, so
    concurrent runs never see a half-written one; an entry that does not load (a file cut
    short or edited since) is trained again, with a warning.

    Args:
        texts: returns a fresh iterable over the training texts (read twice: for the
            fingerprint and, on a cache miss, for training).
        cache_dir: cache folder; default :func:`default_cache_dir`.
        vocab_size, min_frequency, lowercase, model_max_length, length, show_progress:
            see :func:`train_wordpiece`.

    Returns:
        (tokenizer, folder it is stored in).

    Raises:
        ValueError: the cache folder cannot be written (named, with what set it).
    """
    key = hashlib.sha256(
        "|".join(
            map(str, (_FORMAT, corpus_fingerprint(texts()), vocab_size, min_frequency, lowercase))
        ).encode()
    ).hexdigest()[:24]
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    folder = root / "tokenizers" / key
    if (folder / "tokenizer.json").is_file():
        try:
            return load_tokenizer(folder), folder
        except Exception as err:  # cut short or edited: every later run would fail on it
            first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            logger.warning(
                "tokenizer cache: %s does not load (%s); training it again", folder, first
            )
            _discard(folder)
    try:  # before training, which can take a while
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    except OSError as err:
        raise ValueError(_unwritable(root, cache_dir, err)) from None
    tok = train_wordpiece(
        texts(),
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        lowercase=lowercase,
        model_max_length=model_max_length,
        length=length,
        show_progress=show_progress,
    )
    try:
        tok.save_pretrained(staging)
    except OSError as err:  # e.g. a full disk
        shutil.rmtree(staging, ignore_errors=True)
        raise ValueError(_unwritable(root, cache_dir, err)) from None
    try:
        os.replace(staging, folder)
    except OSError:  # another process stored it first: use theirs, so that all agree
        shutil.rmtree(staging, ignore_errors=True)
        return load_tokenizer(folder), folder
    return tok, folder


def _discard(folder: Path) -> None:
    """Moves a damaged cache entry out of the way (atomically) and deletes it."""
    aside = Path(tempfile.mkdtemp(prefix=f".{folder.name}-damaged-", dir=folder.parent))
    try:
        os.replace(folder, aside / folder.name)
    except FileNotFoundError:  # another process moved it first
        pass
    shutil.rmtree(aside, ignore_errors=True)


def _unwritable(root: Path, cache_dir: str | os.PathLike[str] | None, err: OSError) -> str:
    """One line for a tokenizer cache that cannot be written, naming what set it."""
    reason = err.strerror or str(err)
    if cache_dir is not None:
        return f"cache_dir: cannot write the tokenizer cache in {str(root)!r} ({reason})"
    what = "TISA_CACHE_DIR" if os.environ.get("TISA_CACHE_DIR") else "tokenizer cache"
    return (
        f"{what}: cannot write the tokenizer cache in {str(root)!r} ({reason}); set "
        "TISA_CACHE_DIR to a writable folder"
    )
