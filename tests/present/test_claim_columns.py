"""Claim 2's columns are chosen once, for the report page and the Markdown pages alike (issue
74: the results script chose them apart from the report page)."""

import html
import json
import re
from pathlib import Path

import pytest

from rnr_lens.judge.claims import Claims
from rnr_lens.present.claim_columns import BOTTLENECK, bottleneck_columns
from rnr_lens.present.claims_markdown import bottleneck_table
from rnr_lens.present.report_page import render_html

RESULTS = Path(__file__).resolve().parents[2] / "assets" / "results"


def committed(grid: str) -> Claims:
    return Claims.from_dict(json.loads((RESULTS / grid / "claims.json").read_text()))


def page_table(claims: Claims) -> tuple[list[str], list[list[str]]]:
    """The report page's claim 2 table: its headers and its rows' cells (the verdict, written
    beneath each row, left out)."""
    section = render_html(claims).split("<h2>2. One MLP block")[1].split("<h2>")[0]
    headers = [html.unescape(h) for h in re.findall(r"<th(?:\s[^>]*)?>(.*?)</th>", section)]
    rows = [[html.unescape(c) for c in re.findall(r"<td(?:\s[^>]*)?>(.*?)</td>", r)] for r in re.findall(r"<tr>(.*?)</tr>", section, flags=re.S)]
    return headers, [r for r in rows if r]


def markdown_table(claims: Claims, model: str) -> tuple[list[str], list[list[str]]]:
    lines = bottleneck_table(claims, model).splitlines()
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    return cells[0], cells[2:]


@pytest.mark.parametrize("grid", ["grid-deep", "grid-default", "grid-lm-eval"])
def test_both_media_show_the_columns_one_chooser_picks(grid):
    """The page shows every column some setting fills; the Markdown the same ones without the
    report-only columns, in the same order; each shared column holds the same numbers."""
    claims = committed(grid)
    full = [c.header for c in bottleneck_columns(claims.bottleneck, compact=False)]
    compact = [c.header for c in bottleneck_columns(claims.bottleneck, compact=True)]
    headers, page_rows = page_table(claims)
    assert headers == [h for h in full if h != "verdict"], "the page writes the verdict beneath its row"
    assert compact == [h for h in full if h in {c.header for c in BOTTLENECK if c.compact}]
    model = claims.bottleneck[0].setting.model
    md_headers, md_rows = markdown_table(claims, model)
    assert md_headers == compact
    mine = [r for r, c in zip(page_rows, claims.bottleneck) if c.setting.model == model]
    numbers = re.compile(r"−?-?\d+\.\d+")
    for page_row, md_row in zip(mine, md_rows):
        for header, md_cell in zip(md_headers[:-1], md_row):
            page_cell = page_row[headers.index(header)]
            as_page = [n.replace("−", "-") for n in numbers.findall(md_cell)]
            assert as_page == numbers.findall(page_cell.replace("−", "-")), (header, md_cell, page_cell)


def test_a_column_no_setting_fills_is_left_out_of_both():
    """The default grid ran no exhaustive sweep and the lm-eval grid no null: neither medium
    prints an empty column for them; the deep grid, which ran both, shows both in each."""
    for grid, absent in (("grid-default", "screen vs exhaustive"), ("grid-lm-eval", "null: random blocks")):
        claims = committed(grid)
        headers, _ = page_table(claims)
        md_headers, _ = markdown_table(claims, claims.bottleneck[0].setting.model)
        assert absent not in headers and absent not in md_headers, grid
    deep = committed("grid-deep")
    for shown in (page_table(deep)[0], markdown_table(deep, "smollm2")[0]):
        assert {"screen vs exhaustive", "null: random blocks", "null: re-run"} <= set(shown)
