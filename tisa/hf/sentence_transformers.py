"""sentence-transformers model folders: how a model pools its tokens into one embedding,
and the files that make a saved model load with ``SentenceTransformer(path)``.

A sentence-transformers folder names its modules in ``modules.json`` (the transformer,
then ``Pooling``, often ``Normalize``); the pooling module's ``config.json`` says how
token states become the sentence embedding (mean over the tokens for all-MiniLM-L6-v2).
:func:`read_pooling` reads that (mean pooling for a plain transformers folder, the way
sentence-transformers itself wraps one), :func:`pool` applies it, and
:func:`write_sentence_transformers_files` writes the three files into a saved model
folder, copying the original's pooling and normalisation when it had them.

A TISA model in such a folder loads with sentence-transformers once :mod:`tisa.hf` is
imported: sentence-transformers loads the transformer with ``AutoConfig`` and
``AutoModel``, and importing :mod:`tisa.hf` registers the ``tisa_*`` model types there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from torch import Tensor

from tisa.files import write_json

__all__ = ["POOLING_MODES", "Pooling", "pool", "read_pooling", "write_sentence_transformers_files"]

#: pooling modes, as sentence-transformers names them in ``1_Pooling/config.json``
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len")
_KEYS = {
    "mean": "pooling_mode_mean_tokens",
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens",
}


@dataclass(frozen=True)
class Pooling:
    """How token states become one embedding.

    Attributes:
        mode: ``"mean"`` (mean over the tokens the attention mask keeps), ``"cls"`` (the
            first token), ``"max"`` (element-wise maximum) or ``"mean_sqrt_len"`` (the
            sum divided by the square root of the token count).
        normalize: the folder ends in a ``Normalize`` module (unit-length embeddings).
        source: where the setting came from (a file, or the default).
    """

    mode: Literal["mean", "cls", "max", "mean_sqrt_len"] = "mean"
    normalize: bool = False
    source: str = "default (mean pooling)"


def _module_types(folder: Path) -> list[dict]:
    path = folder / "modules.json"
    if not path.is_file():
        return []
    try:
        modules = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"model: {str(path)!r} is not readable JSON ({err})") from None
    if not isinstance(modules, list):
        raise ValueError(f"model: {str(path)!r} does not list modules")
    return modules


def read_pooling(folder: str | os.PathLike[str] | None) -> Pooling:
    """The pooling of a sentence-transformers folder; mean pooling for any other folder
    (or ``None``: a model without a folder of its own).

    Raises:
        ValueError: the folder's pooling config is unreadable or names no mode this
            module implements (e.g. weighted-mean or last-token pooling).
    """
    if folder is None:
        return Pooling()
    folder = Path(folder)
    modules = _module_types(folder)
    pooling = [m for m in modules if str(m.get("type", "")).endswith("Pooling")]
    normalize = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
    if not pooling:
        return Pooling(normalize=normalize)
    path = folder / pooling[0].get("path", "1_Pooling") / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"model: pooling config {str(path)!r} is not readable ({err})") from None
    modes = [mode for mode, key in _KEYS.items() if config.get(key)]
    if "pooling_mode" in config and isinstance(config["pooling_mode"], str):
        modes = [config["pooling_mode"]]  # newer sentence-transformers name it directly
    known = [m for m in modes if m in POOLING_MODES]
    if len(modes) != 1 or not known:
        raise ValueError(
            f"model: pooling {modes or 'none'} in {str(path)!r}; supported: one of "
            f"{', '.join(POOLING_MODES)}"
        )
    return Pooling(mode=known[0], normalize=normalize, source=str(path.relative_to(folder)))


def pool(hidden: Tensor, mask: Tensor, mode: str = "mean") -> Tensor:
    """One embedding per input: (B, D) from token states ``hidden`` (B, L, D) and the
    attention ``mask`` (B, L) (1 for real tokens)."""
    m = mask.to(hidden.dtype)[..., None]
    if mode == "cls":
        return hidden[:, 0]
    if mode == "max":
        return hidden.masked_fill(m == 0, torch.finfo(hidden.dtype).min).amax(1)
    total = (hidden * m).sum(1)
    count = m.sum(1).clamp_min(1.0)
    if mode == "mean":
        return total / count
    if mode == "mean_sqrt_len":
        return total / count.sqrt()
    raise ValueError(f"pooling: expected one of {', '.join(POOLING_MODES)}, got {mode!r}")


def write_sentence_transformers_files(
    folder: str | os.PathLike[str],
    *,
    hidden_size: int,
    max_seq_length: int,
    original: str | os.PathLike[str] | None = None,
) -> Path:
    """Writes ``modules.json``, ``sentence_bert_config.json`` and ``1_Pooling/config.json``
    into a saved transformers model folder, so that it loads with ``SentenceTransformer``.

    Args:
        folder: the saved model (``save_pretrained``).
        hidden_size: the embedding size D.
        max_seq_length: where sentence-transformers cuts inputs (it needs a number).
        original: the folder of the model it was made from: its pooling and
            ``Normalize`` are kept (default: mean pooling, no normalisation).
    """
    folder = Path(folder)
    setting = read_pooling(original)
    kinds = [("", "Transformer"), ("1_Pooling", "Pooling")]
    if setting.normalize:
        (folder / "2_Normalize").mkdir(exist_ok=True)
        kinds.append(("2_Normalize", "Normalize"))
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(kinds)
    ]
    write_json(folder / "modules.json", modules)
    write_json(
        folder / "sentence_bert_config.json",
        {"max_seq_length": int(max_seq_length), "do_lower_case": False},
    )
    write_json(
        folder / "1_Pooling" / "config.json",
        {"word_embedding_dimension": int(hidden_size)}
        | {key: mode == setting.mode for mode, key in _KEYS.items()},
    )
    return folder
