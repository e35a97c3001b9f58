"""The retrieval problems of ``tisa longeval``: documents of a given length in tokens, with
the evidence at a given depth, and one query per document.

One *cell* is one problem: ``candidates`` documents of at most L tokens (special tokens
included; the longest has L, or a few tokens fewer where a word does not fit whole), and
one query per document. A model embeds the documents and the queries; it scores when a
query's most similar document (cosine) is its own (Acc@1).

* **passkey** (as LongEmbed's passkey task): the same filler sentences ("The grass is
  green. The sky is blue. ...") in every document, with one sentence giving a person's
  pass key inserted at the depth: "Ada Brown's pass key is 48213. Remember it. 48213 is
  the pass key for Ada Brown." Each document has its own person and number; the query
  asks "What is the pass key for Ada Brown?". The documents differ only in that sentence.
* **needle**: the filler is real text (Penn Treebank), the same in every document of a
  cell; the inserted sentence states a fact of one relation (a person's home town,
  instrument, pet, ...), each document about another person with another value, and the
  query asks for the fact in other words with its answer ("Which instrument does Ada
  Brown play? The cello."). The documents differ only in the needle.
* **passage**: each document is its own stretch of Penn Treebank text (the stretches
  follow one another with up to :data:`MAX_GAP` words left out between them); a passage of
  ``passage_tokens`` tokens is cut out of it at the depth, and the passage is the query
  (which document did it come from?). Nothing else is changed, so only the text around
  the cut, which is the document's own topic at that depth, links query and document.

Depth d puts the evidence (the inserted sentence; for passage, the cut) d of the way
through the document's filler tokens, snapped to the nearest word boundary. Everything
is drawn from a seeded generator, the same for every depth of a (task, length, seed):
only the position changes with the depth.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass

from tisa.longeval.config import DRAWS

__all__ = [
    "FILLER",
    "MAX_GAP",
    "VERSION",
    "Cell",
    "TextSource",
    "WordTokens",
    "build_cell",
    "needle_facts",
    "passkey_facts",
]

#: bumped when the construction changes: saved cells of another version are recomputed
VERSION = 2
#: words of unused text between two documents of the passage task (fewer where the text
#: is short for the cell)
MAX_GAP = 1000

#: LongEmbed's (and the passkey literature's) filler
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."

_FIRST = (
    "Ada Ben Clara Dev Elena Felix Greta Hugo Iris Jonas Kira Liam Mona Nils Olga Paul "
    "Quinn Rosa Sami Tara Umar Vera Walt Xena Yusuf Zora Anton Bea Cyril Dina Emil Freya "
    "Gus Hana Ivo Jana Karl Lena Milo Nora"
).split()
_LAST = (
    "Brown Costa Dahl Evans Fischer Garcia Holm Ito Jensen Klein Lopez Moreau Novak Olsen "
    "Petrov Quist Rossi Silva Tanaka Ueda Vogel Walsh Young Zeller Abbott Berg Chen Duarte "
    "Ekberg Ford"
).split()

#: (statement, question with its answer, values): the needle task's relations
_RELATIONS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "{x} was born in the small town of {y}.",
        "Where does {x} come from? From {y}.",
        tuple(
            "Aberlow Brindmoor Calder Dunmere Eskby Farrowdale Glenholt Harwick Ivybridge "
            "Jesmond Kelso Larkhill Morwen Northby Oakhurst Penmarsh".split()
        ),
    ),
    (
        "{x} plays the {y} in an amateur orchestra.",
        "Which instrument does {x} play? The {y}.",
        tuple(
            "cello violin trumpet oboe harp flute clarinet bassoon trombone viola tuba "
            "piano accordion banjo saxophone harpsichord".split()
        ),
    ),
    (
        "{x} keeps a pet {y} at home.",
        "What animal does {x} have as a pet? A {y}.",
        tuple(
            "tortoise parrot ferret rabbit hamster iguana goldfish canary hedgehog lizard "
            "gecko chinchilla pony goat duck snail".split()
        ),
    ),
    (
        "The secret ingredient of {x}'s soup is {y}.",
        "What does {x} put in the soup to make it special? {y}.",
        tuple(
            "cinnamon saffron ginger nutmeg fennel cardamom basil lemongrass tarragon "
            "cumin paprika coriander sage thyme rosemary dill".split()
        ),
    ),
    (
        "{x}'s favourite colour is {y}.",
        "Which colour does {x} like best? {y}.",
        tuple(
            "turquoise crimson amber violet olive scarlet indigo magenta ochre teal "
            "maroon lavender beige emerald coral navy".split()
        ),
    ),
    (
        "{x} works as a {y} at the harbour.",
        "What is {x}'s job? A {y}.",
        tuple(
            "carpenter pilot baker welder plumber florist surveyor locksmith tailor "
            "diver librarian butcher cook nurse painter clerk".split()
        ),
    ),
)


def _names(rng: random.Random, count: int) -> list[str]:
    pool = [f"{f} {s}" for f in _FIRST for s in _LAST]
    if count > len(pool):
        raise ValueError(f"candidates: at most {len(pool)} documents per cell, got {count}")
    return rng.sample(pool, count)


def passkey_facts(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """(needle, query) of ``count`` people, each with a different five-digit pass key."""
    keys = rng.sample(range(10000, 100000), count)
    return [
        (
            f"{name}'s pass key is {key}. Remember it. {key} is the pass key for {name}.",
            f"What is the pass key for {name}?",
        )
        for name, key in zip(_names(rng, count), keys, strict=True)
    ]


def needle_facts(rng: random.Random, count: int) -> list[tuple[str, str]]:
    """(needle, query) of ``count`` people, one relation for all (drawn), a value each."""
    statement, question, values = _RELATIONS[rng.randrange(len(_RELATIONS))]
    names = _names(rng, count)
    drawn = rng.sample(values, min(count, len(values)))
    drawn += [rng.choice(values) for _ in range(count - len(drawn))]
    out = []
    for name, value in zip(names, drawn, strict=True):
        answer = value[0].upper() + value[1:] if question.endswith("? {y}.") else value
        out.append((statement.format(x=name, y=value), question.format(x=name, y=answer)))
    return out


class WordTokens:
    """Token counts of words as the tokenizer reads them inside a text (cached)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self._cache: dict[str, int] = {}

    def __call__(self, words: Sequence[str]) -> list[int]:
        new = list(dict.fromkeys(w for w in words if w not in self._cache))
        for s in range(0, len(new), 4096):
            part = new[s : s + 4096]
            # a leading space: how a word inside a text looks to a byte-level BPE
            ids = self.tokenizer([" " + w for w in part], add_special_tokens=False)["input_ids"]
            self._cache.update((w, len(i)) for w, i in zip(part, ids, strict=True))
        return [self._cache[w] for w in words]

    def text(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])


class TextSource:
    """The words of real text, for the needle filler and the passage documents.

    Args:
        lines: the text, one line per sentence or paragraph.
    """

    def __init__(self, lines: Sequence[str]) -> None:
        self.words = [w for line in lines for w in line.split()]
        if not self.words:
            raise ValueError("text_file: the text has no words")


@dataclass(frozen=True)
class Cell:
    """One retrieval problem: document i belongs to query i.

    Attributes:
        task, length, depth, seed: what it was built for.
        documents: the documents (each at most ``length`` tokens with special tokens).
        queries: one per document.
        evidence: per document, the token span [start, end) of the evidence in its input
            ids (special tokens counted); for the passage task the cut, start == end.
        tokens: each document's length in tokens, special tokens included.
    """

    task: str
    length: int
    depth: float
    seed: int
    documents: list[str]
    queries: list[str]
    evidence: list[tuple[int, int]]
    tokens: list[int]


def _special(tokenizer) -> tuple[int, int]:
    """(tokens before the text, tokens after it) that the tokenizer adds to one text."""
    ids = tokenizer("a", add_special_tokens=True)["input_ids"]
    bare = tokenizer("a", add_special_tokens=False)["input_ids"]
    for start in range(len(ids) - len(bare) + 1):
        if ids[start : start + len(bare)] == bare:
            return start, len(ids) - len(bare) - start
    raise ValueError("model: its tokenizer changes a text's tokens when it adds special tokens")


def _cut(counts: Sequence[int], budget: int) -> int:
    """How many of the words (token ``counts``) fit in ``budget`` tokens."""
    total = 0
    for i, c in enumerate(counts):
        if total + c > budget:
            return i
        total += c
    return len(counts)


def _boundary(counts: Sequence[int], depth: float) -> int:
    """The word boundary nearest ``depth`` of the way through the words' tokens."""
    cum = [0]
    for c in counts:
        cum.append(cum[-1] + c)
    target = depth * cum[-1]
    k = bisect.bisect_left(cum, target)
    if k > 0 and (k == len(cum) or target - cum[k - 1] <= cum[k] - target):
        k -= 1
    return k


def _span(tokenizer, text: str, start: int, end: int) -> tuple[list[int], tuple[int, int]]:
    """(input ids of ``text`` with special tokens, token span of characters [start, end))."""
    enc = tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    real = [i for i, (a, b) in enumerate(offsets) if b > a]
    first = next((i for i in real if offsets[i][1] > start), real[-1] + 1 if real else 0)
    last = next((i for i in real if offsets[i][0] >= end), real[-1] + 1 if real else 0)
    return enc["input_ids"], (first, max(first, last))


def _with_needles(
    tokenizer, words: list[str], facts: list[tuple[str, str]], length: int, depth: float
) -> tuple[list[str], list[tuple[int, int]], list[int]]:
    """The filler ``words`` cut to fit ``length`` with the longest needle, each needle
    inserted at the same word boundary: (documents, evidence spans, token counts)."""
    count = WordTokens(tokenizer)
    before, after = _special(tokenizer)
    longest = max(count.text(" " + needle) for needle, _ in facts)
    budget = length - before - after - longest
    if budget < 1:
        raise ValueError(
            f"lengths: {length} tokens cannot hold a needle of {longest} tokens and filler"
        )
    counts = count(words)
    while True:
        n = _cut(counts, budget)
        filler = words[:n]
        k = _boundary(counts[:n], depth)
        docs, spans, sizes = [], [], []
        for needle, _ in facts:
            head, tail = " ".join(filler[:k]), " ".join(filler[k:])
            text = " ".join(part for part in (head, needle, tail) if part)
            start = len(head) + 1 if head else 0
            ids, span = _span(tokenizer, text, start, start + len(needle))
            docs.append(text)
            spans.append(span)
            sizes.append(len(ids))
        if max(sizes) <= length or n == 0:
            break
        budget -= max(sizes) - length  # words read differently in context: fit again
    if max(sizes) > length:
        raise ValueError(f"lengths: {length} tokens cannot hold the needle")
    return docs, spans, sizes


def build_cell(
    task: str,
    tokenizer,
    *,
    length: int,
    depth: float,
    seed: int,
    candidates: int,
    text: TextSource | None = None,
    passage_tokens: int = 64,
    draw: str = "seed",
) -> Cell:
    """The documents and queries of one (task, length, depth, seed).

    Args:
        task: ``"passkey"``, ``"needle"`` or ``"passage"``.
        tokenizer: the model's tokenizer (lengths are counted in its tokens; a fast
            tokenizer, for character offsets).
        length: L, tokens per document with the special tokens.
        depth: where the evidence sits, in [0, 1].
        seed: the seed of everything drawn.
        draw: ``"seed"``: one draw per seed, the same documents at every depth with the
            evidence moved; ``"cell"``: a draw of its own for each depth too, so cells
            are independent samples.
        candidates: documents (and queries).
        text: real text (needle and passage).
        passage_tokens: the passage task's query length in tokens.

    Raises:
        ValueError: an unknown task, a length too short for the evidence, or a text too
            short for the documents.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("model: tisa longeval needs a fast tokenizer (character offsets)")
    if draw not in DRAWS:
        raise ValueError(f"draw: expected one of {', '.join(DRAWS)}, got {draw!r}")
    where = f"{task}/{length}/{seed}" + (f"/{depth:.3f}" if draw == "cell" else "")
    rng = random.Random(where)  # str seeds are stable across runs
    if task == "passkey":
        facts = passkey_facts(rng, candidates)
        filler = FILLER.split() * (length // 4 + 1)  # more words than tokens
        docs, spans, sizes = _with_needles(tokenizer, filler, facts, length, depth)
        queries = [q for _, q in facts]
    elif task == "needle":
        if text is None:
            raise ValueError("text: the needle task needs real text")
        facts = needle_facts(rng, candidates)
        need = length + 16
        if len(text.words) < need:
            raise ValueError(f"text_file: {len(text.words)} words; the needle task needs {need}")
        start = rng.randrange(len(text.words) - need + 1)
        filler = text.words[start : start + need]
        docs, spans, sizes = _with_needles(tokenizer, filler, facts, length, depth)
        queries = [q for _, q in facts]
    elif task == "passage":
        if text is None:
            raise ValueError("text: the passage task needs real text")
        docs, queries, spans, sizes = _passages(
            tokenizer, text, rng, length, depth, candidates, passage_tokens
        )
    else:
        raise ValueError(f"tasks: unknown task {task!r}; expected passkey, needle or passage")
    return Cell(
        task=task,
        length=length,
        depth=float(depth),
        seed=seed,
        documents=docs,
        queries=queries,
        evidence=spans,
        tokens=sizes,
    )


def _passages(tokenizer, text, rng, length, depth, candidates, passage_tokens):
    count = WordTokens(tokenizer)
    before, after = _special(tokenizer)
    budget = length - before - after
    if budget < 1:
        raise ValueError(f"lengths: {length} tokens leave no room for text")
    words = text.words
    need = candidates * (budget + passage_tokens + 16)  # tokens; a word has at least one
    if need > len(words):
        raise ValueError(
            f"text_file: {len(words)} words; the passage task needs at least {need} for "
            f"{candidates} candidates of {length} tokens"
        )
    # unused text between the documents, so that a passage cut at a document's edge does
    # not continue into the next document's article
    gap = min(MAX_GAP, (len(words) - need) // candidates)
    position = rng.randrange(len(words))  # the documents follow one another from here
    docs, queries, spans, sizes = [], [], [], []
    for _ in range(candidates):
        position += gap
        segment, total = [], 0
        while total < budget + passage_tokens + 8:
            w = words[position % len(words)]  # the text read as a circle
            position += 1
            segment.append(w)
            total += count([w])[0]
        counts = count(segment)
        # the cut's place in the document (without the passage) of `budget` tokens
        n = _cut(counts, budget)
        k = _boundary(counts[:n], depth)
        m = k + max(1, _cut(counts[k:], passage_tokens))
        passage = segment[k:m]
        rest = segment[:k] + segment[m:]
        keep = _cut(count(rest), budget)
        while True:
            head, tail = " ".join(rest[:k]), " ".join(rest[k:keep])
            doc = " ".join(part for part in (head, tail) if part)
            cut_at = len(head) + 1 if head and tail else len(head)
            ids, span = _span(tokenizer, doc, cut_at, cut_at)
            if len(ids) <= length or keep <= k:
                break
            keep -= 1
        docs.append(doc)
        queries.append(" ".join(passage))
        spans.append((span[0], span[0]))
        sizes.append(len(ids))
    return docs, queries, spans, sizes
