"""Where does a converted model lose CoLA? Word order and a frozen probe, layer by layer.

    python experiments/word_order.py runs/convert --glue-dir ../shared/data/glue \\
        --output benchmarks/results/glue/word_order

Three frozen models: the original named in a `tisa convert` run's metrics.json, the
converted model of that run (``model/``), and the original without positions (its table
removed and the mean of the first 128 rows folded into the token-type embeddings, TISA at
zero: the converter's student before fitting, a bag of words but for [CLS] and [SEP]).

For each model:

* **word-order sensitivity**: 1 - cos(e(s), e(s')) of the mean-pooled embeddings of a
  CoLA dev sentence s and of s' with two adjacent words swapped (one random pair per
  sentence, seeded), and with all its words shuffled; median and quartiles over the
  sentences of at least 4 words that fit in ``--max-length`` tokens. A model without
  positions gives 0 (to float error).
* **frozen probe**: per layer (0 = embeddings), a logistic regression on the mean-pooled
  hidden states, fitted on CoLA train with its regularisation chosen by 5-fold
  cross-validation on train (balanced classes, MCC), scored by MCC on CoLA dev. The
  difference between two models is paired over dev sentences: a bootstrap 95% interval
  (``--bootstrap`` resamples, seeded).

With ``--holdout F`` the share F of CoLA train (split off with seed 0, as ``tisa glue
--holdout`` does) takes the place of dev, and the probe is fitted on the rest: a setting
of the conversion is chosen there, and dev is kept for the figures that are reported.

Writes word_order.{json,md} and word_order.png into ``--output``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

from tisa.convert.convert import finished_conversion
from tisa.convert.evaluate import layer_embeddings
from tisa.convert.student import build_student
from tisa.data.glue import load_glue
from tisa.hub import model_source
from tisa.provenance import save_result
from tisa.reports.figures import save_figure

MODELS = ("original", "converted", "no positions")
C_GRID = (0.01, 0.1, 1.0, 10.0)


def swapped(sentence: str, rng: random.Random) -> str:
    """``sentence`` with one random pair of adjacent words swapped."""
    words = sentence.split()
    i = rng.randrange(len(words) - 1)
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


def shuffled(sentence: str, rng: random.Random) -> str:
    """``sentence`` with its words in a random order other than the original (if any)."""
    words = sentence.split()
    order = list(range(len(words)))
    while order == sorted(order) and len(set(words)) > 1:
        rng.shuffle(order)
    return " ".join(words[i] for i in order)


def order_sensitivity(model, tokenizer, sentences, *, seed: int, max_length: int = 128) -> dict:
    """1 - cosine between the last layer's embeddings of each sentence and of its swapped
    and shuffled forms: per-sentence values and their median and quartiles."""
    import torch

    rng = random.Random(seed)
    swaps = [swapped(s, rng) for s in sentences]
    shuffles = [shuffled(s, rng) for s in sentences]
    texts = [*sentences, *swaps, *shuffles]
    emb = layer_embeddings(model, tokenizer, texts, max_length=max_length)[-1]
    n = len(sentences)
    result = {}
    for name, other in (("swap", emb[n : 2 * n]), ("shuffle", emb[2 * n :])):
        d = (1 - torch.nn.functional.cosine_similarity(emb[:n], other, dim=-1)).double()
        q = torch.quantile(d, torch.tensor([0.25, 0.5, 0.75], dtype=d.dtype)).tolist()
        result[name] = {"q25": q[0], "median": q[1], "q75": q[2], "values": d.tolist()}
    return result


def probe(train_x, train_y, dev_x, *, seed: int) -> tuple[list[int], float]:
    """Dev predictions of a logistic regression fitted on train (C by 5-fold CV on train)."""
    import warnings

    from sklearn.linear_model import LogisticRegressionCV
    from sklearn.metrics import make_scorer, matthews_corrcoef
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(
        StandardScaler(),
        LogisticRegressionCV(
            Cs=list(C_GRID),
            cv=5,
            scoring=make_scorer(matthews_corrcoef),
            class_weight="balanced",
            max_iter=5000,
            random_state=seed,
        ),
    )
    with warnings.catch_warnings():  # scikit-learn's notices of coming default changes
        warnings.simplefilter("ignore", FutureWarning)
        clf.fit(train_x, train_y)
    return clf.predict(dev_x).tolist(), float(clf[-1].C_[0])


def order_comparison(first, second) -> dict:
    """Per-sentence comparison of two models' sensitivities to the same perturbations:
    median ratio first / second, share of sentences where first is lower, and the
    two-sided Wilcoxon signed-rank p-value."""
    import numpy as np
    from scipy.stats import wilcoxon

    a, b = np.asarray(first, dtype=float), np.asarray(second, dtype=float)
    if a.shape != b.shape or a.size == 0:
        raise ValueError(f"expected two equal non-empty lists, got {a.size} and {b.size}")
    keep = b > 0
    return {
        "median_ratio": float(np.median(a[keep] / b[keep])) if keep.any() else None,
        "share_lower": float(np.mean(a < b)),
        "wilcoxon_p": float(wilcoxon(a, b).pvalue),
    }


def paired_interval(gold, first, second, *, resamples: int, seed: int) -> list[float]:
    """Bootstrap 95% interval of MCC(first) - MCC(second) over the same resampled sentences."""
    import numpy as np
    from sklearn.metrics import matthews_corrcoef

    gold, first, second = (np.asarray(x) for x in (gold, first, second))
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(resamples):
        i = rng.integers(0, len(gold), len(gold))
        diffs.append(matthews_corrcoef(gold[i], first[i]) - matthews_corrcoef(gold[i], second[i]))
    return [float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))]


def load_models(convert_dir: Path):
    """(name of the original, {model name: model}, tokenizer) for a `tisa convert` folder."""
    from transformers import AutoModel, AutoTokenizer

    source, model_dir = finished_conversion(convert_dir)
    original = AutoModel.from_pretrained(model_source(source))
    models = {
        "original": original,
        "converted": AutoModel.from_pretrained(model_dir),
        "no positions": build_student(original, fold_positions=128),
    }
    return source, models, AutoTokenizer.from_pretrained(model_dir)


def measure(
    convert_dir: Path,
    glue_dir: Path,
    *,
    seed: int = 1,
    bootstrap: int = 2000,
    max_train: int | None = None,
    max_dev: int | None = None,
    max_length: int = 128,
    holdout: float = 0.0,
    progress: bool = True,
) -> dict:
    from sklearn.metrics import matthews_corrcoef
    from tqdm.auto import tqdm

    if not 0 <= holdout < 1:
        raise ValueError(f"holdout: expected a share in [0, 1), got {holdout!r}")
    data = load_glue("cola", glue_dir=glue_dir, splits=("train", "validation"))
    train, dev = data["train"], data["validation"]
    if holdout > 0:  # model selection: the held-out part of train stands in for dev
        parts = train.train_test_split(test_size=holdout, seed=0)
        train, dev = parts["train"], parts["test"]
    if max_train is not None:
        train = train.select(range(min(max_train, len(train))))
    if max_dev is not None:  # a smaller run (the reported figures use the whole dev set)
        dev = dev.select(range(min(max_dev, len(dev))))
    source, models, tokenizer = load_models(convert_dir)
    # sentences of at least 4 words that fit whole (a truncated pair would differ in more
    # than order)
    long_dev = [
        s
        for s in dev["sentence"]
        if len(s.split()) >= 4 and len(tokenizer(s)["input_ids"]) <= max_length
    ]
    result: dict = {
        "model": source,
        "seed": seed,
        "max_length": max_length,
        "evaluated_on": "heldout" if holdout > 0 else "dev",
        "holdout": holdout,
        "train_sentences": len(train),
        "dev_sentences": len(dev),
        "order_sentences": len(long_dev),
        "models": {},
    }
    predictions = {}
    for name in tqdm(MODELS, desc="word order and probe", disable=not progress):
        model = models[name]
        sens = order_sensitivity(model, tokenizer, long_dev, seed=seed, max_length=max_length)
        embed = {"max_length": max_length}
        train_x = layer_embeddings(model, tokenizer, list(train["sentence"]), **embed).numpy()
        dev_x = layer_embeddings(model, tokenizer, list(dev["sentence"]), **embed).numpy()
        layers, predictions[name] = [], []
        for layer in range(train_x.shape[0]):
            pred, c = probe(train_x[layer], train["label"], dev_x[layer], seed=seed)
            layers.append({"layer": layer, "mcc": matthews_corrcoef(dev["label"], pred), "C": c})
            predictions[name].append(pred)
        result["models"][name] = {"order": sens, "probe": layers}
    result["order_paired"] = {
        kind: order_comparison(
            result["models"]["converted"]["order"][kind]["values"],
            result["models"]["original"]["order"][kind]["values"],
        )
        for kind in ("swap", "shuffle")
    }
    gold = list(dev["label"])
    result["paired"] = {}
    for a, b in (("converted", "original"), ("no positions", "original")):
        rows = []
        for layer in range(len(predictions[a])):
            rows.append(
                {
                    "layer": layer,
                    "difference": result["models"][a]["probe"][layer]["mcc"]
                    - result["models"][b]["probe"][layer]["mcc"],
                    "interval95": paired_interval(
                        gold,
                        predictions[a][layer],
                        predictions[b][layer],
                        resamples=bootstrap,
                        seed=seed,
                    ),
                }
            )
        result["paired"][f"{a} - {b}"] = rows
    return result


def markdown(result: dict) -> str:
    models = result["models"]
    split = "dev" if result.get("evaluated_on", "dev") == "dev" else "held-out train"
    text = (
        f"{result['model']}, frozen, on CoLA ({result['train_sentences']} train sentences, "
        f"{result['dev_sentences']} {split}; seed {result['seed']})\n\n"
        f"Word-order sensitivity, 1 - cos of the mean-pooled last layer, median [quartiles] "
        f"over the {result['order_sentences']} {split} sentences of at least 4 words that fit "
        f"in {result['max_length']} tokens:\n\n"
        "| model | two adjacent words swapped | all words shuffled |\n|---|---:|---:|\n"
    )
    for name, m in models.items():
        sw, sh = m["order"]["swap"], m["order"]["shuffle"]
        text += (
            f"| {name} | {sw['median']:.4f} [{sw['q25']:.4f}, {sw['q75']:.4f}] | "
            f"{sh['median']:.4f} [{sh['q25']:.4f}, {sh['q75']:.4f}] |\n"
        )
    text += "\nConverted against original, sentence by sentence: "
    text += "; ".join(
        f"{kind}: median ratio {p['median_ratio']:.2f}, lower on {100 * p['share_lower']:.0f}% "
        f"of sentences, Wilcoxon p = {p['wilcoxon_p']:.1e}"
        for kind, p in result["order_paired"].items()
    )
    text += "\n"
    names = list(models)
    pairs = list(result["paired"])
    text += (
        "\nFrozen probe (logistic regression on the mean-pooled layer, C by 5-fold CV on "
        f"train), {split} MCC x100; differences paired over {split} sentences, bootstrap 95% "
        "interval:\n\n| layer | "
        + " | ".join(names)
        + " | "
        + " | ".join(pairs)
        + " |\n|---:|"
        + "---:|" * (len(names) + len(pairs))
        + "\n"
    )
    for layer in range(len(models[names[0]]["probe"])):
        cells = [f"{100 * models[n]['probe'][layer]['mcc']:.1f}" for n in names]
        for p in pairs:
            row = result["paired"][p][layer]
            lo, hi = row["interval95"]
            cells.append(f"{100 * row['difference']:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]")
        text += f"| {layer} | " + " | ".join(cells) + " |\n"
    return text


def figure(result: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, m in result["models"].items():
        layers = [r["layer"] for r in m["probe"]]
        left.plot(layers, [100 * r["mcc"] for r in m["probe"]], marker="o", label=name)
    left.set_xlabel("layer (0 = embeddings)")
    split = "dev" if result.get("evaluated_on", "dev") == "dev" else "held-out train"
    left.set_ylabel(f"CoLA {split} MCC x100, frozen probe")
    left.set_title("What a linear probe reads from each layer")
    left.legend()
    names = list(result["models"])
    data = [result["models"][n]["order"]["swap"]["values"] for n in names]
    right.boxplot(data, showfliers=False)
    right.set_xticks(range(1, len(names) + 1), names)
    right.set_ylabel("1 - cos(e(s), e(swap two adjacent words))")
    right.set_title("Sensitivity to one adjacent swap")
    fig.suptitle(f"{result['model']} and its TISA conversion, frozen", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("convert_dir", type=Path, help="--output-dir of a tisa convert run")
    parser.add_argument("--glue-dir", type=Path, required=True, help="a glue_data folder")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bootstrap", type=int, default=2000, help="resamples, >= 100")
    parser.add_argument("--max-train", type=int, default=None, help="first N train sentences")
    parser.add_argument("--max-length", type=int, default=128, help="tokens per sentence")
    parser.add_argument(
        "--holdout", type=float, default=0.0,
        help="score on this share of CoLA train (seed 0) instead of dev, to choose settings",
    )
    parser.add_argument("--output", type=Path, default=None, help="writes word_order.*")
    args = parser.parse_args(argv)
    if not 0 <= args.holdout < 1:
        parser.error("--holdout must be a share in [0, 1)")
    if args.bootstrap < 100:
        parser.error("--bootstrap must be >= 100")
    if args.max_train is not None and args.max_train < 50:
        parser.error("--max-train must be >= 50")
    if args.max_length < 8:
        parser.error("--max-length must be >= 8")
    try:
        result = measure(
            args.convert_dir,
            args.glue_dir,
            seed=args.seed,
            bootstrap=args.bootstrap,
            max_train=args.max_train,
            max_length=args.max_length,
            holdout=args.holdout,
        )
    except (ValueError, FileNotFoundError) as err:
        print(f"word_order: error: {err}", file=sys.stderr)
        return 2
    text = markdown(result)
    print(text, end="")
    if args.output is not None:
        save_result(args.output, "word_order", text, result)
        save_figure(figure(result), args.output / "word_order.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
