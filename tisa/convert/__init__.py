"""Converting a pretrained encoder's position table into TISA scoring functions.

* :mod:`tisa.convert.profiles`: offset profiles of the attention logits on real text.
* :mod:`tisa.convert.fit`: least-squares RBF kernels for a profile.
* :mod:`tisa.convert.student`: the model without its table, scorers fitted layer by layer.
* :mod:`tisa.convert.distill`: distillation towards the original (resumable).
* :mod:`tisa.convert.evaluate`: fidelity, STS-B zero-shot, long inputs.
* :mod:`tisa.convert.convert`: the pipeline behind ``tisa convert`` (:func:`convert`).
* :mod:`tisa.convert.report`: its report.html.

Names below load their module on first use (``tisa --help`` stays fast).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "ConvertConfig": "tisa.convert.convert",
    "ConvertResult": "tisa.convert.convert",
    "convert": "tisa.convert.convert",
    "finished_conversion": "tisa.convert.convert",
    "DistillSettings": "tisa.convert.distill",
    "fit_rbf": "tisa.convert.fit",
    "build_student": "tisa.convert.student",
    "fit_layers": "tisa.convert.student",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tisa.convert' has no attribute {name!r}")
