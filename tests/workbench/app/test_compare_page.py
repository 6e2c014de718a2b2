"""Compare page: two configurations side by side with what changed highlighted."""

from __future__ import annotations

import re

from conftest import errors_of, html_of, open_app


def _run(at, question: str, preset: str, extra: str = "", history: str = ""):
    at.text_input(key="compare.question").set_value(question)
    at.text_area(key="compare.history").set_value(history)
    box = at.selectbox(key="compare.preset")
    box.set_value(next(o for o in box.options if o.startswith(preset)))
    at.text_area(key="compare.overrides").set_value(extra)
    at.button(key="compare.run").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_two_traces_are_shown_with_the_gate_flip_highlighted(app_env):
    at = _run(open_app("compare"), "What does ERR_TIMEOUT_502 mean?", "only the changes below",
              "gate.confidence_threshold_rerank=0.99")
    headers = [s.value for s in at.subheader]
    assert any(h.startswith("A · config") for h in headers) and any(h.startswith("B · config") for h in headers)
    page = html_of(at)
    assert "class='wb-diff wb-diff-changed' data-diff='gate decision'" in page
    assert "A answer — rule rerank: rerank 0.982 ≥ 0.450" in page, "A's own condition, at the rerank precision"
    assert "B abstain — rule rerank: rerank 0.982 &lt; 0.990" in page, "B compares the same condition"
    assert page.count("class=\"wb-answer\"") == 1 and "wb-abstention" in page
    configs = [df.value for df in at.dataframe if "setting" in df.value.columns]
    assert configs and configs[0].iloc[0]["setting"] == "gate.confidence_threshold_rerank"
    assert len([t for t in at.tabs if t.label == "Retrieval"]) == 2, "both full traces"


def test_reranker_off_moves_ranks_and_the_rerank_rule_falls_back_to_fused(app_env):
    at = _run(open_app("compare"), "How long are dead-letter entries kept by default?", "reranker off")
    moves = next(df.value for df in at.dataframe if "movement" in df.value.columns)
    assert len(moves) >= 10
    assert any(m != "=" for m in moves["movement"]), "turning the reranker off reorders the top 10"
    assert re.search(r"A (answer|abstain) — rule rerank: rerank 0\.\d{3} (≥|&lt;) 0\.\d{3}", html_of(at))
    assert re.search(r"B (answer|abstain) — rule fused[^:]*: fused 0\.\d{5} (≥|&lt;) 0\.\d{5}",
                     html_of(at)), "B's gate (gate.signal=rerank) falls back to the fused rule, its condition shown"


def test_reader_off_reorders_and_the_learned_gate_reads_the_same_rule(app_env):
    at = _run(open_app("compare", settings=None), "How long are dead-letter entries kept by default?", "reader off")
    moves = next(df.value for df in at.dataframe if "movement" in df.value.columns)
    assert any(m != "=" for m in moves["movement"]), "without the reader the order is the fused one"
    page = html_of(at)
    assert re.search(r"A (answer|abstain) — rule learned: learned 0\.\d{3} (≥|&lt;) 0\.\d{3}", page)
    assert re.search(r"B (answer|abstain) — rule learned: learned 0\.\d{3} (≥|&lt;) 0\.\d{3}", page), \
        "auto reads the learned rule with the reader or without it"
    readers = [df.value for df in at.dataframe if "verdict" in df.value.columns]
    assert len(readers) >= 1, "A's trace lists the reader's sentence scores; B read none"


def test_rewrite_off_changes_the_follow_up_query(app_env):
    history = "user: what's the default max_retries in 3.1?\nassistant: 8 retries in 3.1."
    at = _run(open_app("compare"), "and what about the backoff?", "rewrite off", history=history)
    assert "class='wb-diff wb-diff-changed' data-diff='rewrite'" in html_of(at)


def test_user_errors_are_one_line(app_env):
    cases = [("What does ERR_TIMEOUT_502 mean?", "only the changes below", "gate.nope=1", "",
              "unknown config key gate.nope"),
             ("What does ERR_TIMEOUT_502 mean?", "only the changes below", "", "", "same configuration"),
             ("", "reranker off", "", "", "empty"),
             ("x?", "reranker off", "", "bot: hi", "start it with 'user:'")]
    for question, preset, extra, history, expected in cases:
        at = _run(open_app("compare"), question, preset, extra, history)
        assert len(at.error) == 1 and expected in errors_of(at)[0], (expected, errors_of(at))
        assert not [s for s in at.subheader if s.value.startswith("A · config")]


# -- issue 17, item 4: honest presets, no stale results, collapsed no-change tables ------------------------------

def test_offline_presets_offer_no_no_op_and_stricter_is_stricter_on_the_rule_in_use(offline_env):
    at = open_app("compare", settings=None)
    options = at.selectbox(key="compare.preset").options
    assert not any(o.startswith(("reranker", "reader")) for o in options), "no reranker to turn off"
    stricter = next(o for o in options if o.startswith("stricter"))
    assert "(learned: learned " in stricter, "offline, auto applies the learned rule"
    before, after = (float(v) for v in re.findall(r"(\d\.\d+) → (\d\.\d+)", stricter)[0])
    assert after > before, "its threshold rises"
    looser = next(o for o in options if o.startswith("looser"))
    before, after = (float(v) for v in re.findall(r"(\d\.\d+) → (\d\.\d+)", looser)[0])
    assert after < before, "and falls for the looser preset"


def test_an_unchanged_ranking_is_one_line_and_the_answer_diff_has_no_raw_markdown(app_env):
    at = _run(open_app("compare"), "What does ERR_TIMEOUT_502 mean?", "only the changes below",
              "generate.extractive_sentences=2")
    assert not [df for df in at.dataframe if "movement" in df.value.columns]
    assert any(c.value.startswith("Rank movements: none") for c in at.caption)
    answer_line = next(h for h in html_of(at).split("<div class='wb-diff") if "data-diff='answer'" in h)
    assert "`" not in answer_line, "inline code is shown as code, not as backticks"


def test_an_error_clears_the_previous_results(app_env):
    at = _run(open_app("compare"), "What does ERR_TIMEOUT_502 mean?", "reranker off")
    assert any(s.value.startswith("A · config") for s in at.subheader)
    at = _run(at, "What does ERR_TIMEOUT_502 mean?", "only the changes below", "gate.nope=1")
    assert len(at.error) == 1
    assert not any(s.value.startswith("A · config") for s in at.subheader), "no stale results under the error"


def test_over_the_golden_set_each_rate_sits_beside_the_paired_test(app_env):
    """A and B answer the same golden cases; a stricter gate answers no case A abstained on, so every answered
    case B has, A has too: the paired test counts only A's extra answers."""
    at = open_app("compare")
    box = at.selectbox(key="compare.preset")
    box.set_value(next(o for o in box.options if o.startswith("stricter gate")))
    at.number_input(key="compare.golden.limit").set_value(12)
    at.button(key="compare.golden.run").click().run(timeout=300)
    assert not at.exception, [e.value for e in at.exception]
    assert not errors_of(at)
    table = next(df.value for df in at.dataframe if "McNemar p (exact)" in df.value.columns)
    answered = table[table["rate"] == "answered (of answerable)"].iloc[0]
    only_a, only_b = (int(x) for x in answered["only A / only B"].split(" / "))
    assert only_b == 0, "B's stricter gate answers nothing A did not"
    assert re.fullmatch(r"\d+\.\d % \[\d+\.\d–\d+\.\d\]", answered["A [95 % CI]"])
    assert re.fullmatch(r"[+-]\d+\.\d \[[+-]\d+\.\d to [+-]\d+\.\d\]", answered["A − B, points [95 % paired bootstrap]"])
    assert 0.0 <= answered["McNemar p (exact)"] <= 1.0 and answered["cases"] >= 1
    assert "false answers (of unanswerable)" in set(table["rate"])
