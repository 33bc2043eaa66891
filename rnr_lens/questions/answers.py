"""Answer extraction and equivalence.

Extractors turn a model's output into a canonical answer string, or ``None`` when the
output holds no answer. They read the assistant prefix plus the generated text, so a
deployment whose prefix is ``"The answer is "`` is read the same way as a model that wrote
the phrase itself.

=====================  ==============================================================
name                   what it returns
=====================  ==============================================================
``concluding-exact``   the default for numbers (config version 4): ``concluding-token``'s
                       rule followed on every output: no answer where the number is an
                       operand of an unevaluated expression, whatever its operator (symbol,
                       word, parenthesis or sign; ``48 / 3`` too), kept as written and graded
                       exactly
``concluding-token``   ``concluding-number``, where only a number that stands as a token
                       counts ("Thes1" and "H2O" state none)
``concluding-number``  the number a statement concludes with: in the answer's first
                       sentence, the number right after its last "=", "is", "equals" or
                       "answer:" (None if that number opens an unevaluated expression such
                       as ``1 + 0``); a sentence with none of them gives its last number
``number``             the number after "answer is"/"answer:" if present, else the last
``answer-is``          the number after "answer is"/"answer:" (None if absent)
``first-number``       the first number
``last-number``        the last number (= ``gsm8k-flexible``)
``gsm8k-strict``       the number after ``####``
``gsm8k-flexible``     the last number
``boxed``              the content of the last ``\\boxed{...}`` (a number if it is one)
``choice-letter``      a choice letter A-J: after "answer is", "(B)", "B)", "B." or alone
``answer-is-string``   the text after "answer is", up to the end of the sentence
=====================  ==============================================================

Numbers are canonicalised so that ``51.0 == 51``, ``1,234 == 1234``, ``$18 == 18``,
``7. == 7`` and ``3/4 == 0.75``. Every reader but ``concluding-exact`` keeps an answer to six
significant digits (``1.11111``) and grades it equal to the gold within 1e-6 (relative, and
absolute below 1, so ``2e-07`` counted as ``0``): kept as measured, for configs that name them.
``concluding-exact`` keeps the decimal it read (``1.111111111``) and grades it equal only where
it is the gold's number exactly (decimal text read as an exact rational; gold ``3/4`` is
``0.75``). It reads no fractions: every numeric task rnr_lens ships or reads (the built-in
arithmetic, GSM8K, SVAMP) has integer or decimal answers, so a bare ``a/b`` in an answer is an
unevaluated division, and a task with rational answers needs a reader of its own (a new name).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fractions import Fraction

from rnr_lens.errors import RnrLensError

# an integer part: thousands separators only in groups of three ("1,234", not the list "1,2,3")
_INTEGER = r"(?:\d{1,3}(?:,\d{3})+|\d+)"
# a sign only when attached ("-5", not the minus of "12 - 5"); "$" may be spaced; an optional "/ d" fraction
_NUMBER = r"-?(?:\$\s?)?" + _INTEGER + r"(?:\.\d+)?(?:\s?/\s?\d+(?:\.\d+)?)?"
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_IS_RE = re.compile(r"answer\s*(?:is|:|=)\s*:?\s*", re.IGNORECASE)


MAX_DIGITS = 1000
"""The most digits (and the largest power of ten) a number read from a text may have before an
exact rational is built from it: ``1e999999999`` is 30 bytes of a hostile file but a billion
digits as a rational (issue 73). A longer number is read as no number at all."""

_EXPONENT_RE = re.compile(r"[eE]\s*([+-]?\d+)")


def exact_fraction(text: str) -> Fraction | None:
    """``text`` as an exact rational (``Fraction``), or None where it is not a number or is
    longer than :data:`MAX_DIGITS` digits or powers of ten: the one place a text becomes a
    rational, so the work is bounded by the text's size.

    Example:
        >>> exact_fraction("0.75"), exact_fraction("3/4") == exact_fraction("0.75"), exact_fraction("1e999999999")
        (Fraction(3, 4), True, None)
    """
    if len(text) > MAX_DIGITS:
        return None
    exponent = _EXPONENT_RE.search(text)
    if exponent is not None and abs(int(exponent.group(1))) > MAX_DIGITS:
        return None
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def canonical_number(text: str) -> str | None:
    """``'$1,234.50'`` -> ``'1234.5'``; ``'51.0'`` -> ``'51'``; ``'3/4'`` -> ``'0.75'``; else None
    (also for a number beyond a float's range that is not an integer)."""
    cleaned = text.strip().replace("$", "").replace(",", "").replace(" ", "").rstrip(".")
    value = exact_fraction(cleaned) if cleaned else None
    if value is None:
        return None
    if value.denominator == 1:
        return str(value.numerator)
    try:
        return f"{float(value):.6g}"
    except OverflowError:
        return None


def numbers_in(text: str) -> list[str]:
    """Every number ``text`` states, canonical, in order (what a lenient reading would accept)."""
    return _numbers(text)


def _numbers(text: str) -> list[str]:
    out = []
    for match in _NUMBER_RE.finditer(text):
        value = canonical_number(match.group())
        if value is not None:
            out.append(value)
    return out


def _after_answer_is(text: str) -> str | None:
    match = _ANSWER_IS_RE.search(text)
    return text[match.end() :] if match else None


def extract_answer_is(text: str) -> str | None:
    rest = _after_answer_is(text)
    if rest is None:
        return None
    found = _NUMBER_RE.match(rest.lstrip())
    return canonical_number(found.group()) if found else None


def extract_number(text: str) -> str | None:
    hit = extract_answer_is(text)
    if hit is not None:
        return hit
    numbers = _numbers(text)
    return numbers[-1] if numbers else None


_SENTENCE_END_RE = re.compile(r"\.(?!\d)|[!?\n]")
_CONCLUSION_RE = re.compile(r"=|\b(?:is|equals|answer\s*:)(?![A-Za-z])", re.IGNORECASE)
_OPERATOR_NEXT_RE = re.compile(r"\s*(?:[-+*×÷x]|\bplus\b|\bminus\b|\btimes\b)\s*\$?\d", re.IGNORECASE)


def _first_sentence(text: str) -> tuple[str, list[re.Match[str]]]:
    """The answer's first sentence (up to a full stop that is not a decimal point, ``!``, ``?``
    or a line break) and its conclusion markers, in order: what the concluding readers read."""
    body = text.lstrip()
    end = _SENTENCE_END_RE.search(body)
    sentence = body[: end.start()] if end else body
    return sentence, list(_CONCLUSION_RE.finditer(sentence))


def _glued(text: str, start: int, end: int) -> bool:
    """Is the number at ``text[start:end]`` glued to a letter ("Thes1", "H2O", "5th", "1.25x")?"""
    return (start > 0 and text[start - 1].isalpha()) or (end < len(text) and text[end].isalpha())


def extract_concluding(text: str) -> str | None:
    """``concluding-number``: the number the answer's first sentence concludes with, as a
    person reads it.

    The first sentence (up to a full stop that is not a decimal point, ``!``, ``?`` or a line
    break) is read after its last conclusion marker (``=``, "is", "equals", "answer:"); the
    first number there is the answer, unless an arithmetic operator follows it (an unevaluated
    expression states no answer). A sentence with no marker gives its last number. Kept as it
    was measured, for configs that name it: it reads a digit glued to a word ("Thes1") as a
    number; :func:`extract_concluding_token` does not.

    Example:
        >>> [extract_concluding(t) for t in ("The answer is 7 + 6 = 13.", "The answer is 2 + 3 = 5. Sam has 9.", "The answer is 1 + 0.")]
        ['13', '5', None]
    """
    return _concluding(text, tokens=False)


def extract_concluding_token(text: str) -> str | None:
    """``concluding-token``, the default for numbers of config version 3, kept as it was measured
    for configs that name it (it departs from its rule on some expressions: see
    :func:`extract_concluding_exact`): :func:`extract_concluding`'s rule, where
    only a number that stands as a token counts (no letter glued to either side): the number
    after the last marker states no answer when it is glued ("=Thes1", "is 2.25x + 0.25"), and
    a sentence without a marker gives its last number that stands alone. A random route's
    "UnSEENTIFICTheIBS =Thes1" states no answer, where ``concluding-number`` read 1.

    Example:
        >>> [extract_concluding_token(t) for t in ("The answer is 13.", "No It ClThe =Thes1", "H2O is water")]
        ['13', None, None]
    """
    return _concluding(text, tokens=True)


# concluding-exact: a number is an integer or a decimal, never a fraction; what stands between
# two operands (a symbol, a word, with any parenthesis or sign before the second) is an operator
_EXACT_NUMBER_RE = re.compile(r"[-−]?(?:\$\s?)?" + _INTEGER + r"(?:\.\d+)?")
_OPERATOR = r"(?:\*\*|[-+*×÷/^−·]|\b(?:plus|minus|times|x|over|divided\s+by|multiplied\s+by)\b)"
_OPERAND = r"[\s(\[]*[-+−]?\s*\$?\s?\d"
_OPERAND_NEXT_RE = re.compile(r"[\s)\]]*" + _OPERATOR + _OPERAND, re.IGNORECASE)
_OPERAND_BEFORE_RE = re.compile(r"\d[\s)\]]*" + _OPERATOR + r"[\s(\[]*$", re.IGNORECASE)
_DETACHED_SIGN_RE = re.compile(r"(?:[-+−]|\bminus\b|\bplus\b)[\s(\[]*$", re.IGNORECASE)


def extract_concluding_exact(text: str) -> str | None:
    """``concluding-exact``, the default for numbers from config version 4: the number the
    answer's first sentence concludes with (:func:`extract_concluding_token`'s sentence, markers
    and tokens), read as no answer wherever it is an operand of an unevaluated expression.

    - An operator is a symbol (``+ - * × ÷ / ^ ** − ·``) or a word (plus, minus, times, x, over,
      divided by, multiplied by); either operand may be parenthesised or bracketed, the other
      signed (``9+(-3)``, ``3*-0.``, ``(2) + 3``). ``48 / 3`` is a division, not the number 16.
    - A sign or sign word standing apart from the number ("is - 5", "is minus 5") states no
      answer: the reader does not guess whether it is the number's.
    - After the last conclusion marker, the first number is the answer unless an operator
      follows it. A sentence with no marker gives its last number that stands alone, unless
      an operator stands on either side of it.
    - The answer is the decimal as written (``$1,234.50`` is ``1234.5``), never rounded, and
      :func:`is_correct_as` grades it exactly.

    Example:
        >>> [extract_concluding_exact(t) for t in ("The answer is 12 * 36 / 3 = 48 / 3.", "The answer is 5 multiplied by 5.", "The answer is 10/9 = 1.111111111.")]
        [None, None, '1.111111111']
    """
    sentence, markers = _first_sentence(text)
    start = markers[-1].end() if markers else 0
    found = [m for m in _EXACT_NUMBER_RE.finditer(sentence, start) if not _glued(sentence, m.start(), m.end())]
    if markers:
        first = _EXACT_NUMBER_RE.search(sentence, start)
        if first is None or not found or first.start() != found[0].start():  # "is1" is glued
            return None
        if _DETACHED_SIGN_RE.search(sentence[start : first.start()]):  # "is - 5", "is minus 5": a sign it cannot attach
            return None
        chosen = first
    elif found:
        chosen = found[-1]
        if _OPERAND_BEFORE_RE.search(sentence[: chosen.start()]):
            return None
    else:
        return None
    if _OPERAND_NEXT_RE.match(sentence, chosen.end()):
        return None
    return exact_number(chosen.group())


def _exact_text(text: str) -> str:
    """A numeral without its currency sign, separators, spaces and closing full stop, a
    typographic minus as ``-``: what ``concluding-exact`` reads and grades."""
    return text.strip().replace("$", "").replace(",", "").replace(" ", "").replace("−", "-").rstrip(".")


def exact_number(text: str) -> str | None:
    """A decimal numeral as written, exactly: ``'$1,234.50'`` -> ``'1234.5'``, ``'7.'`` ->
    ``'7'``, ``'0.0000002'`` -> ``'0.0000002'``; None for anything but an integer or decimal."""
    cleaned = _exact_text(text)
    match = re.fullmatch(r"(-?)(\d+)(?:\.(\d+))?", cleaned)
    if match is None:
        return None
    sign, whole, fraction = match.group(1), match.group(2).lstrip("0") or "0", (match.group(3) or "").rstrip("0")
    if whole == "0" and not fraction:
        sign = ""  # -0 is 0
    return f"{sign}{whole}.{fraction}" if fraction else f"{sign}{whole}"  # digit for digit: no context rounds it


def _concluding(text: str, *, tokens: bool) -> str | None:
    sentence, markers = _first_sentence(text)
    if not markers:
        found_all = [m for m in _NUMBER_RE.finditer(sentence) if not (tokens and _glued(sentence, m.start(), m.end()))]
        numbers = [v for v in (canonical_number(m.group()) for m in found_all) if v is not None]
        return numbers[-1] if numbers else None
    start = markers[-1].end()
    rest = sentence[start:]
    found = _NUMBER_RE.search(rest)
    if found is None or (tokens and _glued(sentence, start + found.start(), start + found.end())):  # "is1" is glued too
        return None
    if _OPERATOR_NEXT_RE.match(rest[found.end() :]):
        return None
    return canonical_number(found.group())


def extract_first(text: str) -> str | None:
    numbers = _numbers(text)
    return numbers[0] if numbers else None


def extract_last(text: str) -> str | None:
    numbers = _numbers(text)
    return numbers[-1] if numbers else None


def extract_gsm8k_strict(text: str) -> str | None:
    match = re.search(r"####\s*(" + _NUMBER + ")", text)
    return canonical_number(match.group(1)) if match else None


def extract_boxed(text: str) -> str | None:
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 1, start + len("\\boxed{")
    content_start = i
    while i < len(text) and depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    if depth:
        return None
    content = text[content_start : i - 1].strip()
    return canonical_number(content) or content or None


_LETTERS = "ABCDEFGHIJ"


# most specific first; a bare capital followed by a lowercase word is prose ("I think"), not a choice
_CHOICE_PATTERNS = (
    r"\(([A-J])\)",
    r"\b([A-J])[\).:]",
    r"^\s*([A-J])\b(?!\s+[a-z])",
    r"(?<![A-Za-z])([A-J])(?![A-Za-z])(?!\s+[a-z])",
)


def extract_choice(text: str) -> str | None:
    rest = _after_answer_is(text)
    for source in ([rest] if rest is not None else []) + [text]:
        for pattern in _CHOICE_PATTERNS:
            match = re.search(pattern, source)
            if match:
                return match.group(1)
    return None


def extract_string(text: str) -> str | None:
    rest = _after_answer_is(text)
    if rest is None:
        return None
    answer = re.split(r"[.\n!?]", rest.strip(), maxsplit=1)[0].strip()
    return normalize_string(answer) or None


def normalize_string(text: str) -> str:
    return re.sub(r"[^\w\s]", "", text).strip().lower()


ANSWER_TYPES = ("number", "choice", "string")
"""What a task's answers are: a number, a choice letter, or a string."""


@dataclass(frozen=True)
class Reader:
    """An answer reader: how a try's text becomes the answer it states (a string, or None where
    it states none), registered by its name (:func:`register_reader`).

    Args:
        name: The name a deployment config names it by (``extractor``); a name fixes the answers
            it reads, so a changed reader takes a new name.
        read: Text -> the answer in canonical form, or None.
        answer_type: The answers it reads: ``number``, ``choice`` or ``string``.
        compared: Compared side by side with its type's other readers (``check-format``,
            docs/extractors.md); False for a reader of a format the default prompts never ask for.
        exact: Its numbers are graded exactly (:func:`is_correct_exact`); otherwise within 1e-6,
            as the readers before ``concluding-exact`` were measured.
    """

    name: str
    read: Callable[[str], str | None]
    answer_type: str
    compared: bool = True
    exact: bool = False


READERS: dict[str, Reader] = {}
"""Every answer reader by its name, in the order registered."""


def register_reader(reader: Reader) -> Reader:
    """Add ``reader`` to :data:`READERS`; a name already registered is refused (a name fixes the
    answers it reads)."""
    if reader.name in READERS:
        raise RnrLensError(f"answer reader {reader.name!r} is registered already; a name fixes the answers it reads, so choose another")
    if reader.answer_type not in ANSWER_TYPES:
        raise RnrLensError(f"answer reader {reader.name!r}: answer_type {reader.answer_type!r} is not one of {', '.join(ANSWER_TYPES)}")
    READERS[reader.name] = reader
    return reader


for _reader in (
    Reader("concluding-exact", extract_concluding_exact, "number", exact=True),
    Reader("concluding-token", extract_concluding_token, "number"),
    Reader("concluding-number", extract_concluding, "number"),
    Reader("number", extract_number, "number"),
    Reader("answer-is", extract_answer_is, "number"),
    Reader("first-number", extract_first, "number"),
    Reader("last-number", extract_last, "number"),
    Reader("gsm8k-strict", extract_gsm8k_strict, "number", compared=False),
    Reader("gsm8k-flexible", extract_last, "number", compared=False),  # last-number under lm-eval's name
    Reader("boxed", extract_boxed, "number", compared=False),
    Reader("choice-letter", extract_choice, "choice"),
    Reader("answer-is-string", extract_string, "string"),
):
    register_reader(_reader)


def extractors_for(answer_type: str) -> tuple[str, ...]:
    """The readers compared side by side for ``answer_type`` (``check-format``)."""
    return tuple(r.name for r in READERS.values() if r.answer_type == answer_type and r.compared)


def get_extractor(name: str) -> Callable[[str], str | None]:
    """The read function of reader ``name``, or one line naming the readers."""
    try:
        return READERS[name].read
    except KeyError:
        raise RnrLensError(f"unknown extractor {name!r}; choose one of {', '.join(READERS)}") from None


def _exact(reader: str, answer_type: str) -> bool:
    """Are ``reader``'s answers of ``answer_type`` graded exactly? (A harness's reader is not
    registered here: graded within 1e-6.)"""
    return answer_type == "number" and reader in READERS and READERS[reader].exact


def canonical_gold(answer: str, answer_type: str) -> str | None:
    """The gold answer in the form extractors produce (None if it cannot be read)."""
    if answer_type == "number":
        return canonical_number(str(answer))
    if answer_type == "choice":
        letter = str(answer).strip().upper()
        return letter if len(letter) == 1 and letter in _LETTERS else None
    return normalize_string(str(answer)) or None


def is_correct_as(reader: str, extracted: str | None, gold: str, answer_type: str) -> bool:
    """Whether ``extracted``, as reader ``reader`` read it, is the gold answer: the one place
    that decides which grading a reader's answers get."""
    if _exact(reader, answer_type):
        return is_correct_exact(extracted, gold)
    return is_correct(extracted, gold, answer_type)


def match_key(reader: str, answer: str, answer_type: str, *, gold: bool = False) -> Hashable | None:
    """The key under which an answer read by ``reader`` (or, with ``gold``, a gold answer)
    matches: a try's answer is its own question's gold exactly where :func:`is_correct_as` says
    so, and a chance level (another question's gold among a question's answers) must match by
    the same rule. For an exact reader's numbers the key is the exact rational (``"100"`` and
    ``"99.9999999999999"`` differ, as they are graded); for every other reader the canonical
    form (:func:`canonical_gold`, which a grading within 1e-6 accepts). None where it cannot be
    read.

    Example:
        >>> match_key("concluding-exact", "99.9999999999999", "number") == match_key("concluding-exact", "100", "number", gold=True)
        False
        >>> match_key("concluding-exact", "0.75", "number") == match_key("concluding-exact", "3/4", "number", gold=True)
        True
    """
    if _exact(reader, answer_type):
        return exact_fraction(_exact_text(str(answer)) if gold else str(answer))
    return canonical_gold(str(answer), answer_type)


def is_correct_exact(extracted: str | None, gold: str) -> bool:
    """Whether a number read is the gold number exactly: both read as exact rationals (decimal
    text ``0.1`` is 1/10; a gold fraction ``3/4`` is 3/4), no tolerance.

    Example:
        >>> is_correct_exact("0.75", "3/4"), is_correct_exact("2e-07", "0"), is_correct_exact("0.0000002", "0")
        (True, False, False)
    """
    if extracted is None:
        return False
    want, got = exact_fraction(_exact_text(str(gold))), exact_fraction(extracted)
    return want is not None and got == want


def is_correct(extracted: str | None, gold: str, answer_type: str) -> bool:
    """Whether an extracted answer equals the gold answer, numbers within 1e-6 (relative to the
    gold, absolute where the gold is below 1): the grading of every reader but
    ``concluding-exact``, kept as it was measured (so ``2e-07`` equals gold ``0``)."""
    if extracted is None:
        return False
    want = canonical_gold(gold, answer_type)
    if want is None:
        return False
    if answer_type == "number":
        got, gold_value = exact_fraction(extracted), exact_fraction(want)
        if got is None or gold_value is None:
            return False
        try:
            return abs(float(got) - float(gold_value)) <= 1e-6 * max(1.0, abs(float(gold_value)))
        except OverflowError:  # beyond a float's range: equal only exactly
            return got == gold_value
    return extracted == want if answer_type == "choice" else normalize_string(extracted) == want


def holds_gold(text: str, gold: str, answer_type: str) -> bool:
    """Whether ``text`` states the gold answer anywhere (any number in it, for numbers; the
    normalized gold as a phrase, for strings; the letter alone, for choices). A wrong answer
    whose text holds the gold is a format miss (the extractor read another number), not
    necessarily a capability miss.

    Example:
        >>> text = "The answer is 2 + 8, which is 10."
        >>> extract_number(text), holds_gold(text, "10", "number")
        ('2', True)
    """
    if answer_type == "number":
        return any(is_correct(n, gold, "number") for n in _numbers(text))
    want = canonical_gold(gold, answer_type)
    if want is None:
        return False
    if answer_type == "choice":
        return re.search(rf"(?<![A-Za-z]){re.escape(want)}(?![A-Za-z])", text) is not None
    return f" {want} " in f" {normalize_string(text)} "
