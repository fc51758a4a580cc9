"""msq's own xlsx writer: readable by openpyxl's normal and read-only readers alike (pandas uses
the read-only one), every row full width, control characters escaped, formulas never written."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import zipfile
from pathlib import Path

import duckdb
import openpyxl
import pyarrow as pa
import pytest

from msq.export.xlsx import SheetSpec, write_xlsx


def xlsx_c() -> object:
    from msq.export import xlsx

    return xlsx._sheetxml


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


# ------------------------------------------------------- a workbook to browse (the default mode)


def browse_spec(con: duckdb.DuckDBPyConnection, n: int, browse: bool = True) -> SheetSpec:
    con.execute(f"""CREATE OR REPLACE TABLE w AS SELECT range AS out_seq,
        'Functional.op_with_a_long_name.' || range || '.forward.output.0' AS name,
        CAST(range AS DOUBLE) / 3 AS v, repeat('stack line ', 20) AS stack FROM range({n})""")
    return SheetSpec("SELECT * FROM w", ["name", "v", "stack"], ["NPU Name", "Max diff", "Stack"],
                     None, browse=browse)


def test_a_browse_sheet_is_frozen_filtered_sized_and_has_a_bold_header(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = tmp_path / "b.xlsx"
    write_xlsx(con, browse_spec(con, 12), path)
    ws = openpyxl.load_workbook(path).active
    assert ws.freeze_panes == "B2"          # header row and the name column stay in view
    assert ws.auto_filter.ref == "A1:C13"   # every row and column
    assert [c.font.b for c in ws[1]] == [True] * 3 and not ws["A2"].font.b
    longest = max(len(c.value) for c in ws["A"][1:])
    widths = [ws.column_dimensions[col].width for col in "ABC"]
    assert widths == [longest + 2, 12 + 2, 60]  # numbers as General shows them; texts capped
    # read-only readers (pandas) know the size from <dimension>, before reading a row
    ro = openpyxl.load_workbook(path, read_only=True).active
    assert (ro.max_row, ro.max_column, ro.calculate_dimension()) == (13, 3, "A1:C13")


def test_each_sheet_has_its_own_size_and_filter(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = tmp_path / "b.xlsx"
    assert write_xlsx(con, browse_spec(con, 11), path, max_rows=5) == 3
    book = openpyxl.load_workbook(path, read_only=True)
    assert [ws.calculate_dimension() for ws in book.worksheets] == ["A1:C5", "A1:C5", "A1:C4"]
    book = openpyxl.load_workbook(path)
    assert [ws.auto_filter.ref for ws in book.worksheets] == ["A1:C5", "A1:C5", "A1:C4"]
    assert all(ws.freeze_panes == "B2" for ws in book.worksheets)


def test_msprobe_layout_has_only_the_dimension(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = tmp_path / "c.xlsx"
    write_xlsx(con, browse_spec(con, 4, browse=False), path)
    with zipfile.ZipFile(path) as zf:
        sheet = zf.read("xl/worksheets/sheet1.xml").decode()
        book = zf.read("xl/workbook.xml").decode()
    assert '<dimension ref="A1:C5"/>' in sheet
    for absent in ("<sheetViews", "<cols", "<autoFilter", ' s="6"'):
        assert absent not in sheet
    assert "definedName" not in book


def test_an_empty_browse_sheet_is_the_header(tmp_path: Path) -> None:
    con = duckdb.connect()
    path = tmp_path / "e.xlsx"
    write_xlsx(con, browse_spec(con, 0), path)
    ws = openpyxl.load_workbook(path).active
    assert [[c.value for c in r] for r in ws.iter_rows()] == [["NPU Name", "Max diff", "Stack"]]
    assert ws.auto_filter.ref == "A1:C1"


# -- the C renderer (msq/export/_sheetxml.c) against the SQL renderer ---------------------------

_TEXTS = ["a", "", None, "=SUM(A1)", "+1", "-x", "@y", "\uff1dx", "\uff0bx", "\uff0dx", "\uff20x",
          "\uff21x", " lead", "trail ", "\tt", "n\n", "a&b<c>d", "x\x0by\rz\x00", "\ufffe\uffff!",
          "\u00e9\u4e2d\U0001f600", "nan\t", "N/A"]
_NUMBERS = [1.5, -0.0, 0.0, 1e16, 123456789012345678.0, 1e-5, 1e-4, 5e-324, 1.7976931348623157e308,
            0.1, 2.0 / 3, float("inf"), -1e300, None]


def _all_cells(con: duckdb.DuckDBPyConnection) -> SheetSpec:
    """Every kind of cell: texts, numbers (one column of each type), booleans and the cell
    union in its three members and NULL, with red, yellow and no mark."""
    rows = []
    for i in range(max(len(_TEXTS), len(_NUMBERS)) * 3):
        text = _TEXTS[i % len(_TEXTS)]
        number = _NUMBERS[i % len(_NUMBERS)]
        rows.append((i, text, number, i % 3 == 0 if i % 5 else None, i % 4))
    con.execute("CREATE TABLE src (out_seq BIGINT, s VARCHAR, n DOUBLE, b BOOLEAN, k INTEGER)")
    con.executemany("INSERT INTO src VALUES (?, ?, ?, ?, ?)", rows)
    con.execute("CREATE TYPE cell AS UNION(n DOUBLE, s VARCHAR, b BOOLEAN)")
    query = """SELECT (out_seq * 7) % (SELECT count(*) FROM src) AS out_seq, s, n, b,
                      k::BIGINT AS i, k::TINYINT AS tiny, TRY_CAST(n AS FLOAT) AS f, DATE '2020-01-02' AS d,
                      CASE k WHEN 0 THEN union_value(n := n)::cell WHEN 1 THEN union_value(s := s)::cell
                             WHEN 2 THEN union_value(b := b)::cell END AS c
               FROM src"""
    cols = ["s", "n", "b", "i", "tiny", "f", "d", "c"]
    marks = ("SELECT out_seq, CASE out_seq % 3 WHEN 0 THEN 'red' WHEN 1 THEN 'yellow' END AS mark "
             "FROM src WHERE out_seq % 3 < 2")
    return SheetSpec(query, cols, cols, marks)


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_renderer_writes_the_sql_renderers_bytes():
    from msq.export import xlsx

    con = duckdb.connect()
    spec = _all_cells(con)
    sql = b"".join(xlsx._row_tags(chunk, 2) for chunk in xlsx._rendered_rows(con, spec).chunks)
    rows = xlsx._c_rows(con, spec)
    assert rows is not None
    c = rows.render(0, 0, rows.n_rows, 2)
    assert c == sql and isinstance(c, memoryview) and len(c) == len(sql)
    # split in two batches, numbered on
    half = rows.n_rows // 2
    assert bytes(rows.render(0, 0, half, 2)) + rows.render(half, 0, rows.n_rows - half, half + 2) == sql


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_renderer_copies_twin_texts_and_numbers_printed_before_as_sql_renders_them():
    """The C renderer copies a text column's cell from the column's before it where their texts
    are the same (xlsx._twins: a text column right after another, as a bench name after the
    NPU's) and a number's text from the numbers it printed before (its memo, by the number's
    bits, 4,096 entries): texts the same, different, NULL, empty, escaped, formula-like and
    blank-edged beside each other, under every mark; numbers repeated, evicted by ~8,000
    others and special (-0.0, 0.0, NaN, infinities, subnormals, the 23-byte longest) render
    as the SQL renderer's rows."""
    import random

    from msq.export import xlsx

    rng = random.Random(15)
    texts = [None, "", "a", "b", "=x", "+x", " lead", "a&b<c>", "x\x0by", "torch.float32",
             "Functional.linear.0.forward.input.0", "\u00e9\u4e2d"]
    special = [0.0, -0.0, float("nan"), float("inf"), float("-inf"), 5e-324, -2.2250738585072014e-308,
               -1.2345678901234567e-300, 1e16, 0.1]
    repeated = [rng.uniform(-1e3, 1e3) for _ in range(40)]
    rows = []
    for i in range(10_000):
        a = texts[i % len(texts)]
        b = a if i % 3 else rng.choice(texts)  # mostly a's text, else any (of one length too)
        c = b if i % 5 else None
        x = (rng.choice(repeated) if i % 4 == 0 else special[(i // 4) % len(special)] if i % 4 == 1
             else rng.uniform(-1e9, 1e9))
        y = x if i % 2 else rng.choice(repeated)
        rows.append((i, a, b, c, x, y))
    src = pa.table({"out_seq": pa.array([r[0] for r in rows], pa.int64()),
                    **{name: pa.array([r[k] for r in rows], pa.string())
                       for k, name in enumerate(("a", "b", "c"), 1)},
                    **{name: pa.array([r[k] for r in rows], pa.float64())
                       for k, name in enumerate(("x", "y"), 4)}})
    con = duckdb.connect()
    con.register("src", src)
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    marks = ("SELECT out_seq, CASE out_seq % 3 WHEN 0 THEN 'red' WHEN 1 THEN 'yellow' END AS mark "
             "FROM t WHERE out_seq % 3 < 2")
    spec = SheetSpec("SELECT * FROM t", ["a", "b", "c", "x", "y"], ["a", "b", "c", "x", "y"], marks)
    sql = b"".join(xlsx._row_tags(chunk, 2) for chunk in xlsx._rendered_rows(con, spec).chunks)
    got = xlsx._c_rows(con, spec)
    # b selected NULL where it is a's text (xlsx._twin_text), c after it no twin
    assert got is not None and got.twins == bytes([0, 2, 0, 0, 0])
    # row by row: a failure names the rows that differ
    assert bytes(got.render(0, 0, got.n_rows, 2)).split(b"</row>") == sql.split(b"</row>")
    # b's texts as they are: compared with a's (twins 1, c's too) or not at all, the same rows
    seq = memoryview(got.table["_out_seq"][4]).cast("q")  # each Arrow row's out_seq
    columns = list(got.columns)
    columns[1] = ("t", xlsx._c_buffers(pa.array([rows[k][2] for k in seq], pa.string()),
                                       pa.string()))
    for twins in (bytes([0, 1, 1, 0, 0]), None):
        plain = dataclasses.replace(got, columns=columns, twins=twins)
        assert bytes(plain.render(0, 0, got.n_rows, 2)) == sql
    assert b"<v>-0</v>" in sql and b"<v>nan</v>" in sql and b"&amp;" in sql


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_kept_render_buffers_hold_only_the_rows_rendered_into_them():
    """Inside batch_sheets the C renderer's buffers are kept from one render to the next: rows
    rendered into a kept buffer (a larger render's, or a smaller one's grown) are those a fresh
    buffer gets, none of the bytes before them; after the block, as before it."""
    from msq.export import xlsx

    con = duckdb.connect()
    spec = _all_cells(con)
    rows = xlsx._c_rows(con, spec)
    assert rows is not None and rows.n_rows > 3
    counts = (rows.n_rows, 3, rows.n_rows, 1, 0, rows.n_rows - 1)
    fresh = [bytes(rows.render(0, 0, n, 2)) for n in counts]
    with xlsx.batch_sheets({}):
        kept = [bytes(rows.render(0, 0, n, 2)) for n in counts]  # each let go at once: kept
        held = [rows.render(0, 0, n, 2) for n in counts]  # all alive: two kept, then fresh
        assert [bytes(h) for h in held] == fresh
    assert kept == fresh
    assert [bytes(rows.render(0, 0, n, 2)) for n in counts] == fresh
    assert [bytes(h) for h in held] == fresh  # still theirs after the block


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_renderer_escapes_texts_of_every_length_as_sql():
    """The C renderer looks for bytes to escape sixteen at a time (its last step overlapping the
    one before): every length from 0 to 50, with each escaped character (and TAB, LF, a
    multi-byte character, U+FFFE) at every position, renders as the SQL renderer's rows."""
    from msq.export import xlsx

    specials = ["&", "<", ">", "\r", "\x01", "\x1f", "\t", "\n", "\ufffe", "\uffff", "\uff1d",
                "\u00e9"]
    texts: list[str | None] = [None]
    for length in range(51):
        texts.append("a" * length)
        for pos in range(length):
            for ch in specials[(length + pos) % len(specials)], specials[pos % len(specials)]:
                texts.append("b" * pos + ch + "c" * (length - pos - 1))
    con = duckdb.connect()
    src = pa.table({"out_seq": pa.array(range(len(texts)), pa.int64()),
                    "s": pa.array(texts, pa.string())})
    con.register("src", src)
    con.execute("CREATE TABLE t AS SELECT * FROM src")
    spec = SheetSpec("SELECT out_seq, s FROM t", ["s"], ["s"], None)
    sql = b"".join(xlsx._row_tags(chunk, 2) for chunk in xlsx._rendered_rows(con, spec).chunks)
    rows = xlsx._c_rows(con, spec)
    assert rows is not None and rows.n_rows == len(texts) > 1000
    # row by row: a failure names the rows that differ (a diff of the whole bytes takes long)
    assert bytes(rows.render(0, 0, rows.n_rows, 2)).split(b"</row>") == sql.split(b"</row>")
    assert b"&amp;" in sql and b"_x0001_" in sql and b"&#13;" in sql and b"_xFFFE_" in sql


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_number_format_is_printf(tmp_path):
    """%.16g in C without printf, against DuckDB's printf (what the SQL renderer writes), on
    random doubles of every magnitude and bit pattern."""
    import random
    import struct

    from msq.export import _sheetxml

    rng = random.Random(1201)
    values = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    values += [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(20000)]
    values += [float(rng.randint(-10**17, 10**17)) for _ in range(5000)]
    values += [round(rng.uniform(-1000, 1000), rng.randint(0, 10)) for _ in range(5000)]
    values += _NUMBERS[:-1] + [1125899906842624.5, 9999999999999998.0, 0.30000000000000004]
    # float32 statistics widened to double, and dyadic fractions: many end in an exact ...5 at
    # the 17th digit, a tie the C code rounds from the number's bits (to even, as printf)
    values += [struct.unpack("f", struct.pack("I", rng.getrandbits(32)))[0] for _ in range(20000)]
    values += [k * 2.0 ** -e for k in range(1, 400, 7) for e in range(0, 80, 2)]
    # the edges of the exact 128-bit path (_sheetxml.c's digits16: ~1e-17 .. ~1e15) and of each
    # decade, where the decimal exponent is one off on the way in and a rounding carries over
    edges = [10.0 ** e * f for e in range(-20, 18) for f in (1.0, 9.999999999999999, 5.0)]
    values += [math.nextafter(x, toward) for x in edges for toward in (0.0, math.inf)] + edges
    values += [float(2 ** 52 + k) for k in range(-3, 4)] + [float(2 ** 53 + 2 * k) for k in range(3)]
    con = duckdb.connect()
    con.register("v", pa.table({"i": pa.array(range(len(values)), pa.int64()),
                                "x": pa.array(values, pa.float64())}))
    want = [t for (t,) in con.execute("SELECT printf('%.16g', x) FROM v ORDER BY i").fetchall()]
    got = [_sheetxml.fmt16g(x) for x in values]
    assert got == want


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
@pytest.mark.parametrize("browse", [False, True], ids=["msprobe-layout", "browse-layout"])
def test_c_and_sql_renderers_write_the_same_workbook(browse: bool, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Whole packages, in both layouts, split over sheets: the renderer changes no byte (the C
    renderer's columns read by the C stream reader and by pyarrow: a number's or boolean's
    members that are NULL in every row are not selected, xlsx._all_null)."""
    from msq.export import xlsx

    con = duckdb.connect()
    spec = _all_cells(con)
    spec = SheetSpec(spec.query, spec.columns, spec.headers, spec.marks_query, browse=browse)
    books = {}
    for name in ("c", "c-pyarrow", "sql"):
        if name == "c-pyarrow":
            monkeypatch.setattr(xlsx, "arrow_columns", lambda _stream: None)
        if name == "sql":
            monkeypatch.setattr(xlsx, "_sheetxml", None)
        assert (xlsx._c_rows(con, spec) is None) == (name == "sql")
        path = tmp_path / f"{name}.xlsx"
        assert write_xlsx(con, spec, path, max_rows=20) > 1
        with zipfile.ZipFile(path) as zf:
            books[name] = {n: zf.read(n) for n in zf.namelist()}
    assert books["c"] == books["c-pyarrow"] == books["sql"]


def test_isal_and_zlib_deflate_the_same_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """The sheets are deflated by ISA-L where it is installed, by zlib without it: the parts
    inflate to the same bytes (zipfile checks each CRC and size; with ISA-L both are kept by
    xlsx._write_entry) and openpyxl reads the same cells."""
    from msq.export import xlsx

    pytest.importorskip("isal")
    con = duckdb.connect()
    spec = shuffled_rows(con, 5_000)
    books: dict[str, dict[str, bytes]] = {}
    compressed: dict[str, int] = {}
    cells: dict[str, list[list[list[object]]]] = {}
    written = []
    entry_writer = xlsx._write_entry
    monkeypatch.setattr(xlsx, "_write_entry",
                        lambda entry, data: (written.append(len(data)), entry_writer(entry, data)))
    for name in ("isal", "zlib"):
        if name == "zlib":
            assert sum(written) > 100_000  # the rows went through the ISA-L writer
            written.clear()
            monkeypatch.setattr(xlsx, "_isal_zlib", None)
        path = tmp_path / f"{name}.xlsx"
        assert write_xlsx(con, spec, path, max_rows=3_000) == 2
        with zipfile.ZipFile(path) as zf:
            books[name] = {n: zf.read(n) for n in zf.namelist()}
            sizes = {i.filename: i.compress_size for i in zf.infolist()}
        cells[name] = [[list(r) for r in ws.iter_rows(values_only=True)]
                       for ws in openpyxl.load_workbook(path).worksheets]
        compressed[name] = sizes["xl/worksheets/sheet1.xml"]
    assert not written  # zlib: zipfile's own writer
    assert books["isal"] == books["zlib"]
    assert cells["isal"] == cells["zlib"] and cells["isal"][0][1] == [0.0, "r0"]
    assert compressed["isal"] != compressed["zlib"]  # ISA-L did deflate the sheet


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_longest_texts_count_characters_as_duckdb_does() -> None:
    """The browse layout's widths come from the C renderer's columns (_sheetxml.max_chars):
    characters, not bytes (a 9-byte text of 3 characters among them), NULLs skipped, 0 when a
    column holds no text, as DuckDB's max(length()) over the sheet's query."""
    from msq.export import xlsx

    con = duckdb.connect()
    texts = [*_TEXTS, "\u00e9" * 7, "\U0001f600" * 9 + "x"]
    con.execute("CREATE TABLE t (out_seq BIGINT, s VARCHAR, wide VARCHAR, nothing VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, NULL)",
                    [(i, s, "\u4e2d" * (i % 5)) for i, s in enumerate(texts)])
    for where in ("", "WHERE out_seq >= 3"):
        spec = SheetSpec(f"SELECT * FROM t {where}", ["s", "wide", "nothing"], ["s", "w", "n"],
                         None, browse=True)
        rows = xlsx._c_rows(con, spec)
        assert rows is not None
        want = con.execute("SELECT max(length(s)), max(length(wide)), max(length(nothing)) "
                           f"FROM ({spec.query})").fetchall()[0]
        got = xlsx._longest_texts(spec, ["s", "wide", "nothing"], rows)
        assert got == {"s": want[0], "wide": want[1], "nothing": 0}
        assert want[0] == 10 and want[2] is None  # the emoji text: 10 characters, 37 bytes


def _repr_values() -> list[float]:
    """Doubles of every kind for the shortest round trip: random bits and magnitudes, float32
    values widened, relative errors of float32 pairs, every power of two (their interval is
    lopsided), subnormals, the neighbours of powers of ten (1e16 where repr turns to an
    exponent, 1e-4 and 1e-5), NaN, the infinities and both zeros."""
    import math
    import random
    import struct

    rng = random.Random(1702)
    values = [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(20000)]
    values += [rng.uniform(0, 1) * 10 ** rng.randint(-30, 30) for _ in range(20000)]
    values += [struct.unpack("f", struct.pack("I", rng.getrandbits(32)))[0] for _ in range(10000)]
    for _ in range(20000):
        n = struct.unpack("f", struct.pack("f", rng.gauss(0, 1)))[0]
        b = struct.unpack("f", struct.pack("f", n + rng.gauss(0, 1e-3)))[0]
        if b:
            values.append(abs((n - b) / b * 100))
    values += [2.0 ** k for k in range(-1074, 1024)]
    values += [struct.unpack("d", struct.pack("Q", rng.randrange(1, 1 << 52)))[0]
               for _ in range(5000)]
    for k in range(-30, 309):
        for base in (1.0, 5.0, 9.999999999999999):
            v = base * 10.0 ** k
            if math.isfinite(v):
                values += [v, math.nextafter(v, 0), math.nextafter(v, math.inf)]
    values += [round(rng.uniform(0, 1000), rng.randint(0, 10)) for _ in range(5000)]
    values += [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e16, 9999999999999998.0,
               1e15, 999999999999999.9, 1e-4, 9.999999999999999e-05, 1e-5, 0.1, 100.0, 12.5,
               2.2250738585072014e-308, 2.225073858507201e-308, 1.7976931348623157e308]
    return values + [-v for v in values[:5000]]


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_repr_is_duckdbs_cast_to_text() -> None:
    """The relative errors' numbers printed in C (_sheetxml.fmt_repr) as DuckDB prints them in
    SQL (py_float: CAST(x AS VARCHAR), NaN 'nan'), which is Python's repr: the shortest text
    that reads back, on every kind of double."""
    import math

    from msq.export import _sheetxml

    values = _repr_values()
    con = duckdb.connect()
    con.register("v", pa.table({"i": pa.array(range(len(values)), pa.int64()),
                                "x": pa.array(values, pa.float64())}))
    want = [t for (t,) in con.execute(
        "SELECT CASE WHEN isnan(x) THEN 'nan' ELSE CAST(x AS VARCHAR) END FROM v ORDER BY i"
    ).fetchall()]
    got = [_sheetxml.fmt_repr(x) for x in values]
    assert got == want
    assert got == ["nan" if math.isnan(x) else repr(x) for x in values]


_REL_TEXT = ("CASE {x} WHEN -1 THEN 'N/A' WHEN -2 THEN ' ' WHEN -3 THEN '0.0%' "
             "ELSE CASE WHEN isnan({x}) THEN 'nan' ELSE CAST({x} AS VARCHAR) END || '%' END")


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_percent_texts_are_the_rel_text_macros() -> None:
    """_sheetxml.percent_texts: relative errors as rel_text (sql/compare/schema/10_macros.sql)
    prints them: the codes -1, -2, -3 as N/A, ' ' and 0.0%, a number as its repr and '%', NULL
    as NULL; from arrays with offsets (a slice) too."""
    from msq import db
    from msq.export import _sheetxml, xlsx

    con = db.connect()
    db.run_schema(con)
    numbers = pa.array([None, 12.5, -1.0, -2.0, -3.0, float("nan"), float("inf"), 7.0, 0.0,
                        1e-5, 1e16, -4.0] * 3, pa.float64())
    for start, length in ((0, 36), (3, 13), (5, 0)):
        n = numbers.slice(start, length)
        valid, offsets, data, offset = _sheetxml.percent_texts(
            xlsx._c_buffers(n, pa.float64()), length)
        got = pa.StringArray.from_buffers(length, pa.py_buffer(offsets), pa.py_buffer(data),
                                          pa.py_buffer(valid), offset=offset).to_pylist()
        con.register("n", pa.table({"i": pa.array(range(length), pa.int64()), "x": n}))
        want = [t for (t,) in con.execute("SELECT rel_text(x) FROM n ORDER BY i").fetchall()]
        assert got == want
        assert want == [t for (t,) in con.execute(
            f"SELECT {_REL_TEXT.format(x='x')} FROM n ORDER BY i").fetchall()]


def _percent_spec(con: duckdb.DuckDBPyConnection, browse: bool) -> tuple[SheetSpec, SheetSpec]:
    """A sheet whose column p is a relative error as a number (percents), and the same sheet
    from its texts made in SQL."""
    values = _repr_values()[::40]
    rows = [(i, [-1.0, -2.0, -3.0, None][i % 7] if i % 7 < 4 else abs(v), f"t{i}")
            for i, v in enumerate(values)]
    con.execute("CREATE TABLE pct (out_seq BIGINT, p DOUBLE, s VARCHAR)")
    con.executemany("INSERT INTO pct VALUES (?, ?, ?)", rows)
    marks = "SELECT out_seq, 'red' AS mark FROM pct WHERE out_seq % 5 = 0"
    spec = SheetSpec("SELECT * FROM pct", ["s", "p"], ["S", "P"], marks, browse=browse,
                     percents=["p"])
    texts = SheetSpec(f"SELECT out_seq, s, {_REL_TEXT.format(x='p')} AS p FROM pct",
                      ["s", "p"], ["S", "P"], marks, browse=browse)
    return spec, texts


_CELL = "UNION(n DOUBLE, s VARCHAR, b BOOLEAN)"


def _cells_spec(con: duckdb.DuckDBPyConnection, browse: bool) -> tuple[SheetSpec, SheetSpec]:
    """A sheet whose columns c (a statistic: number, text or boolean) and d (a difference: number
    or text) are cells held as plain columns (SheetSpec.cells), and the same sheet of the cells
    themselves."""
    kinds = [(1.5, None, None), (None, "N/A", None), (None, None, True), (None, None, False),
             (-2.0e-300, None, None), (None, "inf\t", None), (None, "=x", None), (None, "", None),
             (None, None, None)]
    rows = [(i, *kinds[i % len(kinds)], *kinds[(i + 4) % len(kinds)][:2], f"t{i}")
            for i in range(2500)]
    # not in out_seq order: the texts read apart (cell_texts) are put back by out_seq
    rows.sort(key=lambda row: row[0] * 7919 % 2500)
    con.execute("CREATE TABLE plain (out_seq BIGINT, c DOUBLE, \"c (text)\" VARCHAR, "
                "\"c (bool)\" BOOLEAN, d DOUBLE, \"d (text)\" VARCHAR, t VARCHAR, "
                "has_text BOOLEAN AS (coalesce(\"c (text)\", \"d (text)\") IS NOT NULL))")
    con.executemany("INSERT INTO plain (out_seq, c, \"c (text)\", \"c (bool)\", d, "
                    "\"d (text)\", t) VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    marks = "SELECT out_seq, 'yellow' AS mark FROM plain WHERE out_seq % 3 = 0"
    spec = SheetSpec("SELECT * FROM plain", ["t", "c", "d"], ["T", "C", "D"], marks,
                     browse=browse, cells={"c": ('"c (text)"', '"c (bool)"'),
                                           "d": ('"d (text)"', None)})
    made = ", ".join(
        f"CASE WHEN {x} IS NOT NULL THEN union_value(n := {x})::{_CELL} "
        f"WHEN \"{x} (text)\" IS NOT NULL THEN union_value(s := \"{x} (text)\")::{_CELL} "
        f"ELSE union_value(b := {b})::{_CELL} END AS {x}"
        for x, b in (("c", '"c (bool)"'), ("d", "NULL::BOOLEAN")))
    cells = SheetSpec(f"SELECT out_seq, t, {made} FROM plain", ["t", "c", "d"], ["T", "C", "D"],
                      marks, browse=browse)
    return spec, cells


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
@pytest.mark.parametrize("browse", [False, True], ids=["msprobe-layout", "browse-layout"])
def test_cells_of_plain_columns_write_the_workbook_of_the_cells(
        browse: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Cells held as plain columns (SheetSpec.cells, stat_result's statistics and differences)
    write the same package, column widths included, as the cells themselves, by the C renderer
    (with the C stream reader and with pyarrow; their texts read with every row, and from the
    rows that have one alone: SheetSpec.cell_texts) and the SQL one."""
    from msq.export import xlsx

    con = duckdb.connect()
    spec, cells = _cells_spec(con, browse)
    sparse = dataclasses.replace(spec, cell_texts="has_text")
    sparse_bools = dataclasses.replace(sparse, cell_bools="c (bool)")
    spread = []
    real_spread = xlsx._spread_cell_texts
    monkeypatch.setattr(xlsx, "_spread_cell_texts",
                        lambda *args: spread.append((sorted(args[2]), real_spread(*args)))
                        or spread[-1][1])
    books = {}
    for name, sheet in (("c", spec), ("c-cells", cells), ("c-sparse", sparse),
                        ("c-sparse-bools", sparse_bools), ("c-pyarrow", spec),
                        ("c-sparse-pyarrow", sparse_bools), ("sql", spec),
                        ("sql-cells", cells), ("sql-sparse", sparse_bools)):
        if name == "c-pyarrow":  # the columns read by pyarrow (no C stream reader)
            monkeypatch.setattr(xlsx, "arrow_columns", lambda _stream: None)
        if name == "sql":
            monkeypatch.setattr(xlsx, "_sheetxml", None)
        assert (xlsx._c_rows(con, sheet) is None) == name.startswith("sql")
        path = tmp_path / f"{name}.xlsx"
        assert write_xlsx(con, sheet, path, max_rows=1000) > 1
        with zipfile.ZipFile(path) as zf:
            books[name] = {n: zf.read(n) for n in zf.namelist()}
    assert books["c"] == books["c-cells"] == books["c-sparse"] == books["c-sparse-bools"] \
        == books["c-pyarrow"] == books["c-sparse-pyarrow"] == books["sql"] \
        == books["sql-cells"] == books["sql-sparse"]
    # the sparse texts (and booleans) were spread (twice a sheet: _c_rows above, then the
    # workbook's own) and only with the C stream reader
    assert len(spread) == 4 and all(order is not None for _, order in spread)
    # c-sparse's texts alone, c-sparse-bools' texts and c's booleans (column 1: "c")
    assert [names for names, _ in spread] == [["s1", "s2"]] * 2 + [["b1", "s1", "s2"]] * 2
    # each kind of cell is in the sheet: a number, a text, a boolean and an empty cell
    sheet = books["c"]["xl/worksheets/sheet1.xml"].decode()
    assert all(part in sheet for part in ("<v>1.5</v>", "t=\"b\"><v>1</v>", "t=\"b\"><v>0</v>",
                                          "N/A", "inf\t", "<c/>"))


def test_column_types_are_those_of_the_rows_written() -> None:
    """_types gives each column the type _text_query writes it as (a percent column's text, a
    cell of plain columns), from the query's own DESCRIBE."""
    from msq.export import xlsx

    con = duckdb.connect()
    for spec, _ in (_percent_spec(con, False), _cells_spec(con, False)):
        written = dict(con.execute(
            f"SELECT column_name, column_type FROM (DESCRIBE {xlsx._text_query(spec)})").fetchall())
        types = xlsx._types(con, spec)
        assert {c: types[c] for c in written} == written
        assert any(types[c] != t for c, t in con.execute(
            f"SELECT column_name, column_type FROM (DESCRIBE {spec.query})").fetchall())


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
@pytest.mark.parametrize("browse", [False, True], ids=["msprobe-layout", "browse-layout"])
def test_percent_columns_write_the_workbook_of_their_texts(browse: bool, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A percent column (SheetSpec.percents, the statistics' relative errors) writes the same
    package, column widths included, as its texts made in SQL, by the C renderer and the SQL
    one."""
    from msq.export import xlsx

    con = duckdb.connect()
    spec, texts = _percent_spec(con, browse)
    books = {}
    for name, sheet in (("c", spec), ("c-texts", texts), ("c-pyarrow", spec), ("sql", spec)):
        if name == "c-pyarrow":  # the columns read by pyarrow (no C stream reader)
            monkeypatch.setattr(xlsx, "arrow_columns", lambda _stream: None)
        if name == "sql":
            monkeypatch.setattr(xlsx, "_sheetxml", None)
        assert (xlsx._c_rows(con, sheet) is None) == (name == "sql")
        path = tmp_path / f"{name}.xlsx"
        assert write_xlsx(con, sheet, path, max_rows=1000) > 1
        with zipfile.ZipFile(path) as zf:
            books[name] = {n: zf.read(n) for n in zf.namelist()}
    assert books["c"] == books["c-texts"] == books["c-pyarrow"] == books["sql"]


def test_same_shapes_asks_a_sheet_querys_types_once(tmp_path: Path) -> None:
    """Inside same_shapes (a batch's pairs, whose views keep their columns' types) a sheet
    query's column types are asked once and the first answer serves its later sheets; outside,
    each sheet asks."""
    from msq.export import xlsx

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT 1::BIGINT AS out_seq, 'a' AS x")
    spec = SheetSpec("SELECT * FROM t", ["x"], ["x"], None)
    with xlsx.same_shapes():
        assert xlsx._types(con, spec)["x"] == "VARCHAR"
        con.execute("CREATE OR REPLACE TABLE t AS SELECT 1::BIGINT AS out_seq, 2.5::DOUBLE AS x")
        assert xlsx._types(con, spec)["x"] == "VARCHAR"  # as first asked
        other = SheetSpec("SELECT out_seq, x FROM t", ["x"], ["x"], None)
        assert xlsx._types(con, other)["x"] == "DOUBLE"  # another query asks for itself
    assert xlsx._types(con, spec)["x"] == "DOUBLE"
    # and a workbook written inside the block is the one written outside it
    books = []
    for inside in (True, False):
        path = tmp_path / f"{inside}.xlsx"
        with xlsx.same_shapes() if inside else contextlib.nullcontext():
            write_xlsx(con, spec, path)
            write_xlsx(con, spec, path.with_suffix(".2.xlsx"))
        with zipfile.ZipFile(path.with_suffix(".2.xlsx")) as zf:
            books.append({n: zf.read(n) for n in zf.namelist()})
    assert books[0] == books[1]


def test_same_fact_is_asked_once_a_key_inside_same_shapes() -> None:
    """Inside same_shapes a fact is asked once for its key (another key asks for itself),
    outside every time; the block's facts end with it, and a block inside another has its own."""
    from msq.export import xlsx

    asked: list[str] = []

    def ask(key: str) -> str:
        asked.append(key)
        return f"{key}{len(asked)}"

    assert xlsx.same_fact("a", lambda: ask("a")) == "a1"
    assert xlsx.same_fact("a", lambda: ask("a")) == "a2"
    with xlsx.same_shapes():
        assert xlsx.same_fact("a", lambda: ask("a")) == "a3"
        assert xlsx.same_fact("a", lambda: ask("a")) == "a3"
        assert xlsx.same_fact("b", lambda: ask("b")) == "b4"
        with xlsx.same_shapes():
            assert xlsx.same_fact("a", lambda: ask("a")) == "a5"
        assert xlsx.same_fact("a", lambda: ask("a")) == "a3"
    assert xlsx.same_fact("a", lambda: ask("a")) == "a6"
    assert asked == ["a", "a", "a", "b", "a", "a"]


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
@pytest.mark.parametrize(("batch_rows", "ahead_rows"), [(20_000, 40_000), (300, 40_000),
                                                       (300, 1500)])
def test_batch_sheets_write_each_pairs_workbook_from_the_batchs_rows(
        tmp_path: Path, batch_rows: int, ahead_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside batch_sheets a pair's sheet whose queries it maps is its slice of the batch's
    rows (fetched once, in any stored order): the same package, widths, marks and percent texts
    included, as the pair's own query writes, for a pair of no rows too; a sheet it does not map
    asks its own query. A pair's sheet of one sheet's rows is rendered before its head, in one
    batch of rows or several, its widths counted by the renderer (_sheetxml.max_chars and
    percent_chars are not asked: _longest_texts is not called)."""
    from msq.export import xlsx

    monkeypatch.setattr(xlsx, "_BATCH_ROWS", batch_rows)
    monkeypatch.setattr(xlsx, "_AHEAD_ROWS", ahead_rows)
    longest = xlsx._longest_texts
    counted: list[int] = []

    def longest_texts(spec: SheetSpec, texts: list[str],
                      source: xlsx._CRows) -> dict[str, int] | None:
        counted.append(source.n_rows)
        return longest(spec, texts, source)

    monkeypatch.setattr(xlsx, "_longest_texts", longest_texts)

    con = duckdb.connect()
    n = 3000
    # three pairs' rows (out_seq 0-999, 1000-2999; none in 3000-3099), stored scrambled; the
    # first pair's texts are the longest (its widths are not the others')
    con.execute(f"""CREATE TABLE batch_res AS SELECT (range * 7919) % {n} AS out_seq,
        repeat('w', CASE WHEN (range * 7919) % {n} < 1000 THEN 30 ELSE 5 END) || range AS s,
        CASE range % 5 WHEN 0 THEN -1.0 WHEN 1 THEN NULL ELSE range / 7.0 END AS p,
        union_value(n := range * 0.5)::UNION(n DOUBLE, s VARCHAR, b BOOLEAN) AS c
        FROM range({n})""")
    con.execute("CREATE TABLE batch_mk AS SELECT out_seq, CASE WHEN out_seq % 3 = 0 THEN 'red' "
                "ELSE 'yellow' END AS mark FROM batch_res WHERE out_seq % 4 = 0")
    spec = SheetSpec("SELECT * FROM res", ["s", "p", "c"], ["S", "P", "C"],
                     "SELECT out_seq, mark FROM mk", browse=True, percents=["p"])
    other = SheetSpec("SELECT out_seq, s FROM res", ["s"], ["S"], None, browse=True)
    ranges = [(0, 999), (3000, 3099), (1000, 2999)]

    def pair_views(lo: int, hi: int) -> None:  # as msq.pipeline.pair_views numbers a pair
        con.execute(f"CREATE OR REPLACE VIEW res AS SELECT * REPLACE (out_seq - {lo} AS out_seq) "
                    f"FROM batch_res WHERE out_seq BETWEEN {lo} AND {hi}; "
                    f"CREATE OR REPLACE VIEW mk AS SELECT * REPLACE (out_seq - {lo} AS out_seq) "
                    f"FROM batch_mk WHERE out_seq BETWEEN {lo} AND {hi}")

    def book(path: Path) -> dict[str, bytes]:
        with zipfile.ZipFile(path) as zf:
            return {name: zf.read(name) for name in zf.namelist()}

    want, got = [], []
    for lo, hi in ranges:
        pair_views(lo, hi)
        write_xlsx(con, spec, tmp_path / "want.xlsx", max_rows=1500)
        write_xlsx(con, other, tmp_path / "want-other.xlsx")
        want.append((book(tmp_path / "want.xlsx"), book(tmp_path / "want-other.xlsx")))
    with xlsx.batch_sheets({"SELECT * FROM res": "SELECT * FROM batch_res",
                            "SELECT out_seq, mark FROM mk": "SELECT * FROM batch_mk"}) as sheets:
        for lo, hi in ranges:
            pair_views(lo, hi)
            sheets.pair((lo, hi))
            rows = xlsx._c_rows(con, spec)
            assert rows is not None and rows.base is not None
            assert rows.n_rows == max(0, min(hi, n - 1) - lo + 1)
            assert xlsx._c_rows(con, other).base is None  # not mapped: its own query
            write_xlsx(con, spec, tmp_path / "got.xlsx", max_rows=1500)
            write_xlsx(con, other, tmp_path / "got-other.xlsx")
            got.append((book(tmp_path / "got.xlsx"), book(tmp_path / "got-other.xlsx")))
        assert len(sheets.sources) == 1
    assert got == want
    # outside a batch every sheet's widths are counted apart; inside, only where a sheet is not
    # rendered first: the second pair's (no rows), the third's sheet of more rows than a sheet
    # holds (two sheets), and a sheet of more rows than _AHEAD_ROWS (streamed as it renders)
    assert counted == [1000, 1000, 0, 0, 2000, 2000] + (
        [0, 0, 2000] if ahead_rows > 2000 else [0, 0, 2000, 2000])
    assert want[0][0]["xl/worksheets/sheet1.xml"] != want[2][0]["xl/worksheets/sheet1.xml"]
    widths = [w[0]["xl/worksheets/sheet1.xml"].split(b"<sheetData>")[0] for w in want]
    assert widths[0] != widths[2]  # the first pair's longer texts


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_percent_chars_are_the_longest_percent_text() -> None:
    """_sheetxml.percent_chars (a relative error column's width, the renderer printing its
    texts where their cells go): the most characters of percent_texts' texts, of every kind of
    double alone (the exact length, where its bound by exponent and seventeen digits is not
    enough), of random sets of them in any order, and of the codes; None for NULLs alone."""
    import random

    import numpy as np

    from msq.export import _sheetxml, xlsx

    values = pa.array([*_repr_values(), -1.0, -2.0, -3.0, None], pa.float64())
    n = len(values)
    numbers = xlsx._c_buffers(values, pa.float64())
    texts = _sheetxml.percent_texts(numbers, n)
    assert _sheetxml.percent_chars(numbers, n) == _sheetxml.max_chars(texts, n) == 25
    for i in range(n):
        one = np.array([i], np.int64).tobytes()
        assert _sheetxml.percent_chars(numbers, 1, one, 0) == _sheetxml.max_chars(texts, 1, one, 0)
    rng = random.Random(23)
    for _ in range(300):
        k = rng.choice([2, 5, 50, 500])
        order = np.array(rng.sample(range(n), k), np.int64).tobytes()
        assert _sheetxml.percent_chars(numbers, k, order, 0) == _sheetxml.max_chars(texts, k, order, 0)
    nulls = pa.array([None, None], pa.float64())
    assert _sheetxml.percent_chars(xlsx._c_buffers(nulls, pa.float64()), 2) is None


def test_c_widths_refuse_an_order_shorter_than_their_rows() -> None:
    """max_chars and percent_chars read rows order[start:start+count]: an order that ends
    before them (or a negative start) is refused with ValueError, not read past its end; an
    order that holds them gives the widths of those rows alone."""
    import numpy as np

    from msq.export import _sheetxml, xlsx

    texts = xlsx._c_buffers(pa.array(["ab", "ññññ", None, "x"]), pa.string())
    numbers = xlsx._c_buffers(pa.array([0.5, 123.25, None, 1.0]), pa.float64())
    order = np.array([3, 1], np.int64).tobytes()
    assert _sheetxml.max_chars(texts, 1, order, 0) == 1
    assert _sheetxml.max_chars(texts, 2, order, 0) == 4
    assert _sheetxml.percent_chars(numbers, 1, order, 1) == 7  # 123.25%
    for width in (_sheetxml.max_chars, _sheetxml.percent_chars):
        for count, start in ((3, 0), (2, 1), (1, -1)):
            with pytest.raises(ValueError, match="past the order's end"):
                width(texts if width is _sheetxml.max_chars else numbers, count, order, start)


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_render_counts_each_text_columns_most_characters_as_max_chars() -> None:
    """render's chars (a sheet rendered before its head, its widths counted as its rows are
    written): each text column's most characters as max_chars counts them (multi-byte texts,
    NULLs, twins copied from the column before), each relative error column's as percent_chars,
    over any rows in any order and any chars to start from; -1 (none) for NULLs alone, and
    the rows rendered are those rendered without chars."""
    import array
    import random

    import numpy as np

    from msq.export import _sheetxml, xlsx

    rng = random.Random(5)
    n = 400
    names = [rng.choice([*_TEXTS, "\u4e2d" * 12, "x" * 20, None]) for _ in range(n)]
    twins = [name if rng.random() < 0.8 else rng.choice(_TEXTS) for name in names]
    values = [*_repr_values()[:200], -1.0, -2.0, -3.0, None]
    numbers = pa.array([rng.choice(values) for _ in range(n)], pa.float64())
    nulls = pa.array([None] * n, pa.string())
    columns = [("t", xlsx._c_buffers(pa.array(names, pa.string()), pa.string())),
               ("t", xlsx._c_buffers(pa.array(twins, pa.string()), pa.string())),
               ("r", xlsx._c_buffers(numbers, pa.float64())),
               ("t", xlsx._c_buffers(nulls, pa.string()))]
    marks = bytes(rng.choice([0, 1, 2]) for _ in range(n))
    for k, start in ((n, 0), (37, 0), (100, 250)):
        order = np.array(rng.sample(range(n), n), np.int64).tobytes()
        for begin in (-1, 3):
            chars = array.array("q", [begin] * 4)
            got = _sheetxml.render(columns, marks, order, start, k, 2, b"\0\1\0\0", chars)
            assert bytes(got) == bytes(_sheetxml.render(columns, marks, order, start, k, 2,
                                                        b"\0\1\0\0"))
            want = [_sheetxml.max_chars(columns[0][1], k, order, start),
                    _sheetxml.max_chars(columns[1][1], k, order, start),
                    _sheetxml.percent_chars(columns[2][1], k, order, start), None]
            assert list(chars) == [max(begin, -1 if w is None else w) for w in want]
    with pytest.raises(ValueError, match="fewer places"):
        _sheetxml.render(columns, marks, None, 0, 1, 2, None, array.array("q", [0] * 3))


def test_spread_bools_python_equals_numpy() -> None:
    """A single statistics compare spreads its cells' booleans in Python (it loads no numpy), a
    pool worker by numpy: the two give the same Arrow columns, unknowns and row order included."""
    import random

    import numpy as np

    from msq.export.xlsx import _spread_bools_numpy, _spread_bools_python

    rng = random.Random(7)
    for n in (1, 9, 64, 1000):
        seq = rng.sample(range(5, 5 + 3 * n), n)  # out_seq: unique, not contiguous, any order
        order = np.argsort(np.array(seq, np.int64), kind="stable").astype(np.int64).tobytes()
        picked = sorted(rng.sample(seq, rng.randint(1, n)))  # the sparse rows, by out_seq
        m = len(picked)
        sparse = {"_out_seq": ("l", 0, None, None, np.array(picked, np.int64).tobytes())}
        for name, with_nulls in (("b0", False), ("b1", True)):
            values = np.array([rng.random() < 0.5 for _ in range(m)])
            known = np.array([rng.random() < 0.7 for _ in range(m)])
            valid = np.packbits(known, bitorder="little").tobytes() if with_nulls else None
            sparse[name] = ("b", 0, valid, None,
                            np.packbits(values, bitorder="little").tobytes())
        args = (order, np.array(seq, np.int64).tobytes(), n, m, sparse, ["b0", "b1"])
        assert _spread_bools_python(*args) == _spread_bools_numpy(*args)


def test_statistics_compare_loads_no_numpy(tmp_path: Path) -> None:
    """The fixtures' statistics compare (booleans among its statistics) writes its workbook
    without importing numpy: importing it cost a small compare ~45 ms (issue 15, target 4)."""
    import subprocess
    import sys

    fixture = Path(__file__).resolve().parents[2] / "fixtures"
    script = ("import sys; from msq.cli import main\n"
              "try:\n    main(['compare', 'compare.json', '-o', sys.argv[1], '-q'])\n"
              "except SystemExit as e:\n    assert not e.code, e.code\n"
              "print('numpy' in sys.modules)")
    ran = subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")],
                         cwd=fixture / "stat",
                         capture_output=True, text=True, check=True)
    assert ran.stdout.strip().splitlines()[-1] == "False", ran.stdout + ran.stderr


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_render_numbers_rows_on_across_every_carry() -> None:
    """render counts the row numbers up from the first (not printed one by one): across the
    carries of 9, 99, 999 and 99,999,999, from any first row and any start, as printed."""
    import re

    from msq.export import _sheetxml, xlsx

    n = 1_200
    texts = xlsx._c_buffers(pa.array([f"r{i}" for i in range(n)], pa.string()), pa.string())
    for first_row in (0, 1, 2, 7, 95, 995, 99_999_990):
        for start, count in ((0, n), (13, 200), (n - 1, 1), (5, 0)):
            got = bytes(_sheetxml.render([("t", texts)], None, None, start, count, first_row))
            numbers = [int(r) for r in re.findall(rb'<row r="(\d+)">', got)]
            assert numbers == list(range(first_row, first_row + count))
            assert re.findall(rb"<t>r(\d+)</t>", got) == [b"%d" % i for i in range(start, start + count)]


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_twin_texts_are_selected_null_where_the_same_and_written_and_counted_as_theirs() -> None:
    """A text column right after another (a bench name after the NPU's, xlsx._twins 2) is
    selected NULL where its text is the one before it (its Arrow export a validity bit, not
    the text) and a NULL text as the empty one: the C renderer copies the cell before there,
    and the widths count the text it stands for (the longest bench texts are in rows where they
    are the NPU's here), so the rows and widths are the SQL renderer's and DuckDB's; a column
    after such a column is none (c), the next one is again (d). twins 2 anywhere else is
    refused by the renderer."""
    import array
    import random

    from msq.export import _sheetxml, xlsx

    rng = random.Random(26)
    texts = [None, "", "a", "b", "=x", " lead", "a&b<c>", "x\x0by", "torch.float32", "\u00e9\u4e2d"]
    rows = []
    for i in range(3_000):
        a = rng.choice([*texts, "\u4e2d" * 30]) if i % 7 else "L" * 50
        b = a if i % 4 else rng.choice(texts)  # the two longest texts only where b is a
        c = rng.choice([a, b, *texts])
        d = c if i % 3 else rng.choice(texts)
        rows.append((i, a, b, c, d))
    con = duckdb.connect()
    con.execute("CREATE TABLE t (out_seq BIGINT, a VARCHAR, b VARCHAR, c VARCHAR, d VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", rows)
    marks = ("SELECT out_seq, CASE out_seq % 3 WHEN 0 THEN 'red' WHEN 1 THEN 'yellow' END AS mark "
             "FROM t WHERE out_seq % 3 < 2")
    cols = ["a", "b", "c", "d"]
    spec = SheetSpec("SELECT * FROM t", cols, cols, marks, browse=True)
    got = xlsx._c_rows(con, spec)
    assert got is not None and got.twins == bytes([0, 2, 0, 2])
    # (a NULL text the empty one: the same cell)
    same = con.execute("SELECT count(*) FILTER (WHERE coalesce(b, '') = a), "
                       "count(*) FILTER (WHERE coalesce(d, '') = c) FROM t").fetchone()
    assert isinstance(got.table, dict) and (got.table["t1"][1], got.table["t3"][1]) == same
    assert got.table["t0"][1] > 0 and got.table["t2"][1] > 0  # NULLs of their own
    sql = b"".join(xlsx._row_tags(chunk, 2) for chunk in xlsx._rendered_rows(con, spec).chunks)
    assert bytes(got.render(0, 0, got.n_rows, 2)).split(b"</row>") == sql.split(b"</row>")
    want = dict(zip(cols, con.execute(
        "SELECT max(length(a)), max(length(b)), max(length(c)), max(length(d)) FROM t"
    ).fetchone(), strict=True))
    assert want["b"] == 50 and xlsx._longest_texts(spec, cols, got) == want
    chars = array.array("q", [-1] * 4)
    got.render(0, 0, got.n_rows, 2, chars)
    assert list(chars) == [want[c] for c in cols]
    # a slice in the sheet's order (a batch's pair): counted in its rows alone
    part = dataclasses.replace(got, n_rows=1_000, base=1_500)
    order = memoryview(got.order).cast("q")[1_500:2_500]
    seq = memoryview(got.table["_out_seq"][4]).cast("q")  # each Arrow row's out_seq
    by_seq = {r[0]: r for r in rows}
    slice_want = {c: max(len(by_seq[seq[k]][j + 1] or "") for k in order)
                  for j, c in enumerate(cols)}
    assert xlsx._longest_texts(spec, cols, part) == slice_want
    for bad in (b"\2\0\0\0", b"\0\2\2\0"):
        with pytest.raises(ValueError, match="twins 2"):
            _sheetxml.render(got.columns, None, got.order, 0, 1, 2, bad)
    percent = [("t", got.columns[0][1]), ("r", xlsx._c_buffers(pa.array([1.0] * 3_000), pa.float64()))]
    with pytest.raises(ValueError, match="twins 2"):
        _sheetxml.render(percent, None, None, 0, 1, 2, b"\0\2")


@pytest.mark.skipif(xlsx_c() is None, reason="msq.export._sheetxml is not built")
def test_c_render_reads_a_cells_sparse_texts_through_each_rows_place() -> None:
    """A cell's texts read from the rows that have one alone (msq.export.xlsx._spread_cell_texts)
    are rendered through each row's place among them (sparse_rows: one index shared by the
    columns): the same bytes as the texts of every row, over any rows in any order; a text
    column is never sparse, and rows a sparse_seq names but does not hold are refused."""
    import random

    import numpy as np

    from msq.export import _sheetxml, xlsx

    rng = random.Random(11)
    n = 500
    seq = rng.sample(range(10 * n), n)  # the rows' out_seq, in no order
    order = np.argsort(np.array(seq, np.int64), kind="stable").astype(np.int64).tobytes()
    seqs = np.array(seq, np.int64).tobytes()
    has = [rng.random() < 0.1 for _ in range(n)]
    texts = [rng.choice([*_TEXTS, "", None]) if h else None for h in has]
    numbers = [None if h or rng.random() < 0.3 else rng.random() for h in has]
    bools = [None if h or x is not None or rng.random() < 0.5 else rng.random() < 0.5
             for h, x in zip(has, numbers, strict=True)]
    sparse_seq = sorted(s for s, h in zip(seq, has, strict=True) if h)
    of_seq = {s: t for s, t in zip(seq, texts, strict=True)}
    rows = _sheetxml.sparse_rows(order, seqs, n, np.array(sparse_seq, np.int64).tobytes())
    assert [r if r < 0 else sparse_seq[r] for r in np.frombuffer(rows, np.int32)] == [
        s if h else -1 for s, h in zip(seq, has, strict=True)]
    dense = xlsx._c_buffers(pa.array(texts, pa.string()), pa.string())
    few = xlsx._c_buffers(pa.array([of_seq[s] for s in sparse_seq], pa.string()), pa.string())
    assert dense is not None and few is not None
    n_arr = xlsx._c_buffers(pa.array(numbers, pa.float64()), pa.float64())
    b_arr = xlsx._c_buffers(pa.array(bools, pa.bool_()), pa.bool_())
    marks = bytes(rng.choice([0, 1, 2]) for _ in range(n))
    for start, count in ((0, n), (17, 200), (n - 1, 1)):
        want = bytes(_sheetxml.render([("c", n_arr, dense, b_arr)], marks, order, start, count, 2))
        got = bytes(_sheetxml.render([("c", n_arr, (*few, rows), b_arr)], marks, order, start,
                                     count, 2))
        assert got == want and (count < n or b"inlineStr" in want)
    with pytest.raises(ValueError, match="not sparse"):
        _sheetxml.render([("t", (*few, rows))], None, order, 0, 1, 2)
    with pytest.raises(ValueError, match="sparse_seq"):
        _sheetxml.sparse_rows(order, seqs, n, np.array([10 * n + 1], np.int64).tobytes())


def test_c_render_chooses_a_columns_texts_as_the_texts_of_its_choice() -> None:
    """A chosen column (render's ("k", flag, text, picks): msq.export.outputs.CHOSEN_TEXTS, a
    batch's Result and Err_message of its warn and unmatched message) writes the bytes of the
    text column of the texts it chooses: the row's own text where not NULL (or picks[2] there),
    else picks[1] where the flag is true, picks[0] where false or NULL; render's chars and
    chosen_chars count those texts' characters as max_chars does, over any rows in any order;
    a pick of more than 47 bytes and a sparse own text are refused."""
    import array
    import random

    import numpy as np

    from msq.export import _sheetxml, xlsx

    rng = random.Random(29)
    n = 600
    flags = [rng.choice([True, False, None]) for _ in range(n)]
    owns = [rng.choice([*_TEXTS, "No NPU data matched: \u4e2d\u6587.", ""]) if rng.random() < 0.2
            else None for _ in range(n)]
    marks = bytes(rng.choice([0, 1, 2]) for _ in range(n))
    flag_arr = xlsx._c_buffers(pa.array(flags, pa.bool_()), pa.bool_())
    own_arr = xlsx._c_buffers(pa.array(owns, pa.string()), pa.string())
    for picks in ((b"", b"Warning", b"N/A"), (b"", b"Need double check api accuracy.", None),
                  (b"=x", "\u00e9 ".encode(), b" <&> ")):
        texts = [(own if picks[2] is None else picks[2].decode()) if own is not None
                 else picks[1].decode() if flag else picks[0].decode()
                 for flag, own in zip(flags, owns, strict=True)]
        plain = ("t", xlsx._c_buffers(pa.array(texts, pa.string()), pa.string()))
        chosen = ("k", flag_arr, own_arr, picks)
        for start, count in ((0, n), (41, 300), (n - 1, 1)):
            order = np.array(rng.sample(range(n), n), np.int64).tobytes()
            chars = array.array("q", [-1])
            got = bytes(_sheetxml.render([chosen], marks, order, start, count, 2, None, chars))
            assert got == bytes(_sheetxml.render([plain], marks, order, start, count, 2))
            most = _sheetxml.max_chars(plain[1], count, order, start)
            assert chars[0] == most == _sheetxml.chosen_chars(chosen, count, order, start)
        assert _sheetxml.chosen_chars(chosen, n) == _sheetxml.max_chars(plain[1], n)
    with pytest.raises(ValueError, match="more than 47 bytes"):
        _sheetxml.render([("k", flag_arr, own_arr, (b"", b"x" * 48, None))], None, None, 0, 1, 2)
    with pytest.raises(ValueError, match="are texts"):
        rows = np.zeros(n, np.int32).tobytes()
        _sheetxml.render([("k", flag_arr, (*own_arr, rows), (b"", b"", None))], None, None,
                         0, 1, 2)
