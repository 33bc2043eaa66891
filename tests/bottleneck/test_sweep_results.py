"""A sweep kept in the store and read back: the names its evaluations are stored under, and
stores written before the renames, which must read the same (or every sweep would be
generated again)."""

import json
import sqlite3

import pandas as pd
import pytest

import rnr_lens as R
from rnr_lens.bottleneck import failures
from rnr_lens.bottleneck.miner import mine
from rnr_lens.bottleneck.sweep_results import SweepKey
from rnr_lens.core.shards import Shard
from rnr_lens.measure.store import RunStore
from tests.planted import PLANTED, build_planted


@pytest.fixture(scope="module")
def planted(tiny, tmp_path_factory):
    return build_planted(tiny, tmp_path_factory.mktemp("sweeps") / "m.db")


def test_sweep_keys_name_stored_evaluations_as_before(tiny, planted):
    """Parity: the key type must write the names stores already hold (built before as an
    f-string and parsed back with rsplit), or every stored sweep would be generated again."""
    result, store = planted
    fs = failures.freeze(result, store, probe="ablation")
    base = SweepKey.base(tiny, fs, ())
    old = f"sweep/{fs.name}/{tiny.fingerprint()}/{fs.config.hash()}/{json.dumps(())[:32]}"
    assert str(base) == f"{old}/clean"
    assert str(base.of(PLANTED, Shard(1, 3))) == f"{old}/{PLANTED}/shard 1/3"
    assert SweepKey.shard_of(str(base.of(PLANTED, Shard(1, 3)))) == Shard(1, 3)
    assert base.of(PLANTED).shards_prefix == f"{old}/{PLANTED}/shard "


def test_stores_written_before_the_renames_read_the_same(tiny, planted, tmp_path):
    """Parity: a failure set frozen when its definition said ``kind`` (now ``selection``) and a
    sweep kept when its table said ``kind`` (now ``method``) must load unchanged, and asking
    for that failure set again must not count as another definition."""

    def copy(source: RunStore, name: str) -> RunStore:  # a WAL store is copied whole by SQLite's backup
        with sqlite3.connect(tmp_path / name) as target:
            source.conn.backup(target)
        return RunStore(tmp_path / name, mode="write")

    result, planted_store = planted
    store = copy(planted_store, "new.db")
    fs = failures.freeze(result, store, probe="ablation")
    sweep = mine(tiny, fs, strategy="exhaustive", break_bound=1.0, store=store, progress=False)
    old = copy(store, "old.db")
    body = old.get_artifact(result.id, "failure_set", "main")
    body["definition"] = {("kind" if k == "selection" else k): v for k, v in body["definition"].items()}
    old.put_artifact(result.id, "failure_set", "main", body, overwrite=True)
    body = old.get_artifact(result.id, "sweep", "main")
    for part in ("table", "details"):
        body[part] = [{("kind" if k == "method" else k): v for k, v in row.items()} for row in body[part]]
    old.put_artifact(result.id, "sweep", "main", body, overwrite=True)
    assert '"kind"' in json.dumps(old.get_artifact(result.id, "sweep", "main"))

    again = failures.freeze(result, old, probe="ablation")
    assert again.definition == fs.definition and again.discovery.ids == fs.discovery.ids
    loaded = R.SweepResult.load(old)
    pd.testing.assert_frame_equal(loaded.table, R.SweepResult.load(store).table)
    assert loaded.bottleneck is not None and loaded.bottleneck.to_dict() == sweep.bottleneck.to_dict()
    assert "method" in loaded.details
