"""The external benchmark (benchmarks/external.py): how its cases are built from the Samsung manuals (on small
manuals written here), its section rendered from the results file, and — where ``../shared/evaldata`` is present,
as in CI — the shipped default on the S10 manual's test part held to the floors its interval gives."""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest

from benchmarks import external
from benchmarks.results_io import load_results, meta_line


def _manuals(root: Path) -> Path:
    """Two tiny manuals in the evaldata layout: eight phone sections (four pages), six TV sections."""
    data = root / "emanual_samsung"
    data.mkdir(parents=True)
    s10 = {f"section_{i}": {"id": i, "title": f"Phone topic {i}", "text": repr([f"Phone text {i} about setting {i}."]),
                            "section_url": f"https://manual.example/page{i // 2}#part{i}"} for i in range(8)}
    (data / "s10_manual_corpus.json").write_text(json.dumps(s10), encoding="utf-8")
    with (data / "s10_50_questions.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, ["question_id", "question", "section_path", "section_link", "answer"])
        writer.writeheader()
        for q in range(6):
            writer.writerow({"question_id": q, "question": f"How do I change phone setting {q}?", "section_path": "",
                             "section_link": f"http://manual.example/page{q % 4}", "answer": f"Open setting {q}."})
    tv = {f"section_{i}": {"id": i, "title": f"TV topic {i}", "text": [f"TV text {i}."]} for i in range(6)}
    (data / "smart_tv_remote_manual_corpus.json").write_text(json.dumps(tv), encoding="utf-8")
    with (data / "smart_tv_remote_qa.jsonl").open("w", encoding="utf-8") as fh:
        for q in range(10):
            gold = [f"section_{q % 6}"] if q < 8 else []
            fh.write(json.dumps({"question": f"Where is TV menu {q}?", "answer": f"Menu {q}.",
                                 "gold_section_ids_by_title": gold}) + "\n")
    return data


def test_answer_removed_cases_lose_every_gold_section_and_answerable_ones_keep_theirs(tmp_path):
    data = _manuals(tmp_path)
    for manual in external.MANUALS:
        ext = external.build(manual, data)
        kept = {d.doc_id for d in ext.documents}
        kinds = {k: [c for c in ext.golden.cases if k in c.tags] for k in external.KINDS}
        assert kinds["answerable"] and kinds["answer-removed"], "a hash that keeps or removes everything"
        for case in kinds["answerable"]:
            assert case.answerable and case.expected_doc_ids and set(case.expected_doc_ids) <= kept
            assert case.expected_answer
        for case in kinds["answer-removed"]:
            assert not case.answerable and case.id.split(":", 1)[1].startswith(manual)
            source = next(q for q in external.MANUALS[manual][1](data)[1] if q.qid == case.id.split(":", 1)[1])
            assert not set(source.gold_doc_ids) & kept, "its answer is still in the corpus"
        other = external.MANUALS[manual][2]
        assert kinds["off-topic"] and all(c.id.split(":", 1)[1].startswith(other) for c in kinds["off-topic"])
        assert not set(ext.removed) & kept and len(kept) + len(ext.removed) == len(external.MANUALS[manual][1](data)[0])
        ids = [c.id for c in ext.golden.cases]
        assert sorted(ext.split.parts["tune"] + ext.split.parts["test"]) == sorted(ids), "each case in one part"
        assert not set(ext.split.parts["tune"]) & set(ext.split.parts["test"])
        assert external.build(manual, data) == ext, "deterministic"
    tv = external.build("tv", data)
    assert not any("tv-0008" in c.id or "tv-0009" in c.id for c in tv.golden.cases if "off-topic" not in c.tags), \
        "a question without gold sections is neither answerable nor answer-removed"


def _rows(kind: str, n: int, answered: int) -> list:
    from workbench.evaluate import EvalRow

    answerable = kind == "answerable"
    return [EvalRow(id=f"{kind}:{i}", answerable=answerable, abstained=i >= answered, gate_score=0.0,
                    gate_scale="learned", retrieved_doc_ids=("d",), supported=None, llm_calls=0,
                    expected_doc_ids=("d",) if answerable else (), hit_at_10=True if answerable else None,
                    tags=(kind,)) for i in range(n)]


def test_floors_come_from_the_interval_not_from_the_point():
    from workbench.summary import summarise

    rows = _rows("answerable", 20, 16) + _rows("answer-removed", 10, 2) + _rows("off-topic", 25, 0)
    figures = external.figures(summarise(rows, [], tags=external.KINDS))
    floors, ceilings = figures["bounds"]["floors"], figures["bounds"]["ceilings"]
    assert 0.55 < floors["answer_rate_answerable"] < 0.8, "the Wilson lower end of 16/20"
    assert 0.2 < ceilings["per_tag.answer-removed.false_answer_rate_unanswerable"] < 0.6
    assert 0.0 < ceilings["per_tag.off-topic.false_answer_rate_unanswerable"] < 0.2, "0/25 still has room above"
    assert figures["false_answer_rate_off-topic"] == 0.0


def test_the_section_shows_the_results_files_numbers_with_intervals():
    results = load_results(external.NAME)
    text = external.render(results)
    assert text == external.render(copy.deepcopy(results)) and meta_line(results["meta"]) in text
    assert list(results["manuals"]) == ["s10", "tv"]
    for m in results["manuals"].values():
        assert sum(m["test"].values()) == m["cases"] > 0 and m["test"]["answer-removed"] > 0
        assert f"{100 * m['answer_rate_answerable']:.1f} % [" in text
    changed = copy.deepcopy(results)
    changed["manuals"]["s10"]["false_answer_rate_off-topic"] = 0.4321
    assert "43.2 % [" in external.render(changed)


def _evaldata() -> Path | None:
    try:
        return external.evaldata(external.EMANUAL, "s10_50_questions.csv")
    except SystemExit:
        return None


@pytest.mark.slow
def test_the_shipped_default_on_the_s10_test_part_holds_its_floors(tmp_path, monkeypatch):
    data = _evaldata()
    if data is None:
        pytest.skip("../shared/evaldata/emanual_samsung is not here (it is in CI)")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    ext = external.build("s10", data)
    measured = load_results(external.NAME)["manuals"]["s10"]
    assert external.counts(ext) == measured["test"], "the cases changed since the results were measured"
    evaluation, _ = external.evaluate_part(ext, tmp_path)
    from workbench.summary import lookup

    failures = []
    for key, floor in measured["bounds"]["floors"].items():
        if (lookup(evaluation.summary, key) or 0.0) < floor:
            failures.append(f"{key} {lookup(evaluation.summary, key)} < floor {floor}")
    for key, ceiling in measured["bounds"]["ceilings"].items():
        if (lookup(evaluation.summary, key) or 0.0) > ceiling:
            failures.append(f"{key} {lookup(evaluation.summary, key)} > ceiling {ceiling}")
    assert not failures, "; ".join(failures)
