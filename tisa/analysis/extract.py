"""Position embeddings and positional attention terms out of Hugging Face models.

Supported: models with a learned (or fixed) absolute position-embedding table, namely
BERT, RoBERTa (and XLM-R / CamemBERT, which share its embeddings), ALBERT, ELECTRA,
DistilBERT and GPT-2, plus TISA models made with :mod:`tisa.hf` (their learned scoring
functions f_h). Models are recognised by their module layout, so task heads (``...ForMaskedLM``
etc.) and converted models work too.

Letters: L positions analysed, E embedding size, D hidden size, H heads, Dh head size.

What is extracted
    ``P`` (L, E): the rows of the position table that real positions 0..L-1 use. RoBERTa
    numbers positions from ``padding_idx + 1`` (row 0..padding_idx are never used for
    real tokens), so its rows start there.

    ``F_P = P~ W_Q^h (W_K^h)^T P~^T * s`` (H, L, L): the position-to-position part of the
    layer-1 attention logits, with ``s`` the model's own logit scale (1/sqrt(Dh)). Two
    versions of ``P~`` (L, D):

    * ``"raw"``: P itself, mapped to the hidden size by the *linear part* (no bias) of
      ALBERT's ``embedding_hidden_mapping_in`` / ELECTRA's ``embeddings_project`` when the
      embedding size differs from the hidden size. This is the term Wennberg & Henter
      analyse.
    * ``"ln"``: P as it reaches layer 1, through the same modules the model applies: the
      embedding LayerNorm (then the projection, with its bias) for BERT-style models, the
      first block's ``ln_1`` for GPT-2 (pre-LN). The real LayerNorm input is
      word + token type + position; LayerNorm is not linear, so "the LayerNorm of the
      position part" is an approximation. We use ``LN(P + t)`` with ``t`` the mean
      token-type embedding (``ln_input="position+type"``, the default; BERT inputs mostly
      use type 0 of 2, RoBERTa has a single type) or ``LN(P)`` (``ln_input="position"``).
      Word embeddings are left out: they are what varies, not position.

    Query/key biases are left out by default (``include_bias=False``): then ``F_P`` is the
    pure bilinear position-position term. With ``include_bias=True`` it is
    ``(P~ W_Q + b_Q)(P~ W_K + b_K)^T * s``, the full layer-1 logits of a position-only
    input, which matches the model's own attention exactly when word and type embeddings
    are zero (the tests check this for every family).
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor, nn

from tisa._validate import check_int
from tisa.analysis import metrics
from tisa.bias import expand
from tisa.bias import table as bias_table

__all__ = [
    "SUPPORTED_ARCHITECTURES",
    "ModelLoadError",
    "PositionalTerms",
    "ScoringProfiles",
    "TisaUnavailableError",
    "UnsupportedModelError",
    "cosine_matrix",
    "describe",
    "extract",
    "gram_matrix",
    "has_absolute_positions",
    "is_causal",
    "layer1_position_inputs",
    "load_model",
    "num_positions",
    "position_embeddings",
    "positional_logits",
    "scoring_profiles",
    "ti_over_training",
    "tisa_scorers",
]

#: Human-readable list used in error messages.
SUPPORTED_ARCHITECTURES: tuple[str, ...] = (
    "BERT",
    "RoBERTa (also XLM-RoBERTa, CamemBERT)",
    "ALBERT",
    "ELECTRA",
    "DistilBERT",
    "GPT-2",
    "TISA models made with tisa.hf",
)

LnInput = Literal["position+type", "position"]
Variant = Literal["raw", "ln"]


class UnsupportedModelError(ValueError):
    """The model has neither a supported absolute position table nor TISA scorers."""


class ModelLoadError(ValueError):
    """A model name or path could not be loaded."""


class TisaUnavailableError(ImportError):
    """TISA analysis was asked for but :mod:`tisa.hf` cannot be imported."""


def _supported_message(what: str) -> str:
    return f"{what}; supported: " + ", ".join(SUPPORTED_ARCHITECTURES) + "."


# --------------------------------------------------------------------------------------
# Module layout
# --------------------------------------------------------------------------------------


@dataclass
class _Layout:
    """Where the positional machinery of one model family lives."""

    family: str
    position: nn.Embedding
    first: int  # table row of position 0
    token_type: nn.Embedding | None
    norm: nn.Module | None  # LayerNorm between the embedding sum and layer 1
    project: nn.Linear | None  # embedding size -> hidden size, after `norm`
    query: tuple[Tensor, Tensor | None]  # (D, H*Dh) in x @ W form, (H*Dh,)
    key: tuple[Tensor, Tensor | None]
    num_heads: int
    head_dim: int
    scale: float
    causal: bool


def _base(model: nn.Module) -> nn.Module:
    return getattr(model, "base_model", model)


def _linear(mod: nn.Linear) -> tuple[Tensor, Tensor | None]:
    return mod.weight.detach().T, None if mod.bias is None else mod.bias.detach()


def _embedding(module: nn.Module | None) -> nn.Embedding | None:
    return module if isinstance(module, nn.Embedding) else None


def _layout(model: nn.Module) -> _Layout:
    """Finds the position table and layer-1 query/key maps by module layout."""
    base = _base(model)
    if hasattr(base, "wpe") and hasattr(base, "h"):  # GPT-2
        wpe = _embedding(base.wpe)
        if wpe is None:
            raise UnsupportedModelError(_supported_message("GPT-2 model without a wpe table"))
        attn = base.h[0].attn
        w, b = attn.c_attn.weight.detach(), attn.c_attn.bias.detach()  # Conv1D: x @ W + b
        d = attn.embed_dim
        return _Layout(
            family="gpt2",
            position=wpe,
            first=0,
            token_type=None,
            norm=base.h[0].ln_1,
            project=None,
            query=(w[:, :d], b[:d]),
            key=(w[:, d : 2 * d], b[d : 2 * d]),
            num_heads=attn.num_heads,
            head_dim=attn.head_dim,
            scale=float(getattr(attn, "scaling", attn.head_dim**-0.5)),
            causal=True,
        )
    emb = getattr(base, "embeddings", None)
    position = _embedding(getattr(emb, "position_embeddings", None))
    if emb is None or position is None:
        raise UnsupportedModelError(
            _supported_message(f"{type(model).__name__} has no absolute position-embedding table")
        )
    token_type = _embedding(getattr(emb, "token_type_embeddings", None))
    norm = getattr(emb, "LayerNorm", None)
    first = 0
    if hasattr(type(emb), "create_position_ids_from_input_ids"):  # RoBERTa family
        first = int(getattr(emb, "padding_idx", position.padding_idx or 0)) + 1
    transformer = getattr(base, "transformer", None)
    encoder = getattr(base, "encoder", None)
    project: nn.Linear | None = None
    if transformer is not None and hasattr(transformer, "layer"):  # DistilBERT
        attn = transformer.layer[0].attention
        family, q, k = "distilbert", attn.q_lin, attn.k_lin
        heads, head_dim = attn.n_heads, attn.attention_head_size
    elif encoder is not None and hasattr(encoder, "albert_layer_groups"):  # ALBERT
        attn = encoder.albert_layer_groups[0].albert_layers[0].attention
        family, q, k = "albert", attn.query, attn.key
        heads, head_dim = attn.num_attention_heads, attn.attention_head_size
        project = encoder.embedding_hidden_mapping_in
    elif encoder is not None and hasattr(encoder, "layer"):  # BERT, RoBERTa, ELECTRA
        attn = encoder.layer[0].attention.self
        q, k = attn.query, attn.key
        heads, head_dim = attn.num_attention_heads, attn.attention_head_size
        project = getattr(base, "embeddings_project", None)  # ELECTRA when E != D
        family = "electra" if project is not None else ("roberta" if first else "bert")
        family = getattr(getattr(model, "config", None), "model_type", family) or family
    else:
        raise UnsupportedModelError(
            _supported_message(f"unrecognised module layout of {type(model).__name__}")
        )
    if not isinstance(q, nn.Linear) or not isinstance(k, nn.Linear):
        raise UnsupportedModelError(
            _supported_message(f"layer-1 query/key of {type(model).__name__} are not Linear")
        )
    return _Layout(
        family=family,
        position=position,
        first=first,
        token_type=token_type,
        norm=norm,
        project=project,
        query=_linear(q),
        key=_linear(k),
        num_heads=int(heads),
        head_dim=int(head_dim),
        scale=float(getattr(attn, "scaling", head_dim**-0.5)),
        causal=False,
    )


def has_absolute_positions(model: nn.Module) -> bool:
    """True when :func:`position_embeddings` can analyse ``model``."""
    try:
        _layout(model)
    except UnsupportedModelError:
        return False
    return True


def is_causal(model: nn.Module) -> bool:
    """True for decoder-only models (GPT-2, TISA GPT-2, any ``config.is_decoder``)."""
    config = getattr(model, "config", None)
    base = _base(model)
    return (
        bool(getattr(config, "is_decoder", False))
        or "gpt2" in str(getattr(config, "model_type", ""))
        or (hasattr(base, "wpe") and hasattr(base, "h"))
    )


def num_positions(model: nn.Module) -> int:
    """Number of real positions the model's table covers (512 for BERT and RoBERTa)."""
    lay = _layout(model)
    return lay.position.num_embeddings - lay.first


def _check_max_positions(model: nn.Module, max_positions: int | None) -> int:
    total = num_positions(model)
    if max_positions is None:
        return total
    check_int(max_positions, "max_positions", minimum=2)
    return min(max_positions, total)


def describe(model: nn.Module) -> dict[str, Any]:
    """Plain-data summary: family, layers, heads, positions, causal, TISA or not."""
    config = getattr(model, "config", None)
    out: dict[str, Any] = {
        "model_type": getattr(config, "model_type", type(model).__name__),
        "class": type(model).__name__,
        "num_layers": getattr(config, "num_hidden_layers", None),
        "num_heads": getattr(config, "num_attention_heads", None),
        "hidden_size": getattr(config, "hidden_size", None),
        "absolute_positions": has_absolute_positions(model),
    }
    if out["absolute_positions"]:
        lay = _layout(model)
        out.update(
            family=lay.family,
            num_heads=lay.num_heads,
            head_dim=lay.head_dim,
            num_positions=num_positions(model),
            embedding_size=lay.position.embedding_dim,
            causal=lay.causal,
        )
    else:
        out["causal"] = is_causal(model)
    try:
        out["tisa_layers"] = len(tisa_scorers(model))
    except TisaUnavailableError:
        out["tisa_layers"] = None
    out["num_parameters"] = sum(p.numel() for p in model.parameters())
    return out


# --------------------------------------------------------------------------------------
# Position embeddings and layer-1 positional logits
# --------------------------------------------------------------------------------------


@torch.no_grad()
def position_embeddings(model: nn.Module, max_positions: int | None = None) -> Tensor:
    """The position-embedding rows of positions 0..L-1: (L, E), float32 on CPU.

    Args:
        model: a supported Hugging Face model (base or with a task head).
        max_positions: L; default (``None``) the full table (512 for BERT), capped there.
    """
    lay = _layout(model)
    n = _check_max_positions(model, max_positions)
    return lay.position.weight.detach()[lay.first : lay.first + n].float().cpu()


def gram_matrix(p: Tensor) -> Tensor:
    """P P^T: (L, L) from (L, E)."""
    if p.dim() != 2:
        raise ValueError(f"p must have shape (L, E), got {tuple(p.shape)}")
    return p @ p.T


def cosine_matrix(p: Tensor) -> Tensor:
    """Cosine similarity of every pair of rows: (L, L) from (L, E)."""
    if p.dim() != 2:
        raise ValueError(f"p must have shape (L, E), got {tuple(p.shape)}")
    unit = nn.functional.normalize(p, dim=-1)
    return unit @ unit.T


@torch.no_grad()
def layer1_position_inputs(
    model: nn.Module, *, max_positions: int | None = None, ln_input: LnInput = "position+type"
) -> dict[str, Tensor]:
    """P~ for both variants (see the module docstring): {"raw": (L, D), "ln": (L, D)}."""
    if ln_input not in ("position+type", "position"):
        raise ValueError(f"ln_input must be 'position+type' or 'position', got {ln_input!r}")
    lay = _layout(model)
    n = _check_max_positions(model, max_positions)
    p = lay.position.weight.detach()[lay.first : lay.first + n]
    raw = p if lay.project is None else p @ lay.project.weight.detach().T
    x = p
    if ln_input == "position+type" and lay.token_type is not None:
        x = x + lay.token_type.weight.detach().mean(0)
    if lay.norm is not None:
        x = lay.norm(x)
    if lay.project is not None:
        x = lay.project(x)
    return {"raw": raw.float().cpu(), "ln": x.float().cpu()}


@torch.no_grad()
def _logits(lay: _Layout, x: Tensor, include_bias: bool) -> Tensor:
    """(L, D) inputs -> (H, L, L) query-key logits of layer 1."""
    n = x.shape[0]
    (wq, bq), (wk, bk) = lay.query, lay.key
    q = x @ wq.float().cpu()  # (L, H*Dh)
    k = x @ wk.float().cpu()
    if include_bias:
        if bq is not None:
            q = q + bq.float().cpu()
        if bk is not None:
            k = k + bk.float().cpu()
    q = q.reshape(n, lay.num_heads, lay.head_dim).transpose(0, 1)  # (H, L, Dh)
    k = k.reshape(n, lay.num_heads, lay.head_dim).transpose(0, 1)  # (H, L, Dh)
    return (q @ k.transpose(-2, -1)) * lay.scale  # (H, L, L)


def positional_logits(
    model: nn.Module,
    *,
    max_positions: int | None = None,
    variant: Variant = "ln",
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
) -> Tensor:
    """F_P of every layer-1 head: (H, L, L), float32.

    Args:
        model: a supported Hugging Face model.
        max_positions: L (default: the full table).
        variant: ``"raw"`` (P through the linear projection only) or ``"ln"`` (P as it
            reaches layer 1: embedding LayerNorm / GPT-2's ``ln_1``, then projection).
        ln_input: what the LayerNorm sees: ``"position+type"`` (P + mean token-type
            embedding) or ``"position"`` (P alone). Ignored by ``variant="raw"``.
        include_bias: add the query/key biases before the product.
    """
    if variant not in ("raw", "ln"):
        raise ValueError(f"variant must be 'raw' or 'ln', got {variant!r}")
    lay = _layout(model)
    x = layer1_position_inputs(model, max_positions=max_positions, ln_input=ln_input)[variant]
    return _logits(lay, x, include_bias)


@dataclass
class PositionalTerms:
    """Everything :func:`extract` reads off one model.

    Attributes:
        position: (L, E) position embeddings P.
        gram: (L, L) P P^T.
        cosine: (L, L) cosine similarities of the rows of P.
        fp_raw: (H, L, L) layer-1 F_P from raw P.
        fp_ln: (H, L, L) layer-1 F_P from P as it reaches layer 1.
        causal: whether the model only attends to j <= i (GPT-2).
        settings: the options used (plain data).
    """

    position: Tensor
    gram: Tensor
    cosine: Tensor
    fp_raw: Tensor
    fp_ln: Tensor
    causal: bool
    settings: dict[str, Any]


def extract(
    model: nn.Module,
    *,
    max_positions: int | None = None,
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
) -> PositionalTerms:
    """P, P P^T, cosines and both versions of layer-1 F_P for a supported model."""
    lay = _layout(model)
    p = position_embeddings(model, max_positions)
    inputs = layer1_position_inputs(model, max_positions=max_positions, ln_input=ln_input)
    return PositionalTerms(
        position=p,
        gram=gram_matrix(p),
        cosine=cosine_matrix(p),
        fp_raw=_logits(lay, inputs["raw"], include_bias),
        fp_ln=_logits(lay, inputs["ln"], include_bias),
        causal=lay.causal,
        settings={
            "max_positions": p.shape[0],
            "ln_input": ln_input,
            "include_bias": include_bias,
            "first_row": lay.first,
            "family": lay.family,
        },
    )


# --------------------------------------------------------------------------------------
# TISA models
# --------------------------------------------------------------------------------------


def tisa_scorers(model: nn.Module) -> list[tuple[int, nn.Module]]:
    """(layer, scoring function) pairs of a TISA model; empty for other models.

    Raises:
        TisaUnavailableError: :mod:`tisa.hf` cannot be imported.
    """
    try:
        from tisa.hf import iter_scorers
    except ImportError as err:
        raise TisaUnavailableError(
            "analysing TISA scoring functions needs tisa.hf.iter_scorers, which could not "
            f"be imported ({err})"
        ) from err
    return list(iter_scorers(model))


@dataclass
class ScoringProfiles:
    """Learned f_h of every TISA layer and head.

    Attributes:
        layers: layer index of each row.
        offsets: (2K+1,) k = -K..K.
        values: (N_layers, H, 2K+1) f_h(k).
        ti: (N_layers, H) TI of each head's bias matrix (K+1, K+1) f_h(j - i).
        families: scoring family name per layer.
    """

    layers: list[int]
    offsets: Tensor
    values: Tensor
    ti: Tensor
    families: list[str]


@torch.no_grad()
def scoring_profiles(
    scorers: Iterable[tuple[int, nn.Module]], *, max_offset: int = 64
) -> ScoringProfiles:
    """Evaluates scoring functions on k = -K..K and measures their biases' TI.

    The TI is computed (not assumed) on the dense (H, K+1, K+1) bias that
    :func:`tisa.bias.expand` builds from the table, so a broken expansion would show up.

    Args:
        scorers: (layer, :class:`~tisa.scoring.ScoringFunction`) pairs, e.g. from
            :func:`tisa_scorers`.
        max_offset: K >= 1.
    """
    check_int(max_offset, "max_offset")
    n = max_offset + 1
    layers, values, tis, families = [], [], [], []
    for layer, scorer in scorers:
        tab = bias_table(scorer, n).detach().float().cpu()  # (H, 2K+1), column t <-> k = t-K
        layers.append(int(layer))
        values.append(tab)
        tis.append(metrics.translation_invariance(expand(tab, n, n)))
        families.append(str(getattr(scorer, "family", type(scorer).__name__)))
    if not layers:
        raise ValueError("scorers is empty: the model has no TISA scoring functions")
    return ScoringProfiles(
        layers=layers,
        offsets=torch.arange(-max_offset, max_offset + 1),
        values=torch.stack(values),
        ti=torch.stack(tis),
        families=families,
    )


# --------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def _is_tisa_config(config: Any) -> bool:
    try:
        keys = config.to_dict().keys()
    except Exception:  # pragma: no cover - exotic configs
        return False
    return "tisa" in str(getattr(config, "model_type", "")).lower() or any(
        "tisa" in k.lower() for k in keys
    )


def _register_tisa() -> bool:
    """Imports tisa.hf when present so that saved TISA models load with Auto classes."""
    try:
        import tisa.hf  # noqa: F401
    except ImportError:
        return False
    return True


def load_model(
    name_or_path: str | os.PathLike[str], *, tokenizer: bool = True, eager: bool = True
) -> tuple[nn.Module, Any]:
    """Loads a model (and its tokenizer) for analysis, in eval mode on CPU.

    Args:
        name_or_path: local folder or Hugging Face Hub id.
        tokenizer: also load the tokenizer (``None`` in the result when there is none).
        eager: ask for the eager attention implementation, which returns attention
            weights. TISA models keep the implementation their config names.

    Returns:
        (model, tokenizer or None).

    Raises:
        ModelLoadError: not a folder and not a loadable Hub id (e.g. offline, not cached).
        UnsupportedModelError: the architecture is not supported (see
            :data:`SUPPORTED_ARCHITECTURES`).
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    name = str(name_or_path)
    path = Path(name).expanduser()
    if not path.exists() and (not _HUB_ID.match(name) or name.startswith(".")):
        raise ModelLoadError(f"{name!r}: no such folder, and not a Hugging Face Hub id")
    if path.exists() and not path.is_dir():
        raise ModelLoadError(f"{name!r} is a file; expected a model folder or a Hub id")
    source = str(path) if path.exists() else name
    tisa_ok = _register_tisa()
    # Without a route to the Hub, use the cache only: fails at once instead of retrying.
    hub: dict[str, Any] = {} if path.exists() or _hub_reachable() else {"local_files_only": True}
    try:
        config = AutoConfig.from_pretrained(source, **hub)
    except (OSError, ValueError, KeyError) as err:
        where = "folder" if path.exists() else "Hugging Face Hub id"
        hint = (
            "it has no readable config.json"
            if path.exists()
            else "not in the local cache and the Hub could not be reached (offline?) or "
            "the id does not exist"
        )
        raise ModelLoadError(f"cannot load {where} {name!r}: {hint} ({_first_line(err)})") from err
    is_tisa = _is_tisa_config(config)
    if is_tisa and not tisa_ok:
        raise UnsupportedModelError(
            f"{name!r} is a TISA model, but tisa.hf could not be imported to load it"
        )
    known = {"bert", "roberta", "xlm-roberta", "camembert", "albert", "electra", "distilbert"}
    if config.model_type not in known | {"gpt2"} and not is_tisa:
        raise UnsupportedModelError(
            _supported_message(f"{name!r} is a {config.model_type!r} model, not supported")
        )
    kwargs: dict[str, Any] = dict(hub)
    if eager and not is_tisa:
        kwargs["attn_implementation"] = "eager"
    try:
        with _quiet_loading():  # a task head's unused weights are expected, not news
            model = AutoModel.from_pretrained(source, **kwargs)
    except (OSError, ValueError) as err:
        raise ModelLoadError(f"cannot load the weights of {name!r} ({_first_line(err)})") from err
    model.eval()
    tok = None
    # A local folder without tokenizer files would give an empty default tokenizer.
    if tokenizer and (not path.exists() or any((path / f).exists() for f in _TOKENIZER_FILES)):
        try:
            tok = AutoTokenizer.from_pretrained(source, **hub)
        except (OSError, ValueError, TypeError):
            tok = None
    return model, tok


def _hub_reachable(timeout: float = 3.0) -> bool:
    """False in offline mode or when the Hub's host cannot be reached within ``timeout``."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return False
    url = urlparse(constants.ENDPOINT)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=timeout):
            return True
    except OSError:
        return False


_TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
)


@contextmanager
def _quiet_loading() -> Iterator[None]:
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:300] if text else type(err).__name__


# --------------------------------------------------------------------------------------
# Over training
# --------------------------------------------------------------------------------------


def _eval_loss(checkpoint: Path, step: int) -> float | None:
    """eval_loss logged at ``step`` (or the last one before it) in trainer_state.json."""
    state_file = checkpoint / "trainer_state.json"
    if not state_file.is_file():
        return None
    try:
        history = json.loads(state_file.read_text()).get("log_history", [])
    except (json.JSONDecodeError, AttributeError):
        return None
    evals = [
        (int(e.get("step", -1)), float(e["eval_loss"]))
        for e in history
        if isinstance(e, dict) and "eval_loss" in e
    ]
    exact = [loss for s, loss in evals if s == step]
    if exact:
        return exact[-1]
    before = [(s, loss) for s, loss in evals if s <= step]
    return max(before)[1] if before else None


def _spearman(x: list[float | None], y: list[float | None]) -> dict[str, Any] | None:
    from scipy.stats import spearmanr

    pairs = [(a, b) for a, b in zip(x, y, strict=True) if a is not None and b is not None]
    if len(pairs) < 3:
        return None
    xs, ys = zip(*pairs, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = spearmanr(xs, ys)
    rho, pvalue = float(res.statistic), float(res.pvalue)
    if rho != rho:  # NaN: constant input
        return None
    return {"rho": rho, "pvalue": pvalue, "n": len(pairs)}


def ti_over_training(
    checkpoint_dir: str | os.PathLike[str],
    *,
    max_positions: int | None = None,
    ln_input: LnInput = "position+type",
    include_bias: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Translation invariance of every ``checkpoint-<step>/`` in a Trainer output folder.

    For each checkpoint: TI of P P^T, the mean over layer-1 heads of TI(F_P) (raw and
    through LayerNorm), and the ``eval_loss`` logged at that step in the checkpoint's
    ``trainer_state.json``. Spearman rank correlations relate each TI series to the step
    and to the validation loss (a negative rho against the loss means: more translation
    invariant, lower loss).

    Args:
        checkpoint_dir: folder holding ``checkpoint-<step>/`` subfolders.
        max_positions: positions analysed (default: the full table).
        ln_input, include_bias: see :func:`positional_logits`.
        progress: show a progress bar.

    Returns:
        Plain data: ``steps``, ``checkpoints`` (folder names), ``eval_loss`` (None where
        not logged), ``ti_gram``, ``ti_fp_raw``, ``ti_fp_ln`` (lists, one per checkpoint)
        and ``spearman``: {"<series>_vs_step" | "<series>_vs_eval_loss": {"rho", "pvalue",
        "n"} or None when fewer than 3 points or a constant series}.

    Raises:
        ValueError: the folder does not exist or holds no ``checkpoint-<step>`` folders.
    """
    from tqdm.auto import tqdm

    folder = Path(checkpoint_dir)
    if not folder.is_dir():
        raise ValueError(f"checkpoint_dir must be an existing folder, got {str(checkpoint_dir)!r}")
    from tisa.checkpoints import checkpoint_step, list_checkpoints

    found = [(checkpoint_step(path), path) for path in list_checkpoints(folder)]
    if not found:
        raise ValueError(
            f"checkpoint_dir {str(checkpoint_dir)!r} holds no 'checkpoint-<step>' folders"
        )
    out: dict[str, Any] = {
        "steps": [],
        "checkpoints": [],
        "eval_loss": [],
        "ti_gram": [],
        "ti_fp_raw": [],
        "ti_fp_ln": [],
    }
    for step, path in tqdm(found, desc="checkpoints", disable=not progress, leave=False):
        model, _ = load_model(path, tokenizer=False, eager=False)
        terms = extract(
            model, max_positions=max_positions, ln_input=ln_input, include_bias=include_bias
        )
        causal = terms.causal
        out["steps"].append(step)
        out["checkpoints"].append(path.name)
        out["eval_loss"].append(_eval_loss(path, step))
        out["ti_gram"].append(float(metrics.translation_invariance(terms.gram)))
        out["ti_fp_raw"].append(
            float(metrics.translation_invariance(terms.fp_raw, causal=causal).mean())
        )
        out["ti_fp_ln"].append(
            float(metrics.translation_invariance(terms.fp_ln, causal=causal).mean())
        )
    out["spearman"] = {
        f"{series}_vs_{against}": _spearman(out[series], out[key])
        for series in ("ti_gram", "ti_fp_raw", "ti_fp_ln")
        for against, key in (("step", "steps"), ("eval_loss", "eval_loss"))
    }
    return out
