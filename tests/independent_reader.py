"""An independent reading of ``concluding-exact`` (config version 4), written from
``docs/extractors.md`` and ``docs/concepts.md`` alone by a referee who never read
``rnr_lens/questions/answers.py`` (issue 54's "Done when": every committed try read by an independent
implementation of the documented rule agrees with its stored correctness).

It shares no code with the package, on purpose: a change to the reader that the documentation
does not describe shows up as a disagreement in
``tests/test_committed_results.py::test_an_independent_reading_agrees_with_every_stored_flag``.
Two decisions the referee could not read off the first draft of the documentation are now
documented in docs/extractors.md ("Where the rule needs a decision") and encoded here:

- a sentence ends at ``.``, ``!`` or ``?`` not followed by a digit, or at a newline;
- an operator makes its neighbour an operand only where a number stands on its other side
  ("5 multiplied by 2"; "is multiplied by 2" leaves the 2 standing), except that a sign or sign
  word standing apart before the number a marker concludes with ("is - 5", "is minus 5", "the
  original number + 1") makes it no answer: whose sign it is cannot be told.
"""

import re
from decimal import Decimal
from fractions import Fraction

MARKER = re.compile(r"=|\bis\b|\bequals\b|answer:", re.IGNORECASE)
NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
OPERATOR_AFTER = re.compile(r"\s*(\*\*|[+\-*×÷/^]|(?:plus|minus|times|x|over|divided\s+by|multiplied\s+by)\b)", re.IGNORECASE)
OPERAND = re.compile(r"\s*\(?\s*[+\-]?\s*\d")
OPERATOR_BEFORE = re.compile(r"(\*\*|[+\-*×÷/^]|\b(?:plus|minus|times|x|over|divided\s+by|multiplied\s+by))\s*\(?\s*$", re.IGNORECASE)
SIGN_APART = re.compile(r"([+\-]|\bplus|\bminus)\s*\(?\s*$", re.IGNORECASE)


def first_sentence(text: str) -> str:
    end = re.search(r"[.!?](?!\d)|\n", text)
    return text[: end.end()] if end else text


def read(text: str, prefix: str = "The answer is ") -> str | None:
    """The answer as written, or None: after the first sentence's last marker its first number
    (no marker: its last number), none where glued to a letter or an operand."""
    s = first_sentence(prefix + text)
    markers = list(MARKER.finditer(s))
    if markers:
        start = markers[-1].end()
        m = NUMBER.search(s, start)
    else:
        start = 0
        found = list(NUMBER.finditer(s))
        m = found[-1] if found else None
    if m is None:
        return None
    a, b = m.start(), m.end()
    if a > 0 and s[a - 1] in "+-":  # a sign attached to the number, not an operator after an operand
        before = s[start : a - 1].rstrip()
        if not before or not (before[-1].isdigit() or before[-1] == ")"):
            a -= 1
    if (a > 0 and s[a - 1].isalpha()) or (b < len(s) and s[b].isalpha()):
        return None
    op = OPERATOR_AFTER.match(s, b)
    if op and OPERAND.match(s[op.end() :]):
        return None
    before = OPERATOR_BEFORE.search(s[start:a])
    if before:
        left = s[start : start + before.start()].rstrip()
        if left and (left[-1].isdigit() or left[-1] == ")"):
            return None
    if markers and SIGN_APART.search(s[start:a]):
        return None
    return s[a:b]


def value(answer: str) -> Fraction:
    answer = answer.strip().replace(",", "")
    if "/" in answer:
        n, d = answer.split("/")
        return Fraction(Decimal(n)) / Fraction(Decimal(d))
    return Fraction(Decimal(answer))


def correct(answer: str | None, gold: str) -> bool:
    return answer is not None and value(answer) == value(gold)
