"""The conversation section (benchmarks/results/followups.json): rendered from the file alone, showing its numbers;
the unrelated conversations pair each question with an earlier one about other documents; the summary counts."""

from __future__ import annotations

import copy

from conftest import ROOT

from benchmarks import followups
from benchmarks.results_io import load_results, meta_line
from workbench.golden import load_golden


def test_the_section_is_deterministic_and_shows_the_files_numbers():
    results = load_results(followups.NAME)
    text = followups.render(results)
    assert text == followups.render(copy.deepcopy(results))
    assert text.startswith(followups.SECTION) and meta_line(results["meta"]) in text
    for key in followups.SETS:
        s = results["sets"][key]
        for mode in followups.MODES:
            hits = round(s["hit_rate"][mode] * s["questions"])
            assert f"({hits}/{s['questions']})" in text
    changed = copy.deepcopy(results)
    changed["sets"]["follow_ups"]["hit_rate"]["never"] = 0.5
    n = changed["sets"]["follow_ups"]["questions"]
    assert "50.0 % [" in followups.render(changed) and f"({round(n / 2)}/{n})" in followups.render(changed)


def test_unrelated_conversations_pair_a_question_with_an_earlier_one_about_other_documents():
    cases = load_golden(ROOT / "golden" / "golden.jsonl").cases
    pairs = followups.unrelated_conversations(cases)
    assert len(pairs) > 100
    for case, history in pairs:
        earlier = next(c for c in cases if c.question == history[0].content)
        assert not case.history and case.answerable
        assert not set(earlier.expected_doc_ids) & set(case.expected_doc_ids)
        assert [m.role for m in history] == ["user", "assistant"]


def test_the_summary_counts_hits_history_and_the_paired_test():
    per_case = {f"q{i}": {mode: {"hit": hit, "turns_sent": sent, "query": "q"}
                          for mode, hit, sent in (("never", i < 2, 0), ("follow-ups", i < 3, 2 * (i % 2)),
                                                  ("always", i < 1, 2))} for i in range(4)}
    s = followups.summarise(per_case)
    assert s["questions"] == 4
    assert s["hit_rate"] == {"never": 0.5, "follow-ups": 0.75, "always": 0.25}
    assert s["sent_history"] == {"never": 0, "follow-ups": 2, "always": 4}
    assert s["vs_rule"]["never"]["only_first"] == 1 and s["vs_rule"]["never"]["only_second"] == 0
    assert s["vs_rule"]["always"]["only_first"] == 2
