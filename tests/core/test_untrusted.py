"""Files from outside: bounded readers (YAML without aliases, JSON depth and integer size, gzip
inflated as a stream against a cap), harmless quoting, and spreadsheet-safe CSV cells."""

import gzip
import zlib

import pandas as pd
import pytest

from rnr_lens import RnrLensError
from rnr_lens.core import untrusted as U


def test_yaml_aliases_are_refused_before_anything_expands_them():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}, *a]\n" for i in range(30))
    with pytest.raises(RnrLensError, match=r"uses a YAML alias \(\*a\) at line 2"):
        U.load_yaml(bomb, "grid.yaml")
    assert U.load_yaml("models: [a]\nn: 3\n", "grid.yaml") == {"models": ["a"], "n": 3}


@pytest.mark.parametrize("text", ["n: " + "1" * 5000, "seed: 2001-13-45"])
def test_yaml_values_that_cannot_be_built_are_one_line(text):
    with pytest.raises(RnrLensError, match="holds a value that cannot be read"):
        U.load_yaml(text, "grid.yaml")


def test_yaml_python_tags_and_deep_nesting_are_refused():
    with pytest.raises(RnrLensError, match="not valid YAML"):
        U.load_yaml("x: !!python/object/apply:os.system ['true']\n", "g.yaml")
    with pytest.raises(RnrLensError, match="nests YAML"):
        U.load_yaml("[" * 200 + "]" * 200, "g.yaml")


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 5000 + "]" * 5000, "nests JSON more than 64 deep"),
        ("[" * 70 + "]" * 70, "nests JSON more than 64 deep"),
        ("[" + "9" * 30 + "]", "an integer of 30 digits"),
        ("[NaN]", "NaN"),
        ("[1e999]", "overflows a float"),
        ("{nope", "not valid JSON"),
    ],
)
def test_json_from_outside_is_bounded(text, message):
    with pytest.raises(RnrLensError, match=message) as err:
        U.loads_json(text, "f.json")
    assert "\n" not in str(err.value)


def test_json_within_bounds_reads_as_json():
    assert U.loads_json('{"a": [1, 2.5, "x", null, -12345678901234567890]}', "f") == {"a": [1, 2.5, "x", None, -12345678901234567890]}


def test_gzip_is_inflated_as_a_stream_and_refused_past_its_cap(tmp_path, monkeypatch):
    monkeypatch.setenv(U.EVIDENCE_BYTES.env, "1")
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    (tmp_path / "bomb.gz").write_bytes(z.compress(b"\0" * 3_000_000) + z.flush())
    assert (tmp_path / "bomb.gz").stat().st_size < 10_000
    with pytest.raises(U.OverLimit, match=r"over the cap of 1 MB; if you trust the file, raise the cap with RNR_LENS_MAX_EVIDENCE_MB"):
        U.read_gzip(tmp_path / "bomb.gz", U.EVIDENCE_BYTES)
    (tmp_path / "ok.gz").write_bytes(gzip.compress(b"x" * 999_999))
    assert len(U.read_gzip(tmp_path / "ok.gz", U.EVIDENCE_BYTES)) == 999_999
    monkeypatch.setenv(U.EVIDENCE_BYTES.env, "lots")
    with pytest.raises(RnrLensError, match="RNR_LENS_MAX_EVIDENCE_MB='lots' is not a positive whole number"):
        U.read_gzip(tmp_path / "ok.gz", U.EVIDENCE_BYTES)


def test_quoting_escapes_control_characters_and_never_prints_a_container_whole():
    assert U.quoted("\x1b[2Jowned") == "'\\x1b[2Jowned'"
    assert U.quoted("x" * 500).endswith("'...") and len(U.quoted("x" * 500)) < 130
    assert U.quoted([[1] * 10] * 10) == "<a list of 10>"
    assert U.quoted(10**5000).startswith("<an integer of about 5")
    assert U.one_line("a\nb\x07") == "a\\nb\\x07"


def test_names_refuse_control_characters_and_text_refuses_lone_surrogates():
    assert U.check_text("line one\nline two", "text") == "line one\nline two"
    with pytest.raises(RnrLensError, match="control characters"):
        U.check_text("model\x1b[31m", "model", name=True)
    with pytest.raises(RnrLensError, match="lone UTF-16 surrogate"):
        U.check_text("a\ud800", "text")
    with pytest.raises(RnrLensError, match="not a whole number"):
        U.check_int(True, "version")


def test_csv_cells_a_spreadsheet_would_run_are_neutralized_and_numbers_kept():
    frame = pd.DataFrame({"text": ["=1+1", "+1", "-2", "@SUM(A1)", "\tx", "plain", None], "n": [-1, 2, 3, 4, 5, 6, 7]})
    safe = U.spreadsheet_safe(frame)
    assert safe["text"].tolist()[:6] == ["'=1+1", "'+1", "'-2", "'@SUM(A1)", "'\tx", "plain"] and pd.isna(safe["text"][6])
    assert safe["n"].tolist() == frame["n"].tolist() and frame["text"][0] == "=1+1", "the frame itself is unchanged"


def test_a_line_break_inside_a_csv_cell_never_starts_a_row_that_runs():
    """Issue 73: a try text ``The answer is 4.<CR>=cmd|' /C notepad'!A0`` was written with its
    bare carriage return unquoted, and a CSV reader started a row there whose first cell was a
    live formula. Every text cell is quoted (read back, it is one cell of one row), and the line
    after the break is neutralised too, for a reader that splits rows at every break."""
    import csv
    import io

    text = "The answer is 4.\r=cmd|' /C notepad'!A0"
    frame = pd.DataFrame({"text": [text, "=1+1"], "n": [1, -2]})
    data = U.safe_csv(frame).decode()
    shown = "The answer is 4.\r'=cmd|' /C notepad'!A0"  # the line after the break neutralised too
    rows = list(csv.reader(io.StringIO(data, newline="")))
    assert rows == [["text", "n"], [shown, "1"], ["'=1+1", "-2"]]
    again = pd.read_csv(io.StringIO(data))
    assert again["text"].tolist() == [shown, "'=1+1"] and again["n"].tolist() == [1, -2]
    cells = [cell for line in data.replace("\r", "\n").splitlines() for cell in next(csv.reader([line]), [])]
    numbers = {"1", "-2"}  # the numeric column's cells, kept as numbers
    assert not any(c.startswith(U.FORMULA_STARTS) for c in cells[2:] if c not in numbers), "a reader splitting at every break runs nothing"
