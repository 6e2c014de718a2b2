"""Which passages (chunks) answer a golden case: the relevance labels behind passage-level recall@k and nDCG@k.

The golden set labels documents (``expected_doc_ids``) and an answer text (``expected_answer``), not chunks. A
chunk is **relevant** to an answerable case when

1. it belongs to one of the case's expected documents, and
2. it states the expected answer: every key fact of the expected answer is in it and at least
   :data:`RELEVANT_RECALL` of the expected answer's distinct tokens are (both as the correctness check reads an
   answer, :func:`workbench.correctness.fact_check` and :func:`~workbench.correctness.token_scores`: the project
   tokenizer, key facts matched as whole tokens, tokens and facts the question already holds left out).

An expected document none of whose chunks passes rule 2 (the answer is spread over two chunks, or worded apart
from the golden answer) contributes its chunks that come closest: the most key facts present, then the highest
token recall (ties all kept). So every expected document has at least one relevant chunk, as the golden labels
say every listed document states an answer, and the labels are reproducible from the golden file and the ingested
chunks alone. A case with no expected document or no expected answer has no labels (None: not scored).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.correctness import fact_check, token_scores

RELEVANT_RECALL = 0.5   # share of the expected answer's tokens a chunk states to count as stating the answer


@dataclass(frozen=True)
class Passage:
    chunk_id: str
    doc_id: str
    text: str


def answer_match(expected: str, text: str, question: str = "") -> tuple[float, float]:
    """(share of the expected answer's key facts in ``text`` — 1 without key facts —, token recall)."""
    facts, missing, _ = fact_check(expected, text, question)
    facts_share = 1.0 if not facts else 1 - len(missing) / len(facts)
    return facts_share, token_scores(expected, text, question)[0]


def states_answer(match: tuple[float, float]) -> bool:
    facts_share, recall = match
    return facts_share == 1.0 and recall >= RELEVANT_RECALL


def relevant_chunks(expected_doc_ids: Sequence[str], expected_answer: str | None, question: str,
                    passages: Iterable[Passage]) -> tuple[str, ...] | None:
    """The relevant chunk ids of one case (module docstring), in the order given; None when the case is unlabelled."""
    if not expected_doc_ids or not expected_answer:
        return None
    by_doc: dict[str, list[tuple[str, tuple[float, float]]]] = {d: [] for d in expected_doc_ids}
    for p in passages:
        if p.doc_id in by_doc:
            by_doc[p.doc_id].append((p.chunk_id, answer_match(expected_answer, p.text, question)))
    out: list[str] = []
    for scored in by_doc.values():
        stating = [cid for cid, m in scored if states_answer(m)]
        if not stating and scored:
            best = max(m for _, m in scored)
            stating = [cid for cid, m in scored if m == best]
        out += stating
    return tuple(out)


def store_passages(store, doc_ids: Iterable[str]) -> list[Passage]:
    """The live chunks of ``doc_ids`` in ``store`` (:meth:`pipeline.storage.store.Store.chunks`)."""
    return [Passage(c.chunk_id, c.doc_id, c.text) for d in dict.fromkeys(doc_ids) for c in store.chunks(d)]


def case_relevance(cases: Sequence, store) -> tuple[tuple[str, ...] | None, ...]:
    """Per golden case, its relevant chunk ids in ``store`` (None: unlabelled)."""
    return tuple(relevant_chunks(c.expected_doc_ids, c.expected_answer, c.question,
                                 store_passages(store, c.expected_doc_ids)) if c.answerable else None
                 for c in cases)
