"""Loading a model for analysis: a local folder or a Hugging Face Hub id, in eval mode.

TISA models load too (:mod:`tisa.hf` registers their model types with the Auto classes).
Without a route to the Hub only the local cache is asked, so an offline machine fails at
once with a message instead of retrying.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torch import nn

from tisa.checkpoints import tensor_file_problems
from tisa.hf.architectures import KNOWN_MODEL_TYPES, UnsupportedModelError, supported_message
from tisa.hub import model_source

__all__ = ["KNOWN_MODEL_TYPES", "ModelLoadError", "load_model", "load_pretrained"]

logger = logging.getLogger(__name__)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)


class ModelLoadError(ValueError):
    """A model name or path could not be loaded."""


def _is_tisa_config(config: Any) -> bool:
    try:
        keys = config.to_dict().keys()
    except Exception:  # pragma: no cover - exotic configs
        return False
    return "tisa" in str(getattr(config, "model_type", "")).lower() or any(
        "tisa" in k.lower() for k in keys
    )


def load_model(
    name_or_path: str | os.PathLike[str], *, tokenizer: bool = True, eager: bool = True
) -> tuple[nn.Module, Any]:
    """Loads a model (and its tokenizer) for analysis, in eval mode on CPU.

    Args:
        name_or_path: local folder or Hugging Face Hub id (an id installed as a package,
            :mod:`tisa.hub`, loads from the package).
        tokenizer: also load the tokenizer (``None`` in the result when there is none).
        eager: ask for the eager attention implementation, which returns attention
            weights. TISA models keep the implementation their config names.

    Returns:
        (model, tokenizer or None).

    Raises:
        ModelLoadError: not a folder and not a loadable Hub id (e.g. offline, not cached).
        UnsupportedModelError: the architecture is not supported (see
            :data:`tisa.hf.architectures.SUPPORTED_ARCHITECTURES`).
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    name = model_source(str(name_or_path))  # a packaged Hub id loads from its package
    path = Path(name).expanduser()
    if not path.exists() and (not _HUB_ID.match(name) or name.startswith(".")):
        raise ModelLoadError(f"{name!r}: no such folder, and not a Hugging Face Hub id")
    if path.exists() and not path.is_dir():
        raise ModelLoadError(f"{name!r} is a file; expected a model folder or a Hub id")
    if path.is_dir() and not (path / "config.json").is_file():
        if (path / "model" / "config.json").is_file():  # a run folder of tisa pretrain
            logger.warning("%s is a run folder: loading its final model, %s", name, path / "model")
            path = path / "model"
            name = str(path)
    source = str(path) if path.exists() else name
    # Without a route to the Hub, use the cache only: fails at once instead of retrying.
    hub: dict[str, Any] = {} if path.exists() or _hub_reachable() else {"local_files_only": True}
    try:
        config = AutoConfig.from_pretrained(source, **hub)
    except (OSError, ValueError, KeyError) as err:
        where = "folder" if path.exists() else "Hugging Face Hub id"
        hint = (
            "it has no readable config.json"
            if path.exists()
            else "not in the local cache and the Hub could not be reached (offline?) or "
            "the id does not exist"
        )
        raise ModelLoadError(f"cannot load {where} {name!r}: {hint} ({_first_line(err)})") from err
    is_tisa = _is_tisa_config(config)
    if config.model_type not in KNOWN_MODEL_TYPES and not is_tisa:
        raise UnsupportedModelError(
            supported_message(f"{name!r} is a {config.model_type!r} model, not supported")
        )
    kwargs: dict[str, Any] = dict(hub)
    if eager and not is_tisa:
        kwargs["attn_implementation"] = "eager"
    # a task head's unused weights are expected, not news
    model = load_pretrained(AutoModel, source, name=name, quiet=True, **kwargs)
    model.eval()
    tok = None
    # A local folder without tokenizer files would give an empty default tokenizer.
    if tokenizer and (not path.exists() or any((path / f).exists() for f in _TOKENIZER_FILES)):
        try:
            tok = AutoTokenizer.from_pretrained(source, **hub)
        except (OSError, ValueError, TypeError):
            tok = None
    return model, tok


def load_pretrained(
    auto_class: Any, source: str, *, name: str | None = None, quiet: bool = False, **kwargs: Any
) -> nn.Module:
    """``auto_class.from_pretrained(source, **kwargs)``, every way it fails told in one line.

    Weight files of a local folder that are cut short or damaged are found from their
    headers before loading (:func:`tisa.checkpoints.tensor_file_problems`); weights whose
    shapes do not match config.json (an edited config, or one of another model) are named
    as such instead of transformers' load report and ``RuntimeError``.

    Args:
        auto_class: e.g. ``transformers.AutoModel`` or ``AutoModelForMaskedLM``.
        source: a local folder or a Hub id.
        name: what the user called it, for the message (default ``source``).
        quiet: hide transformers' load report (unused or newly initialised weights).
        **kwargs: passed to ``from_pretrained``.

    Raises:
        ModelLoadError: the model cannot be loaded; the message names the file and what to
            do.
    """
    from safetensors import SafetensorError

    name = source if name is None else name
    path = Path(source).expanduser()
    if path.is_dir():
        problems = [p for f in sorted(path.iterdir()) for p in tensor_file_problems(f)]
        if problems:
            raise ModelLoadError(
                f"{name!r}: " + "; ".join(problems) + ": the weights are damaged; copy or "
                "download the model again"
            )
    try:
        with _quiet_loading() if quiet else contextlib.nullcontext():
            return auto_class.from_pretrained(source, **kwargs)
    except SafetensorError as err:
        raise ModelLoadError(
            f"{name!r}: a weight file is damaged ({_first_line(err)}); copy or download the "
            "model again"
        ) from err
    except RuntimeError as err:
        if "mismatch" not in str(err):
            raise ModelLoadError(
                f"cannot load the weights of {name!r} ({_first_line(err)})"
            ) from err
        weights = [f.name for f in sorted(path.glob("*.safetensors"))] if path.is_dir() else []
        raise ModelLoadError(
            f"{name!r}: the weights ({', '.join(weights) or 'model weights'}) do not match "
            "config.json: tensor shapes differ (a config edited, or one of another model); "
            "restore the config.json saved with these weights"
        ) from err
    except (OSError, ValueError, KeyError) as err:
        raise ModelLoadError(f"cannot load the weights of {name!r} ({_first_line(err)})") from err


def _hub_reachable(timeout: float = 3.0) -> bool:
    """False in offline mode or when the Hub's host cannot be reached within ``timeout``."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


@contextmanager
def _quiet_loading() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # "Loading weights" of a tiny model is no news either
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__
