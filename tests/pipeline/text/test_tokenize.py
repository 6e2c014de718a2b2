from pipeline.text.tokenize import bm25_doc_weights, idf, query_weights, to_sparse, tokenize


def test_identifiers_stay_whole_and_also_yield_their_parts():
    tokens = tokenize("Deliveries fail with ERR_TIMEOUT_502 after delivery.timeout_ms in v3.1")
    assert "err_timeout_502" in tokens and {"err", "timeout", "502"} <= set(tokens)
    assert "delivery.timeout_ms" in tokens and "ms" in tokens
    assert "v3.1" in tokens


def test_stop_words_dropped_and_plurals_folded_but_identifiers_never_stemmed():
    assert tokenize("How are the retries of endpoints counted?") == ["retry", "endpoint", "counted"]
    assert tokenize("harbor.toml ERR_CLUSTER_QUORUM") == ["harbor.toml", "harbor", "toml", "err_cluster_quorum",
                                                          "err", "cluster", "quorum"]


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
