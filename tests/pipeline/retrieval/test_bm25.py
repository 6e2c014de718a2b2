from pipeline.retrieval.bm25 import (
    average_length,
    avgdl_drifted,
    bm25_doc_weights,
    df_deltas,
    doc_sparse,
    idf,
    query_weights,
    to_sparse,
)


def test_bm25_weights_follow_the_formula():
    w = bm25_doc_weights(["a", "a", "b"], avgdl=3.0, k1=1.2, b=0.75)
    assert abs(w["a"] - 2 * 2.2 / (2 + 1.2)) < 1e-12
    longer = bm25_doc_weights(["a", "a", "b", "c", "d", "e"], avgdl=3.0, k1=1.2, b=0.75)
    assert longer["a"] < w["a"]  # the same tf counts for less in a longer chunk


def test_query_weights_count_repeats_and_idf_is_always_positive():
    assert query_weights(["x", "x", "y"]) == {"x": 2.0, "y": 1.0}
    assert idf(100, 100) > 0 and idf(100, 1) > idf(100, 50)


def test_sparse_vectors_are_sorted_and_deterministic():
    indices, values = to_sparse({"retry": 1.5, "err_timeout_502": 2.0})
    assert indices == sorted(indices) and len(values) == 2
    assert to_sparse({"retry": 1.5, "err_timeout_502": 2.0}) == (indices, values)
    terms = ["retry", "retry", "err_timeout_502"]
    assert doc_sparse(terms, 3.0, 1.2, 0.75) == to_sparse(bm25_doc_weights(terms, 3.0, 1.2, 0.75))


def test_corpus_statistics_avgdl_drift_and_document_frequency_changes():
    assert average_length([2, 4]) == 3.0 and average_length([]) == 1.0
    assert not avgdl_drifted(100.0, 101.9) and avgdl_drifted(100.0, 102.1) and avgdl_drifted(100.0, 97.0)
    # a term counts once per chunk, however often it occurs there
    assert df_deltas([["a", "a", "b"], ["a"]], +1) == {"a": 2, "b": 1}
    assert df_deltas([["a"]], -1) == {"a": -1}
