"""Answer correctness: does an answer say what the golden case's ``expected_answer`` says? (``workbench eval``)

The validator (:mod:`pipeline.validation.citations`) checks that each sentence is supported by the passage it
cites. With the extractive generator every quoted sentence trivially is, so a fully supported answer can
still answer the wrong question ("ERR_TIMEOUT_502?" answered from the ERR_TIMEOUT_504 page) or state the
wrong value ("3.1 still uses 5" where the golden answer says 8). This module compares the answer with the
expected answer instead, with three independent signals, and gives one verdict per answered case.

Signals (:class:`Correctness` keeps every one of them):

1. **Tokens.** Both texts go through the project tokenizer (:mod:`pipeline.text.tokenize`: lower-cased,
   stop words dropped, plural-stemmed, identifiers kept whole). ``token_recall`` is the share of the expected
   answer's distinct tokens found in the answer, ``token_precision`` the share of the answer's found in the
   expected answer, ``token_f1`` their harmonic mean (SQuAD-style token F1: Rajpurkar et al., EMNLP 2016, on
   sets). **Key facts** are the expected answer's numbers, versions and identifiers: a whole token with a
   digit, an ``_`` or a ``.`` joint (``8``, ``3.1``, ``10000``, ``ERR_TIMEOUT_502``, ``security.ca_bundle``;
   not the abbreviations ``e.g``/``i.e``); of a token joined only by ``- / :`` (``14-day``, ``250/min``,
   ``hmac-sha256``, ``rate-limit``) its numbers, else the whole token when a part mixes letters and digits,
   else nothing (a hyphenated word is a word). Key facts match only exactly, as whole tokens
   (:func:`pipeline.text.tokenize.whole_tokens`: ``3.1`` never matches ``3`` or ``1``; a leading ``v`` of a
   version is dropped on both sides), except that a number may match a numeric part of a joined token in the
   answer (``502`` in ``ERR_TIMEOUT_502``, ``14`` in ``14-day``). A missing key fact is **contradicted** when
   the answer states a rival of it: a token of the same shape (each digit replaced by ``#``: ``5`` for ``8``,
   ``3.0`` for ``3.1``, ``ERR_TIMEOUT_504`` for ``ERR_TIMEOUT_502``; ``503`` is no rival of ``10``) that is
   not itself a key fact of the expected answer. Tokens and key facts the question already holds are left out
   of both texts first (an answer that only restates the question gets no credit for it, and a number the
   question asks about is no rival).
2. **Semantic match.** The cosine between the expected answer and the best of the whole answer and each of
   its sentences, with the embedder the evaluation already has (``None`` when none is given).
3. **NLI, both directions.** With the NLI model (``validate.nli_model``; offline the one trained here), the most
   probable label for (premise: the answer, hypothesis: the expected answer) — does the answer say everything the
   expected answer says? — and for (premise: the expected answer, hypothesis: the answer) — does the expected
   answer back everything the answer says? A correct short answer entails only the second way (golden expected
   answers carry detail a correct answer need not repeat), so the two are combined (:func:`combine_nli`):
   ``contradiction`` when either way contradicts, ``entailment`` when either way entails, else ``neutral``; both
   labels are recorded. ``"unavailable"`` when no NLI model resolves, ``"off"`` when the check was not asked for
   (``--no-nli``). Whether the combined label takes part in the verdict is :data:`NLI_DECIDES` — off: against
   hand labels (BENCHMARKS.md, "Answer correctness", which compares both scorers on the same answers) the model,
   trained on single claims against single sentences, reads whole multi-sentence extractive answers poorly and
   lowered agreement, so its labels are recorded beside the verdict but do not change it.

Verdict (:func:`decide`), first rule that applies:

- ``wrong`` when NLI says contradiction; when at least ``CONTRADICTED_WRONG`` of the key facts are
  contradicted; when fewer than ``KEY_RECALL_WRONG`` of the key facts are present and ``token_recall`` is
  below ``RECALL_CORRECT``; or when ``token_recall`` is below ``RECALL_WRONG`` and the semantic match (if
  measured) is below ``SEMANTIC_PARTLY``.
- ``correct`` when at least ``KEY_RECALL_CORRECT`` of the key facts are present, none is contradicted, and
  either ``token_recall`` reaches ``RECALL_CORRECT``, or NLI says entailment, or the semantic match reaches
  ``SEMANTIC_CORRECT`` with ``token_recall`` at least ``RECALL_WRONG``.
- ``partly`` otherwise.

A case without key facts counts as having all of them. An abstention gets no verdict (``None``); an answer
to an unanswerable question is ``wrong`` whatever it says (there is nothing correct to say). The thresholds
are judgement calls, not fitted to the hand labels they are checked against (``benchmarks/correctness_report.py``,
BENCHMARKS.md "Answer correctness").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.text.tokenize import tokenize, whole_tokens
from pipeline.validation.claims import split_claims

VERDICTS = ("correct", "partly", "wrong")

RECALL_CORRECT = 0.6         # token recall that, with the key facts present, makes an answer correct
RECALL_WRONG = 0.25          # below this token recall (and a weak semantic match) the answer is wrong
SEMANTIC_CORRECT = 0.8       # cosine that, with the key facts present, makes an answer correct
SEMANTIC_PARTLY = 0.6        # cosine that keeps a low-recall answer from being wrong
KEY_RECALL_CORRECT = 0.75    # share of the key facts a correct answer states
KEY_RECALL_WRONG = 0.34      # below this share of the key facts stated, the answer is wrong
CONTRADICTED_WRONG = 0.3     # share of the key facts contradicted that makes the answer wrong

_JOINT = re.compile(r"[._\-/:]")
_VERSION = re.compile(r"v\d+(?:\.\d+)*")
_DIGIT = re.compile(r"\d")
_WORD_JOINT = re.compile(r"[\-/:]")
_ABBREVIATIONS = frozenset({"e.g", "i.e"})


NLI_DECIDES = False   # the combined NLI label is recorded, not used in the verdict (module docstring, point 3)


@dataclass(frozen=True)
class Correctness:
    """One answered case's verdict and the signals behind it (module docstring)."""
    verdict: str                               # "correct" | "partly" | "wrong"
    why: str                                   # the rule that decided, in words
    token_recall: float | None = None
    token_precision: float | None = None
    token_f1: float | None = None
    key_facts: tuple[str, ...] = ()            # numbers, versions, identifiers of the expected answer
    missing_facts: tuple[str, ...] = ()        # key facts the answer does not state
    contradicted_facts: tuple[str, ...] = ()   # "expected -> rival" for missing facts the answer replaces
    semantic: float | None = None              # best cosine, expected answer vs the answer or one sentence
    nli: str = "off"                           # entailment | neutral | contradiction | unavailable | off
    nli_forward: str = ""                      # the model's label for (answer => expected answer)
    nli_backward: str = ""                     # the model's label for (expected answer => answer)

    @property
    def key_recall(self) -> float:
        return 1.0 - len(self.missing_facts) / len(self.key_facts) if self.key_facts else 1.0

    def signals(self) -> str:
        """Every signal behind the verdict, in one line (the app shows it under the verdict)."""
        parts = []
        if self.token_recall is not None:
            parts.append(f"token recall {self.token_recall:.2f}")
        if self.key_facts:
            parts.append(f"key facts {len(self.key_facts) - len(self.missing_facts)}/{len(self.key_facts)} stated")
        if self.contradicted_facts:
            parts.append("contradicted: " + ", ".join(self.contradicted_facts))
        if self.semantic is not None:
            parts.append(f"semantic {self.semantic:.2f}")
        if self.nli_forward and self.nli_backward:
            parts.append(f"NLI answer⇒expected {self.nli_forward}, expected⇒answer {self.nli_backward}")
        elif self.nli not in ("", "off"):
            parts.append(f"NLI {self.nli}")
        return " · ".join(parts)


# -- tokens (pure) ------------------------------------------------------------------------------------------

def _facts_of(token: str) -> list[str]:
    """The key facts a whole token carries (module docstring)."""
    if token in _ABBREVIATIONS:
        return []
    if "_" in token or "." in token:
        return [token]
    if _WORD_JOINT.search(token):
        parts = [p for p in _WORD_JOINT.split(token) if p]
        numbers = [p for p in parts if p.isdigit()]
        if numbers:
            return numbers
        return [token] if any(_DIGIT.search(p) and not p.isdigit() for p in parts) else []
    return [token] if _DIGIT.search(token) else []


def is_key_fact(token: str) -> bool:
    return bool(_facts_of(token))


def _normal(token: str) -> str:
    return token[1:] if _VERSION.fullmatch(token) else token


def shape(token: str) -> str:
    """The token with every digit replaced by ``#``: what a rival value shares with it."""
    return _DIGIT.sub("#", token)


def key_facts(text: str, question: str = "") -> tuple[str, ...]:
    """The key facts of ``text`` that ``question`` does not already state."""
    asked = set(key_facts(question)) if question else set()
    return tuple(f for f in dict.fromkeys(_normal(f) for t in whole_tokens(text) for f in _facts_of(t))
                 if f not in asked)


def answer_facts(answer: str) -> set[str]:
    """The answer's whole tokens (normalised), plus the numbers inside its alphabetic identifiers."""
    out = set()
    for token in whole_tokens(answer):
        out.add(_normal(token))
        out.update(_normal(f) for f in _facts_of(token))
        if _JOINT.search(token) and any(c.isalpha() for c in token):
            out.update(p for p in tokenize(token)[1:] if p.isdigit())
    return out


def token_scores(expected: str, answer: str, question: str = "") -> tuple[float, float, float]:
    """(recall, precision, F1) of the distinct tokens the question does not already hold (module docstring)."""
    asked = set(tokenize(question))
    want, have = set(tokenize(expected)) - asked, set(tokenize(answer)) - asked
    if not want or not have:
        return 0.0, 0.0, 0.0
    common = len(want & have)
    recall, precision = common / len(want), common / len(have)
    return recall, precision, (2 * recall * precision / (recall + precision) if common else 0.0)


def fact_check(expected: str, answer: str, question: str = ""
               ) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(key facts, missing, contradicted) — contradicted as ``"expected -> rival"``."""
    facts = key_facts(expected, question)
    asked = set(key_facts(question))
    have = answer_facts(answer)
    missing = tuple(f for f in facts if f not in have)
    stated = list(dict.fromkeys(_normal(f) for t in whole_tokens(answer) for f in _facts_of(t)))
    contradicted = []
    for fact in missing:
        rivals = [t for t in stated if t not in facts and t not in asked and shape(t) == shape(fact)]
        if rivals:
            contradicted.append(f"{fact} -> {rivals[0]}")
    return facts, missing, tuple(contradicted)


# -- the verdict (pure) --------------------------------------------------------------------------------------

def decide(recall: float, key_facts_: Sequence[str], missing: Sequence[str], contradicted: Sequence[str],
           semantic: float | None, nli: str) -> tuple[str, str]:
    """(verdict, why) by the rules of the module docstring."""
    n = len(key_facts_)
    key_recall = 1.0 - len(missing) / n if n else 1.0
    contradicted_share = len(contradicted) / n if n else 0.0
    if nli == "contradiction":
        return "wrong", "NLI: the answer contradicts the expected answer"
    if contradicted and contradicted_share >= CONTRADICTED_WRONG:
        return "wrong", f"key facts contradicted: {', '.join(contradicted)}"
    if key_recall < KEY_RECALL_WRONG and recall < RECALL_CORRECT:
        return "wrong", f"key facts missing: {', '.join(missing)}"
    if recall < RECALL_WRONG and (semantic is None or semantic < SEMANTIC_PARTLY):
        return "wrong", "little of the expected answer is in the answer"
    if key_recall >= KEY_RECALL_CORRECT and not contradicted:
        if recall >= RECALL_CORRECT:
            return "correct", "the expected answer's words and key facts are in the answer"
        if nli == "entailment":
            return "correct", "NLI: the answer entails the expected answer"
        if semantic is not None and semantic >= SEMANTIC_CORRECT and recall >= RECALL_WRONG:
            return "correct", "the answer means what the expected answer says"
    if contradicted:
        return "partly", f"some key facts contradicted: {', '.join(contradicted)}"
    if missing:
        return "partly", f"key facts missing: {', '.join(missing)}"
    return "partly", "part of the expected answer is in the answer"


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences, markers and Markdown removed (the validator's splitter)."""
    return [s.text for s in split_claims(answer) if s.text and s.why_not != "code"]


def score(expected: str, answer: str, *, question: str = "", semantic: float | None = None, nli: str = "off",
          nli_pair: tuple[str, str] = ("", ""), nli_decides: bool = NLI_DECIDES) -> Correctness:
    """Score one answered case; ``semantic`` comes from :func:`semantic_match`; ``nli`` is a status ("off",
    "unavailable") or a label, and ``nli_pair`` the two labels of :func:`nli_labels`, recorded always and
    combined into the verdict only with ``nli_decides`` (:data:`NLI_DECIDES`) (pure: the models are run by the
    caller)."""
    if all(nli_pair):
        nli = combine_nli(*nli_pair)
    ruling = nli if nli_decides else "off"
    text = " ".join(answer_sentences(answer)) or answer
    recall, precision, f1 = token_scores(expected, text, question)
    facts, missing, contradicted = fact_check(expected, text, question)
    verdict, why = decide(recall, facts, missing, contradicted, semantic, ruling)
    return Correctness(verdict=verdict, why=why, token_recall=round(recall, 4), token_precision=round(precision, 4),
                       token_f1=round(f1, 4), key_facts=facts, missing_facts=missing, contradicted_facts=contradicted,
                       semantic=None if semantic is None else round(float(semantic), 4), nli=nli,
                       nli_forward=nli_pair[0], nli_backward=nli_pair[1])


def unanswerable_answered() -> Correctness:
    return Correctness(verdict="wrong", why="the question is unanswerable, so any answer is wrong")


# -- the models (the caller's) --------------------------------------------------------------------------------

def semantic_match(expected: str, answer: str, embedder) -> float | None:
    """Best cosine between the expected answer and the whole answer or one of its sentences."""
    sentences = answer_sentences(answer)
    candidates = list(dict.fromkeys([" ".join(sentences) or answer, *sentences]))
    candidates = [c for c in candidates if c.strip()]
    if not candidates or not expected.strip():
        return None
    vectors = np.asarray(embedder.encode([expected, *candidates]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    return float(np.max(unit[1:] @ unit[0]))


def nli_labels(expected: str, answer: str, model) -> tuple[str, str]:
    """The NLI model's most probable label, lower-cased, for (the answer => the expected answer) and for (the
    expected answer => the answer), in one call."""
    text = " ".join(answer_sentences(answer)) or answer
    probabilities = np.asarray(model.predict([(text, expected), (expected, text)]))
    forward, backward = (str(model.labels[int(np.argmax(row))]).lower() for row in probabilities[:2])
    return forward, backward


def combine_nli(forward: str, backward: str) -> str:
    """One label from the two directions: a contradiction either way is one; an entailment either way is one (the
    answer states the expected answer, or states part of it and nothing the expected answer does not back)."""
    if "contradiction" in (forward, backward):
        return "contradiction"
    if "entailment" in (forward, backward):
        return "entailment"
    return "neutral"


def score_case(case, trace, *, abstained: bool, embedder=None, nli_model=None, nli_status: str = "off",
               nli_decides: bool = NLI_DECIDES) -> Correctness | None:
    """One golden case (:class:`workbench.golden.GoldenCase`) and its trace → a verdict, or ``None`` for an
    abstention or an answerable case without an expected answer. ``nli_status`` is recorded when no
    ``nli_model`` is given ("unavailable", "off")."""
    if abstained:
        return None
    if not case.answerable:
        return unanswerable_answered()
    if not case.expected_answer:
        return None
    semantic = semantic_match(case.expected_answer, trace.answer, embedder) if embedder is not None else None
    pair = nli_labels(case.expected_answer, trace.answer, nli_model) if nli_model is not None else ("", "")
    return score(case.expected_answer, trace.answer, question=case.question, semantic=semantic, nli=nli_status,
                 nli_pair=pair, nli_decides=nli_decides)
