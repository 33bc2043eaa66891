"""A block's rates as one typed record (issue 38; one record for every shape, issue 57):
``BlockRates`` is the one
writer and reader of the sweep table's flat rate columns, so a page, widget or verdict never
reads ``_low``/``_high`` columns by hand. Guards against the table layout and the estimates
drifting apart (an interval read from one column and a count from another), and against
tables written before the control set was split reading as anything but unmeasured halves."""

import math
import subprocess
import sys

import pandas as pd
import pytest

from rnr_lens.core.records import Outcome
from rnr_lens.core.stats import wilson
from rnr_lens.judge.sweeps import RATES, BlockRates, bottleneck_of, rates


def _outcomes() -> tuple[list[Outcome], dict[str, Outcome]]:
    """Eight failures (five discovery, three held-out) and six controls (two held out): the
    ablation repairs d0, d1 and h0, and breaks c0 (a discovery control) and c4 (held out)."""
    before = {f"d{i}": Outcome(f"d{i}", "", "1", False) for i in range(5)}
    before |= {f"h{i}": Outcome(f"h{i}", "", "1", False) for i in range(3)}
    before |= {f"c{i}": Outcome(f"c{i}", "", "2", True) for i in range(6)}
    after = [Outcome(f"d{i}", "", "2", i < 2, "discovery") for i in range(5)]
    after += [Outcome(f"h{i}", "", "2", i == 0, "heldout") for i in range(3)]
    after += [Outcome(f"c{i}", "", "2", i not in (0, 4), "control") for i in range(6)]
    return after, before


def test_rates_count_repairs_and_breaks_per_half():
    after, before = _outcomes()
    got = rates(3, after, before, heldout_controls=frozenset({"c4", "c5"}))
    assert got.repair == wilson(3, 8)
    assert got.repair_discovery == wilson(2, 5)
    assert got.repair_heldout == wilson(1, 3)
    assert got.break_all == wilson(2, 6)
    assert got.break_discovery == wilson(1, 4)
    assert got.break_heldout == wilson(1, 2)
    assert (got.n_repaired, got.n_broken, got.layer) == (3, 2, 3)
    assert got.estimate("break") is got.break_all
    with pytest.raises(KeyError, match="not a sweep rate"):
        got.estimate("repair_low")


def test_the_table_columns_round_trip_through_a_dataframe_and_json():
    after, before = _outcomes()
    got = rates(3, after, before, heldout_controls=frozenset({"c4", "c5"}))
    table = pd.DataFrame([{"layer": 3, "component": "mlp", "method": "zero", **got.columns()}])
    assert BlockRates.from_row(table.iloc[0]) == got
    # the store keeps a table as JSON records, missing values as None
    record = table.astype(object).where(table.notna(), None).to_dict("records")[0]
    assert BlockRates.from_row(record) == got
    assert [c for c in got.columns() if not c.startswith("n_")] == [f"{k}{s}" for k in RATES for s in ("", "_low", "_high")]


def test_a_row_not_generated_has_no_rates_and_a_missing_half_reads_empty():
    assert BlockRates.from_row({"layer": 1, "screen_logprob": 0.2}) is None
    assert BlockRates.from_row({"layer": 1, "repair": float("nan")}) is None
    # a table written before the control set was split: only every control's break rate
    est = wilson(1, 4)
    old = {"layer": 1, "repair": est.value, "repair_low": est.low, "repair_high": est.high, "n_failures": 4, "n_repaired": 1}
    old |= {"break": 0.0, "break_low": 0.0, "break_high": wilson(0, 5).high, "n_control": 5, "n_broken": 0}
    got = BlockRates.from_row(old)
    assert got is not None and got.repair == est and got.break_all == wilson(0, 5)
    assert got.break_discovery.is_empty and got.break_heldout.is_empty and got.repair_heldout.is_empty
    assert got.estimate("break_heldout").text() == "-"
    # no count columns at all: the counts follow from the rate and its n
    no_counts = {k: v for k, v in old.items() if k not in ("n_repaired", "n_broken")}
    assert BlockRates.from_row(no_counts).n_repaired == 1


def test_the_bottleneck_reads_its_held_out_estimate_from_the_same_record():
    after, before = _outcomes()
    row = {"layer": 2, "component": "mlp", "method": "zero", **rates(2, after, before, frozenset({"c4", "c5"})).columns()}
    other = {"layer": 5, "component": "mlp", "method": "zero", "repair_discovery": math.nan}
    b = bottleneck_of(pd.DataFrame([other, row]), bound=0.5)
    assert b is not None and b.layer == 2 and b.rates == BlockRates.from_row(row)
    assert b.rates.repair_heldout == wilson(1, 3) and b.rates.repair_heldout.n == 3
    assert b.admitted_on == "break_discovery" and b.admitted_break == wilson(1, 4)  # admitted on the discovery controls
    assert b.rates.break_heldout == wilson(1, 2), "the held-out controls' break is its own name, never the admitting one"
    d = b.to_dict()
    assert (d["break"], d["repair_heldout"], d["n_discovery"]) == (pytest.approx(0.25), pytest.approx(1 / 3), 5), "mine --json's keys"


def test_a_table_written_before_the_controls_were_split_admits_on_every_control():
    after, before = _outcomes()
    row = {"layer": 2, "component": "mlp", "method": "zero", **rates(2, after, before, frozenset({"c4", "c5"})).columns()}
    old = {k: v for k, v in row.items() if not k.startswith(("break_discovery", "break_heldout", "n_control_"))}
    b = bottleneck_of(pd.DataFrame([old]), bound=0.5)
    assert b is not None and b.admitted_on == "break" and b.admitted_break == wilson(2, 6)
    assert b.rates.break_discovery.is_empty and b.rates.break_heldout.is_empty
    assert "break 0.333" in repr(b)


def test_the_sweep_records_are_torch_free():
    """The claims, the report page and the widgets read sweeps without a model (``widgets``
    once pulled torch in through ``miner``): importing ``sweeps`` in a fresh interpreter loads
    no torch (the values floor's wider check: tests/test_architecture.py)."""
    code = "import sys, rnr_lens.judge.sweeps; assert 'torch' not in sys.modules, 'rnr_lens.judge.sweeps loaded torch'"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
