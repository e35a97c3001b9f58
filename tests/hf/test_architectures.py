"""The per-family descriptions find the same modules the models use."""

from __future__ import annotations

import pytest
import transformers as hf

from tisa.hf.architectures import architecture_of, stock_model_type

SMALL = dict(num_hidden_layers=3, num_attention_heads=4, intermediate_size=32, vocab_size=60)
CONFIGS = {
    "bert": hf.BertConfig(hidden_size=16, max_position_embeddings=20, **SMALL),
    "roberta": hf.RobertaConfig(hidden_size=16, max_position_embeddings=22, **SMALL),
    "xlm-roberta": hf.XLMRobertaConfig(hidden_size=16, max_position_embeddings=22, **SMALL),
    "albert": hf.AlbertConfig(
        embedding_size=8, hidden_size=16, max_position_embeddings=20, inner_group_num=2, **SMALL
    ),
    "electra": hf.ElectraConfig(
        embedding_size=8, hidden_size=16, max_position_embeddings=20, **SMALL
    ),
    "distilbert": hf.DistilBertConfig(
        dim=16, n_layers=3, n_heads=4, hidden_dim=32, max_position_embeddings=20, vocab_size=60
    ),
    "gpt2": hf.GPT2Config(n_embd=16, n_layer=3, n_head=4, n_positions=20, vocab_size=60),
}


@pytest.mark.parametrize("family", sorted(CONFIGS))
def test_description_matches_the_model(family):
    model = hf.AutoModel.from_config(CONFIGS[family])
    arch = architecture_of(model)
    base = model.base_model
    table = arch.position_table(base)
    assert table is not None and table.embedding_dim in (8, 16)
    assert arch.first_position(base) == (2 if "roberta" in family else 0)  # padding_idx + 1
    modules = arch.attention_modules(base)
    assert len(modules) == (2 if family == "albert" else 3)  # ALBERT: one group, 2 layers
    assert arch.num_layers(model.config) == (6 if family == "albert" else 3)
    (wq, _), (wk, _) = arch.query_key(modules[0])
    assert wq.shape == wk.shape == (16, 16)
    assert arch.head_shape(modules[0]) == (4, 4)
    assert arch.logit_scale(modules[0]) == pytest.approx(0.5)
    assert arch.causal == (family == "gpt2")
    assert (arch.input_projection(base) is not None) == (family in ("albert", "electra"))


def test_tisa_types_map_to_their_family_and_others_to_none():
    assert stock_model_type(hf.BertConfig()) == "bert"
    config = hf.BertConfig()
    config.model_type = "tisa_bert"
    assert stock_model_type(config) == "bert" and architecture_of(config).name == "BERT"
    assert architecture_of(hf.LlamaConfig()) is None
