"""The held-out comparison of evaluation-time settings of a converted model
(``tisa.longeval.variants``: ``experiments/length_scale.py``, ``experiments/far_window.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tisa.longeval import variants


def test_compares_settings_on_copies_and_chooses_by_mean_acc1(tiny_tisa, tmp_path, capsys):
    convert_dir = tmp_path / "convert"
    shutil.copytree(tiny_tisa, convert_dir / "model")
    out = tmp_path / "out"
    argv = [str(convert_dir), "--output-dir", str(out), "--lengths", "96", "--seeds", "7", "8",
            "--variants", "plain", "scale-64=length_scale=64",
            "window-8=far_offset=8,far_slope=2", "--threads", "1", "--no-progress"]
    assert variants.main(argv) == 0
    selection = json.loads((out / "selection.json").read_text())
    assert selection["variants"] == ["plain", "scale-64", "window-8"]
    assert selection["baseline"] == "plain"
    assert selection["changes"]["window-8"] == {"far_offset": 8, "far_slope": 2.0}
    models = out / "models"
    plain = json.loads((models / "plain" / "config.json").read_text())["tisa"]
    scaled = json.loads((models / "scale-64" / "config.json").read_text())["tisa"]
    window = json.loads((models / "window-8" / "config.json").read_text())["tisa"]
    assert plain == json.loads((convert_dir / "model" / "config.json").read_text())["tisa"]
    assert scaled["length_scale"] == 64 and scaled["scoring"] == plain["scoring"]
    assert window["scoring"]["far_offset"] == 8 and window["scoring"]["far_slope"] == 2.0
    assert window["length_scale"] == plain["length_scale"]
    # only config.json differs: the same weights in every copy
    assert len(set(selection["weights_sha256"].values())) == 1
    means = selection["mean_acc1"]
    best = max(means, key=lambda name: (means[name]["all"], name == "plain"))
    assert selection["chosen"] == best
    rows = selection["against_baseline"]
    assert {r["task"] for r in rows} == {"passkey", "needle", "passage"}
    assert {r["model"] for r in rows} == {"scale-64", "window-8"}
    assert all(r["n"] == 2 and r["cells"] == 10 for r in rows)  # 2 seeds of 5 depths
    assert all(r["p_holm"] >= r["p"] for r in rows)
    assert "chosen: " in capsys.readouterr().out
    # a changed model in the convert folder is copied again, not reused
    config = json.loads((convert_dir / "model" / "config.json").read_text())
    config["hidden_dropout_prob"] = 0.25
    (convert_dir / "model" / "config.json").write_text(json.dumps(config))
    variant = variants.parse_variant("scale-64=length_scale=64")
    variants.variant_folder(convert_dir / "model", models / "scale-64", variant)
    copied = json.loads((models / "scale-64" / "config.json").read_text())
    assert copied["hidden_dropout_prob"] == 0.25 and copied["tisa"]["length_scale"] == 64


def test_the_window_changes_what_a_long_document_embeds(tiny_tisa, tmp_path):
    """The far-field ramp reaches the model: a narrow window changes the embedding of a
    long input and leaves a short one (all offsets within the window) as it was."""
    import torch
    from transformers import AutoModel

    window = variants.variant_folder(Path(tiny_tisa), tmp_path / "w", variants.parse_variant(
        "w=far_offset=4,far_slope=5"))
    a, b = AutoModel.from_pretrained(tiny_tisa).eval(), AutoModel.from_pretrained(window).eval()
    short, long = torch.arange(5, 9)[None], torch.arange(5, 69)[None]
    with torch.no_grad():
        assert torch.allclose(a(short).last_hidden_state, b(short).last_hidden_state, atol=1e-6)
        assert not torch.allclose(a(long).last_hidden_state, b(long).last_hidden_state, atol=1e-3)


def test_a_hard_window_is_a_setting_of_the_copy(tiny_tisa, tmp_path):
    """attention_window=W reaches the model's config.tisa, and with it the model: a long
    input embeds otherwise, a short one (every key within +-W) as before."""
    import torch
    from transformers import AutoModel

    window = variants.variant_folder(Path(tiny_tisa), tmp_path / "w", variants.parse_variant(
        "w=attention_window=6"))
    assert json.loads((window / "config.json").read_text())["tisa"]["attention_window"] == 6
    a, b = AutoModel.from_pretrained(tiny_tisa).eval(), AutoModel.from_pretrained(window).eval()
    short, long = torch.arange(5, 12)[None], torch.arange(5, 69)[None]
    with torch.no_grad():
        assert torch.allclose(a(short).last_hidden_state, b(short).last_hidden_state, atol=1e-6)
        assert not torch.allclose(a(long).last_hidden_state, b(long).last_hidden_state, atol=1e-3)


def test_another_conversion_is_a_variant_with_its_own_weights(tiny_tisa, tmp_path):
    """NAME=@FOLDER scores another converted model folder (a copy of it) beside the model
    as converted; a folder without a converted model is named."""
    import torch
    from safetensors.torch import load_file, save_file

    other = tmp_path / "other"
    shutil.copytree(tiny_tisa, other)
    weights = load_file(other / "model.safetensors")
    save_file({k: v + 0.01 if v.is_floating_point() else v for k, v in weights.items()},
              other / "model.safetensors")
    variant = variants.parse_variant(f"long={other}".replace("=", "=@", 1))
    assert variant.folder == other and not variant.is_baseline
    copy = variants.variant_folder(Path(tiny_tisa), tmp_path / "models" / "long", variant)
    assert torch.equal(load_file(copy / "model.safetensors")["embeddings.word_embeddings.weight"],
                       load_file(other / "model.safetensors")["embeddings.word_embeddings.weight"])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match="holds no converted model"):
        variants.parse_variant(f"x=@{plain}")
    (other / "model.safetensors").unlink()  # found before the evaluation, not after it
    with pytest.raises(ValueError, match="holds no model.safetensors"):
        variants.parse_variant(f"x=@{other}")


@pytest.mark.parametrize("spec, message", [
    ("x=length_scale=1", "length_scale"),
    ("x=far_offset=-1", "far_offset"),
    ("x=far_slope=0", "far_slope"),
    ("x=far_slope=none", "far_slope"),
    ("x=far_offset=wide", "expected an integer"),
    ("x=attention_window=0", "attention_window"),
    ("x=depth=3", "KEY one of length_scale, attention_window, far_offset, far_slope"),
    ("=length_scale=4", "expected NAME"),
    (".", "not '.', '..'"),
    ("../up=length_scale=4", "nor one with a slash"),
    ("x=@", "holds no converted model"),
])
def test_a_bad_variant_is_named(spec, message):
    with pytest.raises(ValueError, match=message):
        variants.parse_variant(spec)


def test_needs_a_converted_model_and_the_model_as_converted(tmp_path, capsys):
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--variants", "a", "b=length_scale=8"])
    assert "holds no converted model" in capsys.readouterr().err
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    with pytest.raises(SystemExit):  # config.json without weights
        variants.main([str(tmp_path), "--variants", "a", "b=length_scale=8"])
    assert "model/ with config.json and model.safetensors" in capsys.readouterr().err
    (tmp_path / "model" / "model.safetensors").write_bytes(b"")
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--variants", "scale=length_scale=512"])
    assert "the model as converted" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--variants", "a", "a=far_offset=8"])
    assert "each name once" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--variants", "a", "b=far_slope=-1"])
    assert "--variants: 'b=far_slope=-1': far_slope" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--output-dir", str(tmp_path / "out"), "--variants",
                       "a", "b=far_slope=2", "--tasks", "passkey", "haystack"])
    assert "haystack" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--variants", "a", "b=far_slope=2", "--strategies",
                       "chunk", "chunk-64"])
    assert "--strategies: expected chunk-W names (e.g. chunk-2048), got ['chunk']" in (
        capsys.readouterr().err)
    with pytest.raises(SystemExit):
        variants.main([str(tmp_path), "--variants", "a", "b=far_slope=2", "--draw", "depth"])
    assert "draw: expected seed or cell, got 'depth'" in capsys.readouterr().err


def test_chunk_windows_are_scored_beside_the_whole_document(tiny_tisa, tmp_path):
    convert_dir = tmp_path / "convert"
    shutil.copytree(tiny_tisa, convert_dir / "model")
    out = tmp_path / "out"
    argv = [str(convert_dir), "--output-dir", str(out), "--lengths", "96", "--seeds", "7",
            "8", "--tasks", "passkey", "--variants", "plain", "scale-64=length_scale=64",
            "--strategies", "chunk-040", "--threads", "1", "--no-progress"]  # = chunk-40
    assert variants.main(argv) == 0
    selection = json.loads((out / "selection.json").read_text())
    names = ["plain", "plain+chunk-40", "scale-64", "scale-64+chunk-40"]
    assert selection["variants"] == names and selection["strategies"] == ["chunk-40"]
    assert set(selection["mean_acc1"]) == set(names)
    assert set(selection["weights_sha256"]) == {"plain", "scale-64"}
    rows = selection["against_baseline"]  # each entry but the baseline, against it
    assert sorted(r["model"] for r in rows) == names[1:]
    assert all(r["against_strategy"] == "native" and r["n"] == 2 and r["cells"] == 10
               for r in rows)
    cells = json.loads((out / "longeval" / "results.json").read_text())["cells"]
    assert {c["strategy"] for c in cells} == {"native", "chunk-40"}
