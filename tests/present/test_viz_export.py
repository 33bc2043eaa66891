"""Figures as files: each format written whole, bad paths refused, print layouts readable."""

import pytest

import rnr_lens as R
from rnr_lens.present import viz
from rnr_lens.present.viz_export import MIN_FONT_PT, SIZES, print_layout
from tests.conftest import require_chromium


@pytest.mark.parametrize("suffix, magic", [(".html", b"<html"), (".png", b"\x89PNG"), (".pdf", b"%PDF"), (".svg", b"<svg")])
def test_save_writes_each_format(tmp_path, suffix, magic):
    if suffix != ".html":
        require_chromium()  # kaleido renders static formats in Chromium
    fig = viz.route_diagram([R.Route.skip(4, 2)])
    path = viz.save(fig, tmp_path / f"fig{suffix}")
    assert magic in path.read_bytes()[:2000]
    assert [p.name for p in tmp_path.iterdir()] == [f"fig{suffix}"], "no temporary files left behind"


def test_save_rejects_bad_paths(tmp_path):
    fig = viz.route_diagram([R.Route.skip(4, 2)])
    with pytest.raises(R.RnrLensError, match="cannot save a figure as .bmp"):
        viz.save(fig, tmp_path / "x.bmp")
    with pytest.raises(R.RnrLensError, match="does not exist"):
        viz.save(fig, tmp_path / "missing" / "x.pdf")


def test_print_layout_rejects_unknown_sizes():
    with pytest.raises(R.RnrLensError, match="unknown figure size 'poster'"):
        print_layout(viz.route_diagram([R.Route.skip(4, 2)]), "poster")


def test_a_print_layout_keeps_every_font_readable_at_its_size():
    """At the column preset (3.5 in wide) every font is at least MIN_FONT_PT points."""
    fig = viz.route_diagram([R.Route.skip(4, 2), "4:0-2,2-3"])
    laid_out, width, _ = print_layout(fig, "column")
    assert width == round(SIZES["column"][0] * 96)
    px_per_pt = 96 / 72
    sizes = [laid_out.layout.font.size, *(laid_out.layout[a].tickfont.size for a in laid_out.layout if a.startswith(("xaxis", "yaxis")))]
    assert min(sizes) / px_per_pt >= MIN_FONT_PT * 0.94
