"""Which language a piece of text is in, and whether it speaks to someone: the language half of the
instruction detector (:mod:`pipeline.text.instructions`).

A documentation answer quotes sentences in the language of the corpus it answers from, so a sentence in
another language inside an English page is an island worth a second look. A sentence is placed by its script
(Unicode letter names: Latin, Cyrillic, Han, Kana, Arabic, Devanagari, ...) and, within the Latin script, by its
function-word profile: the closed-class words (articles, pronouns, prepositions, auxiliaries) that make up a
large share of any running text and identify its language from a handful of words (Grefenstette, "Comparing
two language identification schemes", JADT 1995). Code spans, identifiers, URLs, numbers and markup carry no
language and are ignored. :func:`is_foreign` needs positive evidence of another language — a table cell, a
bare command or an English sentence quoting a French error message is never foreign.

:func:`addresses_someone` is the cross-lingual half of "is this an order": second-person pronouns and
politeness forms ("Sie", "vous", "usted", "вы", "您", "ください"), "please", and the words for an AI
assistant, in many languages — closed classes of each language, like the function words.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass

from pipeline.text.memo import memoised

# Function words per language: the most frequent closed-class words, minus those shared with English
# (so an English sentence quoting "a" or "in" is never counted as Italian or German).
_FUNCTION_WORDS = {
    "en": """the a an of to in is are was were be been and or but not no for with on at by from as that this these
             those it its which who whom whose what when where how there their they them he she his her we our you
             your i me my can could will would should must may might do does did has have had if then than so
             into about over after before only also any all each every other such same""",
    "de": """der die das den dem des ein eine einer einen einem eines und oder nicht ist sind war waren wird werden
             wurde mit von zu zum zur im auf für bei aus nach über unter sich sie ihr ihre ihnen du dich dir dein
             deine wir uns ich mich mir auch nur noch schon wie wenn dass weil alle allen alles kein keine keinen
             diese dieser dieses nicht bitte sein seine hat haben kann können muss müssen soll sollen""",
    "fr": """le la les un une des du de et ou ne pas est sont était être avec pour par dans sur au aux ce cette ces
             qui que quoi dont il ils elle elles nous vous votre vos tu toi ton ta tes se sa son ses leur leurs
             mais ou donc car tout tous toutes très plus aussi jamais rien quand comme si""",
    "es": """el la los las un una unos unas y o no es son era fue ser está están con para por en del al que qué
             quien cuando como pero más muy también nunca nada todo todos usted ustedes tú te su sus mi mis
             este esta estos estas ese esa lo le les se sin sobre hay""",
    "pt": """o a os as um uma uns umas e ou não é são era foi ser está estão com para por em do da dos das no na
             nos nas ao que quem quando como mas mais muito também nunca nada todo todos você vocês seu sua seus
             suas este esta isso isto se sem sobre há ele ela eles elas""",
    "it": """il lo la i gli le un una uno e o non è sono era fu essere con per da di del della dei delle nel
             nella al alla che chi quando come ma più molto anche mai niente tutto tutti tu ti tuo tua voi vostro
             questo questa quello si senza sopra ci""",
    "nl": """de het een en of niet is zijn was waren wordt worden met voor van naar op aan bij uit als dat die
             dit deze wie wat wanneer hoe maar ook nooit niets alle alles je jij jouw u uw jullie wij ons ik mij
             er zich geen""",
    "pl": """i w z na do nie jest są był była było być że się to ten ta te tego tej jak ale lub oraz dla od po
             przez przy bez nad pod który która które co kto gdy czy ty ci cię twój pan pani proszę tylko także
             już jeszcze o""",
    "sv": """och i att det som en ett är var för med till av på den de inte om har hade men från så kan ska
             eller vid du dig din ditt ni er vi oss jag mig alla aldrig inget""",
    "da": """og i at det som en et er var for med til af på den de ikke om har havde men fra så kan skal eller
             ved du dig din dit jer vi os jeg mig alle aldrig intet""",
    "no": """og i at det som en et er var for med til av på den de ikke om har hadde men fra så kan skal eller
             ved du deg din ditt dere vi oss jeg meg alle aldri ingenting""",
    "fi": """ja on ei se että oli ovat kun jos mutta tai myös sinä sinun te teidän minä me hän he tämä tuo
             mikä kuka miten aina koskaan""",
    "cs": """a v na je jsou byl byla bylo být že se to ten ta jak ale nebo pro od po přes při bez který která
             které co kdo když ty tě ti tvůj vy vás vám prosím jen také už""",
    "tr": """ve bir bu şu o da de ile için gibi ama veya değil mi mı mu mü ne kim nasıl her çok daha sen siz
             senin sizin lütfen ben biz olarak olan""",
    "id": """dan yang di ke dari ini itu dengan untuk adalah tidak pada dalam akan atau juga sudah saya kamu anda
             kami kita mereka tolong mohon jangan""",
    "ro": """și în la de pe cu nu este sunt a fost un o din pentru că care ce cine când cum dar sau tu te
             tine voi vă dumneavoastră vă rog""",
    "hu": """a az és egy nem van volt hogy de vagy is meg ki mi mit ez az te ön kérem ön önök""",
    "vi": """và của là có không được cho với các những một này đó người bạn hãy vui lòng tôi chúng""",
}
_WORDS = {lang: frozenset(words.split()) for lang, words in _FUNCTION_WORDS.items()}
_EN = _WORDS["en"]
_DISTINCT = {lang: (words - _EN if lang != "en" else words) for lang, words in _WORDS.items()}

def _mark_ranges() -> str:
    """A character class body of every combining mark (Unicode category M) in the Basic Multilingual Plane."""
    ranges, start = [], None
    for code in range(0x300, 0x10000):
        is_mark = unicodedata.category(chr(code)).startswith("M")
        if is_mark and start is None:
            start = code
        elif not is_mark and start is not None:
            ranges.append(f"\\u{start:04x}-\\u{code - 1:04x}")
            start = None
    return "".join(ranges)


# A word: letters with the combining marks that spell them (Devanagari, Thai and other vowel signs are marks,
# and "कृपया" is one word, not four pieces).
LETTER = re.compile(r"[^\W\d_](?:[^\W\d_]|[" + _mark_ranges() + r"])*")
CODE_SPAN = re.compile(r"`[^`\n]*`")
URL = re.compile(r"\b(?:https?|ftp|javascript|data|file)://?\S*|\bwww\.\S+", re.IGNORECASE)
_IDENT = re.compile(r"[_./\\=@#<>{}\[\]|\d]")   # keys, paths, versions, numbers, markup: no language in them


@dataclass(frozen=True)
class Language:
    """What a text's letters say about its language."""
    script: str = ""          # "Latin", "Cyrillic", "Han", ... ("" when the text has too few letters)
    code: str = ""            # ISO 639-1 code for Latin-script text placed by function words, else ""
    words: int = 0            # words that were read (outside code, identifiers and URLs)
    hits: int = 0             # function words of ``code`` among them

    @property
    def known(self) -> bool:
        return bool(self.script) and (self.script != "Latin" or bool(self.code))

    @property
    def name(self) -> str:
        return self.code or self.script.lower()

    def bare(self) -> Language:
        """The language alone, without the counts of the text it was read from: all that :func:`is_foreign` and
        the instruction rules read of a reference, so the results memoised for one text serve every reference
        in the same language (:mod:`pipeline.text.memo`)."""
        return self if not (self.words or self.hits) else Language(script=self.script, code=self.code)


def _prose(text: str) -> str:
    """The words of ``text`` a language can be read from: code spans, URLs and identifiers removed."""
    text = URL.sub(" ", CODE_SPAN.sub(" ", text))
    return " ".join(w for w in text.split() if not _IDENT.search(w.strip(".,;:!?()[]\"'«»“”")))


def _script(ch: str) -> str:
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return ""
    first = name.split(" ", 1)[0]
    if first == "CJK" or "IDEOGRAPH" in name:
        return "Han"
    if first in ("HIRAGANA", "KATAKANA"):
        return "Kana"
    if first == "HANGUL":
        return "Hangul"
    return first.capitalize()


@memoised  # a walk over many questions reads the same chunks' sentences again (pipeline/text/memo.py)
def language_of(text: str) -> Language:
    """The script of most of ``text``'s letters and, for Latin script, the language whose function words
    it uses most (English on a tie). Unknown when fewer than 3 letters or no function word are found."""
    prose = _prose(text)
    letters = [ch for ch in prose if ch.isalpha()]
    if len(letters) < 3:
        return Language()
    scripts = Counter(_script(ch) for ch in letters)
    script, count = scripts.most_common(1)[0]
    if script == "Han" and scripts.get("Kana", 0) * 5 >= count:
        script = "Kana"        # Japanese mixes kanji with kana; Chinese has none
    words = [w.casefold() for w in LETTER.findall(prose)]
    if script != "Latin":
        return Language(script=script, words=len(words))
    hits = {lang: sum(w in vocab for w in words) for lang, vocab in _DISTINCT.items()}
    best = max(hits, key=lambda lang: (hits[lang], lang == "en"))
    if hits[best] == 0:
        return Language(script="Latin", words=len(words))
    if best != "en" and hits[best] <= hits["en"]:
        best = "en"
    return Language(script="Latin", code=best, words=len(words), hits=hits[best])


def is_foreign(text: str, reference: Language) -> bool:
    """``text`` is positively in another language than ``reference`` (never for too little evidence).

    Another script needs at least 4 of its letters making up most of the text; another Latin-script
    language needs 2 of its own function words and more than twice the reference language's.
    """
    return _is_foreign(text, reference.bare())


@memoised
def _is_foreign(text: str, reference: Language) -> bool:
    if not reference.known:
        return False
    lang = language_of(text)
    if not lang.script:
        return False
    if lang.script != reference.script:
        return sum(_script(ch) == lang.script for ch in _prose(text)) >= 4 and lang.script not in ("Common", "")
    if lang.script != "Latin" or not lang.code or lang.code == reference.code:
        return False
    words = [w.casefold() for w in LETTER.findall(_prose(text))]
    ref_hits = sum(w in _WORDS.get(reference.code, frozenset()) for w in words)
    return lang.hits >= 2 and lang.hits > 2 * ref_hits


# Addressing someone, in many languages: second-person pronouns and politeness forms, "please", and the
# words for an AI assistant. Closed classes of each language, like the function words above.
_ADDRESS = frozenset("""
    du dich dir dein deine euch ihr bitte assistent ki sprachmodell
    vous votre vos tu toi ton ta tes assistant ia
    usted ustedes tú te asistente favor
    você vocês teu tua assistente
    ti tuo voi vostro assistente favore
    jij jouw jullie je uw alstublieft
    ty ci cię twój twoja pan pani państwo proszę asystent
    dig din ditt ni er snälla deg dere
    sinä sinun teidän
    tě tvůj vás vám prosím
    sen siz senin sizin lütfen asistan
    anda kamu tolong mohon
    tine dumneavoastră vă
    ön kérem
    bạn hãy
    вы ты вам вас тебе тебя ваш твой пожалуйста ассистент помощник ии модель
    ви ти будь ласка
    εσύ εσείς σας σου παρακαλώ βοηθός
    أنت أنتم أنتِ لك يرجى رجاء فضلك المساعد مساعد أيها
    אתה את אתם בבקשה עוזר
    आप तुम कृपया आपको सहायक बताएं
""".split())
_ADDRESS_CJK = re.compile("你|您|请|助手|人工智能|あなた|ください|なさい|アシスタント|"
                          "당신|하세요|십시오|주세요|어시스턴트|답하세요")


# Second-person verb forms: French "-ez" (dites, ignorez, répondez), German polite "Sie"/"Ihnen" inside a
# sentence (capitalised: lower-case "sie" is "she"/"they").
_SECOND_PERSON_FORMS = re.compile(r"\b(?!chez\b|assez\b|nez\b)\w{2,}ez\b|(?<=\w )(Sie|Ihnen|Ihr|Ihre)\b")


def addresses_someone(text: str) -> bool:
    """``text`` (in any language) speaks to a second person or to an AI assistant."""
    words = {w.casefold() for w in LETTER.findall(text)}
    return bool(words & _ADDRESS) or bool(_ADDRESS_CJK.search(text)) or bool(_SECOND_PERSON_FORMS.search(text))



def dominant_language(texts: list[str]) -> Language:
    """The language most of the words of ``texts`` are in (English when nothing says otherwise)."""
    weight: Counter = Counter()
    found: dict[tuple[str, str], Language] = {}
    for text in texts:
        lang = language_of(text)
        if lang.known:
            key = (lang.script, lang.code)
            weight[key] += lang.words
            found.setdefault(key, lang)
    if not weight:
        return Language(script="Latin", code="en")
    return found[weight.most_common(1)[0][0]]
