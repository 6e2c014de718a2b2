"""How the app writes numbers and passages: durations, time left, gauge axes, closest documents in order of
closeness, and source passages without Markdown code-fence lines."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from workbench.app import charts, explain, render
from workbench.app.eval_view import eta_text
from workbench.app.trace_view import ms_text


def test_durations_read_as_milliseconds_or_seconds_never_as_a_bare_fraction():
    assert ms_text(0.026) == "< 0.1 ms"
    assert ms_text(1.44) == "1.4 ms"
    assert ms_text(643.358) == "643 ms"
    assert ms_text(2345.0) == "2.35 s"


def test_time_left_waits_for_a_pace_and_never_says_zero_while_cases_remain():
    assert eta_text(elapsed_s=1.0, done=5, total=100) == ""            # under two seconds: no pace yet
    assert eta_text(elapsed_s=30.0, done=5, total=100) == ""           # under a tenth of the cases
    assert eta_text(elapsed_s=15.0, done=290, total=300) == " · a few seconds left"
    assert eta_text(elapsed_s=10.0, done=50, total=100) == " · about 10 s left"
    assert eta_text(elapsed_s=100.0, done=10, total=100) == " · about 15 min left"
    assert eta_text(elapsed_s=100.0, done=100, total=100) == ""


def test_a_probability_or_share_gauge_runs_to_one():
    for scale in ("learned", "rerank", "window", "coverage", "critical", "fused_norm"):
        assert charts._scale_range(scale, 0.93, 0.5) == (0.0, 1.0), scale
    assert charts._scale_range("dense", -0.2, 0.5) == (-1.0, 1.0)
    lo, hi = charts._scale_range("fused", 0.03, 0.0314)
    assert lo == 0.0 and 0.0314 < hi < 0.05


def test_closest_documents_are_listed_closest_first(monkeypatch):
    import dataclasses

    from pipeline.trace import ClosestDocument
    from tests.support.traces import abstained_trace

    docs = tuple(ClosestDocument(doc_id=f"d{i}", title=f"D{i}", chunk_id=f"d{i}#0", score=0.1 * i, scale="rerank")
                 for i in range(3))
    trace = abstained_trace()
    trace = dataclasses.replace(trace, gate=dataclasses.replace(trace.gate, closest_documents=docs))
    shares = {d.chunk_id: 0.2 + 0.3 * i for i, d in enumerate(docs)}          # the gate's order: least close first
    monkeypatch.setattr(explain, "closeness", lambda t, chunk_id: shares[chunk_id])
    rows = explain.closest_rows(trace)
    assert [r["how close"] for r in rows] == sorted((r["how close"] for r in rows), reverse=True)
    assert rows[0]["chunk"] == docs[-1].chunk_id
    monkeypatch.setattr(explain, "closeness", lambda t, chunk_id: None)
    assert [r["chunk"] for r in explain.closest_rows(trace)] == [d.chunk_id for d in docs], "no share: gate order"



def test_a_passage_loses_its_code_fences_and_keeps_its_code():
    text = "Set the retry budget:\n\n```yaml\ndelivery:\n  max_retries: 8\n```\n\n~~~\nharborctl run\n~~~\nDone."
    assert render.passage_text(text) == "Set the retry budget:\n\ndelivery:\n  max_retries: 8\n\nharborctl run\nDone."
    assert render.passage_text("Inline `code` and a ``` in a sentence stay.") == \
        "Inline `code` and a ``` in a sentence stay."


@given(st.lists(st.one_of(st.text(alphabet=st.characters(blacklist_characters="\n"), max_size=40),
                          st.sampled_from(["```", "```python", "  ~~~", "````js "])), max_size=20))
def test_fence_removal_keeps_every_other_line_in_order(lines):
    out = render.passage_text("\n".join(lines))
    kept = [ln for ln in lines if not render._FENCE.match(ln)]
    assert out == "\n".join(kept)
    assert not any(render._FENCE.match(ln) for ln in out.split("\n") if kept)
