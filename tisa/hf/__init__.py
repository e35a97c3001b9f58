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

See docs/hf.md for the design.
"""

from tisa.hf.attention_fn import IMPLEMENTATIONS, apply_rotary, tisa_attention_forward, tisa_mask
from tisa.hf.attention_fn import register as _register_attention
from tisa.hf.convert import (
    DEFAULT_START,
    STARTS,
    add_tisa,
    is_tisa,
    iter_scorers,
    positional_parameters,
    start_options,
    tisa_config,
)
from tisa.hf.models import (
    ARCHITECTURES,
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
    scoring_movement,
    scoring_parameter_names,
    scoring_snapshot,
)

__all__ = [
    "ARCHITECTURES",
    "DEFAULT_START",
    "STARTS",
    "TisaTrainer",
    "IMPLEMENTATIONS",
    "TisaAlbertConfig",
    "TisaBertConfig",
    "TisaElectraConfig",
    "TisaGPT2Config",
    "TisaRobertaConfig",
    "add_tisa",
    "apply_rotary",
    "is_tisa",
    "iter_scorers",
    "parameter_groups",
    "positional_parameters",
    "scoring_movement",
    "scoring_parameter_names",
    "scoring_snapshot",
    "start_options",
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
