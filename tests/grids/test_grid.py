"""The grid file: its fields checked before any model loads, the committed grids' designs
(matched across models, as their issues ask), and what follows from the fields alone."""

import numpy as np
import pytest

import rnr_lens as R
from rnr_lens.grids.grid import Grid


def test_the_example_grid_is_valid():
    from pathlib import Path

    grid = Grid.load(Path(__file__).resolve().parents[2] / "assets" / "grid.yaml")
    assert (
        grid.k == 8
        and "smollm2-135m-instruct" in grid.models
        and grid.probes[1] == R.parse_probe("routes:k=8,edits=2").name == "routes:k=8,edits=2,protect=1,shared=false"
    )
    assert np.all([p["trained"].endswith("runs/dapo/final") for p in grid.pairs])


def test_the_seeds_grid_pairs_one_base_with_three_training_seeds():
    """The grid behind claim 3 across training runs: one base, three checkpoints of the README's
    DAPO command at seeds 0, 1, 2 (its comment's commands), the same questions for each."""
    import re
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "assets" / "grid-seeds.yaml"
    grid = Grid.load(path)
    assert {p["base"] for p in grid.pairs} == {"smollm2-135m-instruct"} and len({p["trained"] for p in grid.pairs}) == 3
    assert not grid.mine and grid.n >= 200 and set(grid.tasks) == {"add-two-digit", "sub"}
    # claim 3 at large k (issue 41): at least 100 add-two-digit questions and sub whole, at k = 128
    assert grid.ceiling_k == 128 and grid.ceiling_n >= 115 and grid.ceiling_probe.endswith("draw=inverse-cdf")
    commands = re.findall(r"rnr-lens train .*", path.read_text())
    assert [re.search(r"--seed (\d)", c).group(1) if "--seed" in c else "0" for c in commands] == ["0", "1", "2"]
    assert [c.split("--out ")[1] + "/final" for c in commands] == [p["trained"].split("../", 1)[1] for p in grid.pairs]


def test_the_deep_grid_is_valid_and_takes_small_tasks_whole():
    """The deep grid asks n=700 of tasks whose test splits hold 50 and 115: those are used whole
    (once "ask for n between 1 and 50"), the large task gives exactly n."""
    from pathlib import Path

    from rnr_lens.questions import tasks

    grid = Grid.load(Path(__file__).resolve().parents[2] / "assets" / "grid-deep.yaml")
    assert grid.exhaustive and grid.k == 8 and grid.models == ("smollm2-135m-instruct",)
    sizes = {spec: len(grid.load_task(spec).questions) for spec in grid.tasks}
    assert sizes == {spec: min(grid.n, tasks.split_size(spec)) for spec in grid.tasks}
    assert sizes["add-small"] == tasks.split_size("add-small") < grid.n
    assert grid.load_task("add-small").questions == tasks.get("add-small", n="all").questions


def test_the_gemma_deep_grid_is_the_smollm2_deep_grid_on_another_model():
    """Issue 56's matched design: every field of the second architecture's deep grid equals the
    SmolLM2 deep grid's (tasks, n, k, temperature, edits, seed, sweeps, margins), save the model
    and the trained pair (a grid of its own); its deployment is the model's default."""
    from pathlib import Path

    assets = Path(__file__).resolve().parents[2] / "assets"
    smollm2, gemma = (Grid.load(assets / name).to_dict() for name in ("grid-deep.yaml", "grid-deep-gemma.yaml"))
    assert gemma.pop("models") == ["gemma3-270m"] and gemma.pop("pairs") == [] and gemma["config"] is None
    assert {k: v for k, v in smollm2.items() if k not in ("models", "pairs")} == gemma


def test_the_gemma_dapo_grid_is_the_seeds_grid_on_another_model():
    """Issue 56's claim 3 on Gemma: the seeds grid's tasks, sizes and ceiling, and its three
    seeds, each pair trained from Gemma by a command in its comment that differs from the seeds
    grid's only in the model and the layers trained, the top half of the blocks (the stated
    rule: SmolLM2's recipe trains 15-29 of 30)."""
    import re
    from pathlib import Path

    from rnr_lens.model.models import KNOWN_MODELS

    path = Path(__file__).resolve().parents[2] / "assets" / "grid-dapo-gemma.yaml"
    gemma, seeds = Grid.load(path).to_dict(), Grid.load(path.parent / "grid-seeds.yaml").to_dict()
    assert gemma.pop("models") == ["gemma3-270m"] and seeds.pop("models") == ["smollm2-135m-instruct"]
    pairs, seed_pairs = gemma.pop("pairs"), seeds.pop("pairs")
    assert seeds == gemma and len(pairs) == len(seed_pairs) == 3
    commands, seed_commands = (re.findall(r"rnr-lens train .*", p.read_text()) for p in (path, path.parent / "grid-seeds.yaml"))
    blocks = int(re.search(r"\((\d+) blocks\)", KNOWN_MODELS["gemma3-270m"].description).group(1))  # 18, without loading it
    for pair, command, seed_command in zip(pairs, commands, seed_commands, strict=True):
        assert pair["base"] == "gemma3-270m" and f"--model {pair['base']} " in command
        assert command.split("--out ")[1] + "/final" == pair["trained"].split("../", 1)[1]
        assert (re.search(r"--seed \d+", command) or [None])[0] == (re.search(r"--seed \d+", seed_command) or [None])[0]
        first, last = map(int, re.search(r"--layers (\d+)-(\d+)", command).groups())
        assert (first, last) == (blocks // 2, blocks - 1)
        assert re.sub(r"--model \S+ |--layers \S+ |--out \S+", "", command) == re.sub(r"--layers \S+ |--out \S+", "", seed_command)


def test_trained_checkpoints_run_right_after_their_base():
    """So a partial report answers claim 3 for a pair as soon as both its audits are done."""
    grid = Grid(models=("a", "b"), tasks=("add-small",), pairs=({"base": "a", "trained": "a2"}, {"base": "c", "trained": "c2"}))
    assert grid.run_order() == ["a", "a2", "b", "c", "c2"]


def test_a_grid_continues_a_report_only_by_adding_to_it():
    """What a report may be resumed with (Grid.cannot_continue, the one owner of the rule): the
    same grid, the ceiling's fields added, or trained pairs appended; anything else names the
    first field that differs."""
    seed0, seed1 = {"base": "m", "trained": "m-seed0"}, {"base": "m", "trained": "m-seed1"}
    ran = Grid(("m",), ("add-small",), pairs=(seed0,)).to_dict()
    for same_or_more in (
        Grid(("m",), ("add-small",), pairs=(seed0,)),
        Grid(("m",), ("add-small",), pairs=(seed0,), ceiling_k=16, ceiling_n=5),
        Grid(("m",), ("add-small",), pairs=(seed0, seed1), ceiling_k=16),
    ):
        assert same_or_more.cannot_continue(ran) is None
    with_ceiling = Grid(("m",), ("add-small",), pairs=(seed0,), ceiling_k=16).to_dict()
    assert Grid(("m",), ("add-small",), pairs=(seed0,)).cannot_continue(with_ceiling) == "its ceiling_k is 16, this grid's None"
    assert Grid(("m",), ("add-small",), pairs=(seed1, seed0)).cannot_continue(ran).startswith("its pairs is [{'base': 'm', 'trained': 'm-seed0'}]")
    assert Grid(("m",), ("add-small",), pairs=(seed1,)).cannot_continue(ran).startswith("its pairs is ")
    assert (
        Grid(("m",), ("add-small", "sub"), pairs=(seed0, seed1)).cannot_continue(ran)
        == "its tasks is ['add-small'], this grid's ['add-small', 'sub']"
    )


def test_a_pair_given_twice_is_refused():
    """One checkpoint would count as two runs in claim 3's tallies and run labels ("2 of 2
    support"); appending pairs to a report (Grid.cannot_continue) makes that an easy slip."""
    pair = {"base": "m", "trained": "m-seed1"}
    with pytest.raises(R.RnrLensError, match=r"grid pair \(base: 'm', trained: 'm-seed1'\) is given twice; give each pair once"):
        Grid(("m",), ("add-small",), pairs=(pair, {"base": "m", "trained": "m-seed0"}, dict(pair)))


@pytest.mark.parametrize(("field", "value"), [("ceiling_k", 10**12), ("edits", 10**12)])
def test_a_grid_field_too_large_is_refused_before_any_audit(field, value):
    """Issue 73: a grid with ``ceiling_k: 10**12`` or ``edits: 10**12`` was refused only after
    its audits ran, with runs.db, claims.json, report.html and evidence written. Reading the
    grid refuses it, in one line naming the field."""
    from rnr_lens.errors import RnrLensError

    fields = {"models": ["m"], "tasks": ["add-small"], "pairs": [{"base": "m", "trained": "t"}], field: value}
    with pytest.raises(RnrLensError, match=field) as refused:
        Grid.from_dict(fields)
    assert "\n" not in str(refused.value) and "100000" in str(refused.value)


def test_a_grid_of_many_pairs_checks_them_for_repeats_in_one_pass():
    """Issue 73: 60,000 pairs made a quadratic duplicate check. The check is one pass over a
    set, and still refuses a pair given twice wherever it stands."""
    from rnr_lens.errors import RnrLensError

    pairs = [{"base": "m", "trained": f"t{i}"} for i in range(60_000)]
    assert len(Grid.from_dict({"models": ["m"], "tasks": ["add-small"], "pairs": pairs}).pairs) == 60_000
    with pytest.raises(RnrLensError, match="given twice"):
        Grid.from_dict({"models": ["m"], "tasks": ["add-small"], "pairs": [*pairs, pairs[123]]})
