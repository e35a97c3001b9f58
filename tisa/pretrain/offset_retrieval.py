"""Offset retrieval: does a position scheme keep a precise offset beyond its training length?

A causal LM of a pretraining size and position scheme (:mod:`tisa.pretrain.build`) is
trained from scratch on :mod:`tisa.data.offset_task`: after a marker naming an offset d,
every token is to be predicted as the content token d positions back. Training uses
sequences of one length; evaluation scores fresh sequences of several lengths (the same
sequences for every scheme of a seed): accuracy and loss over all scored positions, and
accuracy over the positions at or beyond the training length alone, the ones no training
sequence had. Chance is 1 / vocabulary.

:func:`train_and_evaluate` runs one scheme at one seed: the model of
:func:`build_task_model`, scored by :func:`evaluate` (which also scores saved models
again); :func:`last_query_bias` reads the positional bias a trained model adds;
:func:`choose_rate` picks the learning rate of a scheme's positional parameters from a
sweep, on the loss at the training length of a seed that is not reported;
:func:`summarise` turns the runs of several seeds into mean ± sd per scheme and length and
compares every TISA family with every other scheme on the positions beyond the training
length, paired by seed, with Holm's correction over all comparisons; :func:`markdown`
renders both.

Letters: B batch, L sequence length, V vocabulary.
"""

from __future__ import annotations

import io
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tisa.checkpoints import load_plain
from tisa.files import write_atomic
from tisa.pretrain.schemes import SCHEMES, scoring_family
from tisa.reports.markdown import accuracy_cell
from tisa.stats import holm, paired_difference

__all__ = [
    "TISA_FAMILIES",
    "build_task_model",
    "choose_rate",
    "eval_cell",
    "evaluate",
    "extrapolates",
    "has_positional_parameters",
    "is_tisa",
    "last_query_bias",
    "load_saved_models",
    "markdown",
    "merge_folders",
    "read_results",
    "summarise",
    "train_and_evaluate",
    "trained_where",
]

# the scoring families of TISA proper (learned f_h(j - i) from kernels), as against the
# baselines (ALiBi, T5, KERPLE, FIRE, RoPE, no positions)
TISA_FAMILIES = ("rbf", "rbf_linear", "rbf_log", "rbf_logdist")
# training steps per point of a run's ``train_loss_curve``
CURVE_EVERY = 100

#: the settings that define a run of ``experiments/offset_retrieval/run.py`` (a saved run is
#: reused only when all of them match)
RUN_SETTINGS = (
    "size", "train_length", "eval_lengths", "offsets", "vocab_size", "steps", "batch_size",
    "learning_rate", "tisa_learning_rate", "warmup", "eval_sequences",
)


def extrapolates(position: str) -> bool:
    """Whether a scheme can read sequences longer than its training length (an absolute
    table cannot)."""
    return position in SCHEMES and SCHEMES[position][1] == "remove"


def is_tisa(position: str) -> bool:
    """Whether a scheme is a TISA family that extrapolates."""
    return extrapolates(position) and scoring_family(position) in TISA_FAMILIES


def has_positional_parameters(position: str) -> bool:
    """Whether a scheme has learned positional parameters (which a rate sweep tunes)."""
    from tisa.pretrain.compare import RunSpec
    from tisa.pretrain.compare import has_positional_parameters as learned

    return learned(RunSpec(position, position, {}, ()))


def choose_rate(losses: Mapping[float, float]) -> float:
    """The rate with the lowest validation loss; ties go to the smaller rate, and a rate
    whose loss is not finite (a run that diverged) is never chosen.

    Raises:
        ValueError: no rates, or no rate with a finite loss.
    """
    finite = {rate: loss for rate, loss in losses.items() if math.isfinite(loss)}
    if not finite:
        raise ValueError(f"losses: expected a finite loss at some rate, got {dict(losses)}")
    return min(sorted(finite), key=lambda rate: finite[rate])


def build_task_model(
    position: str,
    *,
    size: str = "small",
    train_length: int = 128,
    vocab_size: int = 64,
    offsets: Sequence[int] = (1, 3, 8, 32),
    seed: int = 0,
) -> Any:
    """The causal LM a run of :func:`train_and_evaluate` trains, freshly initialised (a
    run saved with ``save_model`` loads into it with ``load_state_dict``)."""
    from tisa.data.offset_task import total_vocab
    from tisa.pretrain.build import build_model

    options = {"init_threshold": float(train_length)} if scoring_family(position) == "fire" else {}
    return build_model(
        arch="gpt2",
        size=size,
        position=position,
        vocab_size=total_vocab(vocab_size, offsets),
        max_positions=train_length,
        pad_token_id=None,  # the task has no padding (and id 0 is a marker)
        scoring_options=options,
        seed=seed,
    )


def read_results(run_dir: str | Path) -> dict[str, Any]:
    """The ``results.json`` of an ``experiments/offset_retrieval/run.py`` folder.

    Raises:
        ValueError: no such file, or one without the run's settings, runs and summary
            (one line naming the file).
    """
    import json

    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise ValueError(f"{path} not found; run run.py --save-models first")
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not a results file of run.py ({err})") from None
    if not (isinstance(results, dict) and {"settings", "runs", "summary"} <= results.keys()
            and "seeds" in results["settings"] and "schemes" in results["summary"]):
        raise ValueError(f"{path} is not a results file of run.py (no settings, runs or "
                         "summary)")
    return results


def load_saved_models(
    run_dir: str | Path, settings: Mapping[str, Any], pairs: Sequence[tuple[int, str]]
) -> dict[tuple[int, str], Any]:
    """The trained model of every (seed, position) in ``pairs``, from the weights
    ``run.py --save-models`` wrote (``seed-S/POSITION.pt``), in evaluation mode.

    Raises:
        ValueError: weights missing for any pair (all of them named).
    """
    import torch

    paths = {(s, p): Path(run_dir) / f"seed-{s}" / f"{p}.pt" for s, p in pairs}
    missing = [str(w) for w in paths.values() if not w.is_file()]
    if missing:
        raise ValueError(f"no saved weights {missing}; rerun run.py with --save-models "
                         "(finished runs without weights must be trained again)")
    models = {}
    for (seed, position), path in paths.items():
        model = build_task_model(
            position, size=settings["size"], train_length=int(settings["train_length"]),
            vocab_size=settings["vocab_size"], offsets=settings["offsets"], seed=seed,
        )
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        models[seed, position] = model.eval()
    return models


def last_query_bias(model: Any, length: int) -> tuple[Any, Any]:
    """The positional bias every layer adds for the last query of a ``length``-token input.

    That query (position L - 1) sees every offset k = -(L - 1) .. 0 once. For a
    translation-invariant scheme this is f_h(k); for FIRE's causal normaliser, whose bias
    depends on the query position too, it is the bias at that position.

    Returns:
        (offsets (L,) from -(L - 1) to 0, values (layers, H, L)); empty (0, 0, L) values for
        a model without positional scoring functions (absolute, RoPE).
    """
    import torch

    from tisa.hf.install import iter_scorers

    values = [scorer.position_bias(1, length)[:, 0, :].detach().float().cpu()
              for _, scorer in iter_scorers(model)]  # (H, L) each
    offsets = torch.arange(-(length - 1), 1)
    return offsets, torch.stack(values) if values else torch.zeros(0, 0, length)


def _read_training_state(path: Path, run_args: dict[str, Any]) -> dict[str, Any]:
    """The training state :func:`train_and_evaluate` checkpointed at ``path``.

    Raises:
        ValueError: the file cannot be read, or was written for other arguments (named).
    """
    try:
        state = load_plain(path)
    except (RuntimeError, EOFError, OSError) as err:
        raise ValueError(f"checkpoint {path}: cannot be read ({type(err).__name__}: {err}); "
                         "delete it to start this run over") from None
    if state.get("args") != run_args:
        raise ValueError(f"checkpoint {path}: written for other arguments ({state.get('args')}, "
                         f"not {run_args}); delete it to start this run over")
    return state


def train_and_evaluate(
    position: str,
    *,
    size: str = "small",
    train_length: int = 128,
    eval_lengths: Sequence[int] = (128, 256, 512, 1024),
    offsets: Sequence[int] = (1, 3, 8, 32),
    vocab_size: int = 64,
    steps: int = 2000,
    batch_size: int = 32,
    learning_rate: float = 1e-3,
    tisa_learning_rate: float | None = None,
    warmup: int = 100,
    eval_sequences: int = 64,
    seed: int = 0,
    device: str = "cpu",
    progress: bool = True,
    save_model: str | Path | None = None,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 250,
) -> dict[str, Any]:
    """Trains one scheme on the task and scores it at every evaluation length.

    Same batches, steps and optimiser for every scheme of a seed: AdamW (betas 0.9,
    0.98), a constant rate after a linear warm-up, gradients clipped at norm 1, the
    positional parameters at ``tisa_learning_rate`` when given. The evaluation sequences
    of a length depend on the seed and the length only. With ``save_model``, the trained
    model's ``state_dict`` is written there (``torch.save``) before it is scored.

    With ``checkpoint``, the training state (weights, optimiser, schedule, the batch
    generator, the loss curve so far) is written there atomically every
    ``checkpoint_every`` steps, and a call that finds one written with the same arguments
    goes on from its step: an interrupted run ends with the weights and the result of an
    uninterrupted one. The caller deletes the file once the result is kept.

    Returns:
        ``{"position", "seed", "final_train_loss", "train_loss_curve", "train_seconds",
        "trained_on", "eval": {length: {"status", "accuracy", "loss", "accuracy_beyond_train",
        "tokens", "accuracy_by_block", "accuracy_by_offset"}}}``: ``train_loss_curve``
        holds the mean training loss of every ``CURVE_EVERY`` steps, ``train_seconds`` the
        wall time of training, ``trained_on`` the device, torch build and GPU (or None)
        that trained it, so folders trained apart can be told apart;
        ``accuracy_by_block`` the accuracy on positions ``[b·T, (b+1)·T)`` for each block b
        of the training length T, and ``accuracy_by_offset`` the accuracy on the sequences
        asking for each offset (keys are the offsets as strings), so a fall with length can
        be told apart as distance from the marker or as one offset lost; a length an
        absolute table cannot read has ``status`` "n/a" and a ``reason``.
    """
    import torch
    import torch.nn.functional as F
    from tqdm.auto import tqdm

    from tisa.data.offset_task import offset_batch
    from tisa.hf import parameter_groups

    model = build_task_model(
        position, size=size, train_length=train_length, vocab_size=vocab_size,
        offsets=offsets, seed=seed,
    ).to(device)
    groups = parameter_groups(
        model, learning_rate=learning_rate, tisa_learning_rate=tisa_learning_rate
    )
    optimizer = torch.optim.AdamW(groups, betas=(0.9, 0.98))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / max(1, warmup))
    )
    gen = torch.Generator().manual_seed(seed)
    task = dict(vocab_size=vocab_size, offsets=tuple(offsets))
    model.train()
    loss = torch.tensor(float("nan"))
    curve: list[float] = []
    window = 0.0
    first, before = 0, 0.0  # the step to start from, training seconds of earlier calls
    run_args = {
        "position": position, "size": size, "train_length": train_length,
        "offsets": list(offsets), "vocab_size": vocab_size, "steps": steps,
        "batch_size": batch_size, "learning_rate": learning_rate,
        "tisa_learning_rate": tisa_learning_rate, "warmup": warmup, "seed": seed,
    }
    if checkpoint is not None and Path(checkpoint).is_file():
        state = _read_training_state(Path(checkpoint), run_args)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        gen.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        first, curve, window = state["step"], list(state["curve"]), state["window"]
        before = state["train_seconds"]
    started = time.perf_counter()
    bar = tqdm(range(first, steps), desc=f"train {position} (seed {seed})",
               disable=not progress, leave=False, dynamic_ncols=True, initial=first,
               total=steps)
    for step in bar:
        x, y = offset_batch(batch_size=batch_size, length=train_length, generator=gen, **task)
        x, y = x.to(device), y.to(device)
        logits = model(input_ids=x).logits  # (B, L, V): position t predicts labels[t]
        scored = y != -100
        loss = F.cross_entropy(logits[scored].float(), y[scored])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        window += loss.item()
        if (step + 1) % CURVE_EVERY == 0 or step + 1 == steps:
            curve.append(window / ((step % CURVE_EVERY) + 1))
            window = 0.0
        bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
        if checkpoint is not None and (step + 1) % checkpoint_every == 0 and step + 1 < steps:
            buffer = io.BytesIO()
            torch.save({
                "args": run_args, "step": step + 1, "model": model.state_dict(),
                "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
                "generator": gen.get_state(), "torch_rng": torch.get_rng_state(),
                "curve": curve, "window": window,
                "train_seconds": before + time.perf_counter() - started,
            }, buffer)
            write_atomic(checkpoint, buffer.getvalue())
    bar.close()
    train_seconds = before + time.perf_counter() - started
    model.eval()
    if save_model is not None:  # the trained weights, for the learned f_h (atomic write)
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        write_atomic(save_model, buffer.getvalue())
    scores = evaluate(
        model, position, train_length=train_length, eval_lengths=eval_lengths,
        offsets=offsets, vocab_size=vocab_size, eval_sequences=eval_sequences, seed=seed,
        device=device,
    )
    cuda = torch.device(device).type == "cuda"
    return {
        "position": position, "seed": seed, "final_train_loss": loss.item(),
        "train_loss_curve": curve, "train_seconds": train_seconds, "eval": scores,
        "trained_on": {"device": str(device), "torch": torch.__version__,
                       "gpu": torch.cuda.get_device_name(device) if cuda else None},
    }


def evaluate(
    model: Any,
    position: str,
    *,
    train_length: int,
    eval_lengths: Sequence[int],
    offsets: Sequence[int],
    vocab_size: int,
    eval_sequences: int,
    seed: int,
    device: str = "cpu",
) -> dict[int, dict[str, Any]]:
    """Scores a trained model of ``position`` at every length of ``eval_lengths``.

    The sequences of a length depend on ``seed`` and the length only, so every scheme of a
    seed (and a model scored again, e.g. with other attention settings) sees the same ones.

    Returns:
        ``{length: cell}`` with the cells of :func:`train_and_evaluate`'s ``"eval"``.
    """
    import torch
    import torch.nn.functional as F

    from tisa.data.offset_task import offset_batch

    task = dict(vocab_size=vocab_size, offsets=tuple(offsets))
    model.eval()
    cells: dict[int, dict[str, Any]] = {}
    for length in eval_lengths:
        if not extrapolates(position) and length > train_length:
            cells[length] = {"status": "n/a", "reason": f"{train_length} positions"}
            continue
        eval_gen = torch.Generator().manual_seed(10_000 + seed * 7919 + length)
        x, y = offset_batch(batch_size=eval_sequences, length=length, generator=eval_gen, **task)
        total = correct = beyond = beyond_correct = 0
        nll = 0.0
        blocks = -(-length // train_length)
        block_hits, block_scored = torch.zeros(blocks), torch.zeros(blocks)
        offset_hits, offset_scored = torch.zeros(len(offsets)), torch.zeros(len(offsets))
        block_of = torch.arange(length) // train_length  # (L,)
        batch = max(1, 16384 // length)
        with torch.inference_mode():
            for start in range(0, eval_sequences, batch):
                xb, yb = x[start : start + batch].to(device), y[start : start + batch].to(device)
                logits = model(input_ids=xb).logits.float()
                scored = yb != -100
                hit = (logits.argmax(-1) == yb) & scored
                late = scored & (torch.arange(length, device=device)[None, :] >= train_length)
                nll += float(F.cross_entropy(logits[scored], yb[scored], reduction="sum"))
                total += int(scored.sum())
                correct += int(hit.sum())
                beyond += int(late.sum())
                beyond_correct += int((hit & late).sum())
                hit, scored, which = hit.cpu(), scored.cpu(), xb[:, 0].cpu()  # marker id (B,)
                block_hits.index_add_(0, block_of, hit.sum(0).float())
                block_scored.index_add_(0, block_of, scored.sum(0).float())
                offset_hits.index_add_(0, which, hit.sum(1).float())
                offset_scored.index_add_(0, which, scored.sum(1).float())
        cells[length] = {
            "status": "ok",
            "accuracy": correct / total,
            "loss": nll / total,
            "accuracy_beyond_train": beyond_correct / beyond if beyond else None,
            "tokens": total,
            "accuracy_by_block": _ratios(block_hits, block_scored),
            "accuracy_by_offset": dict(zip(
                map(str, offsets), _ratios(offset_hits, offset_scored), strict=True)),
        }
    return cells


def _ratios(hits: Any, scored: Any) -> list[float | None]:
    """hits / scored element by element; None where nothing was scored."""
    return [None if n == 0 else float(h / n) for h, n in zip(hits, scored, strict=True)]


def eval_cell(run: Mapping[str, Any], length: int) -> Mapping[str, Any]:
    """A run's scores at one evaluation length (as returned, or read back from JSON)."""
    ev = run["eval"]
    return ev[length] if length in ev else ev[str(length)]  # int keys, or str after JSON


def _mean_sd(values: Sequence[float]) -> dict[str, Any]:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return {"mean": mean, "sd": sd, "values": list(values)}


def summarise(
    runs: Mapping[Any, Mapping[str, Mapping[str, Any]]],
    *,
    train_length: int,
    eval_lengths: Sequence[int],
    level: float = 0.95,
) -> dict[str, Any]:
    """Mean ± sd over seeds, and each TISA family against every other scheme.

    Args:
        runs: ``{seed: {position: run}}``, each run as :func:`train_and_evaluate` returns
            it (or read back from JSON); every seed must hold the same positions.
        train_length: the training length.
        eval_lengths: the lengths to summarise.
        level: the intervals' confidence level.

    Returns:
        ``{"seeds", "schemes": {position: {length: {"accuracy": {"mean", "sd", "values"},
        "accuracy_beyond_train": ... or None} or {"status": "n/a"}}}, "comparisons":
        [...], "correction"}``. A comparison is a TISA family minus another scheme in
        accuracy on the positions beyond the training length, at a length past it, paired
        by seed (:func:`tisa.stats.paired_difference`), with ``p_holm`` over all the
        comparisons; there are none with fewer than two seeds.

    Raises:
        ValueError: no runs, or seeds with different positions.
    """
    seeds = sorted(runs, key=lambda s: int(s))
    if not seeds:
        raise ValueError("runs: expected at least one seed")
    positions = list(runs[seeds[0]])
    for seed in seeds[1:]:
        if sorted(runs[seed]) != sorted(positions):
            raise ValueError(
                f"runs: seed {seed} has positions {sorted(runs[seed])}, "
                f"seed {seeds[0]} has {sorted(positions)}"
            )
    schemes: dict[str, dict[int, Any]] = {}
    for position in positions:
        per_length: dict[int, Any] = {}
        for length in eval_lengths:
            cells = [eval_cell(runs[s][position], length) for s in seeds]
            if any(c["status"] != "ok" for c in cells):
                per_length[length] = {"status": "n/a"}
                continue
            beyond = [c["accuracy_beyond_train"] for c in cells]
            per_length[length] = {
                "status": "ok",
                "accuracy": _mean_sd([c["accuracy"] for c in cells]),
                "accuracy_beyond_train": None if beyond[0] is None else _mean_sd(beyond),
            }
        schemes[position] = per_length
    comparisons: list[dict[str, Any]] = []
    if len(seeds) >= 2:
        for length in eval_lengths:
            if length <= train_length:
                continue
            for family in (p for p in positions if is_tisa(p)):
                for other in positions:
                    if other == family or schemes[other][length]["status"] != "ok":
                        continue
                    a = schemes[family][length]["accuracy_beyond_train"]["values"]
                    b = schemes[other][length]["accuracy_beyond_train"]["values"]
                    d = paired_difference(a, b, level=level)
                    comparisons.append({
                        "length": length, "family": family, "other": other,
                        "family_mean": sum(a) / len(a), "other_mean": sum(b) / len(b),
                        **d.to_dict(),
                    })
        for c, p in zip(comparisons, holm([c["p"] for c in comparisons])):
            c["p_holm"] = p
    return {
        "seeds": [int(s) for s in seeds],
        "schemes": schemes,
        "comparisons": comparisons,
        "correction": f"Holm over {len(comparisons)} comparisons",
    }


#: settings that folders trained apart must share to be compared run by run: those that
#: define a run, and how the runs' seeds and positional rates were chosen
SHARED_SETTINGS = RUN_SETTINGS + ("seeds", "positional_lr_sweep", "sweep_seed", "sweep_steps")


def merge_folders(
    files: Sequence[tuple[str, Mapping[str, Any]]],
) -> dict[str, dict[str, Any]]:
    """The runs of several ``results.json`` of ``experiments/offset_retrieval/run.py``
    (``(name, data)`` pairs), trained apart with the same settings, as one
    ``{seed: {position: run}}`` for :func:`summarise`.

    Raises:
        ValueError: naming the file: no runs, a setting of :data:`SHARED_SETTINGS` other
            than the first file's (both values), or a scheme another file holds too.
    """
    if not files:
        raise ValueError("files: expected at least one results.json")
    first_name, first = files[0]
    owner: dict[str, str] = {}
    runs: dict[str, dict[str, Any]] = {}
    for name, data in files:
        if not data.get("runs"):
            raise ValueError(f"{name}: holds no runs")
        differ = [f"{k} {data['settings'].get(k)!r} (not {first['settings'].get(k)!r})"
                  for k in SHARED_SETTINGS
                  if data["settings"].get(k) != first["settings"].get(k)]
        if differ:
            raise ValueError(f"{name}: settings differ from {first_name}'s: "
                             + "; ".join(differ))
        for seed, per_position in data["runs"].items():
            for position, run in per_position.items():
                if owner.setdefault(position, name) != name:
                    raise ValueError(f"{name}: {position} is in {owner[position]} too")
                runs.setdefault(seed, {})[position] = run
    return runs


def trained_where(data: Mapping[str, Any], position: str) -> str:
    """Where the runs of ``position`` in a ``results.json`` trained: the GPU or device
    their ``trained_on`` records, or, for runs from before that record, the device the
    file's command named (``settings.device``), said as such."""
    records = [per_position[position].get("trained_on")
               for per_position in data["runs"].values() if position in per_position]
    if records and all(records):
        return ", ".join(sorted({r.get("gpu") or r["device"] for r in records}))
    return f"{data['settings'].get('device')} (from the file's settings)"


def markdown(summary: Mapping[str, Any], *, settings: Mapping[str, Any]) -> str:
    """The accuracy table (mean ± sd over seeds, beyond the training length in brackets)
    and the comparisons, as Markdown."""
    lengths = [int(n) for n in settings["eval_lengths"]]
    train = int(settings["train_length"])
    seeds = summary["seeds"]
    lines = [
        f"Offset retrieval: accuracy x 100 on fresh sequences, mean ± sd over seeds "
        f"{', '.join(map(str, seeds))} (trained at {train}; offsets {list(settings['offsets'])};"
        f" chance {100 / settings['vocab_size']:.1f}). In brackets: on the positions at or "
        f"beyond the training length alone.",
        "",
        "| position | " + " | ".join(map(str, lengths)) + " |",
        "|---|" + "---:|" * len(lengths),
    ]
    for position, per_length in summary["schemes"].items():
        cells = [accuracy_cell(per_length.get(n) or per_length.get(str(n))) for n in lengths]
        lines.append(f"| {position} | " + " | ".join(cells) + " |")
    swept = {p: r for p, r in (settings.get("positional_rates") or {}).items() if r is not None}
    if swept:
        lines += ["", "Positional learning rates: " + ", ".join(
            f"{p} {r:g}" for p, r in swept.items()) + (
            f" (chosen on seed {settings['sweep_seed']} at the training length)"
            if settings.get("sweep_seed") is not None else "") + "."]
    if summary["comparisons"]:
        lines += [
            "",
            f"TISA family minus each other scheme, accuracy x 100 beyond the training length, "
            f"paired by seed ({summary['correction']}):",
            "",
            "| length | family | other | difference, 95% interval | p (Holm) |",
            "|---:|---|---|---:|---:|",
        ]
        for c in summary["comparisons"]:
            lines.append(
                f"| {c['length']} | {c['family']} | {c['other']} | {100 * c['mean']:+.1f} "
                f"[{100 * c['low']:+.1f}, {100 * c['high']:+.1f}] | {c['p_holm']:.2g} |"
            )
    return "\n".join(lines) + "\n"
