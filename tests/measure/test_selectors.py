from rnr_lens.core.records import Try
from rnr_lens.measure import selectors


def _t(i, extracted, correct, lp=-1.0, ent=1.0, reward=None):
    return Try("q", "p", i, str(extracted), extracted, correct, 3, mean_logprob=lp, mean_entropy=ent, reward=reward)


TRIES = [
    _t(0, "5", False, lp=-0.5, ent=2.0),
    _t(1, "7", True, lp=-2.0, ent=0.5),
    _t(2, "5", False, lp=-1.0, ent=1.0, reward=0.9),
    _t(3, None, False, lp=-0.1, ent=3.0),
]


def test_oracle_finds_any_correct_try():
    assert selectors.oracle(TRIES).try_index == 1
    assert selectors.oracle([TRIES[0]]).try_index == 0


def test_blind_selectors_never_need_the_gold():
    assert selectors.majority(TRIES).extracted == "5"
    assert selectors.logprob(TRIES).try_index == 3
    assert selectors.entropy(TRIES).try_index == 1
    assert selectors.reward(TRIES).try_index == 2
    # flipping every correct flag changes no blind pick
    flipped = [Try(**{**t.__dict__, "correct": not t.correct}) for t in TRIES]
    default = _t(0, "9", True, lp=-0.3)
    flipped_default = Try(**{**default.__dict__, "correct": False})
    for name in selectors.ANSWER_BLIND:
        assert selectors.pick(name, flipped, flipped_default).try_index == selectors.pick(name, TRIES, default).try_index


def test_logprob_or_default_keeps_the_default_unless_a_try_is_more_confident():
    """A blind selector restricted to a probe's own tries can never keep the default answer, so
    its retention of the oracle's gain was handicapped by construction."""
    confident = Try("q", "default", 0, "9", "9", True, 3, mean_logprob=-0.05)
    assert selectors.pick("logprob-or-default", TRIES, confident) is confident
    unsure = Try("q", "default", 0, "9", "9", True, 3, mean_logprob=-5.0)
    assert selectors.pick("logprob-or-default", TRIES, unsure).try_index == 3, "the most confident try wins when it is more confident"
    assert selectors.pick("logprob-or-default", TRIES, None).try_index == 3, "no default stored: the tries alone"


def test_majority_ties_go_to_the_earliest_answer():
    assert selectors.majority([_t(0, "3", False), _t(1, "4", True)]).extracted == "3"
    assert selectors.majority([_t(0, None, False)]).try_index == 0
