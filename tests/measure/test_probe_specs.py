"""A probe's name read once: ProbeSpec, the short labels and budget labels, and the shortest
form that names a probe among an audit's (the one reader of names outside probes.py)."""

import pytest

import rnr_lens as R
from rnr_lens.errors import RnrLensError
from rnr_lens.measure.probe_specs import ProbeSpec, budget_label, family_of, short_labels
from rnr_lens.measure.probes import PROBES, parse_probe, shortest_form

CANONICAL = [
    parse_probe(s).name
    for s in (
        "sampling:k=8,t=0.5",
        "routes:k=8,edits=2",
        "search:k=8,reward=oracle",
        "ablation:method=zero,layers=3+4",
        "sampling:k=128,draw=inverse-cdf",
    )
]


def test_every_canonical_name_round_trips_through_its_spec():
    for name in CANONICAL:
        spec = ProbeSpec.parse(name)
        assert str(spec) == name and spec == parse_probe(name).spec
        assert spec.family in PROBES and family_of(name) == spec.family


def test_the_budget_label_reads_k_by_its_key_not_its_place():
    assert budget_label("routes:edits=2,k=8,protect=1") == "routes:k=8"
    assert budget_label(CANONICAL[0]) == "sampling:k=8" and budget_label(CANONICAL[3]) == CANONICAL[3]


def test_short_labels_are_families_numbered_where_they_repeat():
    names = [CANONICAL[0], CANONICAL[1], CANONICAL[4]]
    assert short_labels(names) == {names[0]: "sampling-1", names[1]: "routes", names[2]: "sampling-2"}
    assert short_labels([]) == {}


@pytest.mark.parametrize(
    "bad, message",
    [("sampling:k", "malformed setting 'k'"), ("sampling:k=1,k=2", "k is given twice"), ("routes:=3", "malformed setting '=3'")],
)
def test_a_malformed_name_is_refused_in_one_line(bad, message):
    with pytest.raises(RnrLensError, match=message):
        ProbeSpec.parse(bad)


def test_the_shortest_form_names_its_probe_in_a_real_audit(tiny):
    """Guards against the comma-cut prefix the CLI once suggested: beside routes, the prefix
    `sampling:k=2` of `sampling:k=2,t=0.5` is unique as text, yet the library reads it with
    the default t=0.7 and refused it."""
    specs = ["sampling:k=2,t=0.5", "routes:k=2", "sampling:k=2,t=1.0", "sampling:k=2"]
    for probes in (specs[:2], specs):
        result = R.audit(tiny, R.tasks.get("add-small", n=2), probes, progress=False)
        forms = {p: shortest_form(p, result.probes) for p in result.probes}
        assert all(result.probe_name(form) == p for p, form in forms.items()), forms
        assert len(set(forms.values())) == len(forms)
    assert [forms[p] for p in result.probes] == ["sampling:k=2,t=0.5", "routes", "sampling:k=2,t=1.0", "sampling:k=2"]


@pytest.mark.parametrize(
    "written, canonical",
    [
        ("sampling:k=8,t=1", "sampling:k=8,t=1.0,top_p=1.0,draw=multinomial"),
        ("sampling: t=0.5 , k=4", "sampling:k=4,t=0.5,top_p=1.0,draw=multinomial"),
        ("routes:k=3,shared=true", "routes:k=3,edit_rate=0.25,max_segment=4,protect=1,shared=true"),
        ("routes:k=3,shared=yes,edits=1", "routes:k=3,edits=1,protect=1,shared=true"),
        ("routes:k=3,shared=", "routes:k=3,edit_rate=0.25,max_segment=4,protect=1,shared=false"),
        ("ablation:method=zero,layers=3+4", "ablation:component=mlp,method=zero,layers=3+4"),
        ("ablation:component=attn", "ablation:component=attn,method=zero"),
        ("search:k=4,reward=oracle", "search:k=4,reward=oracle,algo=mcts,c=1.0,length_penalty=0.1,epsilon=0.1,protect=1,expand=distinct"),
    ],
)
def test_a_written_spec_parses_to_its_canonical_name(written, canonical):
    """The names are part of stored audit ids: reading a setting by its declaration must give
    the names the hand-written parser gave."""
    assert parse_probe(written).name == canonical


def test_a_name_that_does_not_read_back_is_refused_before_an_audit(tiny):
    from dataclasses import dataclass

    from rnr_lens.measure.probes import Sampling

    @dataclass(repr=False)
    class Mine(Sampling):
        def params(self):
            return {**super().params(), "layers": (1, 2)}  # "layers=(1, 2)": a comma inside a value

    with pytest.raises(RnrLensError, match=r"does not read back as written"):
        R.audit(tiny, R.tasks.get("add-small", n=2), [Mine(k=1)], progress=False)
