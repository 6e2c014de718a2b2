"""Calibration probes written from a corpus itself (:mod:`workbench.calibrate` searches them and estimates the gate's
operating point): pseudo-questions with a known source chunk, and four kinds of unanswerable probe. Pure: a
:class:`Corpus` and a seed in, probes out; the same corpus and seed give the same probes.

- **Pseudo-questions** (answerable): a live chunk is drawn, one of its prose sentences chosen, and a contiguous run
  of its content words left out as the "answer" (a cloze question); a wh-word opens what remains, so the question
  shares most, not all, of its sentence's words and never quotes the answer.
- ``off-corpus``: general questions from a built-in pool on everyday topics (:data:`OFF_CORPUS`); one whose content
  words meet in a single chunk of this corpus is dropped.
- ``swapped-out``: a pseudo-question whose critical term (identifier, number, version, name; else its rarest word)
  is replaced by one the corpus never uses.
- ``swapped-in``: the same term replaced by a similarly rare word of the same shape from another document (dropped
  when some chunk holds all the probe's words).
- ``swapped-near``: the same term replaced by a word of the same shape from the source chunk itself, kept only when
  no sentence of the chunk holds all the probe's words (the adversarial kind, as SQuAD 2.0's unanswerable questions
  were written; Rajpurkar, Jia & Liang, ACL 2018).
- ``answer-removed``: a pseudo-question asked unchanged, searched with its source chunk and every chunk holding all
  of its words and its left-out answer taken out of the candidates (:attr:`Probe.removed`): the on-topic question
  whose answer this corpus does not hold, while its neighbours, same document and same vocabulary, stay. A
  paraphrase of the answer in other words elsewhere would make it answerable; the word test cannot see that.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeline.gate.signals import critical_terms
from pipeline.retrieval.bm25 import idf as bm25_idf
from pipeline.text.sentences import FENCE, HEADING, LIST_ITEM, TABLE_RULE, split_sentences
from pipeline.text.tokenize import tokenize

PSEUDO = "pseudo"
UNANSWERABLE = ("off-corpus", "swapped-out", "swapped-in", "answer-removed", "swapped-near")
KINDS = (PSEUDO, *UNANSWERABLE)
# probes of each unanswerable kind per pseudo-question
SHARES: Mapping[str, float] = {"off-corpus": 0.5, "swapped-out": 0.25, "swapped-in": 0.25, "answer-removed": 0.25,
                               "swapped-near": 0.25}
DEFAULT_PROBES = 200   # pseudo-questions
MIN_CONTENT, MAX_WORDS = 6, 40   # a sentence worth a question: enough content words, not a run-on list
MIN_KEPT, MAX_KEPT = 3, 6        # content words a pseudo-question keeps
DROP_SHARE = 0.3                 # the share of content words left out as the answer
COVER_LIMIT = 0.8                # an off-corpus question whose words' IDF mass a chunk covers this much is dropped

_WORD = re.compile(r"[0-9A-Za-z_]+(?:[.\-/:'’][0-9A-Za-z_]+)*")
# a link keeps its text; code ticks and emphasis markers go, but never an underscore inside an identifier
_MARKUP = re.compile(r"\[([^\]]*)\]\([^)]*\)|`|\*{1,3}|(?<![0-9A-Za-z])_{1,2}(?=\S)|(?<=\S)_{1,2}(?![0-9A-Za-z])")
_DIGIT = re.compile(r"\d")

OFF_CORPUS = tuple(q.strip() for q in """
How long should I boil an egg for a runny yolk?
What is the best way to keep basil fresh in the kitchen?
Which wine goes well with grilled salmon?
How do I stop my bread dough from sticking to the counter?
Why do onions make people cry when they are chopped?
How many calories are in a medium banana?
What temperature should a roast chicken reach inside?
How can I get rid of aphids on my rose bushes?
When should tomato seedlings be moved outdoors?
How often should a cactus be watered in winter?
Which trees grow fastest in a small garden?
How do I teach my dog to stop pulling on the leash?
What should a goldfish tank contain?
Why do cats knead blankets with their paws?
Who won the first football World Cup?
How many players are on a cricket team?
What is the offside rule in ice hockey?
How long is an Olympic marathon?
Which tennis players have won the most Wimbledon titles?
How far is the Moon from the Earth?
Why is the sky blue during the day?
What causes the northern lights?
How many bones are in the adult human body?
What is the boiling point of water at high altitude?
Why do leaves change colour in autumn?
How do bees make honey?
Which is the longest river in South America?
What is the capital city of Australia?
How tall is Mount Kilimanjaro?
Which countries border Switzerland?
When did the Roman Empire fall in the west?
Who painted the ceiling of the Sistine Chapel?
What started the French Revolution?
Who wrote the novel Pride and Prejudice?
How many symphonies did Beethoven compose?
What is the difference between a violin and a viola?
How do I tune a six-string acoustic guitar?
Which key signature has three sharps?
How do I fix a flat tyre on a road bicycle?
How often should a car's engine oil be changed?
Why does my car battery drain overnight?
How do I remove rust from garden tools?
What is the best way to paint a bathroom ceiling?
How do I unclog a kitchen sink without chemicals?
How can I stop a door from squeaking?
What is the difference between a Roth IRA and a traditional IRA?
How is compound interest calculated on a savings account?
Should I pay off my mortgage early or invest?
How do I file a tax return as a freelancer?
What is a good resting heart rate for an adult?
How much sleep does a teenager need?
What are the symptoms of a vitamin D deficiency?
How do I treat a mild sunburn at home?
Which stretches help with lower back pain?
How do I get a visa to visit Japan as a tourist?
What is the cheapest way to travel from Paris to Rome?
Which vaccinations are recommended before a trip to Kenya?
How early should I arrive at the airport for an international flight?
How do I write a cover letter for a teaching job?
What should I wear to a job interview at a bank?
How do I ask for a raise politely?
What is the plot of the opera Carmen?
Who directed the film Casablanca?
How many seasons does the show Friends have?
What is the rule for the past tense of irregular Spanish verbs?
How do you say thank you in Portuguese?
What does the idiom break a leg mean?
How do I knit a scarf for beginners?
Which glue works best for broken ceramic mugs?
How do I press flowers in a book?
How long does it take to learn to swim as an adult?
What is the best age to start piano lessons?
How do I plan a birthday party for a five-year-old?
How many people can a medium pizza feed?
What is the difference between baking soda and baking powder?
How do I make pancakes fluffier?
Which spices go into a traditional garam masala?
How long can cooked rice stay in the fridge?
What is the best way to store fresh strawberries?
How do I keep a Christmas tree from dropping needles?
When is the best time to prune apple trees?
How deep should tulip bulbs be planted?
Why are my hydrangea flowers turning pink?
How much should an adult cat eat each day?
How do I introduce a new rabbit to an older one?
Why does my parrot pull out its feathers?
Who holds the record for the fastest 100 metres sprint?
How is a tie-break scored in volleyball?
What does a caddie do during a golf tournament?
How many laps are in a Formula One race at Monaco?
What is the largest desert in the world?
Why does the Moon have phases?
How are diamonds formed deep underground?
What is the speed of sound in air?
How do vaccines train the immune system?
Why do whales sing?
Which mountain range separates Europe from Asia?
What language is spoken in Brazil?
How many time zones does Russia span?
Who built the pyramids of Giza?
When was the printing press invented?
What caused the sinking of the Titanic?
Who was the first woman to win a Nobel Prize?
Which instrument did Miles Davis play?
How do I read sheet music for the drums?
What is the difference between jazz and blues?
How do I bleed the brakes on a motorcycle?
What tyre pressure is right for a family car?
How do I replace a broken window pane?
Which paint finish is best for a kitchen wall?
How do I fix a running toilet?
How much should I save for retirement each month?
What is a credit score and how is it calculated?
How do index funds differ from mutual funds?
How many steps a day should I walk to stay healthy?
What are the early signs of dehydration?
How do I get rid of hiccups quickly?
Which countries can I visit with a Schengen visa?
What should I pack for a week of hiking in the Alps?
How do I avoid jet lag on a long flight?
How do I prepare for a marathon in six months?
What are good questions to ask at the end of an interview?
Who wrote the Harry Potter books?
What is the story of the ballet Swan Lake?
How do you conjugate the French verb etre?
What does the word schadenfreude mean?
How do I crochet a granny square?
How do I remove candle wax from a tablecloth?
What games are fun for a children's party?
""".strip().splitlines())

REPLACEMENT_WORDS = tuple("""
glacier saxophone mortgage espresso turbine sonnet vaccine tariff lighthouse avalanche cathedral harpsichord
volcano orchard falcon meringue trombone tapestry pottery vineyard sailboat marathon compost mosaic telescope
dinosaur origami quilt lagoon tornado walrus pagoda bagpipe sundial croissant igloo kayak lantern monsoon
nebula orchid parsnip quartz raccoon sequoia tundra ukulele velvet waffle yacht zeppelin accordion bonsai
chandelier dumpling emerald fjord gondola hammock iceberg jasmine kiln llama marzipan nutmeg oyster pelican
rhubarb saffron tambourine umbrella violin windmill xylophone yodel zucchini anchovy blizzard canoe dolphin
eclipse flamingo geyser hurricane ivory juniper koala lobster meteor narwhal octopus peacock quokka reindeer
scarecrow trampoline unicorn volleyball wombat yoghurt bamboo cobblestone dandelion eucalyptus firefly gazebo
""".split())

REPLACEMENT_NAMES = tuple("""
Lisbon Okonkwo Valparaiso Tashkent Abernathy Kilimanjaro Brisbane Marrakesh Oaxaca Reykjavik Zanzibar Yamamoto
Castellano Ingrid Leopold Svetlana Thaddeus Winnipeg Montevideo Kathmandu Novosibirsk Galway Tromso Dubrovnik
Esperanza Fitzgerald Gwendolyn Horatio Isadora Jebediah Krakow Ljubljana Mombasa Nairobi Ottoline Perpetua
Quetzal Rosalind Salamanca Tobago Ulrich Vasquez Wilhelmina Xiomara Yolanda Zebulon
""".split())

# words the tokenizer keeps that say nothing about a topic: never the term a perturbation swaps
FUNCTION_WORDS = frozenset("""
about above across after again against all almost along already also although always among another any anyone
anything around because before behind being below beside besides between beyond both cannot done down during
each either else enough even ever every few first further here however just last later least less many may might
more most much must near neither never next none nor now often once only onto other otherwise over own per
perhaps rather same should shall since some still then thus till together toward towards under unless until upon
very via whether while within without yet
""".split())
_NUMBER = re.compile(r"\d+")


@dataclass(frozen=True)
class Probe:
    """One calibration query: a pseudo-question (answerable from ``chunk_id``) or an unanswerable probe."""
    kind: str
    query: str
    chunk_id: str = ""    # the chunk the question was written from ("" for off-corpus)
    changed: str = ""     # what a perturbed probe replaced ("v3.1 -> v7.4"); the answer left out of a pseudo-question
    removed: tuple[str, ...] = ()  # answer-removed: the chunks left out of the candidates when it is searched

    @property
    def answerable(self) -> bool:
        return self.kind == PSEUDO


@dataclass(frozen=True)
class Corpus:
    """What probe writing reads from a store: live chunks, each chunk's term set, document frequencies."""
    chunks: tuple[tuple[str, str, str], ...]       # (chunk id, doc id, text), live chunks only
    postings: Mapping[str, frozenset[str]]          # term -> the chunks that contain it
    size: int                                       # chunks

    @staticmethod
    def build(chunks: Sequence[tuple[str, str, str]], terms: Mapping[str, Sequence[str]]) -> Corpus:
        postings: dict[str, set[str]] = {}
        for cid, tokens in terms.items():
            for t in set(tokens):
                postings.setdefault(t, set()).add(cid)
        return Corpus(chunks=tuple(chunks), postings={t: frozenset(c) for t, c in postings.items()}, size=len(terms))

    def df(self, term: str) -> int:
        return len(self.postings.get(term, ()))

    def idf(self, term: str) -> float:
        return bm25_idf(max(self.size, 1), self.df(term))

    def holds(self, term: str) -> bool:
        return term in self.postings

    def covered(self, tokens: Sequence[str]) -> float:
        """The largest share of ``tokens``' IDF mass that one chunk contains."""
        tokens = list(dict.fromkeys(tokens))
        mass = sum(self.idf(t) for t in tokens)
        if not tokens or mass <= 0:
            return 0.0
        held: dict[str, float] = {}
        for t in tokens:
            for cid in self.postings.get(t, ()):
                held[cid] = held.get(cid, 0.0) + self.idf(t)
        return max(held.values(), default=0.0) / mass

    def meet(self, tokens: Sequence[str]) -> bool:
        """Some chunk contains every token."""
        return bool(self.holding(tokens))

    def holding(self, tokens: Sequence[str]) -> frozenset[str]:
        """The chunks that contain every token (none for no tokens)."""
        wanted = sorted(set(tokens), key=self.df)
        if not wanted:
            return frozenset()
        common = set(self.postings.get(wanted[0], ()))
        for t in wanted[1:]:
            common &= self.postings.get(t, frozenset())
            if not common:
                break
        return frozenset(common)


# -- text -----------------------------------------------------------------------------------------------------

def sentences(text: str) -> list[str]:
    """The prose sentences of a chunk: headings, code blocks and table rows skipped, list items as sentences,
    link targets and emphasis markers dropped (:func:`pipeline.text.sentences.split_sentences` cuts them)."""
    out: list[str] = []
    para: list[str] = []
    fenced = False

    def flush() -> None:
        if para:
            out.extend(split_sentences(_MARKUP.sub(lambda m: m.group(1) or "", " ".join(para))))
            para.clear()

    for line in text.splitlines():
        if FENCE.match(line):
            flush()
            fenced = not fenced
        elif fenced or HEADING.match(line) or TABLE_RULE.match(line) or line.lstrip().startswith("|"):
            flush()
        elif LIST_ITEM.match(line):
            flush()
            para.append(LIST_ITEM.sub("", line, count=1).strip())
            flush()
        elif not line.strip():
            flush()
        else:
            para.append(line.strip())
    flush()
    return [s for s in out if s.strip()]


def _content(word: str) -> bool:
    return bool(tokenize(word))


def _lower_opening(word: str) -> str:
    """A sentence's first word lower-cased unless it is an acronym, CamelCase or has a digit (a name stays)."""
    if word[:1].isupper() and word[1:].islower() and word.isalpha():
        return word.lower()
    return word


def pseudo_question(sentence: str, rng: random.Random) -> tuple[str, str] | None:
    """(question, left-out answer) from one sentence, or None when it has too few content words.

    A run of about :data:`DROP_SHARE` of the content words is the answer; the question keeps the words around
    the gap, at most :data:`MAX_KEPT` content words of them (people ask shorter than documents state)."""
    words = _WORD.findall(sentence)
    content = [i for i, w in enumerate(words) if _content(w)]
    if len(content) < MIN_CONTENT or len(words) > MAX_WORDS:
        return None
    span = max(1, round(len(content) * DROP_SHARE))
    start = rng.choice((0, len(content) - span, rng.randrange(len(content) - span + 1)))
    first, last = content[start], content[start + span - 1]
    left = [i for i in content if i < first]
    right = [i for i in content if i > last]
    keep = rng.randint(MIN_KEPT, MAX_KEPT)
    chosen: list[int] = []
    while len(chosen) < keep and (left or right):  # nearest content words to the gap, alternating sides
        side = left if left and (not right or len(chosen) % 2 == 0) else right
        chosen.append(side.pop() if side is left else side.pop(0))
    if len(chosen) < 3:
        return None
    lo, hi = min(chosen), max(chosen)
    kept = [w for i, w in enumerate(words) if lo <= i <= hi and not first <= i <= last]
    answer = " ".join(words[first:last + 1])
    wh = "How many" if _NUMBER.fullmatch(answer.replace(",", "")) else rng.choice(("What", "Which", "How", "Why"))
    kept[0] = _lower_opening(kept[0])
    return f"{wh} {' '.join(kept)}?", answer


def _target(question: str, corpus: Corpus) -> str | None:
    """The word a perturbation replaces: the first critical term that is one word of the question, else the
    rarest content word."""
    words = _WORD.findall(question)
    by_lower = {w.lower(): w for w in words[1:]}
    for term in critical_terms(question):
        if term in by_lower:
            return by_lower[term]
    content = [w for w in words[1:] if _content(w) and w.lower() not in FUNCTION_WORDS and len(w) > 2]
    return max(content, key=lambda w: sum(corpus.idf(t) for t in tokenize(w)) / len(tokenize(w)), default=None)


def _styled(word: str, like: str) -> str:
    return word.capitalize() if like[:1].isupper() else word


def _absent_variant(word: str, corpus: Corpus, rng: random.Random) -> str | None:
    """A replacement the corpus never uses: the digits changed for a number or identifier, else a pool word."""
    for _ in range(20):
        if _DIGIT.search(word):
            new = _DIGIT.sub(lambda _m: str(rng.randrange(10)), word)
        elif word[:1].isupper():
            new = rng.choice(REPLACEMENT_NAMES)
        else:
            new = rng.choice(REPLACEMENT_WORDS)
        # the whole token must be new; an identifier's parts (``err``, ``timeout``) may well be the corpus's own
        if new.lower() != word.lower() and tokenize(new) and not corpus.holds(tokenize(new)[0]):
            return _styled(new, word) if not _DIGIT.search(word) else new
    return None


def _shape(word: str) -> str:
    """``code`` (has a digit or an inner ``._-/:``), ``name`` (capitalised) or ``word``."""
    if _DIGIT.search(word) or re.search(r"\w[._\-/:]\w", word):
        return "code"
    return "name" if word[:1].isupper() else "word"


def _present_variant(word: str, doc_id: str, corpus: Corpus, rng: random.Random) -> str | None:
    """A word of another document of the same shape (identifier, name, plain word) and about as rare in the
    corpus as ``word`` (within a factor of two in document frequency, else the closest of a few tries)."""
    others = [c for c in corpus.chunks if c[1] != doc_id]
    shape = _shape(word)
    want = max(min((corpus.df(t) for t in tokenize(word)), default=1), 1)
    best: tuple[float, str] | None = None
    for _ in range(12):
        if not others:
            return None
        _cid, _doc, text = rng.choice(others)
        words = [w for w in _WORD.findall(text) if _content(w) and len(w) > 3 and _shape(w) == shape
                 and w.lower() != word.lower()]
        if not words:
            continue
        new = rng.choice(words)
        gap = abs(math.log(max(corpus.df(tokenize(new)[0]), 1) / want))
        if best is None or gap < best[0]:
            best = (gap, new)
        if gap <= math.log(2):
            break
    return None if best is None else best[1]


def _replace(question: str, old: str, new: str) -> str:
    return re.sub(rf"(?<![0-9A-Za-z_]){re.escape(old)}(?![0-9A-Za-z_])", new, question, count=1)


def _near_variant(word: str, question: str, text: str, rng: random.Random) -> str | None:
    """A word of the same shape from the source chunk itself that the question does not use."""
    used = {w.lower() for w in _WORD.findall(question)}
    shape = _shape(word)
    words = sorted({w for w in _WORD.findall(text) if _content(w) and len(w) > 3 and _shape(w) == shape
                    and w.lower() not in used and w.lower() not in FUNCTION_WORDS})
    return rng.choice(words) if words else None


def _stated_in(tokens: Sequence[str], text: str) -> bool:
    """Some sentence of ``text`` contains every token."""
    wanted = set(tokens)
    return any(wanted <= set(tokenize(s)) for s in sentences(text))


def perturb(question: str, chunk: tuple[str, str, str], kind: str, corpus: Corpus,
            rng: random.Random) -> tuple[str, str] | None:
    """(probe, what changed) for a ``swapped-*`` kind from a pseudo-question written from ``chunk`` (chunk id,
    doc id, text), or None when no replacement fits."""
    _chunk_id, doc_id, text = chunk
    old = _target(question, corpus)
    if old is None:
        return None
    if kind == "swapped-out":
        new = _absent_variant(old, corpus, rng)
    elif kind == "swapped-in":
        new = _present_variant(old, doc_id, corpus, rng)
    else:
        new = _near_variant(old, question, text, rng)
    if new is None:
        return None
    probe = _replace(question, old, new)
    tokens = tokenize(probe)
    if probe == question or (kind == "swapped-in" and corpus.meet(tokens)) or (
            kind == "swapped-near" and _stated_in(tokens, text)):
        return None
    return probe, f"{old} -> {new}"


def off_corpus(corpus: Corpus, n: int, rng: random.Random) -> list[Probe]:
    """Up to ``n`` questions of :data:`OFF_CORPUS` that no chunk of this corpus could answer (drawn without
    replacement; fewer when the pool runs out)."""
    pool = [q for q in OFF_CORPUS if corpus.covered(tokenize(q)) < COVER_LIMIT]
    return [Probe("off-corpus", q) for q in rng.sample(pool, min(n, len(pool)))]

def counts(n: int) -> dict[str, int]:
    """How many probes of each kind for ``n`` pseudo-questions (:data:`SHARES`)."""
    return {PSEUDO: n, **{k: max(1, round(n * share)) for k, share in SHARES.items()}}


def make_probes(corpus: Corpus, n: int = DEFAULT_PROBES, seed: int = 0) -> tuple[Probe, ...]:
    """Pseudo-questions and unanswerable probes for this corpus, seeded (the same corpus and seed give the same
    probes). Kinds can come out short on a small corpus; :class:`Estimate` weighs what there is."""
    rng = random.Random(seed)
    want = counts(n)
    got: dict[str, list[Probe]] = {k: [] for k in KINDS}
    order = list(corpus.chunks)
    rng.shuffle(order)
    for chunk_id, doc_id, text in order * 3:  # up to three sentences per chunk before giving up
        if all(len(got[k]) >= want[k] for k in KINDS if k != "off-corpus"):
            break
        candidates = [s for s in sentences(text) if len(_WORD.findall(s)) >= MIN_CONTENT]
        if not candidates:
            continue
        made = pseudo_question(rng.choice(candidates), rng)
        if made is None:
            continue
        question, answer = made
        kind = min((k for k in KINDS if k != "off-corpus" and len(got[k]) < want[k]),
                   key=lambda k: len(got[k]) / want[k], default=None)
        if kind == PSEUDO:
            got[PSEUDO].append(Probe(PSEUDO, question, chunk_id, answer))
        elif kind == "answer-removed":
            removed = corpus.holding(tokenize(question) + tokenize(answer)) | {chunk_id}
            got[kind].append(Probe(kind, question, chunk_id, answer, tuple(sorted(removed))))
        elif kind is not None:
            changed = perturb(question, (chunk_id, doc_id, text), kind, corpus, rng)
            if changed is not None:
                got[kind].append(Probe(kind, changed[0], chunk_id, changed[1]))
    got["off-corpus"] = off_corpus(corpus, want["off-corpus"], rng)
    return tuple(p for k in KINDS for p in got[k])


