"""Text views of results: compact estimates, tables that do not wrap."""

from rnr_lens.core.display import estimate_text, html_table, short_text
from rnr_lens.core.stats import Estimate


def test_estimates_fit_on_one_line():
    assert estimate_text(Estimate(0.5833, 0.3333, 0.8333, 12)) == "0.58 [0.33,0.83]"
    assert estimate_text(Estimate.empty()) == "-" and estimate_text(None) == "-"
    assert short_text("smollm2-135m-instruct / add-two-digit", 20) == "smollm2-135m-instru…" and short_text("ab", 5) == "ab"


def test_html_table_wraps_only_free_text_and_escapes():
    table = html_table([["<b>x</b>", "0.58 [0.33,0.83]"]], ["prompt", "realized"])
    cells = table.split("<td ")[1:]
    assert "white-space:nowrap" not in cells[0] and "white-space:nowrap" in cells[1]
    assert "&lt;b&gt;x&lt;/b&gt;" in table and "<b>x</b>" not in table


def test_an_empty_verdict_row_is_left_out():
    """The report page showed an empty "verdict:" row under the search's retention line."""
    from rnr_lens.core.display import html_table

    page = html_table([["a", "support: x"], ["b", ""]], ["probe", "verdict"], below=("verdict",))
    assert page.count("class='rnr-below'") == 1 and "<b>verdict:</b> support: x" in page
