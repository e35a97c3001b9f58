"""Tables of pretraining: the scoring rate sweep, schemes at their own rate, offset retrieval."""

from __future__ import annotations

import statistics
from pathlib import Path

from tisa.doc_tables.base import RESULTS, grouped, read_json, table
from tisa.pretrain.offset_retrieval import merge_folders, summarise, trained_where
from tisa.pretrain.schemes import describe_variant
from tisa.reports.markdown import accuracy_cell, markdown_table


@table("pretrain-scoring-rate-sweep", f"{RESULTS}/pretrain/tisa-lr-sweep/*/results.json",
        f"{RESULTS}/pretrain/tisa-lr-sweep/*/metrics.csv")
def pretrain_rate_sweep(root: Path) -> str:
    """`tisa` at 1,000 steps with each learning rate of its scoring parameters."""
    rows = []
    for path in (root / RESULTS / "pretrain/tisa-lr-sweep").glob("*/results.json"):
        data = read_json(root, path.relative_to(root).as_posix())
        name = path.parent.name
        rate = name.split("-lr", 1)[1] if "-lr" in name else "backbone (5e-4)"
        moved = data.get("scoring_movement") or {}
        rows.append((float(rate) if "-lr" in name else 5e-4, [
            rate, data["step"], f"{data['eval_loss']:.3f}",
            *(f"{moved[k]['mean_abs_change']:.3f}" if k in moved else "n/a"
              for k in ("amplitude", "offset", "sharpness")),
        ]))
    rows.sort(key=lambda r: r[0])
    columns = ["scoring learning rate", "steps", "val. loss", "amplitudes moved",
               "centres moved", "sharpness moved"]
    return markdown_table(columns, [r for _, r in rows], align="lrrrrr")


@table("pretrain-own-rate", f"{RESULTS}/pretrain/position-schemes-tisa-lr/**/*.json",
        f"{RESULTS}/pretrain/position-schemes-tisa-lr/**/*.csv")
def pretrain_own_rate(root: Path) -> str:
    """The 2,500-step runs whose scoring parameters had their own learning rate."""
    data = read_json(root, f"{RESULTS}/pretrain/position-schemes-tisa-lr/summary.json")
    lengths = [int(n) for n in data["settings"]["lengths"]]
    train = int(data["settings"]["seq_len"])
    body = []
    for name, run in data["runs"].items():
        test = {int(k): v for k, v in run["test_loss"].items()}

        def rise(factor: int) -> str:
            far, near = test.get(train * factor), test.get(train)
            return "n/a" if far is None or near is None else f"{100 * (far / near - 1):+.1f}%"

        body.append([
            run["position"], f"{run['tisa_learning_rate']:g}",
            f"{run['final_validation_loss']:.3f}",
            *("n/a" if test.get(n) is None else f"{test[n]:.3f}" for n in lengths),
            f"{rise(8)} / {rise(16)}", grouped(run["positional_parameters"]["total"]),
        ])
    columns = ["position", "scoring rate", f"val. loss ({train})",
               *(f"test @{n}" for n in lengths), "rise 8x / 16x", "positional params"]
    return markdown_table(columns, body, align="ll" + "r" * (len(columns) - 2))


#: the tables of one offset-retrieval run folder (:func:`_offset_retrieval_tables`)
OFFSET_PARTS = ("accuracy", "comparisons", "sweep", "by-offset", "by-block", "peaks",
                "inference", "inference-comparisons", "far", "far-comparisons")


def _offset_retrieval_tables(
    name: str, results: str, parts: tuple[str, ...] = ("accuracy", "comparisons", "sweep")
) -> None:
    """Registers the tables ``parts`` (of :data:`OFFSET_PARTS`) of one run of
    ``experiments/offset_retrieval/run.py``: ``name`` (the accuracy), and ``name-PART``
    for the others. ``results`` is the run's ``results.json``; ``peaks`` reads the
    folder's ``profiles.json`` (``profiles.py``), ``inference*`` its files of
    ``rescore.py`` at the run's lengths and ``far*`` those of ``rescore.py
    --eval-lengths``."""

    def accuracy(root: Path) -> str:
        """Accuracy of every scheme at every length (beyond the training length in brackets)."""
        r = read_json(root, results)
        st, prov = r["settings"], r["provenance"]
        lengths = [int(n) for n in st["eval_lengths"]]
        rates, swept = st.get("positional_rates") or {}, r.get("sweep") or {}
        rows = []
        for position, per_length in r["summary"]["schemes"].items():
            rate = rates.get(position)
            cells = [f"{rate:g}" if rate is not None else
                     "none learned" if swept else "the backbone's"]
            cells += [accuracy_cell(per_length[str(n)]) for n in lengths]
            rows.append([position, *cells])
        columns = ["position", "positional rate", *[f"{n:,}" for n in lengths]]
        sweep = "" if not swept else (
            "; positional rates chosen among "
            f"{', '.join(f'{x:g}' for x in st['positional_lr_sweep'])} on seed "
            f"{st['sweep_seed']} ({st['sweep_steps']} steps, by the loss at the training length)")
        minutes = [run["train_seconds"] / 60 for seed in r["runs"].values()
                   for run in seed.values() if "train_seconds" in run]
        took = "" if not minutes else (
            f"; training wall time {statistics.median(minutes):.1f} min a run (median, range "
            f"{min(minutes):.1f}-{max(minutes):.1f}; as the runs logged it, with whatever "
            f"else shared the machine: not a benchmark)")
        note = (f"\n\nGPT-2 {st['size']}, trained at {st['train_length']} tokens for "
                f"{st['steps']} steps of {st['batch_size']} sequences; offsets {st['offsets']}, "
                f"{st['vocab_size']} content tokens (chance {100 / st['vocab_size']:.1f}); "
                f"{st['eval_sequences']} sequences a length{sweep}; seeds "
                f"{', '.join(map(str, st['seeds']))}{took}; trained on "
                f"{'; '.join(sorted({trained_where(r, p) for p in r['summary']['schemes']}))}; "
                f"the file written with {prov.get('threads')} threads on "
                f"{prov.get('cpu')}, torch {prov.get('torch')}, commit "
                f"`{(prov.get('commit') or '')[:12]}`; `{prov.get('command')}`\n")
        return markdown_table(columns, rows, align="ll" + "r" * len(lengths)) + note

    def comparisons(root: Path) -> str:
        """Each TISA family minus every other scheme beyond the training length, by seed."""
        return _offset_comparisons(read_json(root, results)["summary"])

    def sweep(root: Path) -> str:
        """The positional rate sweep: each learned scheme's loss at the training length."""
        r = read_json(root, results)
        st, swept = r["settings"], r.get("sweep") or {}
        rates = sorted({float(x) for s in swept.values() for x in s["losses"]})
        rows = []
        for position, s in swept.items():
            losses = {float(x): v for x, v in s["losses"].items()}
            rows.append([position, *(
                "n/a" if x not in losses else
                f"**{losses[x]:.3f}**" if x == s["chosen"] else f"{losses[x]:.3f}"
                for x in rates)])
        columns = ["position", *[f"rate {x:g}" for x in rates]]
        return (markdown_table(columns, rows, align="l" + "r" * len(rates))
                + f"\n\nLoss at {st['train_length']} tokens on seed {st['sweep_seed']}'s fresh "
                f"sequences after {st['sweep_steps']} steps; the chosen rate in bold.\n")


    folder = results.rsplit("/", 1)[0]
    variants = (results, f"{folder}/length-scale-*.json", f"{folder}/clip-*.json")
    far = (f"{folder}/*-to*.json",)
    renderers = {
        "accuracy": (accuracy, (results,)),
        "comparisons": (comparisons, (results,)),
        "sweep": (sweep, (results,)),
        "by-offset": (lambda root: offset_accuracy_by_offset(root, results), (results,)),
        "by-block": (lambda root: offset_accuracy_by_block(root, results), (results,)),
        "peaks": (lambda root: offset_bias_peaks(root, f"{folder}/profiles.json"),
                  (f"{folder}/profiles.json",)),
        "inference": (lambda root: offset_accuracy_at_inference(root, results), variants),
        "inference-comparisons": (lambda root: offset_inference_comparisons(root, results),
                                  variants),
        "far": (lambda root: offset_accuracy_far(root, folder), far),
        "far-comparisons": (lambda root: offset_far_comparisons(root, folder), far),
    }
    for part in parts:
        render, sources = renderers[part]
        table(name if part == "accuracy" else f"{name}-{part}", *sources)(render)


def _offset_comparisons(s: dict) -> str:
    """The comparisons of a :func:`tisa.pretrain.offset_retrieval.summarise` summary."""
    if not s["comparisons"]:
        return (f"No scheme to compare: the run holds {', '.join(s['schemes'])} alone "
                "so far.\n")
    rows = []
    for c in s["comparisons"]:
        verdict = ("no difference shown" if c["p_holm"] >= 0.05 else
                   "TISA ahead" if c["mean"] > 0 else "TISA behind")
        rows.append([f"{c['length']:,}", c["family"], c["other"],
                     f"{100 * c['family_mean']:.1f}", f"{100 * c['other_mean']:.1f}",
                     f"{100 * c['mean']:+.1f} [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]",
                     f"{c['p_holm']:.2g}", verdict])
    columns = ["length", "TISA family", "other", "its accuracy", "other's",
               "difference, 95% interval", "p (Holm)", "reading"]
    return (markdown_table(columns, rows, align="lllrrrrl")
            + f"\n\n{s['correction']}; paired by seed ({len(s['seeds'])} seeds).\n")


def offset_across_folders(root: Path, *results: str) -> str:
    """Offset retrieval: every TISA family against every other scheme, the schemes read
    from several folders of the same settings (trained apart, e.g. on other devices), paired
    by seed with Holm over all the comparisons (:func:`tisa.pretrain.offset_retrieval.summarise`).
    """
    files = [(r, read_json(root, r)) for r in results]
    runs = merge_folders(files)
    first = files[0][1]["settings"]
    summary = summarise(runs, train_length=first["train_length"],
                        eval_lengths=first["eval_lengths"])
    parts = []
    for _, f in files:
        positions = list(next(iter(f["runs"].values())))
        on = "; ".join(sorted({trained_where(f, p) for p in positions}))
        commit = (f["provenance"].get("commit") or "not recorded")[:12]
        parts.append(f"{' and '.join(positions)} on {on}, commit `{commit}`")
    where = "; ".join(parts)
    return (_offset_comparisons(summary).rstrip("\n")
            + f" Trained apart with the same settings: {where}.\n")


def _seed_means(r: dict, position: str, length: int, key: str) -> tuple[list, int]:
    """The mean over the seeds that recorded ``key`` at ``length``, element by element,
    and how many seeds that is."""
    parts = [run["eval"][str(length)][key] for run in
             (r["runs"][seed][position] for seed in r["runs"])
             if key in run["eval"][str(length)]]
    if key == "accuracy_by_offset":
        parts = [list(p.values()) for p in parts]
    means = [None if any(v is None for v in col) else statistics.fmean(col)
             for col in zip(*parts, strict=True)] if parts else []
    return means, len(parts)


def _seeds_note(counts: dict[str, int], total: int) -> str:
    fewer = {p: n for p, n in counts.items() if n < total}
    return "" if not fewer else " Fewer seeds recorded it for " + ", ".join(
        f"{p} ({n} of {total})" for p, n in fewer.items()) + "."


def offset_accuracy_by_offset(root: Path, results: str) -> str:
    """Offset retrieval: accuracy on the sequences asking for each offset, mean over seeds."""
    r = read_json(root, results)
    st = r["settings"]
    lengths = [int(n) for n in st["eval_lengths"]]
    rows, counts = [], {}
    for position, per_length in r["summary"]["schemes"].items():
        columns_ok = [n for n in lengths if per_length[str(n)]["status"] == "ok"]
        per_n = {n: _seed_means(r, position, n, "accuracy_by_offset") for n in columns_ok}
        counts[position] = min((c for _, c in per_n.values()), default=0)
        for i, offset in enumerate(st["offsets"]):
            rows.append([position, str(offset), *(
                "n/a" if n not in per_n or not per_n[n][0] or per_n[n][0][i] is None
                else f"{100 * per_n[n][0][i]:.1f}" for n in lengths)])
    columns = ["position", "offset d", *[f"{n:,}" for n in lengths]]
    seeds = st["seeds"]
    return (markdown_table(columns, rows, align="ll" + "r" * len(lengths))
            + f"\n\nAccuracy x 100 on the sequences whose marker names d, mean over "
            f"seeds {', '.join(map(str, seeds))}.{_seeds_note(counts, len(seeds))}\n")


def offset_accuracy_by_block(root: Path, results: str) -> str:
    """Offset retrieval: accuracy by block of the training length at the longest length."""
    r = read_json(root, results)
    st = r["settings"]
    train, longest = int(st["train_length"]), max(int(n) for n in st["eval_lengths"])
    blocks = -(-longest // train)
    rows, counts = [], {}
    for position, per_length in r["summary"]["schemes"].items():
        if per_length[str(longest)]["status"] != "ok":
            continue
        means, counts[position] = _seed_means(r, position, longest, "accuracy_by_block")
        rows.append([position, *("n/a" if m is None else f"{100 * m:.1f}"
                                 for m in means or [None] * blocks)])
    columns = ["position", *[f"{b * train}-{min(longest, (b + 1) * train) - 1}"
                             for b in range(blocks)]]
    return (markdown_table(columns, rows, align="l" + "r" * blocks)
            + f"\n\nAccuracy x 100 at {longest:,} tokens on each block of {train} "
            f"positions (the first is the training length), mean over seeds "
            f"{', '.join(map(str, st['seeds']))}.{_seeds_note(counts, len(st['seeds']))}\n")


def _variants(root: Path, folder: str) -> list[tuple[str, dict]]:
    """The rescored variants of a run folder (``experiments/offset_retrieval/rescore.py``):
    (label, data), log-n alone, clipping alone, then both."""
    found = []
    for path in sorted((root / folder).glob("*.json")):
        if path.name.startswith(("length-scale-", "clip-")) and "-to" not in path.name:
            data = read_json(root, f"{folder}/{path.name}")
            order = (data["clip_distance"] is not None, data["length_scale"] is not None)
            label = describe_variant(data["length_scale"], data["clip_distance"], short=True)
            found.append((order, label, data))
    return [(label, data) for _, label, data in sorted(found, key=lambda f: f[0])]


def offset_accuracy_at_inference(root: Path, results: str) -> str:
    """Offset retrieval: every scheme as trained and with each inference-time variant."""
    r = read_json(root, results)
    st = r["settings"]
    lengths = [int(n) for n in st["eval_lengths"]]
    variants = _variants(root, results.rsplit("/", 1)[0])
    rows = []
    for position, per_length in r["summary"]["schemes"].items():
        rows.append([position, "as trained", *(accuracy_cell(per_length[str(n)])
                                                for n in lengths)])
        for label, data in variants:
            if position in data["summary"]["schemes"]:
                changed = data["summary"]["schemes"][position]
                rows.append(["", label, *(accuracy_cell(changed[str(n)]) for n in lengths)])
    columns = ["position", "at inference", *[f"{n:,}" for n in lengths]]
    commands = "; ".join(f"`{d['provenance'].get('command')}`" for _, d in variants)
    return (markdown_table(columns, rows, align="ll" + "r" * len(lengths))
            + f"\n\nThe same trained models (seeds {', '.join(map(str, st['seeds']))}) "
            f"scored again on the same sequences; {commands}.\n")


def _paired_cells(c: dict, first: str, second: str) -> list[str]:
    """The cells of one paired comparison: both means, the difference with its interval,
    and the corrected p (accuracies x 100)."""
    return [f"{100 * c[first]:.1f}", f"{100 * c[second]:.1f}",
            f"{100 * c['mean']:+.1f} [{100 * c['low']:+.1f}, {100 * c['high']:+.1f}]",
            f"{c['p_holm']:.2g}"]


def offset_inference_comparisons(root: Path, results: str) -> str:
    """Offset retrieval with each inference-time variant at the longest length: the variant
    minus the model as trained, and each TISA family minus every other scheme under it."""
    r = read_json(root, results)
    longest = max(int(n) for n in r["settings"]["eval_lengths"])
    rows = []
    for label, data in _variants(root, results.rsplit("/", 1)[0]):
        for c in data["against_trained"]:
            if c["length"] == longest:
                rows.append([label, f"{c['position']}: with minus as trained",
                             *_paired_cells(c, "variant_mean", "trained_mean")])
        for c in data["summary"]["comparisons"]:
            if c["length"] == longest:
                rows.append([label, f"{c['family']} minus {c['other']}",
                             *_paired_cells(c, "family_mean", "other_mean")])
    columns = ["at inference", "comparison", "first", "second", "difference, 95% interval",
               "p (Holm)"]
    return (markdown_table(columns, rows, align="llrrrr")
            + f"\n\nAccuracy x 100 beyond the training length at {longest:,} tokens, paired "
            f"by seed. Each variant's p values are corrected with Holm over all of its "
            f"comparisons (every longer length), those against the model as trained and those "
            f"between schemes separately.\n")


def _far_files(root: Path, folder: str) -> list[dict]:
    """The rescored variants of a run folder at lengths of their own (``--eval-lengths``,
    files ``*-toL.json``)."""
    return [read_json(root, f"{folder}/{p.name}")
            for p in sorted((root / folder).glob("*-to*.json"))]


def offset_accuracy_far(root: Path, folder: str) -> str:
    """Offset retrieval far past the run's own lengths: as trained and with each variant."""
    parts = []
    for data in _far_files(root, folder):
        lengths = [int(n) for n in data["eval_lengths"]]
        label = describe_variant(data["length_scale"], data["clip_distance"], short=True)
        rows = []
        for position, per_length in data["trained_summary"]["schemes"].items():
            rows.append([position, "as trained",
                         *(accuracy_cell(per_length[str(n)]) for n in lengths)])
            if position in data["summary"]["schemes"]:
                changed = data["summary"]["schemes"][position]
                rows.append(["", label, *(accuracy_cell(changed[str(n)]) for n in lengths)])
        columns = ["position", "at inference", *[f"{n:,}" for n in lengths]]
        parts.append(markdown_table(columns, rows, align="ll" + "r" * len(lengths))
                     + f"\n\n`{data['provenance'].get('command')}`; seeds "
                     f"{', '.join(data['trained_runs'])}.\n")
    return "\n".join(parts)


def offset_far_comparisons(root: Path, folder: str) -> str:
    """Offset retrieval far past the run's own lengths, at the longest: each TISA family
    minus every other scheme as trained and with the variant, and the variant minus as
    trained."""
    rows = []
    for data in _far_files(root, folder):
        longest = max(int(n) for n in data["eval_lengths"])
        label = describe_variant(data["length_scale"], data["clip_distance"], short=True)
        for when, summary in (("as trained", data["trained_summary"]),
                              (label, data["summary"])):
            for c in summary["comparisons"]:
                if c["length"] == longest:
                    rows.append([f"{longest:,}", when, f"{c['family']} minus {c['other']}",
                                 *_paired_cells(c, "family_mean", "other_mean")])
        for c in data["against_trained"]:
            if c["length"] == longest:
                rows.append([f"{longest:,}", label, f"{c['position']}: with minus as trained",
                             *_paired_cells(c, "variant_mean", "trained_mean")])
    columns = ["length", "at inference", "comparison", "first", "second",
               "difference, 95% interval", "p (Holm)"]
    return (markdown_table(columns, rows, align="lllrrrr")
            + "\n\nAccuracy x 100 beyond the training length, paired by seed; Holm over all "
            "the comparisons of each kind in each file (every longer length).\n")


# 1,000 steps of rbf_linear, ALiBi and FIRE
_offset_retrieval_tables("offset-retrieval", f"{RESULTS}/pretrain/offset-retrieval/results.json")
# 2,000 steps, with the weights saved: by offset, by block, the learned bias and the
# inference-time variants too
_offset_retrieval_tables(
    "offset-retrieval-2000", f"{RESULTS}/pretrain/offset-retrieval-2000/results.json",
    OFFSET_PARTS,
)
# 4,000 steps of rbf_linear, as trained and clipped; ALiBi and FIRE at the same settings,
# trained on a GPU; the three compared
_offset_retrieval_tables(
    "offset-retrieval-4000", f"{RESULTS}/pretrain/offset-retrieval-4000/results.json",
    ("accuracy", "far", "far-comparisons"),
)
_offset_retrieval_tables(
    "offset-retrieval-4000-baselines",
    f"{RESULTS}/pretrain/offset-retrieval-4000-baselines/results.json", ("accuracy", "sweep"),
)
_OFFSET_4000 = (f"{RESULTS}/pretrain/offset-retrieval-4000/results.json",
                f"{RESULTS}/pretrain/offset-retrieval-4000-baselines/results.json")
table("offset-retrieval-4000-comparisons", *_OFFSET_4000)(
    lambda root: offset_across_folders(root, *_OFFSET_4000))


def offset_bias_peaks(root: Path, profiles: str) -> str:
    """Offset retrieval: how far each scheme's learned bias stands out at the task's offsets.

    For each offset d of the task, the largest over layers and heads of f(-d) minus the
    larger of its neighbours f(-d + 1) and f(-d - 1): positive where some head puts a peak
    at -d, at most 0 for a bias that only falls with distance (ALiBi).
    """
    p = read_json(root, profiles)
    st = p["settings"]
    index = {d: i for i, d in enumerate(p["distances"])}
    rows = []
    for position, layers in p["schemes"].items():
        cells = []
        for d in st["offsets"]:
            if not {d - 1, d, d + 1} <= index.keys():
                cells.append("n/a")
                continue
            peak = max(h[index[d]] - max(h[index[d - 1]], h[index[d + 1]])
                       for layer in layers for h in layer)
            cells.append(f"{peak:+.2f}")
        rows.append([position, *cells])
    columns = ["position", *[f"peak at -{d}" for d in st["offsets"]]]
    without = ", ".join(p["without_bias"])
    return (markdown_table(columns, rows, align="l" + "r" * len(st["offsets"]))
            + f"\n\nThe largest over layers and heads of f(-d) minus the larger of f(-d + 1) "
            f"and f(-d - 1), in logits, for the last query of a {p['length']:,}-token input; "
            f"seed {p['seed']}, from `{p['provenance'].get('command')}`"
            + (f"; no positional bias: {without}" if without else "") + ".\n")
