"""The Ask page's conversation: example questions for an empty chat, each turn (the latest in full, earlier
ones as question and answer with their details one click away), and asking with the right history."""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import streamlit as st

from pipeline.engine import Pipeline
from pipeline.trace import Message, Trace
from workbench.app import render
from workbench.app.answer_view import gate_abstained, render_answer
from workbench.app.conversation import Turn, choose_history
from workbench.app.explain import abstention_headline
from workbench.app.render import md
from workbench.app.trace_view import render_trace

TURNS = "ask.turns"
PENDING = "ask.pending"
DEMO_DOCUMENT = "err-timeout-502"

# (label, what it shows, the questions asked in turn): the Demo tour's checked questions and a follow-up pair.
EXAMPLES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("An error code", "cited answer from the error page", ("What does ERR_TIMEOUT_502 mean?",)),
    ("Answerable", "every sentence cited", ("What's the default lifetime of an API token?",)),
    ("On topic, not in the documents", "says it does not know",
     ("Is there a Windows build of harbord? I need to run it on Windows Server 2022.",)),
    ("Off topic", "abstains before any LLM call", ("Can you give me a good recipe for sourdough starter?",)),
    ("Versions that disagree", "the older version badged", ("What is the default per-endpoint rate limit?",)),
    ("A follow-up", "two questions; the second needs the first",
     ("what's the default max_retries in 3.1?", "and what about the backoff?")),
)


def queue(questions: tuple[str, ...] | list[str], history: tuple[Message, ...] = ()) -> None:
    """Ask these on the next run of the Ask page, in order; ``history`` goes with the first (a golden case's)."""
    st.session_state[PENDING] = {"questions": list(questions), "history": tuple(history)}


def render_examples(pipe: Pipeline) -> None:
    """The empty chat: what to try, one click each (only for the demo corpus, whose answers they match)."""
    if pipe.store.document(DEMO_DOCUMENT) is None:
        st.info("Ask a question about your documents below.")
        return
    st.markdown("**Try one of these** (the bundled Harbor Relay documents)")
    for i, (label, shows, questions) in enumerate(EXAMPLES):
        if i % 3 == 0:   # a row of columns per three examples, so the buttons of a row line up
            columns = st.columns(3)
        with columns[i % 3]:
            if st.button(label, key=f"ask.example.{i}", help=" → ".join(questions), width="stretch"):
                queue(questions)
                st.rerun()
            st.caption(md(shows))


def ask_pending(pipe: Pipeline, turns: list[Turn], cfg, mode: str, attempt: Callable) -> bool:
    """Ask the queued questions (an example, a golden case opened from the gallery); True if any was asked."""
    pending = st.session_state.pop(PENDING, None)
    if not pending:
        return False
    given = tuple(pending.get("history", ()))
    asked = False
    for n, question in enumerate(pending["questions"]):
        if n == 0 and given:
            users = sum(1 for m in given if m.role == "user")
            note = f"Opened with its {users} earlier question{'s' if users != 1 else ''} as the conversation."
            turn = ask_turn(pipe, question, given, note, cfg, attempt)
        else:
            turn = ask_with_mode(pipe, question, turns, cfg, mode, attempt)
        if turn is None:
            break
        turns.append(turn)
        asked = True
    return asked


def ask_with_mode(pipe: Pipeline, question: str, turns: list[Turn], cfg, mode: str, attempt: Callable) -> Turn | None:
    choice = choose_history(question, turns, mode)
    return ask_turn(pipe, question, choice.history, choice.note, cfg, attempt)


def ask_turn(pipe: Pipeline, question: str, history: tuple[Message, ...], note: str, cfg,
             attempt: Callable) -> Turn | None:
    def ask() -> Trace:
        return pipe.ask(question, list(history), cfg)

    if cfg.generate.backend == "extractive":
        with st.spinner(waiting_text(cfg)):
            trace = attempt(ask)
    else:
        trace = attempt(lambda: run_with_countdown(ask, cfg))
    return None if trace is None else Turn(question, trace, note, tuple(history))


def provider_budget_s(cfg) -> float:
    """The longest a question waits on the provider before the extractive fallback: every try of one call."""
    return cfg.generate.timeout_s * (1 + max(0, cfg.generate.retries))


def countdown_text(cfg, elapsed_s: float) -> str:
    """The live line under a question that waits on an LLM provider: how long so far, how long at most."""
    gen = cfg.generate
    left = max(0.0, provider_budget_s(cfg) - elapsed_s)
    tries = "" if gen.retries == 0 else f" ({1 + gen.retries} tries of {gen.timeout_s:g} s)"
    if left <= 0:
        return (f"Asking {gen.model or gen.backend}: {elapsed_s:.0f} s so far, past the provider's time limit"
                f"{tries}; the sources are being quoted instead ...")
    return (f"Asking {gen.model or gen.backend}: {elapsed_s:.0f} s so far. If it has not answered in {left:.0f} s"
            f"{tries}, the sources are quoted instead ...")


def run_with_countdown(fn: Callable[[], Trace], cfg, tick_s: float = 0.5) -> Trace:
    """``fn()`` in a worker thread while the page counts down the provider's time limit; its result or its
    exception, as if called directly."""
    line = st.empty()
    started = time.monotonic()
    line.info(countdown_text(cfg, 0.0))
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ask") as pool:
        future = pool.submit(fn)
        try:
            while True:
                try:
                    return future.result(timeout=tick_s)
                except FutureTimeout:
                    line.info(countdown_text(cfg, time.monotonic() - started))
        finally:
            line.empty()


def waiting_text(cfg) -> str:
    """What the spinner says while a question runs without an LLM (an LLM's wait is counted down instead)."""
    return "Searching, checking the gate and quoting the sources ..."


def render_turns(turns: list[Turn]) -> None:
    """Earlier turns as question and answer (details one toggle away); the latest with citations and trace."""
    for i, turn in enumerate(turns):
        latest = i == len(turns) - 1
        with st.chat_message("user"):
            st.text(turn.question)
            if turn.history_note:
                st.caption(md(turn.history_note))
        with st.chat_message("assistant"):
            if latest:
                render_answer(turn.trace, key=f"ask.t{i}")
                # Off by default, so the newest answer is what the page ends on (it scrolls to the bottom after
                # each question); the key names the turn's role: once a newer turn arrives this toggle is a new one.
                if st.toggle("Show the trace", value=False, key=f"ask.show_trace.{i}.latest",
                             help="Every stage of this answer: rewrite, retrieval, rerank, gate, generation, "
                                  "validation, with their scores and timings."):
                    render_trace(turn.trace, key=f"ask.t{i}", rewrite_note=turn.history_note)
            else:
                _render_compact(turn.trace)
                if st.toggle("Show citations and trace", value=False, key=f"ask.show_trace.{i}.earlier"):
                    render_answer(turn.trace, key=f"ask.t{i}")
                    render_trace(turn.trace, key=f"ask.t{i}", rewrite_note=turn.history_note)


# Scrolls the page so the newest answer's top sits below Streamlit's header: a chat page otherwise keeps its scroll
# position (or jumps to the bottom), and at 1024×768 the answer of a first question starts below the fold. The
# script is the app's own (no retrieved text in it); the turn count in it makes each new answer a new element.
_SCROLL_TO_NEWEST = """<script>/* turn {turns} */
setTimeout(function () {{
  var answers = window.parent.document.querySelectorAll('.wb-answer, .wb-abstention');
  if (!answers.length) return;
  var newest = answers[answers.length - 1];
  newest.style.scrollMarginTop = '80px';
  newest.scrollIntoView({{block: 'start'}});
}}, 250);
</script>"""


def keep_newest_in_view(turns: list[Turn]) -> None:
    """After the conversation is drawn: scroll to the newest answer (a zero-height component) — once per new
    answer, so a rerun for a widget (a toggle, a tab) leaves the page where the reader put it."""
    shown = st.session_state.get("ask.scrolled_to", 0)
    if turns and len(turns) != shown:
        import streamlit.components.v1 as components

        components.html(_SCROLL_TO_NEWEST.format(turns=len(turns)), height=0)
    st.session_state["ask.scrolled_to"] = len(turns)


def _render_compact(trace: Trace) -> None:
    if gate_abstained(trace) or trace.abstained:
        st.html(render.abstention_html(trace, abstention_headline(trace)))
        return
    st.html(render.answer_html(trace.answer, trace.validation))
