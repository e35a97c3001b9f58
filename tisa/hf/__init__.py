"""Hugging Face transformers integration: TISA inside BERT, ALBERT, RoBERTa, ELECTRA, GPT-2.

Importing this package registers

- the attention implementations ``"tisa"``, ``"tisa_eager"``, ``"tisa_sdpa"`` and
  ``"tisa_flex"`` with ``transformers.AttentionInterface``, each with its mask function in
  ``transformers.masking_utils.AttentionMaskInterface``;
- the model types ``tisa_bert``, ``tisa_albert``, ``tisa_roberta``, ``tisa_electra`` and
  ``tisa_gpt2`` with ``AutoConfig`` and the ``AutoModel*`` classes,

so saved TISA models reload with the Auto classes::

    import tisa.hf
    model = tisa.hf.add_tisa(AutoModelForSequenceClassification.from_pretrained(...))
    model.save_pretrained("out")
    AutoModelForSequenceClassification.from_pretrained("out")   # TISA again

Modules: :mod:`~tisa.hf.install` (``add_tisa``, ``tisa_config``: where TISA is added to a
model), :mod:`~tisa.hf.settings` (``TisaSettings``), :mod:`~tisa.hf.architectures` (where
each family keeps its embeddings and attention), :mod:`~tisa.hf.model_types` (the
registered TISA configs and classes), :mod:`~tisa.hf.attention_fn` (the attention and mask
functions), :mod:`~tisa.hf.optim` and :mod:`~tisa.hf.trainer` (fine-tuning the scorers on
their own learning rate). See docs/hf.md for the design.
"""

from tisa.hf.attention_fn import IMPLEMENTATIONS, apply_rotary, tisa_attention_forward, tisa_mask
from tisa.hf.attention_fn import register as _register_attention
from tisa.hf.install import add_tisa, is_tisa, iter_scorers, positional_parameters, tisa_config
from tisa.hf.model_types import (
    TISA_FAMILY_NAMES,
    TisaAlbertConfig,
    TisaBertConfig,
    TisaElectraConfig,
    TisaGPT2Config,
    TisaRobertaConfig,
    register_auto_classes,
    tisa_model_class,
)
from tisa.hf.optim import (
    parameter_groups,
    position_table_names,
    scoring_movement,
    scoring_parameter_names,
    scoring_snapshot,
)
from tisa.hf.settings import DEFAULT_START, STARTS, TisaSettings, start_options, takes_num_kernels

__all__ = [
    "TISA_FAMILY_NAMES",
    "DEFAULT_START",
    "IMPLEMENTATIONS",
    "STARTS",
    "TisaAlbertConfig",
    "TisaBertConfig",
    "TisaElectraConfig",
    "TisaGPT2Config",
    "TisaRobertaConfig",
    "TisaSettings",
    "TisaTrainer",
    "add_tisa",
    "apply_rotary",
    "is_tisa",
    "iter_scorers",
    "parameter_groups",
    "position_table_names",
    "positional_parameters",
    "register_auto_classes",
    "scoring_movement",
    "scoring_parameter_names",
    "scoring_snapshot",
    "start_options",
    "takes_num_kernels",
    "tisa_attention_forward",
    "tisa_config",
    "tisa_mask",
    "tisa_model_class",
]


def __getattr__(name: str):
    if name == "TisaTrainer":  # imports the Trainer (and accelerate) only when asked for
        from tisa.hf.trainer import TisaTrainer

        return TisaTrainer
    raise AttributeError(f"module 'tisa.hf' has no attribute {name!r}")


_register_attention()
register_auto_classes()
