"""Retrieval parameter sweeps for the SciFact benchmark, in NumPy over cached per-leg scores.

Re-ingesting SciFact for every BM25 or fusion setting would re-embed 5,183 abstracts each time, so the sweep
works on what the settings change and nothing else:

- the corpus and query vectors are encoded once and cached under ``build/`` (:class:`CachedEmbedder`, keyed by
  the SHA-256 of the text: a cached vector is the embedder's own output for exactly that text); the dense leg's
  top-k is then a matrix product;
- the keyword leg is rebuilt as a sparse matrix of the project's own BM25 weights
  (:func:`pipeline.retrieval.bm25.bm25_doc_weights`, the project's tokenizer, the engine's IDF), so a setting
  of k1, b or the heading weight costs one matrix build and one sparse product over all claims;
- fusion is the stage's own fusion function (:func:`pipeline.retrieval.retrieve.fuse`) over the two top-k lists.

Everything is chosen on the *train* claims only; the benchmark then measures the chosen setting on test
through the real stage (:func:`pipeline.retrieval.retrieve.run` over an ingested store), not through this
module.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from pipeline.retrieval.bm25 import bm25_doc_weights, idf, query_weights
from pipeline.retrieval.retrieve import LegScores, fuse
from pipeline.text.tokenize import tokenize


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """An :class:`~pipeline.models.encoders.Embedder` that answers from a vector cache file and encodes only
    the texts it has not seen (then saves them), so a rebuilt benchmark store does not re-embed the corpus."""

    def __init__(self, path: Path, load: Callable[[], object]) -> None:
        self.path = path
        self._load = load
        self._inner = None
        self._cache: dict[str, np.ndarray] = {}
        if path.is_file():
            with np.load(path) as data:
                self._cache = dict(zip((str(k) for k in data["keys"]), data["vectors"], strict=True))
        self.calls = 0
        self.encoded = 0

    def _model(self):
        if self._inner is None:
            self._inner = self._load()
        return self._inner

    @property
    def name(self) -> str:
        return self._model().name

    @property
    def dim(self) -> int:
        if self._cache:
            return int(next(iter(self._cache.values())).shape[0])
        return int(self._model().dim)

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        keys = [text_key(t) for t in texts]
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self._cache))
        if missing:
            vectors = np.asarray(self._model().encode(missing), dtype=np.float32)
            self._cache.update(zip((text_key(t) for t in missing), vectors, strict=True))
            self.encoded += len(missing)
            self.save()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([self._cache[k] for k in keys]).astype(np.float32)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp.npz")
        np.savez(tmp, keys=np.array(list(self._cache)), vectors=np.vstack(list(self._cache.values())))
        tmp.replace(self.path)


@dataclass(frozen=True)
class Corpus:
    """The chunks as the keyword leg sees them: tokens of the indexed text and how many of them are heading."""
    doc_ids: list[str]
    tokens: list[list[str]]
    heading_tokens: list[int]
    vectors: np.ndarray           # (n, dim), L2-normalised


def keyword_matrix(corpus: Corpus, k1: float, b: float, heading_weight: float) -> tuple[sparse.csr_matrix, dict]:
    """(documents x terms) BM25 weights times the engine's IDF, and the term -> column map."""
    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    lengths = [len(t) for t in corpus.tokens]
    avgdl = sum(lengths) / len(lengths)
    df: dict[str, int] = {}
    for i, (tokens, n_head) in enumerate(zip(corpus.tokens, corpus.heading_tokens, strict=True)):
        weights = bm25_doc_weights(tokens, avgdl, k1, b, heading_tokens=n_head, heading_weight=heading_weight)
        for term, w in weights.items():
            j = vocab.setdefault(term, len(vocab))
            rows.append(i)
            cols.append(j)
            vals.append(w)
            df[term] = df.get(term, 0) + 1
    n = len(corpus.tokens)
    idfs = np.zeros(len(vocab))
    for term, j in vocab.items():
        idfs[j] = idf(n, df[term])
    m = sparse.csr_matrix((vals, (rows, cols)), shape=(n, len(vocab)))
    return (m @ sparse.diags(idfs)).tocsr(), vocab


def _top(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    k = min(k, scores.shape[0])
    idx = np.argpartition(-scores, k - 1)[:k]
    order = np.lexsort((idx, -scores[idx]))
    return idx[order], scores[idx][order]


def keyword_runs(matrix: sparse.csr_matrix, vocab: dict, queries: Sequence[str], top_k: int) -> list[LegScores]:
    out = []
    for q in queries:
        weights = query_weights(tokenize(q))
        cols = [(vocab[t], w) for t, w in weights.items() if t in vocab]
        if not cols:
            out.append(LegScores((), ()))
            continue
        qv = np.zeros(matrix.shape[1])
        for j, w in cols:
            qv[j] = w
        scores = matrix @ qv
        idx, vals = _top(scores, top_k)
        keep = vals > 0
        out.append(LegScores(tuple(int(i) for i in idx[keep]), tuple(float(v) for v in vals[keep])))
    return out


def dense_runs(doc_vectors: np.ndarray, query_vectors: np.ndarray, top_k: int) -> list[LegScores]:
    sims = query_vectors @ doc_vectors.T
    out = []
    for row in sims:
        idx, vals = _top(row, top_k)
        out.append(LegScores(tuple(int(i) for i in idx), tuple(float(v) for v in vals)))
    return out


def fused_doc_runs(corpus: Corpus, qids: Sequence[str], dense: list[LegScores], keyword: list[LegScores],
                   fusion: dict) -> dict[str, list[str]]:
    out = {}
    for qid, d, kw in zip(qids, dense, keyword, strict=True):
        items = fuse([d, kw], **fusion)
        out[qid] = [corpus.doc_ids[int(it.item_id)] for it in items]
    return out


def leg_doc_runs(corpus: Corpus, qids: Sequence[str], leg: list[LegScores]) -> dict[str, list[str]]:
    return {qid: [corpus.doc_ids[i] for i in run.ids] for qid, run in zip(qids, leg, strict=True)}


SWEEP_K1 = (0.6, 0.9, 1.2, 1.5)
SWEEP_B = (0.4, 0.6, 0.75, 0.9)
SWEEP_HEADING = (1.0, 2.0, 3.0)
SWEEP_RRF = tuple(itertools.product((10, 20, 40, 60, 100), ((1.0, 1.0), (1.0, 1.5), (1.0, 2.0), (1.5, 1.0),
                                                              (2.0, 1.0))))
SWEEP_CONVEX_ALPHA = (0.3, 0.4, 0.5, 0.6, 0.7)
SWEEP_NORMS = ("minmax", "tmm")


def fusion_settings() -> list[dict]:
    rrf = [{"method": "rrf", "k": k, "weights": w} for k, w in SWEEP_RRF]
    convex = [{"method": "convex", "alpha": a, "normalisation": n} for a in SWEEP_CONVEX_ALPHA for n in SWEEP_NORMS]
    return rrf + convex


def build_corpus(documents, cfg, embedder) -> Corpus:
    """One entry per chunk (the benchmark indexes one chunk per abstract), tokenized as the ingest does."""
    from pipeline.ingestion.chunking import chunk_document
    from pipeline.ingestion.ingest import heading_token_count

    doc_ids, tokens, heads, texts = [], [], [], []
    for doc in documents:
        for chunk in chunk_document(doc, cfg.chunking):
            doc_ids.append(doc.doc_id)
            tokens.append(tokenize(chunk.indexed_text))
            heads.append(heading_token_count(chunk.heading_path))
            texts.append(chunk.indexed_text)
    return Corpus(doc_ids, tokens, heads, embedder.encode(texts))


def _keyword_runs_batch(matrix: sparse.csr_matrix, vocab: dict, queries: Sequence[str],
                        top_k: int) -> list[LegScores]:
    rows, cols, vals = [], [], []
    for i, q in enumerate(queries):
        for t, w in query_weights(tokenize(q)).items():
            if t in vocab:
                rows.append(i)
                cols.append(vocab[t])
                vals.append(w)
    qm = sparse.csr_matrix((vals, (rows, cols)), shape=(len(queries), matrix.shape[1]))
    scores = (qm @ matrix.T).toarray()
    out = []
    for row in scores:
        idx, v = _top(row, top_k)
        keep = v > 0
        out.append(LegScores(tuple(int(i) for i in idx[keep]), tuple(float(x) for x in v[keep])))
    return out


def sweep(corpus: Corpus, qids: Sequence[str], queries: Sequence[str], query_vectors: np.ndarray,
          qrels: dict, evaluate: Callable, top_k: int = 100, shortlist: int = 4) -> dict:
    """BM25 (k1, b, heading weight) by the keyword leg's own train nDCG@10; then, for the ``shortlist`` best
    BM25 settings, every fusion setting; rows sorted best first by train nDCG@10."""
    dense = dense_runs(corpus.vectors, query_vectors, top_k)
    bm25_rows, legs = [], {}
    for k1, b, hw in itertools.product(SWEEP_K1, SWEEP_B, SWEEP_HEADING):
        matrix, vocab = keyword_matrix(corpus, k1, b, hw)
        kw = _keyword_runs_batch(matrix, vocab, queries, top_k)
        ndcg, recall = evaluate(leg_doc_runs(corpus, qids, kw), qrels)
        bm25_rows.append({"k1": k1, "b": b, "heading_weight": hw, "ndcg10": ndcg, "recall100": recall})
        legs[(k1, b, hw)] = kw
    bm25_rows.sort(key=lambda r: (-r["ndcg10"], r["k1"], r["b"], r["heading_weight"]))
    dense_ndcg, dense_recall = evaluate(leg_doc_runs(corpus, qids, dense), qrels)
    fusion_rows = []
    for row in bm25_rows[:shortlist]:
        kw = legs[(row["k1"], row["b"], row["heading_weight"])]
        for setting in fusion_settings():
            ndcg, recall = evaluate(fused_doc_runs(corpus, qids, dense, kw, setting), qrels)
            fusion_rows.append({"k1": row["k1"], "b": row["b"], "heading_weight": row["heading_weight"],
                                "fusion": describe(setting), "setting": setting, "ndcg10": ndcg,
                                "recall100": recall})
    fusion_rows.sort(key=lambda r: (-r["ndcg10"], -r["recall100"], r["fusion"]))
    return {"bm25": bm25_rows, "dense": {"ndcg10": dense_ndcg, "recall100": dense_recall},
            "fusion": fusion_rows}


def describe(setting: dict) -> str:
    if setting["method"] == "rrf":
        return f"RRF k = {setting['k']}, weights {setting['weights'][0]:g}/{setting['weights'][1]:g}"
    return f"convex alpha = {setting['alpha']:g}, {setting['normalisation']}"


def overrides_for(row: dict) -> dict:
    """The config overrides (``--set`` keys) that put a sweep row's setting into the pipeline."""
    s = row["setting"]
    out = {"keyword.k1": row["k1"], "keyword.b": row["b"], "keyword.heading_weight": row["heading_weight"],
           "retrieve.fusion": s["method"]}
    if s["method"] == "rrf":
        out.update({"retrieve.rrf_k": s["k"], "retrieve.dense_weight": s["weights"][0],
                    "retrieve.keyword_weight": s["weights"][1]})
    else:
        out.update({"retrieve.convex_dense_weight": s["alpha"], "retrieve.convex_normalisation": s["normalisation"]})
    return out
