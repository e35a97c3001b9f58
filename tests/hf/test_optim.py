"""TISA in a pretrained model: the start that leaves it unchanged, the scoring parameters'
own learning rate (parameter groups, TisaTrainer) and how far they moved."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import (
    AlbertConfig,
    AlbertForMaskedLM,
    BertConfig,
    BertForMaskedLM,
    ElectraConfig,
    ElectraForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    RobertaConfig,
    RobertaForMaskedLM,
    TrainingArguments,
)

import tisa.hf as th

COMMON = dict(
    vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=4, intermediate_size=24
)
MODELS = {
    "bert": lambda: BertForMaskedLM(BertConfig(**COMMON, max_position_embeddings=32)),
    "albert": lambda: AlbertForMaskedLM(
        AlbertConfig(**COMMON, embedding_size=8, max_position_embeddings=32)
    ),
    "roberta": lambda: RobertaForMaskedLM(
        RobertaConfig(**COMMON, max_position_embeddings=40, pad_token_id=1)
    ),
    "electra": lambda: ElectraForMaskedLM(
        ElectraConfig(**COMMON, embedding_size=8, max_position_embeddings=32)
    ),
    "gpt2": lambda: GPT2LMHeadModel(
        GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=4, n_positions=32)
    ),
}


def _model(arch: str):
    torch.manual_seed(0)
    return MODELS[arch]().eval()


def _ids(b: int = 3, length: int = 13) -> torch.Tensor:
    return torch.randint(3, 50, (b, length), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("arch", sorted(MODELS))
def test_spread_start_computes_exactly_what_the_original_computes(arch):
    stock = _model(arch)
    model = th.add_tisa(copy.deepcopy(stock), start="spread")
    for _, scorer in th.iter_scorers(model):
        assert torch.count_nonzero(scorer.amplitude) == 0
        torch.testing.assert_close(
            scorer.offset, torch.tensor([-10.0, -5.0, 0.0, 5.0, 10.0]).expand(4, 5)
        )
    ids = _ids()
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, stock(ids).logits, atol=1e-6, rtol=0)


def test_starts_and_their_errors():
    paper = th.add_tisa(_model("bert"), start="paper")
    scorer = next(th.iter_scorers(paper))[1]
    assert scorer.amplitude.abs().min() > 0.05  # N(0.1, 0.01^2)
    assert scorer.offset.std() > 1  # N(0, 5^2)
    assert th.DEFAULT_START == "paper"  # the held-out sweep's choice (docs/glue.md)
    default = next(th.iter_scorers(th.add_tisa(_model("bert"))))[1]
    assert default.amplitude.abs().min() > 0.05 and default.offset.std() > 1
    zero = th.add_tisa(_model("bert"), start="zero")
    scorer = next(th.iter_scorers(zero))[1]
    assert torch.count_nonzero(scorer.amplitude) == 0 and scorer.offset.std() > 1
    # explicit scoring options override the start
    own = th.add_tisa(_model("bert"), start="spread", amplitude_mean=0.5)
    assert next(th.iter_scorers(own))[1].amplitude.eq(0.5).all()
    # non-RBF families take their own defaults
    th.add_tisa(_model("bert"), scoring="t5")
    with pytest.raises(ValueError, match="start must be one of"):
        th.add_tisa(_model("bert"), start="lucky")
    with pytest.raises(ValueError, match="applies to the 'rbf' scoring family"):
        th.add_tisa(_model("bert"), scoring="alibi", start="spread")
    # training from scratch keeps the paper's start
    config = th.tisa_config(BertConfig(**COMMON, max_position_embeddings=32))
    assert config.tisa["scoring"]["amplitude_mean"] == 0.1


def test_parameter_groups_put_scorers_on_their_own_rate_without_decay():
    model = th.add_tisa(_model("bert"))
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    groups = {
        g["name"]: g
        for g in th.parameter_groups(
            model, learning_rate=5e-5, tisa_learning_rate=1e-2, weight_decay=0.01
        )
    }
    names = {id(p): n for n, p in model.named_parameters()}
    got = {k: {names[id(p)] for p in g["params"]} for k, g in groups.items()}
    assert got["tisa"] == set(th.scoring_parameter_names(model))
    assert len(got["tisa"]) == 3 * 2  # amplitude, sharpness, offset x 2 layers
    assert groups["tisa"]["lr"] == 1e-2 and groups["tisa"]["weight_decay"] == 0.0
    assert groups["decay"]["lr"] == 5e-5 and groups["decay"]["weight_decay"] == 0.01
    assert all(n.endswith("bias") or "LayerNorm" in n for n in got["no_decay"])
    assert "bert.encoder.layer.0.attention.self.query.weight" in got["decay"]
    everything = {n for n, p in model.named_parameters() if p.requires_grad}
    assert set.union(*got.values()) == everything  # each trainable parameter once ...
    assert sum(len(v) for v in got.values()) == len(everything)
    assert "bert.embeddings.word_embeddings.weight" not in everything  # ... frozen ones never
    with pytest.raises(ValueError, match="tisa_learning_rate must be a positive number"):
        th.parameter_groups(model, learning_rate=1e-3, tisa_learning_rate=0)
    stock_groups = th.parameter_groups(_model("bert"), learning_rate=1e-3)
    assert [g["name"] for g in stock_groups] == ["decay", "no_decay"]


def test_a_position_table_can_take_a_rate_of_its_own():
    stock = _model("bert")
    table = th.position_table_names(stock)
    assert table == ["bert.embeddings.position_embeddings.weight"]
    groups = {
        g["name"]: g
        for g in th.parameter_groups(
            stock,
            learning_rate=5e-5,
            weight_decay=0.01,
            position_names=table,
            position_learning_rate=1e-3,
        )
    }
    assert [p.data_ptr() for p in groups["positions"]["params"]] == [
        stock.bert.embeddings.position_embeddings.weight.data_ptr()
    ]
    assert groups["positions"]["lr"] == 1e-3 and groups["positions"]["weight_decay"] == 0.0
    assert all(p is not groups["positions"]["params"][0] for p in groups["decay"]["params"])
    # the positions group comes first: a converted model's scorers can take its rate
    model = th.add_tisa(_model("bert"), position_embeddings="remove")
    assert th.position_table_names(model) == []
    scorers = th.scoring_parameter_names(model)
    groups = {
        g["name"]: g
        for g in th.parameter_groups(
            model, learning_rate=5e-5, position_names=scorers, position_learning_rate=1e-2
        )
    }
    assert "tisa" not in groups and len(groups["positions"]["params"]) == len(scorers)
    with pytest.raises(ValueError, match="position_names: the model has no parameters"):
        th.parameter_groups(stock, learning_rate=1e-3, position_names=["no.such.weight"])
    with pytest.raises(ValueError, match="position_learning_rate must be a positive number"):
        th.parameter_groups(stock, learning_rate=1e-3, position_learning_rate=-1.0)


def test_scoring_movement_measures_each_kind():
    model = th.add_tisa(_model("bert"), start="spread")
    start = th.scoring_snapshot(model)
    with torch.no_grad():
        model.bert.tisa_scorers[0].offset[0, 0] += 3.0
        model.bert.tisa_scorers[1].amplitude.fill_(0.5)
    moved = th.scoring_movement(model, start)
    assert set(moved) == {"amplitude", "offset", "sharpness"}
    assert moved["offset"]["count"] == 2 * 4 * 5
    assert moved["offset"]["max_abs_change"] == pytest.approx(3.0)
    assert moved["offset"]["mean_abs_change"] == pytest.approx(3.0 / 40)
    assert moved["amplitude"]["mean_abs_change"] == pytest.approx(0.25)  # half of them by 0.5
    assert moved["amplitude"]["mean_abs_start"] == 0.0
    assert moved["amplitude"]["mean_abs_now"] == pytest.approx(0.25)
    assert moved["sharpness"]["max_abs_change"] == 0.0
    assert th.scoring_movement(_model("bert"), {}) == {}
    with pytest.raises(ValueError, match="disagree on scoring parameters"):
        th.scoring_movement(model, {})


def _dataset(n: int = 8):
    ids = _ids(n, 9)
    return [{"input_ids": i, "labels": i} for i in ids]


def test_tisa_trainer_trains_scorers_at_their_own_rate_and_resumes(tmp_path):
    def train(max_steps, resume=None, out=tmp_path / "run"):
        model = th.add_tisa(_model("bert").train(), start="paper")
        start = th.scoring_snapshot(model)
        backbone = model.bert.encoder.layer[0].attention.self.query.weight.detach().clone()
        args = TrainingArguments(
            output_dir=str(out),
            per_device_train_batch_size=4,
            max_steps=max_steps,
            learning_rate=1e-6,
            weight_decay=0.1,
            save_steps=2,
            report_to=[],
            disable_tqdm=True,
            seed=0,
            use_cpu=True,
        )
        trainer = th.TisaTrainer(
            model=model, args=args, train_dataset=_dataset(), tisa_learning_rate=1e-1
        )
        trainer.train(resume_from_checkpoint=resume)
        moved = th.scoring_movement(model, start)
        weight = model.bert.encoder.layer[0].attention.self.query.weight.detach()
        drift = float((weight - backbone).abs().max())
        return trainer, moved, drift, th.scoring_snapshot(model)

    trainer, moved, drift, straight = train(4)
    lrs = {g["name"]: g["initial_lr"] for g in trainer.optimizer.param_groups}
    assert lrs == {"decay": 1e-6, "no_decay": 1e-6, "tisa": 1e-1}
    assert moved["offset"]["max_abs_change"] > 0.05  # about lr per AdamW step
    assert drift < 1e-5  # the backbone, at 1e-6, barely moves
    # resumed from the step-2 checkpoint (optimizer state of all three groups), the run
    # ends where the uninterrupted one ended
    *_, resumed = train(4, resume=str(tmp_path / "run" / "checkpoint-2"), out=tmp_path / "re")
    for name in straight:
        torch.testing.assert_close(resumed[name], straight[name])
    with pytest.raises(ValueError, match="tisa_learning_rate must be a positive number"):
        th.TisaTrainer(
            model=_model("bert"),
            args=TrainingArguments(str(tmp_path / "x")),
            tisa_learning_rate=-1.0,
        )
