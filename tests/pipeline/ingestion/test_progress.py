"""The ingest's progress line: "N/M chunks · X chunks/s · ETA m:ss", the same numbers wherever it is shown (the
CLI's stderr, the app's bar, a notebook callback)."""

import io
import re

from hypothesis import given
from hypothesis import strategies as st

from pipeline.ingestion.progress import Progress, ProgressTracker, StreamReporter, format_duration, reporter_for

LINE = re.compile(r"^(?P<done>[\d,]+)/(?P<total>[\d,]+)(?P<plus>\+?) chunks"
                  r"(?: · (?P<rate>\d+\.\d) chunks/s)?(?: · ETA (?P<eta>\d+(?::\d\d){1,2}))?$")


def _seconds(text: str) -> int:
    parts = [int(p) for p in text.split(":")]
    return parts[0] * 3600 + parts[1] * 60 + parts[2] if len(parts) == 3 else parts[0] * 60 + parts[1]


@given(done=st.integers(0, 10**6), extra=st.integers(0, 10**6), elapsed=st.floats(0.001, 10**5))
def test_the_line_states_done_total_rate_and_an_eta_that_matches_the_rate(done, extra, elapsed):
    total = done + extra
    p = Progress(done, total, elapsed)
    m = LINE.match(p.text())
    assert m, p.text()
    assert int(m["done"].replace(",", "")) == done and int(m["total"].replace(",", "")) == total
    if done == 0:
        assert m["rate"] is None and (m["eta"] is None) == (total > 0)  # no rate yet; an empty run is done
    else:
        assert abs(float(m["rate"]) - done / elapsed) <= 0.05 + 1e-9 * done / elapsed
        expected = (total - done) / (done / elapsed)
        assert abs(_seconds(m["eta"]) - expected) <= 0.5 + 1e-9 * expected
    assert 0.0 <= p.fraction <= 1.0


@given(done=st.integers(0, 10**5), extra=st.integers(0, 10**5), elapsed=st.floats(0.01, 10**4),
       later=st.floats(0.0, 10**4))
def test_at_a_steady_rate_the_eta_counts_down(done, extra, elapsed, later):
    """Same rate, more done: the remaining time never goes up."""
    rate = (done + 1) / elapsed
    more = min(done + 1 + int(rate * later), done + 1 + extra)
    a = Progress(done + 1, done + 1 + extra, elapsed)
    b = Progress(more, done + 1 + extra, more / rate)
    assert b.eta_s <= a.eta_s + 1e-6


@given(seconds=st.floats(0, 10**6))
def test_durations_read_back_to_the_nearest_second(seconds):
    text = format_duration(seconds)
    assert re.fullmatch(r"\d+:\d\d" if seconds < 3599.5 else r"\d+:\d\d:\d\d", text)
    assert abs(_seconds(text) - seconds) <= 0.5 + 1e-9


def test_a_finished_run_says_no_time_is_left_and_a_counting_total_gives_no_eta():
    assert Progress(650, 650, 31.0).text() == "650/650 chunks · 21.0 chunks/s · ETA 0:00"
    assert Progress(120, 300, 10.0, counting=True).text() == "120/300+ chunks · 12.0 chunks/s"
    assert Progress(0, 0, 0.0).fraction == 1.0 and str(Progress(0, 0, 0.0)) == "0/0 chunks · ETA 0:00"
    assert format_duration(3725) == "1:02:05" and format_duration(59.4) == "0:59"


def test_the_tracker_reports_each_state_to_its_callback():
    seen, clock = [], iter([0.0, 2.0, 4.0, 8.0]).__next__
    tracker = ProgressTracker(seen.append, clock=clock)
    tracker.update(total=40, counting=True)
    tracker.update(advanced=10, total=100, counting=False)
    tracker.update(advanced=90)
    assert [s.text() for s in seen] == ["0/40+ chunks", "10/100 chunks · 2.5 chunks/s · ETA 0:36",
                                        "100/100 chunks · 12.5 chunks/s · ETA 0:00"]


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_a_terminal_gets_one_line_rewritten_in_place_and_a_file_gets_lines():
    tty = _Stream(True)
    reporter = StreamReporter(tty)
    reporter(Progress(10, 100, 1.0))
    reporter(Progress(100, 100, 2.0))
    reporter.close()
    assert tty.getvalue().count("\n") == 1 and tty.getvalue().startswith("\r10/100 chunks")
    assert tty.getvalue().rstrip().endswith("100/100 chunks · 50.0 chunks/s · ETA 0:00")
    log = _Stream(False)
    reporter = StreamReporter(log, every_s=3600)
    for done in (10, 20, 100):
        reporter(Progress(done, 100, 1.0))
    reporter.close()
    assert log.getvalue().splitlines() == ["10/100 chunks · 10.0 chunks/s · ETA 0:09",
                                           "100/100 chunks · 100.0 chunks/s · ETA 0:00"]  # throttled; last kept


def test_progress_argument_means_stderr_nothing_or_the_callable():
    assert isinstance(reporter_for(True), StreamReporter)
    assert reporter_for(False) is None and reporter_for(None) is None
    assert reporter_for(print) is print


def test_the_tracker_does_not_repeat_a_state():
    seen = []
    tracker = ProgressTracker(seen.append, clock=iter(range(10)).__next__)
    tracker.update(total=10, counting=False)
    tracker.update(total=10, counting=False)
    tracker.update(advanced=0)
    tracker.update(advanced=10)
    assert [(p.done, p.total) for p in seen] == [(0, 10), (10, 10)]
