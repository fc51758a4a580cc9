"""msq's own xlsx writer: readable by openpyxl's normal and read-only readers alike (pandas uses
the read-only one), every row full width, control characters escaped, formulas never written."""

from __future__ import annotations

from pathlib import Path

import duckdb
import openpyxl
import pytest

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


def shuffled_rows(con: duckdb.DuckDBPyConnection, n: int) -> SheetSpec:
    """n rows stored in a scrambled order: the writer must put them in out_seq order itself."""
    con.execute(f"CREATE TABLE r AS SELECT (range * 7919) % {n} AS out_seq FROM range({n})")
    return SheetSpec("SELECT out_seq, CAST(out_seq AS DOUBLE) AS v, 'r' || out_seq AS s FROM r",
                     ["v", "s"], ["V", "S"], "SELECT 3::BIGINT AS out_seq, 'yellow' AS mark")


def test_batches_and_sheets_split_anywhere_and_rows_stay_in_order(tmp_path, monkeypatch):
    """Batches of 3 rows, sheets of 4: batch and sheet boundaries fall at different rows."""
    from msq.export import xlsx

    monkeypatch.setattr(xlsx, "_BATCH_ROWS", 3)
    con = duckdb.connect()
    path = tmp_path / "b.xlsx"
    assert write_xlsx(con, shuffled_rows(con, 11), path, max_rows=5) == 3
    book = openpyxl.load_workbook(path)
    got = [[c.value for c in r] for ws in book.worksheets for r in ws.iter_rows()]
    want = []
    for i in range(11):
        if i % 4 == 0:
            want.append(["V", "S"])
        want.append([i, f"r{i}"])
    assert got == want
    assert [ws.max_row for ws in book.worksheets] == [5, 5, 4]
    assert book.worksheets[0]["A5"].fill.fgColor.rgb == xlsx.YELLOW  # out_seq 3


def test_a_write_failure_in_the_writer_thread_leaves_nothing(tmp_path, monkeypatch):
    """The zip entries are written by a writer thread: its error reaches the caller, the
    temporary is removed, and the thread is gone."""
    import threading

    from msq.export import xlsx

    monkeypatch.setattr(xlsx, "_BATCH_ROWS", 2)
    real = xlsx._Sheets._write
    calls = []

    def failing(self, data):
        calls.append(len(data))
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(self, data)

    monkeypatch.setattr(xlsx._Sheets, "_write", failing)
    con = duckdb.connect()
    with pytest.raises(OSError, match="No space left"):
        write_xlsx(con, shuffled_rows(con, 11), tmp_path / "b.xlsx")
    assert list(tmp_path.iterdir()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("msq-xlsx")]
