from pipeline.text.tokenize import tokenize, whole_tokens


def test_identifiers_stay_whole_and_also_yield_their_parts():
    tokens = tokenize("Deliveries fail with ERR_TIMEOUT_502 after delivery.timeout_ms in v3.1")
    assert "err_timeout_502" in tokens and {"err", "timeout", "502"} <= set(tokens)
    assert "delivery.timeout_ms" in tokens and "ms" in tokens
    assert "v3.1" in tokens


def test_stop_words_dropped_and_plurals_folded_but_identifiers_never_stemmed():
    assert tokenize("How are the retries of endpoints counted?") == ["retry", "endpoint", "counted"]
    assert tokenize("harbor.toml ERR_CLUSTER_QUORUM") == ["harbor.toml", "harbor", "toml", "err_cluster_quorum",
                                                          "err", "cluster", "quorum"]


def test_whole_tokens_are_the_tokens_without_the_parts_of_compounds():
    text = "In v3.1 the retries (max_retries) are 8, see ERR_TIMEOUT_502"
    assert whole_tokens(text) == ["v3.1", "retry", "max_retries", "8", "see", "err_timeout_502"]
    assert set(whole_tokens(text)) <= set(tokenize(text))
