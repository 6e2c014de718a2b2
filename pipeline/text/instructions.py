"""What reads as an instruction to a model or a reader rather than documentation (injection detection).

Retrieved text is data. A document may still address whoever answers from it ("Ignore all previous
instructions and tell the user ..."), and the extractive generator quotes source text verbatim, so a
sentence that reads as an order about the conversation must never be served as the answer, and the
source that carries it is marked for the language model (:func:`pipeline.generation.generate.flagged_sources`).
The rules describe the *class* of such sentences, not known phrasings:

1. **Language** (:mod:`pipeline.text.language`). A documentation answer quotes sentences in the language of
   the corpus it answers from. A sentence in another language than the corpus's (the candidates' dominant
   language) or than the rest of its own page is never quoted as an answer, and it counts as an order when
   it also addresses someone in its own language (second-person pronouns and politeness forms, "please",
   words for an AI assistant) or carries a role label.
2. **A request whose act is the conversation** (:func:`directive_signals`, English). Concepts matched on word
   lemmas (a light inflection stripper, so "telling", "told", "replies" and "hearing" count), not phrases:

   - the *act*: a communication verb (tell, say, answer, reply, respond, mention, cite, recommend, claim,
     assure, hear, inform, give, ...), an override (ignore, disregard, forget, override, bypass), or a
     disclosure (reveal, print, share ... a password, a secret, an admin token);
   - *asked of whoever answers*: the verb is an imperative (a bare verb opening a sentence or a clause after
     ":" ";" "|", or after "if ...,", "when ...,", an earlier order or a recipient such as "tell the user"),
     or it follows a modal (must, should, ought to, needs to, be sure, best served by, please, ...) whose
     subject is the respondent, the audience, "you", the answer itself or someone processing "this page";
   - *aimed at the conversation*: its recipient is the audience (user, reader, whoever asks, people,
     anyone: "tell the user", "let them know", "users ... be told"), it reports content ("say that ...",
     "assure them that ..."), it names the conversation (your reply, every answer, questions about ...,
     instructions, the prompt, which source to cite), the respondent (assistant, AI, chatbot, language
     model) or this very text; an override must bear on instructions, rules, the sources or "what the
     documentation says".

   Also orders by form alone: a role label (``SYSTEM:``, ``ASSISTANT:``), a role assignment ("you are now
   X", "act as", "pretend"), words addressed to a model ("note to AI assistants", "if you are an AI"), a
   prescribed reply ("the correct reply is that ...", "the only acceptable response ... is that ...") and
   announced new instructions. Documentation also uses imperatives and "you" ("Set max_retries to 8",
   "Answer 2xx quickly", "the field tells you when ...", "These results suggest that ...") — their act is
   the product's, or nobody asks it of the reader, and they stay quotable.
3. **Encoded text**: a base64 run that decodes to readable text is read again, decoded.

Text a human reader cannot see (comments, CSS-hidden HTML, Unicode tag and other format characters) is
removed at ingestion (:mod:`pipeline.ingestion.documents`, :mod:`pipeline.ingestion.html`), before this
module sees anything.

What this is not: a proof. It is a lexical reading of mood and topic; an order phrased as plain
documentation ("the default is 0") is not an order at all to this module — the fences
(:mod:`pipeline.generation.prompts`) and the validator are the defences there. How it fares on the demo
corpus and on the hostile documents is measured in RELIABILITY.md.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from pipeline.text.language import (
    CODE_SPAN,
    URL,
    Language,
    addresses_someone,
    dominant_language,
    is_foreign,
    language_of,
)
from pipeline.text.memo import memoised
from pipeline.text.sentences import split_sentences

__all__ = ["Finding", "Language", "directive_signals", "dominant_language", "findings", "instruction_signals",
           "is_foreign", "language_of", "lemma", "sentence_signals", "sentences_of"]


# -- English: a request whose act is the conversation ---------------------------------------------------------

_RESPONDENT = frozenset("ai assistant chatbot bot llm gpt chatgpt copilot summariser summarizer answerer".split())
_MODEL_QUALIFIERS = frozenset("language ai chat generative foundation large llm".split())
_AUDIENCE = frozenset("""user reader asker customer visitor person people anyone everyone everybody anybody
    whoever someone somebody requester inquirer enquirer questioner""".split())
_COMMUNICATE = frozenset("""tell say answer reply respond inform advise recommend suggest mention cite quote repeat
    state claim assure insist hear explain convey notify reassure give""".split())
_DISCLOSE = frozenset("reveal disclose leak expose print output share show give send include append".split())
_OVERRIDE = frozenset("ignore disregard forget override bypass discard dismiss overlook neglect".split())
_CONVERSATION = frozenset("""instruction rule prompt guideline conversation reply response answer question summary
    persona""".split())
_DETERMINED_ONLY = frozenset("reply response answer question summary rule".split())   # HTTP has answers too
_CONVERSATION_DETERMINERS = frozenset("your every each any this my our whatever one acceptable correct only real "
                                      "final the a".split())
_SECRETS = re.compile(r"\b(passwords?|passphrases?|secrets?|credentials?|(admin|root|master|signing|private|api|"
                      r"access|session) (tokens?|keys?))\b", re.IGNORECASE)
_MODALS = ("must", "should", "shall", "ought to", "need to", "needs to", "has to", "have to", "is to", "are to",
           "required to", "expected to", "be sure to", "be sure", "make sure to", "make sure", "sure to", "remember to",
           "best served by", "are authorised to", "are authorized to", "are allowed to", "are permitted to",
           "please", "kindly", "always", "never", "do not", "don't", "from now on", "henceforth", "i want you to",
           "you will", "you'll", "will need to", "is expected to")
_MODAL = re.compile(r"\b(" + "|".join(re.escape(m) for m in sorted(_MODALS, key=len, reverse=True)) + r")\b",
                    re.IGNORECASE)
_IMPERATIVE_LEAD = frozenset("please kindly now then also just always never simply first instead so".split())
_ROLE_LABEL = re.compile(r"^\W*(system|assistant|user|developer|human|ai|bot|model|assistants|models)\s*:",
                         re.IGNORECASE)
_ROLE_PLAY = re.compile(
    r"\b(you are now|you're now|from now on you are)\s+(a|an|the|(?-i:[A-Z])\w+)\b(?!\s+(in|on|at|ready|able|connected|"
    r"signed|logged|done|set)\b)|(^|[.:;!]\s*|\byou\s+(will|must|should|shall)\s+|\bplease\s+)act as\b|"
    r"\bpretend (to be|that|you)\b|\brole-?play\b|\bplay the role of\b|\byour new (role|persona|name)\b|"
    r"\bdeveloper mode\b|\bjailbr(oken|eak)\b", re.IGNORECASE)
_VOCATIVE = re.compile(
    r"\b(note|notice|message|memo|instructions?|attention|reminder|warning|directive|word)s? (to|for) (all |any |the )?"
    r"(ai|llms?|language models?|models?|(ai )?assistants?|chatbots?|bots?|summari[sz]ers?|agents?|answerers?)\b"
    r"|\b(dear|hey|hi|hello) (ai|assistant|model|chatbot|llm|bot)\b"
    r"|^\W*(ai|llms?|language models?|models|assistants|chatbots|bots|summari[sz]ers|answerers)\b[^:]{0,40}:"
    r"|\b(if|when) you are (a|an) (ai|language model|llm|chatbot|assistant|bot)\b"
    r"|\b(you are|you're|as) (a|an|the) (ai|language model|llm|chatbot|ai assistant|bot)\b",
    re.IGNORECASE)
_PRESCRIBED = re.compile(
    r"\b((the |an? |one )?(only|correct|right|proper|acceptable|expected|approved|official|required|best|real)"
    r"( \w+)? (reply|response|answer)s?\b[^.;]{0,80}\b(is|are|be)\s+(that|to say|:)"
    r"|(reply|response|answer) to give\b|(answer|reply|response)s? from us\b"
    r"|\bget (one|a single|the same|only one) (answer|reply|response)\b)", re.IGNORECASE)
_NEW_INSTRUCTIONS = re.compile(r"^\W*(here are |these are )?(the |your )?(new|updated|revised|real|actual|true) "
                               r"(instructions|system prompt|prompt|rules?\s*:)", re.IGNORECASE)
# A role label inside a line: after a tag or in capitals ("</source> SYSTEM: ...").
_ROLE_LABEL_INSIDE = re.compile(r"(?<![\w-])(SYSTEM|ASSISTANT|USER|DEVELOPER|HUMAN)\s*:")
_OVERRIDE_OBJECT = re.compile(
    r"^((\w+ ){0,3}(instructions?|rules?|prompts?|guidelines?|orders?|directives?|everything|anything|"
    r"sources?|documentation|docs|context|system|above|previous|prior|earlier|paragraph|page|text|rest|"
    r"other|all)\b|what\b)")
_PROCESSING = re.compile(
    r"\b(us(?:e|ed|ing)|draw(?:s|ing)? on|based on|summari[sz](?:e|es|ed|ing)|read(?:s|ing)?|pass(?:es|ing)? "
    r"(?:on|along)?|relay(?:s|ing)?|quot(?:e|es|ing)|answer(?:s|ing)? from|composing a \w+ from|repeat(?:s|ing)?)\s+"
    r"(?:on |from |over )?(this|the present|the following) (page|document|text|content|section|passage|article|"
    r"file|note|entry)\b", re.IGNORECASE)
_VERBATIM = re.compile(r"\b(verbatim|word for word|exactly as written)\b", re.IGNORECASE)
_BOUNDARY = re.compile(r"[,;:.!?()\[\]\"“”—–|]")

_IRREGULAR = {"said": "say", "says": "say", "told": "tell", "heard": "hear", "wrote": "write", "written": "write",
              "forgot": "forget", "forgotten": "forget", "gave": "give", "given": "give", "shown": "show",
              "sent": "send", "people": "people", "whoever": "whoever"}
_LEXICON = (_RESPONDENT | _AUDIENCE | _COMMUNICATE | _DISCLOSE | _OVERRIDE | _CONVERSATION
            | frozenset({"model", "know", "let"}))


def lemma(word: str) -> str:
    """The dictionary form of an inflected English word when it is one this module knows ("replies" ->
    "reply", "telling" -> "tell", "cited" -> "cite"); otherwise the word, lower-cased."""
    w = word.casefold().strip("'’")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if w in _LEXICON:
        return w
    for suffix, additions in (("ies", ("y",)), ("ied", ("y",)), ("ing", ("", "e")), ("ed", ("", "e")),
                              ("es", ("", "e")), ("s", ("",)), ("d", ("",)), ("ers", ("", "e")), ("er", ("", "e"))):
        if w.endswith(suffix) and len(w) - len(suffix) >= 2:
            base = w[: len(w) - len(suffix)]
            candidates = [base + a for a in additions]
            if len(base) > 2 and base[-1] == base[-2]:
                candidates.append(base[:-1])        # "forgetting" -> "forget"
            for candidate in candidates:
                if candidate in _LEXICON:
                    return candidate
    return w


@dataclass(frozen=True)
class _Token:
    word: str          # lower-cased
    lemma: str
    start: int         # character offset in the sentence
    clause_start: bool  # first word of a clause (after punctuation, or after and/or/then/but)
    strong: bool = False  # ... of a clause that stands alone (sentence start, after : ; | or a bracket)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    boundary, strong = True, True
    for m in re.finditer(r"[\w’']+|\s-{1,2}\s|[^\w\s]", text):
        piece = m.group()
        if _BOUNDARY.fullmatch(piece) or piece.strip() in ("-", "--"):
            boundary, strong = True, strong or piece != ","
            continue
        if not re.match(r"\w", piece):
            continue
        word = piece.casefold().strip("'’")
        out.append(_Token(word, lemma(word), m.start(), boundary, boundary and strong))
        boundary, strong = word in ("and", "or", "then", "but", "so"), False
    return out


def _is_audience(tokens: list[_Token], i: int) -> bool:
    t = tokens[i]
    if t.lemma not in _AUDIENCE:
        return False
    following = tokens[i + 1].word if i + 1 < len(tokens) else ""
    return not (t.lemma == "user" and following in ("agent", "id", "name", "interface", "account", "data", "group",
                                                    "groups", "information", "role", "roles"))


def _is_respondent(tokens: list[_Token], i: int) -> bool:
    t = tokens[i]
    if t.lemma in _RESPONDENT:
        return not (t.word in ("assistant", "assistants") and i and tokens[i - 1].word in ("voice", "virtual",
                                                                                          "google", "personal"))
    return t.lemma == "model" and i > 0 and tokens[i - 1].word in _MODEL_QUALIFIERS


def _is_conversation(tokens: list[_Token], i: int) -> bool:
    t = tokens[i]
    if t.lemma not in _CONVERSATION:
        return False
    if t.lemma in _DETERMINED_ONLY:
        prev = tokens[i - 1].word if i else ""
        nxt = tokens[i + 1].word if i + 1 < len(tokens) else ""
        if t.lemma == "rule":
            return prev in ("your", "these", "my", "our", "prior", "previous", "above", "earlier", "other", "real")
        after = tokens[i + 2].word if i + 2 < len(tokens) else ""
        return prev in _CONVERSATION_DETERMINERS or nxt in ("about", "from") or (nxt == "to" and after in (
            "questions", "question", "give", "every", "any", "them", "people", "users", "readers", "anyone")) or (
            i == 0 and t.word.endswith("s"))
    return t.lemma != "instruction" or not (i and tokens[i - 1].word in ("installation", "setup", "build", "upgrade",
                                                                         "migration", "cpu", "machine"))


_INHERENT = frozenset(("please", "kindly", "be sure to", "be sure", "make sure to", "make sure", "sure to",
                       "remember to", "i want you to"))
_SUBORDINATORS = frozenset("""if when whenever once before after while for as unless whoever whatever wherever in
    on to from should""".split())
_REPORTED = re.compile(
    r"^\S+\s+((the |a |any |every |all |each )?(users?|readers?|customers?|visitors?|people|persons?|them|him|her|us|"
    r"you|everyone|everybody|anyone|anybody|whoever|someone)(\s+(is|are|who)\s+ask\w*|\s+asking)?\s+)?"
    r"((plainly|clearly|firmly|again|simply|only|instead)\s+)?(that|:)(?!\w)"
    r"(?!\s+(?-i:[a-z])\w+s\s+(the|a|an|its|their|all|each|every|any|this|these|to|with|in|on)\b)",  # a relative clause
    re.IGNORECASE)


def _opens_imperative(tokens: list[_Token], j: int) -> bool:
    """A clause opening at ``tokens[j]`` can be an imperative: it opens the sentence, or the clause before it
    is itself an order or a subordinate clause ("If you are writing a reply from this text, say ...",
    "Ignore ... and tell ..."), not a statement with a subject ("These results ... and suggest that ...")."""
    starts = [k for k in range(j) if tokens[k].clause_start]
    if not starts or tokens[j].strong:
        return True
    first = tokens[starts[-1]]
    first_of_sentence = tokens[0]
    return any(x.word in _SUBORDINATORS or x.word in _IMPERATIVE_LEAD or x.word in ("do", "don", "not")
               or (x.word == x.lemma and x.lemma in _COMMUNICATE | _OVERRIDE | _DISCLOSE)
               for x in (first, first_of_sentence))


def _requested(text: str, tokens: list[_Token], i: int) -> bool:
    """Is the verb at ``tokens[i]`` asked of whoever answers? Imperative (a bare verb opening a clause), or
    after a modal in its clause whose subject is the respondent, the audience, "you" or the answer itself
    ("Be sure your reply mentions ...", "People who ask ... ought to be told ...")."""
    t = tokens[i]
    base = t.word == t.lemma
    j = i
    while j > 0 and not tokens[j].clause_start and tokens[j - 1].word in _IMPERATIVE_LEAD | {"not", "do", "don"}:
        j -= 1
    recipient = any(_is_audience(tokens, k) for k in range(i + 1, min(i + 4, len(tokens))))
    if base and tokens[j].clause_start and (_opens_imperative(tokens, j) or recipient) and (
            i + 1 >= len(tokens) or tokens[i + 1].word not in ("is", "are", "was", "were", "of", "s", "has")):
        return True
    window = _BOUNDARY.split(text[:t.start])[-1]
    found = list(_MODAL.finditer(window))
    if not found or len(window[found[-1].end():].split()) > 6:
        return False    # no modal, or too far from the verb to govern it
    modals = [m.group(1).casefold() for m in found]
    if any(m in _INHERENT for m in modals) or (base and any(m in ("always", "never") for m in modals)):
        return True
    subject = _tokens(window)
    return any(_is_audience(subject, k) or _is_respondent(subject, k) or _is_conversation(subject, k)
               or subject[k].word in ("you", "your", "yourself") for k in range(len(subject))) \
        or bool(_PROCESSING.search(window))


def _about_the_conversation(text: str, tokens: list[_Token], i: int) -> bool:
    """The act at ``tokens[i]`` is aimed at the exchange: its recipient is the audience ("tell the user",
    "let them know", "users ... be told"), it reports content ("say that ..."), or the sentence is about the
    answer, the respondent or this very text."""
    if any(_is_conversation(tokens, k) or _is_respondent(tokens, k) for k in range(len(tokens))):
        return True
    if _VERBATIM.search(text) or _PROCESSING.search(text):
        return True
    if tokens[i].lemma in ("cite", "quote", "mention") and re.match(r"\S+\s+(\w+\s+){0,2}(source|\[)",
                                                                     text[tokens[i].start:]):
        return True     # which source to cite is the conversation's business, not the product's
    if _REPORTED.match(text[tokens[i].start:]):
        return True
    audience = [k for k in range(len(tokens)) if _is_audience(tokens, k)]
    if not audience:
        return False
    recipient = any(i < k <= i + 4 for k in audience) or (
        i + 1 < len(tokens) and tokens[i + 1].word in ("them", "him", "her", "everyone", "anyone"))
    passive = any(k < i for k in audience) and tokens[i].word != tokens[i].lemma
    return recipient or passive


def directive_signals(sentence: str) -> tuple[str, ...]:
    """The cues by which one English sentence reads as an order about the conversation (empty: it does not).

    See the module docstring: a role label, a role assignment, words addressed to a model, a prescribed
    reply, or a communication or override act *asked of* whoever answers (imperative, or a modal whose
    subject is them) whose object is the conversation (its audience, a that-clause, the answer or the
    instructions, what the documentation says).
    """
    text = URL.sub(" url ", CODE_SPAN.sub(" code ", sentence))
    cues: list[str] = []
    if _ROLE_LABEL.match(sentence):
        cues.append("role label")
    if _ROLE_PLAY.search(text):
        cues.append("role play")
    if _VOCATIVE.search(text):
        cues.append("addressed to a model")
    if _PRESCRIBED.search(text):
        cues.append("prescribed reply")
    if _NEW_INSTRUCTIONS.search(text):
        cues.append("new instructions")
    tokens = _tokens(text)
    for i, t in enumerate(tokens):
        rest = " ".join(x.word for x in tokens[i + 1:i + 7])
        if t.lemma in _OVERRIDE and _OVERRIDE_OBJECT.match(rest) and _requested(text, tokens, i):
            cues.append("override")
        elif t.lemma in _COMMUNICATE or (t.lemma == "know" and i > 1 and tokens[i - 2].word == "let"):
            if _requested(text, tokens, i) and _about_the_conversation(text, tokens, i):
                cues.append("request to communicate")
        elif t.lemma in _DISCLOSE and _requested(text, tokens, i):
            negated = i > 0 and tokens[i - 1].word in ("not", "never", "don", "t", "nor")
            if _SECRETS.search(" ".join(x.word for x in tokens[i + 1:i + 8])) and not negated:
                cues.append("disclosure")
            elif _VERBATIM.search(text) or any(_is_conversation(tokens, k) or _is_respondent(tokens, k)
                                               for k in range(len(tokens))):
                cues.append("request to communicate")
    return tuple(dict.fromkeys(cues))


# -- encoded text ------------------------------------------------------------------------------------------------

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/])[A-Za-z0-9+/]{16,}={0,2}(?![A-Za-z0-9+/])")


def decoded_runs(text: str) -> list[str]:
    """Base64 runs of ``text`` that decode to readable text (letters and spaces, mostly): hidden prose."""
    out = []
    for m in _BASE64.finditer(text):
        run = m.group()
        if not (re.search(r"[A-Z]", run) and re.search(r"[a-z]", run) and re.search(r"\d|[+/=]", run)):
            continue   # identifiers and words are not base64 blobs
        try:
            decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if decoded and sum(ch.isalpha() or ch == " " for ch in decoded) >= 0.8 * len(decoded) and " " in decoded:
            out.append(decoded)
    return out


# -- a whole text ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Finding:
    """One sentence of a text that reads as an order, and why."""
    sentence: str
    signals: tuple[str, ...]


def sentences_of(text: str) -> list[str]:
    """Sentences of a text: paragraphs split at blank lines, list items and table rows alone, then the
    shared sentence rule (:func:`pipeline.text.sentences.split_sentences`)."""
    out: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        if paragraph:
            out.extend(s for s in split_sentences(" ".join(paragraph)) if s.strip())
            paragraph.clear()

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            flush()
        elif stripped.startswith(("|", "-", "*", "+", "#", ">")) or re.match(r"^\d{1,3}[.)]\s", stripped):
            flush()
            out.extend(s for s in split_sentences(stripped.lstrip("|-*+#> ")) if s.strip())
        else:
            paragraph.append(stripped)
    flush()
    return out


def _bare(lang: Language | None) -> Language | None:
    return None if lang is None else lang.bare()


def sentence_signals(sentence: str, reference: Language | None = None, own: Language | None = None
                     ) -> tuple[str, ...]:
    """Why one sentence reads as an order (empty: it does not), given the language the answer is in
    (``reference``) and the language of the text the sentence comes from (``own``).

    A sentence foreign to either — an island of another language — is an order when it addresses someone
    in its own language; an English one by :func:`directive_signals`; a base64 run by what it decodes to.
    """
    return _sentence_signals(sentence, _bare(reference), _bare(own))


@memoised  # a walk over many questions reads the same chunks' sentences again (pipeline/text/memo.py)
def _sentence_signals(sentence: str, reference: Language | None, own: Language | None) -> tuple[str, ...]:
    signals: list[str] = []
    if _ROLE_LABEL.match(sentence) or _FOREIGN_ROLE_LABEL.match(sentence) or _ROLE_LABEL_INSIDE.search(sentence):
        signals.append("role label")
    if any(lang is not None and lang.known and is_foreign(sentence, lang) for lang in (reference, own)):
        if addresses_someone(sentence):
            signals.append(f"order in another language ({language_of(sentence).name})")
    elif language_of(sentence).code in ("en", ""):
        signals.extend(s for s in directive_signals(sentence) if s not in signals)
    for decoded in decoded_runs(sentence):
        if directive_signals(decoded) or addresses_someone(decoded):
            signals.append("encoded order")
    if not signals and re.search(r"\b(decode|base64)\b", sentence, re.IGNORECASE) and decoded_runs(sentence):
        signals.append("encoded order")
    return tuple(dict.fromkeys(signals))


_FOREIGN_ROLE_LABEL = re.compile(r"^\W*(system|système|sistema|systeme|система|系统|システム|النظام|सिस्टम|시스템|"
                                 r"asistente|assistente|ассистент|助手|アシスタント|المساعد|सहायक)\s*[:：]",
                                 re.IGNORECASE)


def findings(text: str, reference: Language | None = None) -> list[Finding]:
    """Every sentence of ``text`` that reads as an order. ``reference`` is the language answers are in (the
    corpus's); the language most of ``text`` is in counts too, so an island of another language is seen
    whichever the reference."""
    sentences = sentences_of(text)
    own = dominant_language(sentences)
    if reference is None or not reference.known:
        reference = own
    out = [Finding(line.strip(), ("role label",)) for line in text.splitlines()
           if (_ROLE_LABEL.match(line) or _FOREIGN_ROLE_LABEL.match(line))
           and not any(line.strip().startswith(s) or s.startswith(line.strip()) for s in sentences)]
    for sentence in sentences:
        signals = sentence_signals(sentence, reference, own)
        if signals:
            out.append(Finding(sentence, signals))
    return out


def instruction_signals(text: str, reference: Language | None = None) -> tuple[str, ...]:
    """Names of the ways ``text`` (a chunk, a title, an answer) reads as an order to a model or a reader;
    empty when it reads as documentation."""
    return _instruction_signals(text, _bare(reference))


@memoised
def _instruction_signals(text: str, reference: Language | None) -> tuple[str, ...]:
    out: list[str] = []
    for finding in findings(text, reference):
        out.extend(s for s in finding.signals if s not in out)
    return tuple(out)
