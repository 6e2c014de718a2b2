from pipeline.text.tokenize import tokenize


def test_identifiers_stay_whole_and_also_yield_their_parts():
    tokens = tokenize("Deliveries fail with ERR_TIMEOUT_502 after delivery.timeout_ms in v3.1")
    assert "err_timeout_502" in tokens and {"err", "timeout", "502"} <= set(tokens)
    assert "delivery.timeout_ms" in tokens and "ms" in tokens
    assert "v3.1" in tokens


def test_stop_words_dropped_and_plurals_folded_but_identifiers_never_stemmed():
    assert tokenize("How are the retries of endpoints counted?") == ["retry", "endpoint", "counted"]
    assert tokenize("harbor.toml ERR_CLUSTER_QUORUM") == ["harbor.toml", "harbor", "toml", "err_cluster_quorum",
                                                          "err", "cluster", "quorum"]
