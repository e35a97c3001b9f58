"""What one ``tisa glue`` run reads: the task's data (GLUE or custom files) subset and
tokenized, the model's config and tokenizer checked against the settings, and the model
with its task head and, for the TISA variants, TISA installed (:mod:`tisa.glue.run`
trains it)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tisa.hf
from tisa.checkpoints import tensor_file_problems
from tisa.data.glue import GlueTask, get_task, load_glue
from tisa.data.glue_custom import load_custom
from tisa.glue.config import GlueConfig
from tisa.hub import model_source

if TYPE_CHECKING:
    from datasets import DatasetDict
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "build_model",
    "check_max_length",
    "check_room_for_text",
    "encode",
    "load_task",
    "model_tokenizer",
    "read_model_config",
]

logger = logging.getLogger(__name__)


def load_task(config: GlueConfig, name: str) -> tuple[GlueTask, DatasetDict]:
    """The task and its data: a GLUE task (hub or glue_data folder) or custom files."""
    if config.train_file is not None:
        return load_custom(
            config.train_file,
            config.validation_file,
            text_columns=config.text_columns,
            label_column=config.label_column,
            task_type=config.task_type,
            task=None if name == "custom" else name,
            name=name,
        )
    return get_task(name), load_glue(name, glue_dir=config.glue_dir, hf_path=config.hf_path)


def encode(
    config: GlueConfig, task: GlueTask, data: DatasetDict, tokenizer: PreTrainedTokenizerBase
) -> DatasetDict:
    """Subsets (if asked) and tokenizes: text columns -> input_ids, attention_mask, ..."""
    from datasets import DatasetDict

    if config.holdout > 0:  # model selection: evaluate on a part of train, never on dev
        parts = data["train"].train_test_split(test_size=config.holdout, seed=0)
        held = {split: parts["test"] for split in task.eval_splits}
        data = DatasetDict({"train": parts["train"], **held})
    cap = config.max_train_samples
    limits = {"train": cap.get(task.name) if isinstance(cap, dict) else cap}
    limits.update({s: config.max_eval_samples for s in task.eval_splits})
    parts = {}
    for split, limit in limits.items():
        ds = data[split]
        if limit is not None and limit < len(ds):
            ds = ds.shuffle(seed=0).select(range(limit))  # the same subset for every run
        parts[split] = ds

    pair = len(task.text_columns) == 2
    special = tokenizer.num_special_tokens_to_add(pair=pair)

    def tokenize(batch: dict[str, list]) -> dict[str, list]:
        texts = [batch[c] for c in task.text_columns]  # one text or a pair
        out = tokenizer(*texts, truncation=True, max_length=config.max_length)
        # an example left without text (a segment of a pair included) after truncation
        if getattr(out, "encodings", None):
            out[_EMPTY] = [
                len({i for i in e.sequence_ids if i is not None}) < len(texts)
                for e in out.encodings
            ]
        else:  # a slow tokenizer: count the tokens that are not special
            out[_EMPTY] = [len(ids) <= special for ids in out["input_ids"]]
        return out

    encoded = DatasetDict(parts).map(
        tokenize, batched=True, remove_columns=list(task.text_columns), desc=f"tokenize {task.name}"
    )
    for split, ds in encoded.items():
        empty = sum(ds[_EMPTY])
        if empty > 0.05 * len(ds):
            logger.warning(
                "%s %s: %d of %d examples (%.0f%%) have no text left at max_length=%d%s",
                task.name,
                split,
                empty,
                len(ds),
                100 * empty / len(ds),
                config.max_length,
                "; raise max_length" if pair else " (empty texts in the data?)",
            )
    return encoded.remove_columns(_EMPTY)


#: Column of the encoded data marking examples without text (removed before training).
_EMPTY = "tisa_no_text"


def check_room_for_text(
    config: GlueConfig, tasks: Sequence[GlueTask], tokenizer: PreTrainedTokenizerBase
) -> None:
    """max_length must leave at least one text token after the special tokens (one in each
    segment of a pair): shorter inputs would train on nothing but the special tokens."""
    for task in tasks:
        pair = len(task.text_columns) == 2
        need = tokenizer.num_special_tokens_to_add(pair=pair) + (2 if pair else 1)
        if config.max_length < need:
            what = "a sentence pair" if pair else "a sentence"
            raise ValueError(
                f"max_length: {config.max_length} leaves no text in {task.name}: the tokenizer "
                f"adds {need - (2 if pair else 1)} special tokens to {what}; expected at "
                f"least {need}"
            )


def build_model(
    config: GlueConfig, task: GlueTask, variant: str, tokenizer: PreTrainedTokenizerBase
) -> PreTrainedModel:
    """The model with a classification (or regression) head for ``task``, and TISA added
    for the variants ``keep`` and ``remove``; its own positional parameters frozen when
    ``position_learning_rate`` is 0.

    Raises:
        ValueError: a model that cannot be loaded, or ``position_learning_rate`` set for a
            model without positional parameters of its own.
    """
    from transformers import AutoModelForSequenceClassification

    kwargs: dict[str, Any] = {
        "num_labels": task.num_labels,
        "problem_type": "regression" if task.is_regression else "single_label_classification",
    }
    if not task.is_regression:
        kwargs["id2label"] = dict(enumerate(task.label_names))
        kwargs["label2id"] = {n: i for i, n in enumerate(task.label_names)}
    from safetensors import SafetensorError

    try:
        model = AutoModelForSequenceClassification.from_pretrained(
            model_source(config.model), ignore_mismatched_sizes=True, **kwargs
        )
    except (OSError, ValueError, SafetensorError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"model: cannot load {config.model!r} ({first})") from err
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if variant != "none":
        kernels = config.num_kernels if tisa.hf.takes_num_kernels(config.scoring) else None
        tisa.hf.add_tisa(
            model,
            tisa.hf.TisaSettings(
                scoring=config.scoring, num_kernels=kernels, position_embeddings=variant
            ),
            start=config.tisa_start,
        )
    if config.position_learning_rate is not None:
        own = set(own_position_names(model, variant))
        if not own:
            raise ValueError(
                f"position_learning_rate: {config.model!r} under the variant {variant!r} has "
                "no positional parameters of its own (no absolute position table, no TISA "
                "scoring functions it came with); leave it unset"
            )
        if config.position_learning_rate == 0:  # frozen
            for name, param in model.named_parameters():
                if name in own:
                    param.requires_grad_(False)
    return model


def own_position_names(model: PreTrainedModel, variant: str) -> list[str]:
    """The parameters :attr:`GlueConfig.position_learning_rate` sets the rate of: the
    model's absolute position table, and under the variant ``none`` any TISA scoring
    functions it came with (a ``tisa convert`` output); scorers that the variants ``keep``
    and ``remove`` add train at ``tisa_learning_rate``."""
    names = tisa.hf.position_table_names(model)
    if variant == "none":
        names += [n for n in tisa.hf.scoring_parameter_names(model) if n not in names]
    return names


def read_model_config(config: GlueConfig) -> PretrainedConfig:
    """The model's configuration; a ``ValueError`` naming ``model`` when it cannot be read
    (a missing folder, a file, a folder without config.json, an unknown Hub id)."""
    from transformers import AutoConfig

    name = model_source(config.model)
    path = Path(name).expanduser()
    if path.exists() and not path.is_dir():
        raise ValueError(
            f"model: {name!r} is a file; expected a model folder (save_pretrained) or a "
            "Hugging Face Hub id"
        )
    if path.is_dir() and not (path / "config.json").is_file():
        raise ValueError(f"model: folder {name!r} holds no config.json, so no saved model")
    if path.is_dir():  # weights cut short fail here, not after the data is prepared
        problems = [p for f in sorted(path.iterdir()) for p in tensor_file_problems(f)]
        if problems:
            raise ValueError(f"model: folder {name!r}: " + "; ".join(problems))
    if not path.exists() and (name.startswith((".", "/", "~")) or name.count("/") > 1):
        raise ValueError(f"model: no such folder: {name!r}")
    try:
        return AutoConfig.from_pretrained(name)
    except (OSError, ValueError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        where = "folder" if path.is_dir() else "model folder nor a reachable Hugging Face Hub id"
        raise ValueError(f"model: {name!r} is not a readable {where} ({first})") from err


def model_tokenizer(config: GlueConfig) -> PreTrainedTokenizerBase:
    """The model's tokenizer (padding with end-of-text where it has no pad token)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model_source(config.model))
    except (OSError, ValueError, TypeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"model: no tokenizer could be loaded from {config.model!r} ({first})"
        ) from err
    if tokenizer.pad_token is None:  # e.g. GPT-2: pad with the end-of-text token
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def check_max_length(config: GlueConfig, model_config: PretrainedConfig) -> None:
    """Absolute position embeddings cap the sequence length (unless TISA replaces them)."""
    limit = getattr(model_config, "max_position_embeddings", None)
    capped = [v for v in config.variants if v != "remove"]
    if limit is not None and capped and config.max_length > limit:
        raise ValueError(
            f"max_length: {config.max_length} exceeds the {limit} positions of "
            f"{config.model!r} (variants {capped} keep its position embeddings); "
            f"expected at most {limit}"
        )
