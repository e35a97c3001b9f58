"""Measuring translation invariance in transformer language models.

* :mod:`tisa.metrics` (below the features, re-exported here): pure tensor -> number (TI,
  Toeplitz projection, offset profiles, locality and symmetry of attention): where TI is
  computed.
* :mod:`tisa.analysis.extract`: layer-1 positional logits F_P and TISA scoring functions,
  from Hugging Face models (the position table itself: :mod:`tisa.hf.architectures`).
* :mod:`tisa.analysis.probes`: mean attention on position-only and real-text inputs.
* :mod:`tisa.analysis.training`: TI over training (checkpoints or a run's ``ti.jsonl``).
* :mod:`tisa.analysis.positional_ti`: TI of a position table against nulls, the measure
  ``tisa pretrain`` logs at each checkpoint.
* :mod:`tisa.hf.loading`: loading a model (Hub id or folder), below the features.
* :mod:`tisa.analysis.results`: the typed results; :mod:`tisa.analysis.pipeline`:
  :func:`analyze`, which measures models and writes ``metrics.json`` and the report
  (:mod:`tisa.analysis.report`).

Names below load their module on first use, so that ``tisa --help`` does not pay for
torch, transformers or matplotlib.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "OffsetProfile": "tisa.metrics",
    "locality": "tisa.metrics",
    "offset_profile": "tisa.metrics",
    "symmetry": "tisa.metrics",
    "toeplitz_projection": "tisa.metrics",
    "translation_invariance": "tisa.metrics",
    "transpose_symmetry": "tisa.metrics",
    "load_model": "tisa.hf.loading",
    "positional_logits": "tisa.analysis.extract",
    "position_embeddings": "tisa.analysis.extract",
    "scoring_profiles": "tisa.analysis.extract",
    "ti_over_training": "tisa.analysis.training",
    "read_ti_log": "tisa.analysis.training",
    "TrainingTI": "tisa.analysis.training",
    "attention_probe": "tisa.analysis.probes",
    "analyze": "tisa.analysis.pipeline",
    "AnalysisConfig": "tisa.analysis.pipeline",
    "AnalysisResult": "tisa.analysis.results",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tisa.analysis' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
