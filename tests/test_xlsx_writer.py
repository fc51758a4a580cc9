"""msq's own xlsx writer: readable by openpyxl's normal and read-only readers alike (pandas uses
the read-only one), every row full width, control characters escaped, formulas never written."""

from __future__ import annotations

from pathlib import Path

import duckdb
import openpyxl

from msq.export.xlsx import SheetSpec, write_xlsx


def make(tmp_path: Path) -> Path:
    con = duckdb.connect()
    con.execute("""CREATE TABLE t AS SELECT * FROM (VALUES
        (0, 'a', 1.5::DOUBLE, ''),
        (1, '=SUM(A1)', NULL, 'x' || chr(11) || 'y' || chr(13) || 'z'),
        (2, ' lead', 2.0, '')) v(out_seq, s, n, tail)""")
    path = tmp_path / "t.xlsx"
    write_xlsx(con, SheetSpec("SELECT * FROM t", ["s", "n", "tail"], ["S", "N", "Tail"],
                              "SELECT 1::BIGINT AS out_seq, 'red' AS mark"), path)
    return path


def test_read_only_and_normal_readers_agree(tmp_path):
    path = make(tmp_path)
    normal = [list(r) for r in openpyxl.load_workbook(path).active.iter_rows(values_only=True)]
    fast = [list(r) for r in openpyxl.load_workbook(path, read_only=True).active.iter_rows(
        values_only=True)]
    assert normal == fast
    assert normal == [["S", "N", "Tail"], ["a", 1.5, None], ["=SUM(A1)", None, "x_x000B_y\rz"],
                      [" lead", 2, None]]


def test_formula_text_is_a_string_cell_and_row_fill_kept(tmp_path):
    ws = openpyxl.load_workbook(make(tmp_path)).active
    cell = ws["A3"]
    assert cell.data_type == "s" and cell.value == "=SUM(A1)"
    assert {c.fill.fgColor.rgb for c in ws[3]} == {"FFFF0000"}
    assert ws["A2"].fill.fill_type is None
