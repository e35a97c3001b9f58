"""The retrieval problems: evidence at the requested depth in tokens, documents that
differ only in it, lengths within L, and everything seeded."""

from __future__ import annotations

import pytest

from tisa.longeval.tasks import build_cell

DEPTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def _ids(tokenizer, doc):
    return tokenizer(doc)["input_ids"]


@pytest.mark.parametrize("task", ["passkey", "needle"])
def test_the_needle_sits_at_the_depth_and_is_all_that_differs(task, tokenizer, text):
    length = 300
    for depth in DEPTHS:
        cell = build_cell(
            task, tokenizer, length=length, depth=depth, seed=1, candidates=4, text=text
        )
        rests = []
        for doc, query, (start, end), size in zip(
            cell.documents, cell.queries, cell.evidence, cell.tokens, strict=True
        ):
            ids = _ids(tokenizer, doc)
            assert len(ids) == size <= length
            needle = tokenizer.decode(ids[start:end])
            name = query.split(" for ")[-1].rstrip("?") if task == "passkey" else None
            if task == "passkey":
                assert "pass key" in needle and name.lower() in needle
            filler = size - 2 - (end - start)  # [CLS] and [SEP] are not filler
            # at the word boundary nearest depth * filler tokens (words here: <= 12 tokens)
            assert abs((start - 1) - depth * filler) <= 12, (depth, start, filler)
            rests.append(ids[:start] + ids[end:])
        assert all(r == rests[0] for r in rests)  # the same filler around every needle
        assert max(cell.tokens) >= length - 12  # filled up to L, up to a word
        assert len(set(cell.queries)) == 4


def test_passage_is_cut_out_of_its_own_stretch_of_text(tokenizer, text):
    source = " ".join(text.words)
    for depth in (0.0, 0.5, 1.0):
        cell = build_cell(
            "passage",
            tokenizer,
            length=200,
            depth=depth,
            seed=0,
            candidates=3,
            text=text,
            passage_tokens=24,
        )
        for doc, query, (start, end), size in zip(
            cell.documents, cell.queries, cell.evidence, cell.tokens, strict=True
        ):
            ids = _ids(tokenizer, doc)
            assert start == end and len(ids) == size <= 200 and size >= 200 - 12
            assert query not in doc
            offsets = tokenizer(doc, return_offsets_mapping=True)["offset_mapping"]
            k = len(doc[: offsets[start][0]].split()) if start < size - 1 else len(doc.split())
            words = doc.split()
            # the words before the cut, the passage, the words after: contiguous in the text
            joined = " ".join([*words[max(0, k - 6) : k], query, *words[k : k + 6]])
            assert joined in source
            assert len(tokenizer(query, add_special_tokens=False)["input_ids"]) <= 24
        for a, b in zip(cell.documents, cell.documents[1:]):  # unused text between them
            assert " ".join(a.split()[-5:] + b.split()[:5]) not in source
            assert abs((start - 1) - depth * (size - 2)) <= 12  # the cut at the depth
            if depth == 0.0:
                assert start == 1


def test_cells_are_seeded_and_depth_moves_only_the_evidence(tokenizer, text):
    for task in ("passkey", "needle", "passage"):
        a = build_cell(task, tokenizer, length=160, depth=0.5, seed=3, candidates=3, text=text)
        b = build_cell(task, tokenizer, length=160, depth=0.5, seed=3, candidates=3, text=text)
        c = build_cell(task, tokenizer, length=160, depth=0.5, seed=4, candidates=3, text=text)
        d = build_cell(task, tokenizer, length=160, depth=0.0, seed=3, candidates=3, text=text)
        assert a == b
        assert a.documents != c.documents and a.queries != c.queries
        if task != "passage":  # the passage itself moves with the cut
            assert a.queries == d.queries and a.documents != d.documents
            assert sorted(a.documents[0].split()) == sorted(d.documents[0].split())


def test_a_cell_draw_gives_every_depth_its_own_documents(tokenizer, text):
    for task in ("passkey", "needle", "passage"):
        def cell(depth, draw="cell", seed=3):
            return build_cell(task, tokenizer, length=160, depth=depth, seed=seed,
                              candidates=3, text=text, draw=draw)

        assert cell(0.5) == cell(0.5)  # still seeded
        assert cell(0.5) != cell(0.5, "seed")  # a draw of its own, not the seed's
        if task != "passkey":  # new text around the evidence
            assert sorted(cell(0.5).documents[0].split()) != sorted(
                cell(0.0).documents[0].split())
        assert cell(0.5).queries != cell(0.0).queries or task == "passage" and (
            cell(0.5).documents != cell(0.0).documents)
    with pytest.raises(ValueError, match="draw: expected one of seed, cell, got 'depth'"):
        build_cell("passkey", tokenizer, length=160, depth=0.0, seed=0, candidates=2,
                   draw="depth")


def test_bad_cells(tokenizer, text):
    with pytest.raises(ValueError, match="tasks: unknown task 'poem'"):
        build_cell("poem", tokenizer, length=128, depth=0.0, seed=0, candidates=2, text=text)
    with pytest.raises(ValueError, match="lengths: 20 tokens cannot hold a needle"):
        build_cell("passkey", tokenizer, length=20, depth=0.0, seed=0, candidates=2)
    with pytest.raises(ValueError, match="the passage task needs"):
        build_cell("passage", tokenizer, length=60000, depth=0.0, seed=0, candidates=2, text=text)
