"""Selectors: which of a question's tries a probe finally answers with.

The **oracle** needs the gold answer (a question is reachable when any try is correct);
every other selector is **answer-blind**: it sees the tries' texts, extracted answers and
the model's own confidence, never the gold answer. The gap between the oracle and the blind
selectors is one of the findings rnr_lens exists to show.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from rnr_lens.core.records import Try
from rnr_lens.errors import RnrLensError
from rnr_lens.measure.probes import probe_class

Selector = Callable[[Sequence[Try]], Try]


def oracle(tries: Sequence[Try]) -> Try:
    """The first correct try, else the first try (answer-aware)."""
    return next((t for t in tries if t.correct), tries[0])


def majority(tries: Sequence[Try]) -> Try:
    """The first try whose extracted answer is the most common one (ties: earliest answer)."""
    answered = [t for t in tries if t.extracted is not None]
    if not answered:
        return tries[0]
    counts = Counter(t.extracted for t in answered)
    best = max(counts.values())
    winner = next(t.extracted for t in answered if counts[t.extracted] == best)
    return next(t for t in answered if t.extracted == winner)


def logprob(tries: Sequence[Try]) -> Try:
    """The try with the highest mean token log-probability (ties: earliest)."""
    return max(tries, key=lambda t: (t.mean_logprob if t.mean_logprob is not None else float("-inf"), -t.try_index))


def entropy(tries: Sequence[Try]) -> Try:
    """The try with the lowest mean next-token entropy (ties: earliest)."""
    return min(tries, key=lambda t: (t.mean_entropy if t.mean_entropy is not None else float("inf"), t.try_index))


def reward(tries: Sequence[Try]) -> Try:
    """The try with the highest search reward; answer-blind only when the reward is
    (the route search's best route under a confidence reward)."""
    return max(tries, key=lambda t: (t.reward if t.reward is not None else float("-inf"), -t.try_index))


def logprob_or_default(tries: Sequence[Try], default: Try) -> Try:
    """The probe's most confident try (highest mean log-probability) where it is more confident
    than the default answer, else the default answer itself (answer-blind). A blind selector
    restricted to a probe's own tries is handicapped by construction, since the tries never
    include the default route; this one may keep the default."""
    pick = logprob(tries)

    def conf(t: Try) -> float:
        return t.mean_logprob if t.mean_logprob is not None else float("-inf")

    return pick if conf(pick) > conf(default) else default


SELECTORS: dict[str, Selector] = {"oracle": oracle, "majority": majority, "logprob": logprob, "entropy": entropy, "reward": reward}
WITH_DEFAULT: dict[str, Callable[[Sequence[Try], Try], Try]] = {"logprob-or-default": logprob_or_default}
"""Answer-blind selectors that also see the default (realized) answer."""
ANSWER_BLIND = ("majority", "logprob", "entropy", "logprob-or-default")


def names_for(probe: str) -> list[str]:
    """The selectors a probe's tries are read with: the answer-blind ones, the oracle, and the
    probe's own reward where its tries carry one (a route search's)."""
    return list(ANSWER_BLIND) + ["oracle"] + (["reward"] if probe_class(probe).rewarded else [])


def get(name: str) -> Selector:
    try:
        return SELECTORS[name]
    except KeyError:
        raise RnrLensError(f"unknown selector {name!r}; choose one of {', '.join(SELECTORS)}") from None


def pick(name: str, tries: Sequence[Try], default: Try | None) -> Try:
    """Selector ``name``'s pick among ``tries`` (those that see it also get the ``default`` try;
    without one they pick among the tries alone)."""
    if name in WITH_DEFAULT:
        return WITH_DEFAULT[name](tries, default) if default is not None else logprob(tries)
    return get(name)(tries)
