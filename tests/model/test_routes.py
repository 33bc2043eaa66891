import random

import pytest

from rnr_lens import RnrLensError, Route
from rnr_lens.model.routes import as_route, draw_route


def test_identity_skip_repeat_layers():
    assert Route.identity(4).layers == (0, 1, 2, 3)
    assert Route.skip(5, 1, 3).layers == (0, 2, 4)
    assert Route.repeat(4, 2, times=3).layers == (0, 1, 2, 2, 2, 3)
    assert Route([0, 0, 1], n_layers=2).repeated == {0: 2}
    assert Route.skip(5, 1, 3).skipped == (1, 3)


@pytest.mark.parametrize(
    "route",
    [
        Route.identity(30),
        Route.skip(30, 3, 4).then_repeat(10),
        Route([0, 1, 2, 1, 2, 3], n_layers=4),
        Route([3, 2, 1, 0], n_layers=4),
        Route([5], n_layers=6),
    ],
)
def test_string_form_round_trips(route):
    text = str(route)
    assert Route.parse(text) == route
    assert text.startswith(f"{route.n_layers}:")


def test_string_form_is_compact():
    assert str(Route.skip(30, 3)) == "30:0-2,4-29"
    assert str(Route.repeat(30, 10)) == "30:0-10,10-29"
    assert Route.parse("0-2,4-5", n_layers=6).layers == (0, 1, 2, 4, 5)


def test_describe():
    assert Route.identity(4).describe() == "identity"
    assert Route([0, 1, 1, 3], n_layers=4).describe() == "skip 2; repeat 1x2"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Route([0, 4], n_layers=4), "out of range"),
        (lambda: Route([], n_layers=4), "at least one block"),
        (lambda: Route([0] * 9, n_layers=4), "maximum 8"),
        (lambda: Route.skip(4, 7), "cannot skip block 7"),
        (lambda: Route.parse("0-2,x"), "does not say how many"),
        (lambda: Route.parse("4:0-2,x"), "cannot parse run 'x'"),
        (lambda: Route.parse("4:3-1"), "cannot parse run"),
        (lambda: Route.parse("5:0-3", n_layers=4), "5-block model"),
        (lambda: as_route(Route.identity(3), 4), "3-block model"),
    ],
)
def test_bad_routes_give_one_line_errors(make, message):
    with pytest.raises(RnrLensError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_n_edits_counts_single_block_skips_and_extra_visits():
    """The report sets the random routes' depth beside the search's by this count."""
    assert Route.identity(6).n_edits == 0
    assert Route.skip(6, 2, 3).n_edits == 2
    assert Route.repeat(6, 4, times=3).n_edits == 2
    assert Route.skip(6, 1).then_repeat(4).n_edits == 2
    assert Route.parse("6:0,1,2,2,4,5").n_edits == 2


def test_max_length_is_configurable():
    assert len(Route([0] * 9, n_layers=4, max_length=9)) == 9


def test_as_route_accepts_strings_and_lists():
    assert as_route("4:0,1,1,3", 4) == Route([0, 1, 1, 3], n_layers=4)
    assert as_route([0, 2], 4) == Route([0, 2], n_layers=4)
    assert as_route(None, 4) is None


def test_draw_route_distribution_properties():
    rng = random.Random(0)
    routes = [draw_route(30, rng, edit_rate=0.5) for _ in range(200)]
    assert all(r[0] == 0 and r[-1] == 29 for r in routes), "first and last blocks are protected"
    assert all(len(r) <= 60 for r in routes)
    assert any(r.skipped for r in routes) and any(r.repeated for r in routes)
    assert all(draw_route(30, random.Random(5)) == draw_route(30, random.Random(5)) for _ in range(3))
    low = [draw_route(6, random.Random(i), edit_rate=0.02) for i in range(300)]
    assert not any(r.is_identity for r in low), "the identity (the default answer) is redrawn, never a try"


def test_route_from_an_edit_vector():
    assert Route.from_edits((0, 1, 2, 0)) == Route([0, 2, 2, 3], 4)


def test_a_routes_edits_and_depth_are_read_from_its_text_in_linear_time():
    """Issue 73: 20,000 stored search tries whose route was '100000:0-99999,0-99999' were each
    expanded to 200,000 blocks to count their edits. The count is read from the runs, equal to
    the expanded route's on every route, and the depth with it."""
    import random

    rng = random.Random(0)
    for _ in range(2000):
        n = rng.randint(1, 12)
        layers = rng.choices(range(n), k=rng.randint(1, 2 * n))
        route = Route(sorted(layers) if rng.random() < 0.5 else layers, n)
        assert Route.edits_of(str(route)) == route.n_edits and Route.depth_of(str(route)) == n
    assert Route.edits_of("100000:0-99999,0-99999") == 100_000  # no list of 200,000 blocks is built
    with pytest.raises(RnrLensError, match="more than the maximum 200000 blocks"):
        Route.edits_of("100000:0-99999,0-99999,0")
