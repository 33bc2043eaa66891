"""Provenance records what ran; nothing in it decides a verdict. Guards against a claims.json
that cannot say which code and weights it speaks for, and a re-derivation that hides a code
difference."""

import json
from dataclasses import replace

from rnr_lens.dapo import CLI_FIELDS, TrainConfig
from rnr_lens.provenance import Code, Provenance, RunSpan, Weights, code_differences


def test_a_run_span_records_the_code_and_the_machine():
    span = RunSpan.begin()
    assert span.start == span.end and span.code.libraries["torch"] and span.machine.torch_threads >= 1 and span.machine.cpu
    assert RunSpan.from_dict(json.loads(json.dumps(span.to_dict()))) == span


def test_provenance_keeps_one_span_per_run_and_every_distinct_weights():
    span = RunSpan.begin()
    p = Provenance().with_run(span).with_run(replace(span, end="2099-01-01T00:00:00+00:00"))
    assert len(p.runs) == 1 and p.runs[0].end.startswith("2099"), "a run's span is brought up to date, not repeated"
    w = Weights("m", "m", "abc", "cpu", "float32")
    p = p.with_model(w).with_model(w).with_model(replace(w, fingerprint="def"))
    assert [m.fingerprint for m in p.models] == ["abc", "def"], "other weights under one spec stay visible"
    assert Provenance.from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_code_differences_name_the_commit_and_uncommitted_changes():
    here = Code("0.1.0", "a" * 40, False, "3.11", {"torch": "2"})
    same = Provenance((RunSpan("s", "e", here, RunSpan.begin().machine),))
    assert code_differences(same, here) == []
    other = Provenance((RunSpan("s", "e", replace(here, commit="b" * 40, dirty=True), RunSpan.begin().machine),))
    lines = code_differences(other, here)
    assert "ran commit bbbbbbbbbbbb; this is commit aaaaaaaaaaaa" in lines[0] and "uncommitted" in lines[1]
    unknown = Provenance((RunSpan("s", "e", replace(here, commit=None), RunSpan.begin().machine),))
    assert "may differ" in code_differences(unknown, here)[0]


def test_the_training_command_gives_back_the_config():
    from rnr_lens.cli import build_parser

    config = TrainConfig(steps=30, layers="15-29", lr=3e-5, seed=2)
    args = build_parser().parse_args(["train", "--task", "add-two-digit", "--out", "x", *config.command_flags().split()])
    rebuilt = TrainConfig(**{f: getattr(args, f) for f in CLI_FIELDS})
    assert rebuilt == config
    assert "set through the API: clip_high=0.3" in TrainConfig(clip_high=0.3).command_flags()
