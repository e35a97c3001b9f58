"""Each strategy on a tiny BERT (64 positions) against a reference computed by hand."""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil

import pytest
import torch
from torch import nn

from tisa.longeval.run import load_encoder, strategies_for
from tisa.longeval.strategies import (
    Chunk,
    ChunkWindows,
    Copy,
    Interpolate,
    Native,
    Truncate,
    copy_table,
    make_strategy,
    stretch_table,
)

TEXT = " ".join(["the cat sat on the mat and it was not a dog"] * 30)  # 600 tokens here


@pytest.fixture(scope="module")
def encoder(tiny_bert):
    return load_encoder(tiny_bert)[0]


def _reference(model, ids):
    """Mean-pooled last hidden state of one input (a plain forward, no padding)."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).last_hidden_state[0].mean(0)


def test_truncate_is_the_model_on_its_first_positions(encoder):
    ids = encoder.content([TEXT])[0]
    assert len(ids) > 200
    got = Truncate(encoder).embed([TEXT], 256)[0]
    want = _reference(encoder.model, [2, *ids[:62], 3])  # [CLS] 62 tokens [SEP] = 64
    torch.testing.assert_close(got, want)
    # within the table every strategy is the model on the whole input
    short = " ".join(TEXT.split()[:20])
    whole = _reference(encoder.model, encoder.frame(encoder.content([short])[0]))
    for cls in (Truncate, Chunk, Interpolate, Copy, Native):
        torch.testing.assert_close(cls(encoder).embed([short], 64)[0], whole)


def test_chunk_averages_its_windows_by_their_token_counts(encoder):
    ids = encoder.content([TEXT])[0][:254]  # the document as a 256-token input
    windows = [ids[s : s + 62] for s in range(0, len(ids), 62)]
    pooled = torch.stack([_reference(encoder.model, [2, *w, 3]) for w in windows])
    sizes = torch.tensor([len(w) + 2 for w in windows], dtype=torch.float32)[:, None]
    want = (pooled * sizes).sum(0) / sizes.sum()
    torch.testing.assert_close(Chunk(encoder).embed([TEXT], 256)[0], want)
    assert len(windows) == 5 and len(windows[-1]) == 254 - 4 * 62  # a short last window


def test_chunk_w_reads_windows_of_w_tokens_on_any_model_that_reads_them(encoder, tiny_tisa):
    tisa_encoder, _ = load_encoder(tiny_tisa)
    ids = tisa_encoder.content([TEXT])[0][:298]  # the document as a 300-token input
    windows = [ids[s : s + 98] for s in range(0, len(ids), 98)]  # 100-token windows
    pooled = torch.stack([_reference(tisa_encoder.model, [2, *w, 3]) for w in windows])
    sizes = torch.tensor([len(w) + 2 for w in windows], dtype=torch.float32)[:, None]
    strategy = make_strategy("chunk-100", tisa_encoder)
    assert isinstance(strategy, ChunkWindows) and strategy.name == "chunk-100"
    want = (pooled * sizes).sum(0) / sizes.sum()
    torch.testing.assert_close(strategy.embed([TEXT], 300)[0], want)
    assert len(windows) == 4 and len(windows[-1]) == 298 - 3 * 98
    # within a window: the model on the whole document, as native
    torch.testing.assert_close(make_strategy("chunk-400", tisa_encoder).embed([TEXT], 300),
                               make_strategy("native", tisa_encoder).embed([TEXT], 300))
    # on a table of 64 rows, chunk-64 is chunk; longer windows it cannot read
    torch.testing.assert_close(make_strategy("chunk-64", encoder).embed([TEXT], 256),
                               Chunk(encoder).embed([TEXT], 256))
    with pytest.raises(ValueError, match="chunk-65: the model reads at most 64 tokens"):
        make_strategy("chunk-65", encoder)
    with pytest.raises(ValueError, match="chunk-2: a window must hold more than the 2 special"):
        make_strategy("chunk-2", tisa_encoder)


def test_each_model_runs_the_strategies_it_can():
    asked = ("truncate", "chunk", "chunk-64", "chunk-2048")
    assert strategies_for(None, asked) == ("native", "chunk-64", "chunk-2048")
    assert strategies_for(512, asked) == ("truncate", "chunk", "chunk-64")
    assert strategies_for(64, asked) == ("truncate", "chunk", "chunk-64")
    assert strategies_for(32, ("chunk-64",)) == ()


def test_interpolated_table_keeps_the_original_rows_at_multiples():
    table = torch.randn(64, 8)
    long = stretch_table(table, 256)
    assert long.shape == (256, 8)
    torch.testing.assert_close(long[::4], table)
    torch.testing.assert_close(long[1], 0.75 * table[0] + 0.25 * table[1])
    torch.testing.assert_close(long[-1], table[-1])  # beyond the last row: the last row
    odd = stretch_table(table, 100)
    assert odd.shape == (100, 8) and torch.equal(odd[0], table[0])
    copied = copy_table(table, 150)
    assert copied.shape == (150, 8)
    torch.testing.assert_close(copied[64:128], table) and torch.equal(copied[130], table[2])


@pytest.mark.parametrize("cls, make", [(Interpolate, stretch_table), (Copy, copy_table)])
def test_longer_tables_are_used_and_then_restored(encoder, cls, make):
    emb = encoder.model.embeddings
    before = emb.position_embeddings.weight.detach().clone()
    got = cls(encoder).embed([TEXT], 256)[0]
    # reference: a copy of the model given the L-row table for good
    other = copy.deepcopy(encoder.model)
    rows = make(before, 256)
    other.embeddings.position_embeddings = nn.Embedding.from_pretrained(rows)
    other.embeddings.position_ids = torch.arange(256)[None]
    other.embeddings.token_type_ids = torch.zeros(1, 256, dtype=torch.long)
    ids = encoder.frame(encoder.content([TEXT])[0][:254])
    torch.testing.assert_close(got, _reference(other, ids))
    assert torch.equal(emb.position_embeddings.weight, before)  # the model is unchanged
    assert emb.position_ids.shape == (1, 64)


@pytest.mark.parametrize("name", ["interpolate", "copy"])
def test_longer_tables_read_a_short_input_with_the_models_own_table(encoder, name):
    """A query that fits the table reads it, also when the cell's documents are longer
    and share the call: the longer table is for the documents only."""
    short = " ".join(TEXT.split()[:20])
    strategy = make_strategy(name, encoder)
    # interpolation's version 1 read the query with the stretched table; a copied
    # table's first rows are the original's, so copy's cells stand
    assert strategy.version == (2 if name == "interpolate" else 1)
    whole = _reference(encoder.model, encoder.frame(encoder.content([short])[0]))
    mixed = strategy.embed([TEXT, short, TEXT], 256)
    torch.testing.assert_close(mixed[1], whole)
    torch.testing.assert_close(mixed[0], strategy.embed([TEXT], 256)[0])
    torch.testing.assert_close(mixed[2], mixed[0])
    torch.testing.assert_close(strategy.embed([short], 256)[0], whole)


def test_native_runs_tisa_at_any_length_and_refuses_a_table_past_its_end(encoder, tiny_tisa):
    tisa_encoder, facts = load_encoder(tiny_tisa)
    assert facts["tisa"] and facts["positions"] is None and facts["pooling"] == "mean"
    out = make_strategy("native", tisa_encoder).embed([TEXT], 300)
    assert out.shape == (1, 16) and torch.isfinite(out).all()
    with pytest.raises(ValueError, match="native reads at most the model's 64 positions"):
        Native(encoder).embed([TEXT], 256)
    with pytest.raises(ValueError, match="interpolate needs a model with a position table"):
        make_strategy("interpolate", tisa_encoder)
    with pytest.raises(ValueError, match="unknown strategy 'stretch'"):
        make_strategy("stretch", encoder)


@pytest.mark.slow  # importing sentence-transformers takes seconds
def test_a_converted_folder_loads_with_sentence_transformers(tiny_tisa):
    from sentence_transformers import SentenceTransformer

    import tisa.hf  # noqa: F401  (registers tisa_bert with AutoConfig and AutoModel)

    model = SentenceTransformer(tiny_tisa, device="cpu")
    assert model.max_seq_length == 4096
    got = model.encode([TEXT], convert_to_tensor=True)[0]
    encoder = load_encoder(tiny_tisa)[0]
    torch.testing.assert_close(got, Native(encoder).embed([TEXT], 1000)[0], atol=1e-5, rtol=1e-4)


def test_pooling_comes_from_the_sentence_transformers_folder(tiny_bert, tmp_path):
    folder = tmp_path / "st"
    shutil.copytree(tiny_bert, folder)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {
                    "idx": 0,
                    "name": "0",
                    "path": "",
                    "type": "sentence_transformers.models.Transformer",
                },
                {
                    "idx": 1,
                    "name": "1",
                    "path": "1_Pooling",
                    "type": "sentence_transformers.models.Pooling",
                },
            ]
        )
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": 16,
                "pooling_mode_cls_token": True,
                "pooling_mode_mean_tokens": False,
            }
        )
    )
    encoder, facts = load_encoder(str(folder))
    assert facts["pooling"] == "cls" and facts["pooling_source"] == "1_Pooling/config.json"
    ids = encoder.frame(encoder.content(["the cat"])[0])
    with torch.no_grad():
        want = encoder.model(input_ids=torch.tensor([ids])).last_hidden_state[0, 0]
    torch.testing.assert_close(Native(encoder).embed(["the cat"], 64)[0], want)
    (folder / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_lasttoken": True}))
    with pytest.raises(ValueError, match="pooling none in"):
        load_encoder(str(folder))


def test_models_the_strategies_cannot_handle(tmp_path):
    from transformers import GPT2Config, GPT2Model

    GPT2Model(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=50)).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="models: .* is not an encoder"):
        load_encoder(str(tmp_path))
    with pytest.raises(ValueError, match="models: .*no such folder"):
        load_encoder(str(tmp_path / "missing"))


def test_context_extension_says_what_to_install(encoder, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "context_extension", None)  # as if not installed
    with pytest.raises(ValueError, match=r"pip install context-extension"):
        make_strategy("context-extension", encoder)


@pytest.mark.skipif(
    importlib.util.find_spec("context_extension") is None, reason="needs context-extension"
)
def test_context_extension_table_has_length_rows(encoder):
    strategy = make_strategy("context-extension", encoder)
    rows = strategy.table(256)
    assert rows.shape == (256, 16)
    torch.testing.assert_close(rows[0], encoder.model.embeddings.position_embeddings.weight[0])
    assert strategy.embed([TEXT], 256).shape == (1, 16)


def test_copy_init_gives_the_conversions_distillation_nothing_to_learn(encoder):
    """Copy-init (Longformer) followed by ``tisa convert``'s distillation: its blocks are
    at most the table's n tokens, where a copied table is the original's, so the
    objective is zero at the start and stays at rounding level; what AdamW then moves is
    rounding noise scaled to its step size (at most the learning rate per step), not a
    signal. So the ``copy`` row (copy-init before any training) stands for copy-init with
    that budget; a longer table needs a long-input objective to learn anything."""
    import tempfile

    from tisa.convert.config import DistillSettings
    from tisa.convert.distill import LengthSampler, distill

    teacher = encoder.model
    student = copy.deepcopy(teacher)
    n = teacher.config.max_position_embeddings
    rows = copy_table(teacher.embeddings.position_embeddings.weight.detach(), 4 * n)
    student.embeddings.position_embeddings = nn.Embedding.from_pretrained(rows, freeze=False)
    student.embeddings.position_ids = torch.arange(4 * n)[None]
    student.embeddings.token_type_ids = torch.zeros(1, 4 * n, dtype=torch.long)
    before = {k: v.clone() for k, v in student.state_dict().items()}
    settings = DistillSettings(steps=4, tokens_per_batch=4 * n, min_length=16, max_length=n,
                               save_every=4)  # the conversion's settings, fewer steps
    stream = torch.tensor(encoder.content([TEXT])[0])
    sampler = LengthSampler(stream, first=2, last=3, settings=settings)
    with tempfile.TemporaryDirectory() as folder:
        curve = distill(teacher, student, sampler, settings, checkpoint_dir=folder,
                        progress=False)
    losses = [row["loss"] for row in curve]
    assert losses[0] == 0.0 and max(losses) < 1e-5
    moved = max((student.state_dict()[k] - v).abs().max().item() for k, v in before.items())
    assert moved <= settings.steps * settings.learning_rate * 1.01
