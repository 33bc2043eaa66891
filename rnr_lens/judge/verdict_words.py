"""A verdict's words, rendered from its decision.

A verdict is stored as its decision (:class:`Reason`): the rule that decided it, by name, and
the numbers and estimates that rule read. Its sentence is rendered here, when it is shown, from
that record alone, so a rewording changes this module and no stored ``claims.json`` (which
holds no prose). Each rule's words are one function registered under its name
(:func:`words`); :func:`render` refuses a rule it has no words for in one line.

The invariant: every rule a verdict function decides by has its words here, and the words read
only the reason's fields (``tests/judge/test_verdict_words.py`` renders every committed verdict).
A verdict read from a file of the format before decisions (a ``text`` and no ``reason``)
keeps its written sentence (:data:`WRITTEN`).

Example:
    >>> render(Reason("routes:no-overlap"))
    "no question has both probes' tries"
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rnr_lens.core.stats import Estimate
from rnr_lens.errors import RnrLensError

WRITTEN = "written"
"""The rule of a verdict read from a file written before verdicts were stored as decisions:
its one number, ``text``, is the sentence that file holds."""

Number = float | int | str | bool | None | tuple[Any, ...]
"""A value a reason names besides its estimates: a margin, a count, a block, a selector's
name, a part of a rule by its name, or a tuple of them."""


@dataclass(frozen=True)
class Reason:
    """Why a verdict has its status: the rule that decided it and what that rule read.

    Attributes:
        rule: The rule, by name (``routes:matched``, ``bottleneck:support``, ...).
        numbers: The plain values the rule read or decided with (margins, counts, blocks, the
            names of the parts of a test that do not hold).
        estimates: The estimates the rule read, by role.
    """

    rule: str
    numbers: Mapping[str, Number] = field(default_factory=dict)
    estimates: Mapping[str, Estimate] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "numbers": {k: list(v) if isinstance(v, tuple) else v for k, v in self.numbers.items()},
            "estimates": {k: e.to_dict() for k, e in self.estimates.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Reason:
        """A stored reason, checked: its rule one this version has words for, its numbers plain
        JSON values, its estimates estimates."""
        rule = d.get("rule")
        if not isinstance(rule, str) or rule not in WORDS:
            raise RnrLensError(f"a verdict's reason names rule {rule!r}, which this rnr_lens has no words for; known: {', '.join(sorted(WORDS))}")
        numbers = d.get("numbers", {})
        estimates = d.get("estimates", {})
        if not isinstance(numbers, dict) or not isinstance(estimates, dict):
            raise RnrLensError(f"a verdict's reason ({rule}) holds numbers and estimates as JSON objects")
        return cls(rule, {str(k): _number(v, rule) for k, v in numbers.items()}, {str(k): Estimate.from_dict(e) for k, e in estimates.items()})


def _number(v: Any, rule: str) -> Number:
    if isinstance(v, list):
        return tuple(_number(x, rule) for x in v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    raise RnrLensError(f"a verdict's reason ({rule}) holds a {type(v).__name__} among its numbers; only numbers, names and lists of them")


WORDS: dict[str, Callable[[Reason], str]] = {}
"""Each rule's words, by the rule's name."""


def words(rule: str) -> Callable[[Callable[[Reason], str]], Callable[[Reason], str]]:
    """Register the words of ``rule``."""

    def add(render_: Callable[[Reason], str]) -> Callable[[Reason], str]:
        WORDS[rule] = render_
        return render_

    return add


def render(reason: Reason) -> str:
    """The sentence of a verdict's reason."""
    try:
        return WORDS[reason.rule](reason)
    except KeyError:
        raise RnrLensError(f"no words for verdict rule {reason.rule!r}; known: {', '.join(sorted(WORDS))}") from None


def shown(e: Estimate) -> str:
    """An estimate as a verdict's reason prints it: its interval, and where the exact test beside
    it disagrees with the interval's own test, both p's and the flag (an interval clear of the
    null beside "not resolved" says why)."""
    return e.text() + (f", {e.p_text()}" if e.tests_disagree else "")


def power_text(detectable: float | None, n_needed: int | None) -> str:
    """What an undecided verdict's ``n`` can decide: the smallest effect it resolves and the
    questions that would resolve the one observed."""
    if detectable is None:
        return ""
    need = (
        "no n resolves the effect observed: it is zero or points the other way"
        if n_needed is None
        else f"about {n_needed} questions would resolve the effect observed"
    )
    return f"this n resolves effects of {detectable:.2f} or more (80% power); {need}"


def chance_text(questions: int, failures: int, expected: float, estimate: Estimate) -> str:
    """A failure set against its chance expectation: ``29 of 724 not-realized questions
    reached, 24.2 expected by chance (...)``."""
    return (
        f"{failures} of {questions} not-realized questions reached, {expected:.1f} expected by chance "
        f"({estimate.text()} above chance, {estimate.p_text()})"
    )


def _n(r: Reason, name: str) -> Any:
    return r.numbers[name]


def _e(r: Reason, name: str) -> Estimate:
    return r.estimates[name]


@words(WRITTEN)
def _written(r: Reason) -> str:
    return str(_n(r, "text"))


# Claim 1: random routes against the search ---------------------------------------------------

ROUTES_PARTS = {
    "margin": "random - search's lower bound above -{margin:.2f}",
    "contrast": "the contrast resolved above zero",
    "chance": "random routes' reach resolved above their chance level",
}
"""The parts of claim 1's support, by name, as its unresolved verdict names those missing."""


def _routes_shown(r: Reason) -> str:
    return f"random - search {shown(_e(r, 'difference'))}, random keeps half of the search's gain: (R-D) - (S-D)/2 {shown(_e(r, 'kept'))}"


@words("routes:no-overlap")
def _routes_no_overlap(r: Reason) -> str:
    return "no question has both probes' tries"


@words("routes:behind")
def _routes_behind(r: Reason) -> str:
    margin = _n(r, "margin")
    why = f"random - search is resolved below -{margin:.2f}" if _n(r, "by_margin") else "random routes keep less than half of the search's gain"
    return f"{why} (Holm over the two ways): {_routes_shown(r)}"


@words("routes:ahead")
def _routes_ahead(r: Reason) -> str:
    return f"random routes reach more than the search ({shown(_e(r, 'difference'))}) and than realized ({shown(_e(r, 'random_gain'))}), above chance"


@words("routes:no-gain")
def _routes_no_gain(r: Reason) -> str:
    missing = (
        f"the search's gain over realized is not resolved above zero ({shown(_e(r, 'search_gain'))})"
        if "search_gain" in r.estimates
        else f"the search's reach is not resolved above its chance level ({shown(_e(r, 'search_above_chance'))} above chance)"
    )
    return f"{missing}: with nothing to match, matching says nothing ({_routes_shown(r)})"


@words("routes:matched")
def _routes_matched(r: Reason) -> str:
    return f"random routes reach as much as the search within {_n(r, 'margin'):.2f} and keep at least half of its gain: {_routes_shown(r)}"


@words("routes:unresolved")
def _routes_unresolved(r: Reason) -> str:
    needs = [ROUTES_PARTS[p].format(margin=_n(r, "margin")) for p in _n(r, "needs")]
    return f"{_routes_shown(r)}; support needs {' and '.join(needs)}"


# Claim 1's second half: what answer-blind selectors keep ------------------------------------

RETENTION_GATES = {
    "chance": "reach not resolved above chance",
    "gain": "no gain over realized resolved ({gain})",
    "none": "no selections stored, or a gain of exactly zero",
}
"""Why no selector's retention was measured, by name."""


def gate_text(gate: str, gain: Estimate | None = None) -> str:
    """Why a probe's retention is not measured (its gate, by name)."""
    return RETENTION_GATES[gate].format(gain=shown(gain) if gain is not None else "")


def _kept(r: Reason) -> str:
    gross = f"; gross {_e(r, 'gross').text()} of the gained questions" if "gross" in r.estimates else ""
    kept = _e(r, "kept").text() if "kept" in r.estimates else "-"
    return f"{_n(r, 'selector')} keeps {kept} of the gain (net of lost realized answers{gross})"


@words("retention:none")
def _retention_none(r: Reason) -> str:
    return f"no retention to judge: {gate_text(str(_n(r, 'gate')), r.estimates.get('gain'))}"


@words("retention:kept")
def _retention_kept(r: Reason) -> str:
    return f"{_kept(r)}: resolved above {_n(r, 'margin'):.2f} (Holm over {_n(r, 'selectors')} selectors)"


@words("retention:little")
def _retention_little(r: Reason) -> str:
    return f"every answer-blind selector keeps under {_n(r, 'margin'):.2f} of the gain, each resolved (net of lost realized answers)"


@words("retention:unresolved")
def _retention_unresolved(r: Reason) -> str:
    return f"{_kept(r)}: not resolved below {_n(r, 'margin'):.2f}"


# Claim 2: one MLP block ------------------------------------------------------------------------

BOTTLENECK_PARTS = {
    "repair": "held-out repair resolved above one half",
    "break": "a held-out break rate resolved below {bound:.2f}",
    "null": "held-out repair resolved above each null",
}
"""The parts of claim 2's support, by name, as its unresolved verdict names those missing."""


@words("bottleneck:no-set")
def _bottleneck_no_set(r: Reason) -> str:
    return f"only {_n(r, 'failures')} question(s) reachable but not realized under {_n(r, 'probe')}: no failure set to mine"


@words("bottleneck:at-chance")
def _bottleneck_at_chance(r: Reason) -> str:
    """Rules 3's precondition: a failure set at chance; what the sweep found is the reason the
    rules beneath would have given (its own rule and fields, beside the chance fields)."""
    chance = chance_text(_n(r, "chance_questions"), _n(r, "chance_failures"), _n(r, "chance_expected"), _e(r, "chance"))
    found = Reason(
        str(_n(r, "found")),
        {k: v for k, v in r.numbers.items() if not k.startswith("chance_") and k != "found"},
        {k: e for k, e in r.estimates.items() if k != "chance"},
    )
    return (
        f"the failure set is not resolved above its chance expectation: {chance}; a set that guessing alone gives "
        f"cannot speak to claim 2 (what the sweep found: {render(found)})"
    )


@words("bottleneck:ruled-out")
def _bottleneck_ruled_out(r: Reason) -> str:
    return (
        f"every one of {_n(r, 'swept')} blocks is ruled out on the whole failure set and every control ({_n(r, 'half_level'):.1%} bounds): "
        f"{_n(r, 'by_repair')} repair resolved below one half, {_n(r, 'by_break')} more break resolved above {_n(r, 'break_bound'):.2f}"
    )


@words("bottleneck:no-heldout")
def _bottleneck_no_heldout(r: Reason) -> str:
    return "no held-out failures to confirm a block on"


@words("bottleneck:none-selected")
def _bottleneck_none_selected(r: Reason) -> str:
    generated = _n(r, "generated")
    made = f" ({generated[0]} of {generated[1]} blocks generated)" if generated else ""
    screen_only = "" if _n(r, "swept") else "; a screen alone never gives against (sweep every block with exhaustive)"
    return f"no generated block repairs a discovery failure within the break bound {_n(r, 'break_bound'):.2f}{made}{screen_only}"


def _named(r: Reason) -> str:
    held = _e(r, "heldout")
    named = f"MLP {_n(r, 'layer')} repairs {shown(held)} of {held.n} held-out failures"
    tied = _n(r, "tied_with")
    if tied:
        named += f" (tied on discovery repair with MLP {', '.join(map(str, tied))}; kept by held-out repair, Holm over {len(tied) + 1})"
    return named


@words("bottleneck:support")
def _bottleneck_support(r: Reason) -> str:
    broken = r.estimates.get("break")
    nulls_text = ", ".join(f"{k} {shown(_e(r, 'versus:' + k))}" for k in _n(r, "nulls"))
    return (
        f"silencing {_named(r)}, resolved above one half; breaks {broken.text() if broken else '-'} of {broken.n if broken else 0} "
        f"held-out controls; above the null ({nulls_text})"
    )


@words("bottleneck:unresolved")
def _bottleneck_unresolved(r: Reason) -> str:
    broken = r.estimates.get("break")
    notes = []
    if _n(r, "heldout_needed") is not None:
        notes.append(f"no repair rate resolves above one half with fewer than {_n(r, 'heldout_needed')} held-out failures")
    if _n(r, "controls_needed") is not None:
        zero, one = _n(r, "controls_needed")
        notes.append(
            f"the break bound needs at least {zero} held-out controls with 0 breaks ({one} with 1); this set has {broken.n if broken is not None else 0}"
        )
    breaks = f"; breaks {shown(broken)} of {broken.n} held-out controls" if broken is not None else "; break rate unmeasured (no held-out control)"
    needs = [BOTTLENECK_PARTS[p].format(bound=_n(r, "break_bound")) for p in _n(r, "needs")]
    text = f"{_named(r)}{breaks}; support needs {' and '.join(needs)}" + (f" ({'; '.join(notes)})" if notes else "")
    return text if _n(r, "swept") else text + "; a screen alone never gives against"


# Claim 3: training -----------------------------------------------------------------------------

TRAINING_PARTS = {
    "margin": "delta reachable's upper bound below +{margin:.2f}",
    "contrast": "delta realized / 2 - delta reachable resolved above zero",
}
"""The parts of claim 3's support, by name, as its unresolved verdict names those missing."""


def _training_shown(r: Reason) -> str:
    return (
        f"realized rose ({shown(_e(r, 'delta_realized'))}); delta reachable {shown(_e(r, 'delta_reachable'))}, "
        f"delta realized / 2 - delta reachable {shown(_e(r, 'contrast'))}"
    )


@words("training:no-overlap")
def _training_no_overlap(r: Reason) -> str:
    return "no question complete in both audits"


@words("training:at-chance")
def _training_at_chance(r: Reason) -> str:
    a, b = _e(r, "base_above_chance"), _e(r, "trained_above_chance")
    return (
        f"neither model's reach is resolved above its chance level (base {a.text()}, {a.p_text()}; trained {b.text()}, "
        f"{b.p_text()} above chance): a ceiling that guessing alone gives says nothing of what training kept or lost "
        f"(delta realized {shown(_e(r, 'delta_realized'))}; delta reachable {shown(_e(r, 'delta_reachable'))})"
    )


@words("training:no-rise")
def _training_no_rise(r: Reason) -> str:
    how = "fell" if _n(r, "fell") else f"stayed flat (within ±{_n(r, 'margin'):.2f}, resolved)"
    return f"realized accuracy {how} (delta realized {shown(_e(r, 'delta_realized'))}): there is no gain to attribute"


@words("training:rise-unresolved")
def _training_rise_unresolved(r: Reason) -> str:
    return f"a rise in realized accuracy is not resolved (delta realized {shown(_e(r, 'delta_realized'))}; delta reachable {shown(_e(r, 'delta_reachable'))})"


@words("training:expanded")
def _training_expanded(r: Reason) -> str:
    return f"{_training_shown(r)}: the ceiling rose by more than {_n(r, 'margin'):.2f} (training expanded reach)"


@words("training:kept")
def _training_kept(r: Reason) -> str:
    how = "fell" if _n(r, "fell") else f"rose by less than {_n(r, 'margin'):.2f} and by less than half the realized rise"
    return f"{_training_shown(r)}: the ceiling {how}"


@words("training:unresolved")
def _training_unresolved(r: Reason) -> str:
    needs = [TRAINING_PARTS[p].format(margin=_n(r, "margin")) for p in _n(r, "needs")]
    return f"{_training_shown(r)}; support needs {' and '.join(needs)}"
