"""GLUE tasks: metrics, the glue_data loader on the real files, the hub code path on a
local copy in the hub's layout, custom files and bad input."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from tisa.data.glue import (
    GLUE_TASKS,
    HOW_TO_GET_GLUE,
    accuracy,
    compute_metrics,
    f1,
    get_task,
    glue_average,
    load_glue,
    matthews_corr,
    pearson,
    spearman,
    task_score,
)
from tisa.data.glue_custom import load_custom

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

GLUE_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "glue"
needs_glue = pytest.mark.skipif(not GLUE_DIR.is_dir(), reason="shared GLUE data not present")


# ------------------------------------------------------------------------------ metrics
def test_metrics_against_hand_computed_values():
    # TP = 2 (0, 4), TN = 1 (2), FP = 1 (1), FN = 1 (3)
    pred, gold = [1, 1, 0, 0, 1], [1, 0, 0, 1, 1]
    assert accuracy(pred, gold) == pytest.approx(3 / 5)
    assert f1(pred, gold) == pytest.approx(2 / 3)  # precision = recall = 2/3
    # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (2 - 1) / sqrt(3*3*2*2)
    assert matthews_corr(pred, gold) == pytest.approx(1 / 6)
    assert matthews_corr([1, 1, 1, 1], [1, 0, 1, 0]) == 0.0  # constant prediction


def test_correlations_against_hand_computed_values():
    x, y = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 9.0]
    # centred: dx = (-1.5, -.5, .5, 1.5), dy = (-3.25, -1.25, .75, 3.75)
    assert pearson(x, y) == pytest.approx(11.5 / math.sqrt(5 * 26.75))
    assert spearman(x, y) == pytest.approx(1.0)  # monotonic
    # ranks differ by (0, -1, 1, 0): rho = 1 - 6 * 2 / (4 * (16 - 1)) = 0.8
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_metrics_reject_mismatched_inputs():
    with pytest.raises(ValueError, match="equal length"):
        accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="at least one"):
        accuracy([], [])


def test_glue_average_is_mean_over_tasks_of_mean_over_metrics():
    scores = {"mrpc": {"accuracy": 0.8, "f1": 0.9}, "cola": {"matthews_corr": 0.5}}
    assert glue_average(scores) == pytest.approx(((0.8 + 0.9) / 2 + 0.5) / 2)
    assert task_score({"pearson": 0.6, "spearman": 0.7}) == pytest.approx(0.65)
    mnli = get_task("mnli")
    assert mnli.score(
        {"accuracy_matched": 0.8, "accuracy_mismatched": 0.7, "extra": 0.0}
    ) == pytest.approx(0.75)
    with pytest.raises(ValueError, match="accuracy_mismatched"):
        mnli.score({"accuracy_matched": 0.8})


def test_compute_metrics_per_task():
    mrpc = compute_metrics(
        get_task("mrpc"), {"validation": [1, 1, 0, 0, 1]}, {"validation": [1, 0, 0, 1, 1]}
    )
    assert mrpc == pytest.approx({"accuracy": 0.6, "f1": 2 / 3})
    mnli = compute_metrics(
        get_task("mnli"),
        {"validation_matched": [0, 1, 2, 2], "validation_mismatched": [0, 0]},
        {"validation_matched": [0, 1, 2, 0], "validation_mismatched": [0, 1]},
    )
    assert mnli == pytest.approx({"accuracy_matched": 0.75, "accuracy_mismatched": 0.5})
    stsb = compute_metrics(get_task("stsb"), {"validation": [1, 2, 3]}, {"validation": [1, 3, 2]})
    assert set(stsb) == {"pearson", "spearman"}
    with pytest.raises(ValueError, match="validation_mismatched"):
        compute_metrics(get_task("mnli"), {"validation_matched": [0]}, {"validation_matched": [0]})


# ----------------------------------------------------------------------------- registry
def test_registry():
    assert list(GLUE_TASKS) == [
        "cola",
        "sst2",
        "mrpc",
        "stsb",
        "qqp",
        "mnli",
        "qnli",
        "rte",
        "wnli",
    ]
    assert get_task("SST-2").name == "sst2" and get_task("STS-B").is_regression
    assert get_task("stsb").num_labels == 1 and get_task("mnli").num_labels == 3
    assert get_task("cola").metric_names == ("matthews_corr",)
    assert get_task("qqp").metric_names == ("accuracy", "f1")
    assert get_task("mnli").metric_names == ("accuracy_matched", "accuracy_mismatched")
    assert get_task("rte").text_columns == ("sentence1", "sentence2")
    with pytest.raises(ValueError, match="unknown GLUE task 'squad'.*cola"):
        get_task("squad")


# ------------------------------------------------------------------ glue_data (real files)
# rows from MANIFEST.md; label counts where it states them
PRESENT = {
    "cola": {"train": 8551, "validation": 1043},
    "sst2": {"train": 67349, "validation": 872},
    "mrpc": {"train": 3668, "validation": 408},
    "stsb": {"train": 5749, "validation": 1500},
    "rte": {"train": 2490, "validation": 277},
    "wnli": {"train": 635, "validation": 71},
    "qnli": {"validation": 5463},
}


@needs_glue
@pytest.mark.parametrize("name", list(PRESENT))
def test_glue_dir_tasks_load_with_manifest_row_counts(name):
    task = get_task(name)
    data = load_glue(name, glue_dir=GLUE_DIR, splits=tuple(PRESENT[name]))
    assert {s: len(d) for s, d in data.items()} == PRESENT[name]
    for split in data.values():
        assert split.column_names == [*task.text_columns, "label"]
        assert all(isinstance(t, str) and t.strip() for t in split[task.text_columns[0]][:50])
        labels = split["label"]
        if task.is_regression:
            assert 0.0 <= min(labels) and max(labels) <= 5.0
            assert any(v != int(v) for v in labels)  # real-valued scores
        else:
            assert split.features["label"].names == list(task.label_names)
            assert set(labels) == set(range(task.num_labels))


@needs_glue
def test_glue_dir_columns_and_labels_are_the_right_ones():
    cola = load_glue("cola", glue_dir=GLUE_DIR, splits=("train",))["train"][0]
    assert cola == {
        "sentence": "Our friends won't buy this analysis, let alone the next one we propose.",
        "label": 1,
    }
    mrpc = load_glue("mrpc", glue_dir=GLUE_DIR, splits=("validation",))["validation"]
    assert not mrpc[0]["sentence1"].startswith("\ufeff")  # the BOM sits before "Quality"
    qnli = load_glue("qnli", glue_dir=GLUE_DIR, splits=("validation",))["validation"]
    labels = qnli["label"]
    assert (labels.count(0), labels.count(1)) == (2702, 2761)  # entailment / not_entailment
    stsb = load_glue("stsb", glue_dir=GLUE_DIR, splits=("train",))["train"][0]
    assert stsb["sentence1"] == "A plane is taking off." and stsb["label"] == 5.0


@needs_glue
@pytest.mark.parametrize(
    ("name", "needed"), [("qnli", "QNLI/train.tsv"), ("qqp", "QQP/train.tsv"), ("mnli", "MNLI")]
)
def test_glue_dir_missing_task_says_how_to_get_it(name, needed):
    with pytest.raises(FileNotFoundError, match=needed) as info:
        load_glue(name, glue_dir=GLUE_DIR)
    assert "download_glue_data.py" in str(info.value) and "nyu-mll/glue" in str(info.value)


def test_missing_glue_folder_says_how_to_get_the_data(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_glue("rte", glue_dir=tmp_path / "nowhere")
    assert "nowhere" in str(info.value) and HOW_TO_GET_GLUE in str(info.value)


def test_bad_split_and_custom_task_rejected(tmp_path):
    with pytest.raises(ValueError, match="splits"):
        load_glue("rte", glue_dir=tmp_path, splits=("test",))


def _write_rte(root: Path, train_rows: list[str]) -> Path:
    (root / "RTE").mkdir(parents=True)
    header = "index\tsentence1\tsentence2\tlabel\n"
    (root / "RTE" / "train.tsv").write_text(header + "".join(r + "\n" for r in train_rows))
    (root / "RTE" / "dev.tsv").write_text(header + "0\tA b.\tC d.\tentailment\n")
    return root


def test_glue_dir_labels_that_do_not_match_the_task(tmp_path):
    root = _write_rte(
        tmp_path / "glue",
        ['0\tA "quoted" b.\tC.\tentailment', "1\tA.\tB.\tmaybe", "2\tA.\tB.\tyes"],
    )
    with pytest.raises(ValueError) as info:
        load_glue("rte", glue_dir=root)
    message = str(info.value)
    assert "train.tsv" in message and "'maybe'" in message and "'yes'" in message
    assert "entailment" in message


def test_glue_dir_reads_quotes_verbatim_and_rejects_ragged_rows(tmp_path):
    root = _write_rte(tmp_path / "ok", ['0\t"Hi," she said.\tB "c\tnot_entailment'])
    row = load_glue("rte", glue_dir=root)["train"][0]
    assert row == {"sentence1": '"Hi," she said.', "sentence2": 'B "c', "label": 1}
    root = _write_rte(tmp_path / "ragged", ["0\tA.\tB.\tentailment", "1\tA.\tentailment"])
    with pytest.raises(ValueError, match=r"train.tsv:3: expected 4 tab-separated fields, got 3"):
        load_glue("rte", glue_dir=root)


# ----------------------------------------------------------- HF hub path, local hub layout
def _hub_copy(root: Path, configs: dict) -> Path:
    """Writes ``configs`` ({name: {split: Dataset}}) as the hub repo lays GLUE out:
    ``<config>/<split>-00000-of-00001.parquet`` and a README whose YAML lists them."""
    lines = ["---", "configs:"]
    for name, splits in configs.items():
        (root / name).mkdir(parents=True)
        lines += [f"- config_name: {name}", "  data_files:"]
        for split, ds in splits.items():
            ds.to_parquet(str(root / name / f"{split}-00000-of-00001.parquet"))
            lines += [f"  - split: {split}", f"    path: {name}/{split}-*"]
    lines += ["---", "", "# GLUE (local copy)", ""]
    (root / "README.md").write_text("\n".join(lines))
    return root


def _hub_split(rows: dict, label, *, idx: bool = True):
    from datasets import Dataset, Features, Value

    n = len(rows["label"])
    features = {c: Value("string") for c in rows if c != "label"}
    features["label"] = label
    if idx:
        rows = {**rows, "idx": list(range(n))}
        features["idx"] = Value("int32")
    return Dataset.from_dict(rows, features=Features(features))


def test_hub_code_path_on_a_local_copy_in_the_hub_layout(tmp_path):
    from datasets import ClassLabel, Value

    nli3 = ClassLabel(names=["entailment", "neutral", "contradiction"])
    pair = {"sentence1": ["A man.", "A dog.", "Rain."], "sentence2": ["B.", "C.", "D."]}
    mnli = {"premise": ["P one.", "P two."], "hypothesis": ["H one.", "H two."]}
    root = _hub_copy(
        tmp_path / "glue",
        {
            "rte": {
                "train": _hub_split(
                    {**pair, "label": [0, 1, 1]}, ClassLabel(names=["entailment", "not_entailment"])
                ),
                "validation": _hub_split(
                    {**pair, "label": [1, 0, 0]}, ClassLabel(names=["entailment", "not_entailment"])
                ),
                "test": _hub_split({**pair, "label": [-1, -1, -1]}, Value("int64")),
            },
            "mnli": {
                "train": _hub_split({**mnli, "label": [0, 2]}, nli3),
                "validation_matched": _hub_split({**mnli, "label": [1, 1]}, nli3),
                "validation_mismatched": _hub_split({**mnli, "label": [2, 0]}, nli3),
            },
            "stsb": {
                "train": _hub_split({**pair, "label": [0.5, 4.0, 2.25]}, Value("float32")),
                "validation": _hub_split({**pair, "label": [1.0, 2.0, 3.0]}, Value("float32")),
            },
            # the same names in another order: renumbered to the registry's order
            "wnli": {
                split: _hub_split(
                    {**pair, "label": [0, 1, 1]}, ClassLabel(names=["entailment", "not_entailment"])
                )
                for split in ("train", "validation")
            },
        },
    )
    cache = tmp_path / "cache"
    rte = load_glue("rte", hf_path=str(root), cache_dir=cache)
    assert list(rte) == ["train", "validation"]  # test labels are hidden: not loaded
    assert rte["train"].column_names == ["sentence1", "sentence2", "label"]
    assert (
        rte["train"]["label"] == [0, 1, 1] and rte["validation"]["sentence1"] == pair["sentence1"]
    )

    m = load_glue("mnli", hf_path=str(root), cache_dir=cache)
    assert list(m) == ["train", "validation_matched", "validation_mismatched"]
    assert m["validation_mismatched"]["label"] == [2, 0]
    assert m["train"].features["label"].names == ["entailment", "neutral", "contradiction"]

    s = load_glue("stsb", hf_path=str(root), cache_dir=cache)
    assert s["train"]["label"] == pytest.approx([0.5, 4.0, 2.25])

    w = load_glue("wnli", hf_path=str(root), cache_dir=cache)
    assert w["train"].features["label"].names == ["not_entailment", "entailment"]
    assert w["train"]["label"] == [1, 0, 0]


@needs_glue
def test_hub_copy_of_real_rows_matches_the_glue_dir_loader(tmp_path):
    real = load_glue("rte", glue_dir=GLUE_DIR)
    subset = {s: d.select(range(25)) for s, d in real.items()}
    root = _hub_copy(tmp_path / "glue", {"rte": subset})
    hub = load_glue("rte", hf_path=str(root), cache_dir=tmp_path / "cache")
    for split in ("train", "validation"):
        assert hub[split].to_dict() == subset[split].to_dict()


def test_hub_labels_that_do_not_match_the_task(tmp_path):
    from datasets import ClassLabel

    pair = {"sentence1": ["A.", "B."], "sentence2": ["C.", "D."], "label": [0, 1]}
    root = _hub_copy(
        tmp_path / "glue",
        {
            "rte": {
                s: _hub_split(pair, ClassLabel(names=["yes", "no"]))
                for s in ("train", "validation")
            }
        },
    )
    with pytest.raises(ValueError) as info:
        load_glue("rte", hf_path=str(root), cache_dir=tmp_path / "cache")
    assert "'no'" in str(info.value) and "'yes'" in str(info.value) and "rte" in str(info.value)


def test_hub_unreachable_says_how_to_get_the_data(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        load_glue("rte", hf_path=str(tmp_path / "no-such-dataset"), cache_dir=tmp_path / "c")
    assert "download_glue_data.py" in str(info.value)


# ------------------------------------------------------------------------ custom files
def test_custom_csv_classification_is_inferred(tmp_path):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text('text,label\n"good, really",pos\nbad,neg\nNA,pos\n')
    dev.write_text("text,label\nfine,pos\nawful,neg\n")
    task, data = load_custom(train, dev, text_columns=["text"], cache_dir=tmp_path / "c")
    assert task.label_names == ("neg", "pos") and not task.is_regression
    assert task.metric_names == ("accuracy",)
    assert data["train"].to_dict() == {"text": ["good, really", "bad", "NA"], "label": [1, 0, 1]}
    assert data["validation"]["label"] == [1, 0]


def test_label_minus_one_is_a_class_but_said_in_one_line(tmp_path, caplog):
    """{-1, 0, 1, 5}: four classes, but -1 is GLUE's 'no label', so it is said."""
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("text,label\na,-1\nb,0\nc,1\nd,5\ne,-1\n")
    dev.write_text("text,label\nf,0\ng,1\n")
    with caplog.at_level("WARNING", logger="tisa.data.glue"):
        task, data = load_custom(train, dev, text_columns=["text"], cache_dir=tmp_path / "c")
    assert task.label_names == ("-1", "0", "1", "5")
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "label -1 on rows 1, 5 is taken as a class" in said[0]
    assert "'no label'" in said[0]
    caplog.clear()
    train.write_text("text,label\na,0\nb,1\n")
    with caplog.at_level("WARNING", logger="tisa.data.glue"):
        load_custom(train, dev, text_columns=["text"], cache_dir=tmp_path / "d")
    assert not caplog.records


def test_custom_jsonl_regression_pair_is_inferred(tmp_path):
    rows = [{"a": "x", "b": "y", "score": 0.5}, {"a": "u", "b": "v", "score": 3}]
    for name in ("train.jsonl", "dev.jsonl"):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    task, data = load_custom(
        tmp_path / "train.jsonl",
        tmp_path / "dev.jsonl",
        text_columns=("a", "b"),
        label_column="score",
        cache_dir=tmp_path / "c",
    )
    assert task.is_regression and task.metric_names == ("pearson", "spearman")
    assert task.text_columns == ("a", "b")
    assert data["validation"]["label"] == pytest.approx([0.5, 3.0])


def test_custom_tsv_with_a_glue_task_label_set(tmp_path):
    header = "premise\thypothesis\tlabel\n"
    (tmp_path / "t.tsv").write_text(header + 'A "b\tC\tnot_entailment\nD\tE\t0\n')
    (tmp_path / "d.tsv").write_text(header + "F\tG\tentailment\n")
    task, data = load_custom(
        tmp_path / "t.tsv",
        tmp_path / "d.tsv",
        text_columns=("premise", "hypothesis"),
        task="rte",
        cache_dir=tmp_path / "c",
    )
    assert task.name == "rte" and task.label_names == ("entailment", "not_entailment")
    assert data["train"]["label"] == [1, 0]  # by name, or by id
    assert data["train"]["premise"][0] == 'A "b'  # TSV: no quoting

    (tmp_path / "bad.tsv").write_text(header + "F\tG\tmaybe\n")
    with pytest.raises(ValueError) as info:
        load_custom(
            tmp_path / "t.tsv",
            tmp_path / "bad.tsv",
            task="rte",
            text_columns=("premise", "hypothesis"),
            cache_dir=tmp_path / "c",
        )
    assert "bad.tsv" in str(info.value) and "'maybe'" in str(info.value)


def test_custom_labels_that_do_not_match(tmp_path):
    train, dev = tmp_path / "train.csv", tmp_path / "dev.csv"
    train.write_text("text,label\na,pos\nb,neg\n")
    dev.write_text("text,label\nc,pos\nd,neutral\ne,meh\n")
    with pytest.raises(ValueError) as info:
        load_custom(train, dev, text_columns=["text"], cache_dir=tmp_path / "c")
    message = str(info.value)
    assert "dev.csv" in message and "'neutral'" in message and "'meh'" in message
    assert "'pos'" not in message.split("do not match")[0]
    with pytest.raises(ValueError, match=r"train.csv.*'neg'.*regression"):
        load_custom(
            train, dev, text_columns=["text"], task_type="regression", cache_dir=tmp_path / "c"
        )
    with pytest.raises(ValueError, match=r"missing \['sentence'\]"):
        load_custom(train, dev, text_columns=["sentence"], cache_dir=tmp_path / "c")
    with pytest.raises(ValueError, match="text_columns"):
        load_custom(train, dev, text_columns=["a", "b", "c"], cache_dir=tmp_path / "c")
    with pytest.raises(ValueError, match="expected a .csv"):
        load_custom(tmp_path / "x.parquet", dev, text_columns=["text"])


# ------------------------------------------------------------------ custom files: faults
def _load(tmp_path, train, dev=None, **kwargs):
    dev = train if dev is None else dev
    kwargs.setdefault("text_columns", ["text"])
    return load_custom(train, dev, cache_dir=tmp_path / "c", **kwargs)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", b"", r"train_file: '.*empty.csv' is empty"),
        ("blank.csv", b"\n \n", r"train_file: '.*blank.csv' is empty"),
        ("header.csv", b"text,label\n", r"header.csv' cannot be read: no rows below the header"),
        (
            "ragged.tsv",
            b"text\tlabel\na\t1\nb\t0\textra\n",
            r"ragged.tsv' cannot be read: .*"
            r"Expected 2 fields in line 3, saw 3",
        ),
        (
            "binary.csv",
            b"text,label\n\xff\xfe\x00\x81,1\n",
            r"binary.csv' cannot be read: not UTF-8",
        ),
        ("rows.jsonl", b'{"text": "a", "label": 1}\n{"text": \n', r"rows.jsonl' cannot be read"),
    ],
)
def test_unreadable_custom_files_name_the_file(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        _load(tmp_path, path)
    good = tmp_path / "good.csv"
    good.write_text("text,label\na,1\nb,0\n")
    with pytest.raises(ValueError, match=r"validation_file: .*" + name):
        _load(tmp_path, good, path)
    folder = tmp_path / "folder.csv"
    folder.mkdir()
    with pytest.raises(ValueError, match=r"train_file: .*folder.csv' is a folder"):
        _load(tmp_path, folder, good)
    with pytest.raises(FileNotFoundError, match=r"train_file: data file .*missing.csv"):
        _load(tmp_path, tmp_path / "missing.csv", good)


def test_labels_mixing_numbers_and_words_are_refused(tmp_path):
    train = tmp_path / "train.csv"
    train.write_text("text,label\na,1\nb,0\nc,neg\nd,pos\n")
    with pytest.raises(ValueError) as info:
        _load(tmp_path, train)
    message = str(info.value)
    assert "train.csv" in message and "label column 'label' mixes numbers" in message
    assert "'0', '1'" in message and "'neg', 'pos'" in message and "rows 3, 4" in message
    # saying that every value is a class name takes them as four classes, on purpose
    task, data = _load(tmp_path, train, task_type="classification")
    assert task.label_names == ("0", "1", "neg", "pos") and data["train"]["label"] == [1, 0, 2, 3]


@pytest.mark.parametrize("bad", ["", "  ", "n/a"])
def test_a_regression_file_with_a_blank_or_text_label_is_refused(tmp_path, bad):
    train = tmp_path / "train.csv"
    train.write_text(f"text,label\na,0.5\nb,1.25\nc,{bad}\nd,3.75\n")
    kind = "is blank on row 3" if not bad.strip() else "mixes numbers"
    with pytest.raises(ValueError, match=rf"train.csv: label column 'label' {kind}"):
        _load(tmp_path, train)
    dev = tmp_path / "dev.csv"
    dev.write_text("text,label\na,0.5\nb,2\n")
    good = tmp_path / "good.csv"
    good.write_text("text,label\na,0.5\nb,1.25\n")
    bad_dev = tmp_path / "bad_dev.csv"
    bad_dev.write_text(f"text,label\na,0.5\nb,{bad}\n")
    with pytest.raises(
        ValueError, match=r"bad_dev.csv: labels .* \(row 2\) do not match regression"
    ):
        _load(tmp_path, good, bad_dev)
    task, data = _load(tmp_path, good, dev)  # numbers written as text are numbers
    assert task.is_regression and data["validation"]["label"] == [0.5, 2.0]


def test_whole_number_labels_are_one_class_however_written(tmp_path):
    rows = [{"text": "a", "label": 1}, {"text": "b", "label": 0}, {"text": "c", "label": 2}]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "dev.csv").write_text("text,label\nx,1.0\ny,2\nz, 0\n")
    task, data = _load(tmp_path, tmp_path / "train.jsonl", tmp_path / "dev.csv")
    assert task.label_names == ("0", "1", "2") and not task.is_regression
    assert data["validation"]["label"] == [1, 2, 0]
    (tmp_path / "blank.jsonl").write_text(json.dumps({"text": "d", "label": None}) + "\n")
    with pytest.raises(ValueError, match="blank.jsonl: label column 'label' is blank on row 1"):
        _load(tmp_path, tmp_path / "blank.jsonl", tmp_path / "dev.csv")


def test_glue_dir_binary_or_empty_files_name_the_file(tmp_path):
    (tmp_path / "RTE").mkdir()
    header = "index\tsentence1\tsentence2\tlabel\n"
    (tmp_path / "RTE" / "train.tsv").write_bytes(header.encode() + b"0\t\xff\xfe\tb\tentailment\n")
    (tmp_path / "RTE" / "dev.tsv").write_text(header)
    with pytest.raises(ValueError, match=r"train.tsv: not UTF-8 text"):
        load_glue("rte", glue_dir=tmp_path)
    with pytest.raises(ValueError, match=r"dev.tsv: no rows of data"):
        load_glue("rte", glue_dir=tmp_path, splits=["validation"])
