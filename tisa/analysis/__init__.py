"""Measuring translation invariance in transformer language models.

* :mod:`tisa.analysis.metrics`: pure tensor -> number (TI, Toeplitz projection, offset
  profiles, locality and symmetry of attention).
* :mod:`tisa.analysis.extract`: position embeddings, layer-1 positional logits F_P, TISA
  scoring functions and TI over training checkpoints, from Hugging Face models.
* :mod:`tisa.analysis.probes`: mean attention on position-only and real-text inputs.
* :mod:`tisa.analysis.cli`: the ``tisa analyze`` command and :func:`analyze`.

Names below load their module on first use, so that ``tisa --help`` does not pay for
torch, transformers or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "OffsetProfile": "tisa.analysis.metrics",
    "locality": "tisa.analysis.metrics",
    "offset_profile": "tisa.analysis.metrics",
    "symmetry": "tisa.analysis.metrics",
    "toeplitz_projection": "tisa.analysis.metrics",
    "translation_invariance": "tisa.analysis.metrics",
    "transpose_symmetry": "tisa.analysis.metrics",
    "load_model": "tisa.analysis.extract",
    "positional_logits": "tisa.analysis.extract",
    "position_embeddings": "tisa.analysis.extract",
    "scoring_profiles": "tisa.analysis.extract",
    "ti_over_training": "tisa.analysis.extract",
    "attention_probe": "tisa.analysis.probes",
    "analyze": "tisa.analysis.cli",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tisa.analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
