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
from tisa.hf.convert import add_tisa, is_tisa, iter_scorers, positional_parameters, tisa_config
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

__all__ = [
    "ARCHITECTURES",
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
    "positional_parameters",
    "tisa_attention_forward",
    "tisa_config",
    "tisa_mask",
    "tisa_model_class",
]

_register_attention()
register_auto_classes()
