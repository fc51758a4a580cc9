"""A fast, streaming xlsx writer fed by a DuckDB view.

msprobe spends nearly all of a large compare writing the workbook cell by cell in Python; general
writers (openpyxl, xlsxwriter) still pay a Python call per cell (~20 s per 2.5 M cells here). msq lets
DuckDB render each row's sheet XML in bulk and streams it into the zip, so a 100,000-row workbook
takes about a second. The package is the minimal SpreadsheetML set Excel, LibreOffice and openpyxl
open: content types, relationships, workbook, styles (fills), one sheet per 1,048,575 data rows.

Cell rules (spec §5.3): numbers as ``%.16g``, booleans as boolean cells, texts as inline strings
(never formulas, so text such as ``=cmd()`` is not evaluated); an empty text is an empty cell.
Text that starts like a formula also gets Excel's quote-prefix style, so editing keeps it as text.
"""

from __future__ import annotations

import array
import bisect
import contextlib
import dataclasses
import functools
import re
import sys
import zipfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeVar

import duckdb

from msq import cext, interrupts
from msq.db import SelectStream, atomic_write
from msq.errors import ExportError
from msq.flatten import ArrowColumn, arrow_columns, stable_order

# the C renderer (msq/export/_sheetxml.c): optional, as the other C extensions are
_sheetxml: Any = cext.load("msq.export._sheetxml")

try:  # ISA-L's deflate (see _faster_deflate); zlib's is the fallback
    from isal import isal_zlib as _isal_zlib
except ImportError:  # pragma: no cover (installed with msq; a bare source tree may lack it)
    _isal_zlib = None  # type: ignore[assignment]

if TYPE_CHECKING:  # imported where used: the C path reads DuckDB's Arrow stream without them
    import pyarrow as pa

_T = TypeVar("_T")

EXCEL_MAX_ROWS = 1_048_576
#: zlib's level 1, the fastest it has: the sheets of a 100k-row compare are ~95 MB of XML
_LEVEL = 1
RED, YELLOW = "FFFF0000", "00FFFF00"
_FORMULA_START = "=+-@＝＋－＠"
# XML 1.0 forbids most control characters; Excel's own escape is _xHHHH_.


@dataclass(frozen=True)
class SheetSpec:
    """What to write: the view (or query), its columns, the header labels and the marks."""

    query: str                # SELECT returning out_seq plus the columns (in any order)
    columns: Sequence[str]    # column names of the query to write, in order
    headers: Sequence[str]    # header labels (row 1)
    marks_query: str | None   # SELECT out_seq, mark ('red'|'yellow')
    # as pandas' to_excel writes a sheet (the kernel compare's workbooks): a bold, bordered
    # header, sheets named Sheet1, Sheet2, ..., a NaN number as an empty cell, +-inf as text
    pandas_style: bool = False
    # a sheet to browse (the default mode's): a bold header (pandas' style) frozen with the name
    # column, an autofilter, columns as wide as their text; msprobe's own layout (--compat) without
    browse: bool = False
    # columns of relative errors as numbers (sql/compare/schema/10_macros.sql's rel_pct: in
    # percent, or -1, -2, -3 for N/A, ' ', 0.0%), written as their texts (rel_text): printed by
    # the C renderer, in SQL by the others (see _text_query)
    percents: Sequence[str] = ()
    # columns of cells the query holds as plain columns (stat_result's: the number "<col>", and
    # the SQL, over the query's columns, of its text and of its boolean named here, None where
    # it has none; stat_result's are members of its lists cell_texts and cell_bools), each
    # written as its cell (plain_cell): the C renderer reads them as they are, the others read
    # the cell made in SQL (see _text_query)
    cells: Mapping[str, tuple[str, str | None]] = field(default_factory=dict)
    # a boolean column of the query, true on the rows where any of the cells' texts is not NULL
    # (stat_result's has_cell_text): the C renderer reads the texts of those rows alone, by a
    # second query behind that filter (:func:`_spread_cell_texts`); with every row where the
    # query has no such column (a --sql-dir stat_result of its own)
    cell_texts: str | None = None
    # with cell_texts, a column of the query that is NULL on the rows where every cell's boolean
    # is (stat_result's cell_bools): the booleans are read by that second query too, from the
    # rows where it is not NULL; None: with every row, by the first
    cell_bools: str | None = None
    # text columns the C renderer makes itself, each of a boolean column of the query and a
    # text (SQL over the query's columns), where the query has that column: {column: (the
    # flag's column, the text's SQL, the text where the flag is false or NULL, where true,
    # where the row's text is not NULL (None: that text))}: stat_result's Result and
    # Err_message, of a batch's warn and its unmatched rows' Err_message
    # (msq.export.outputs.CHOSEN_TEXTS), without a text a row from DuckDB; the other renderers,
    # and this one elsewhere, read the column's own texts
    chosen: Mapping[str, tuple[str, str, str, str, str | None]] = field(default_factory=dict)


def _col_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


def _text_query(spec: SheetSpec) -> str:
    """The sheet's query with each of its :attr:`SheetSpec.percents` as the text it shows (as
    the rel_text macro prints it; msq/export/_sheetxml.c's pct_text in C) and each of its
    :attr:`SheetSpec.cells` as its cell (as the plain_cell macro makes it)."""
    if not spec.percents and not spec.cells:
        return spec.query
    shown = [
        f'CASE "{col}" WHEN -1 THEN \'N/A\' WHEN -2 THEN \' \' WHEN -3 THEN \'0.0%\' '
        f'ELSE CASE WHEN isnan("{col}") THEN \'nan\' ELSE CAST("{col}" AS VARCHAR) END '
        f'|| \'%\' END AS "{col}"' for col in spec.percents]
    for col, (text, flag) in spec.cells.items():
        boolean = flag or "NULL::BOOLEAN"
        shown.append(f'CASE WHEN "{col}" IS NOT NULL THEN union_value(n := "{col}")::{_CELL_TYPE} '
                     f'WHEN {text} IS NOT NULL THEN union_value(s := {text})::{_CELL_TYPE} '
                     f'ELSE union_value(b := {boolean})::{_CELL_TYPE} END AS "{col}"')
    return f"SELECT * REPLACE ({', '.join(shown)}) FROM ({spec.query})"


def _escape_sql(expr: str) -> str:
    # Control characters and CR are escaped on the rendered XML in Python (see _fix_controls):
    # they are rare, and a regular expression per cell would cost more than the rest of a cell.
    return f"replace(replace(replace({expr}, '&', '&amp;'), '<', '&lt;'), '>', '&gt;')"


# U+FFFE/U+FFFF are not XML characters either: one in a dump string made the workbook unreadable
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\r\ufffe\uffff]")


def _fix_controls(xml: str) -> str:
    """Excel's _xHHHH_ escape for control characters, &#13; for CR (markup never holds them)."""
    if not _CONTROLS.search(xml):
        return xml
    return _CONTROLS.sub(lambda m: "&#13;" if m.group() == "\r" else f"_x{ord(m.group()):04X}_", xml)


def xml_escape(text: str) -> str:
    """Escape text for an inline-string cell, control characters as Excel's _xHHHH_."""
    return _fix_controls(text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;"))


def _text_cell_sql(expr: str) -> str:
    # Cells carry no r="A2" reference: a reader places them in order, so every column gets a cell
    # (an empty one is <c/>), which keeps the sheet XML small.
    formula = " OR ".join(f"left({expr}, 1) = '{ch}'" for ch in _FORMULA_START)
    edge = (f"left({expr}, 1) IN (' ', chr(9), chr(10)) OR right({expr}, 1) IN (' ', chr(9), chr(10))")
    return (
        f"CASE WHEN {expr} IS NULL OR {expr} = '' THEN '<c' || _st || '/>' "
        f"ELSE '<c' || (CASE WHEN {formula} THEN _stq ELSE _st END) "
        f"|| (CASE WHEN {edge} THEN ' t=\"inlineStr\"><is><t xml:space=\"preserve\">' "
        f"ELSE ' t=\"inlineStr\"><is><t>' END) || {_escape_sql(expr)} || '</t></is></c>' END"
    )


def _num_cell_sql(expr: str) -> str:
    return (f"CASE WHEN {expr} IS NULL THEN '<c' || _st || '/>' ELSE '<c' || _st || '><v>' "
            f"|| printf('%.16g', CAST({expr} AS DOUBLE)) || '</v></c>' END")


def _pandas_num_cell_sql(expr: str) -> str:
    """A number as pandas writes it: NaN an empty cell, +-inf the text inf / -inf."""
    value = f"CAST({expr} AS DOUBLE)"
    return (f"CASE WHEN {expr} IS NULL OR isnan({value}) THEN '<c' || _st || '/>' "
            f"WHEN isinf({value}) THEN '<c' || _st || ' t=\"inlineStr\"><is><t>' "
            f"|| (CASE WHEN {value} > 0 THEN 'inf' ELSE '-inf' END) || '</t></is></c>' "
            f"ELSE {_num_cell_sql(expr)} END")


def _bool_cell_sql(expr: str) -> str:
    return (f"CASE WHEN {expr} IS NULL THEN '<c' || _st || '/>' ELSE '<c' || _st || "
            f"' t=\"b\"><v>' || (CASE WHEN {expr} THEN '1' ELSE '0' END) || '</v></c>' END")


_UNION_TAGS = re.compile(r"[(,]\s*(\w+)\s")


def _cell_sql(column: str, type_name: str, pandas_style: bool = False) -> str:
    col = f'"{column}"'
    num = _pandas_num_cell_sql if pandas_style else _num_cell_sql
    if type_name.startswith("UNION"):
        # a number (n), a boolean (b) or a text (s): each member the union has; the main
        # workbook's cell type has all three
        tags = set(_UNION_TAGS.findall(type_name))
        cases = "".join(f"WHEN '{tag}' THEN {cell(f'union_extract({col}, {chr(39)}{tag}{chr(39)})')} "
                        for tag, cell in (("n", num), ("b", _bool_cell_sql)) if tag in tags)
        other = (_text_cell_sql(f"union_extract({col}, 's')") if "s" in tags
                 else "'<c' || _st || '/>'")
        return f"CASE union_tag({col}) {cases}ELSE {other} END"
    if type_name in _NUMBER_TYPES:
        return num(col)
    if type_name == "BOOLEAN":
        return _bool_cell_sql(col)
    return _text_cell_sql(f"CAST({col} AS VARCHAR)")


@dataclass
class Shapes:
    """What :func:`same_shapes` keeps: the column types of each sheet query asked (by the
    query's text) and what :func:`same_fact` asked (by its key). A caller may keep one from a
    block to the next while its catalog's tables keep their columns and types (a pool worker's
    kept database from batch to batch: msq.pair_tables.WorkerDatabase.shapes)."""

    types: dict[str, dict[str, str]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


#: Inside :func:`same_shapes`: what is asked there
_SHAPES: Shapes | None = None


@contextlib.contextmanager
def same_shapes(kept: Shapes | None = None) -> Iterator[None]:
    """Inside the block, a sheet query's column types are asked once (DESCRIBE binds the whole
    query: ~10 M instructions of a 24,500-row pair's workbook, ~13 M of its blame sheet's) and
    taken as asked for every later sheet of the same query text. For a caller whose tables
    keep their columns and types throughout: the pairs of a batch, whose views differ only in
    the constants that pick their rows (msq.pipeline.pair_views). :func:`same_fact` too.
    ``kept``: what an earlier block asked, taken as asked (and what this one asks kept in it);
    None: asked anew."""
    global _SHAPES
    before, _SHAPES = _SHAPES, kept if kept is not None else Shapes()
    try:
        yield
    finally:
        _SHAPES = before


def same_fact(key: str, ask: Callable[[], _T]) -> _T:
    """``ask()``: asked once for ``key`` inside :func:`same_shapes` (a fact of the catalog its
    callers keep throughout, e.g. which of the workbook's sources are tables: one query, ~4.5 M
    instructions of a 24,500-row pair's workbook), every time outside."""
    if _SHAPES is None:
        return ask()
    if key not in _SHAPES.facts:
        _SHAPES.facts[key] = ask()
    found: _T = _SHAPES.facts[key]
    return found


@dataclass
class _BatchSheets:
    """What :func:`batch_sheets` keeps for a batch's pairs."""

    queries: Mapping[str, str]   # a pair's sheet or marks query -> the same over the batch
    #: each batched sheet's rows over the whole batch (None: not for the C renderer), by
    #: (query, marks query, columns, percents, cells); with each row's out_seq
    sources: dict[tuple[Any, ...], tuple[_CRows, memoryview] | None]
    rows: tuple[int, int] | None = None  # the pair's out_seq range in the batch (inclusive)
    #: makes the pair's own views (msq.pipeline.batch_pair) for a sheet that must read them
    #: (:func:`_own_views`); None: made already, or made by nothing here
    views: Callable[[], None] | None = None

    def pair(self, out_range: tuple[int, int], views: Callable[[], None] | None = None) -> None:
        """The next sheets are those of the pair whose rows are the batch's ``out_range``
        (msq.pipeline.BatchPlace.out_range: lo > hi for none). ``views``: what makes the pair's
        views, when they are left to be made on demand (its sheets are slices of the batch's
        rows and read no view of the pair, but where a sheet cannot be: :func:`_own_views`)."""
        self.rows = out_range
        self.views = views


#: Inside :func:`batch_sheets`: the batch's sheet rows and the current pair.
_BATCH: _BatchSheets | None = None


@contextlib.contextmanager
def batch_sheets(queries: Mapping[str, str]) -> Iterator[_BatchSheets]:
    """Inside the block, the C renderer's rows of a sheet whose query and marks query are keys
    of ``queries`` are fetched once, by the queries they map to (the same rows over a whole
    batch of pairs, out_seq the batch's), and each pair's workbook renders its slice of them:
    the rows whose out_seq is in the range given by ``pair()`` before its workbook (a pair's
    views are the batch tables' rows of its range, msq.pipeline.pair_views), in out_seq
    order, its column widths counted in that slice. One query, Arrow stream and percent-text
    pass a batch instead of one a pair (~43 M instructions a 24,500-row pair); the batch's
    columns (~7 MB a pair) are held until the block ends. The C renderer's buffers are kept
    from one render to the next until then too (``_sheetxml.keep_buffers``: at most two, the
    ones a sheet's batch of rows is rendered into and deflated from anyway; fresh ones took
    ~4,400 page faults a 24,500-row pair)."""
    global _BATCH
    kept, _BATCH = _BATCH, _BatchSheets(queries, {})
    outermost = kept is None and _sheetxml is not None
    if outermost:
        _sheetxml.keep_buffers(True)
    try:
        yield _BATCH
    finally:
        _BATCH = kept
        if outermost:
            _sheetxml.keep_buffers(False)


def _own_views() -> None:
    """Before a query of a batch's pair's own views (msq.pipeline.pair_views): they are made
    now if they were left to be made on demand (:meth:`_BatchSheets.pair`)."""
    batch = _BATCH
    if batch is not None and batch.views is not None:
        make, batch.views = batch.views, None
        make()


def _described(query: str) -> str:
    """What to DESCRIBE for a sheet query's column types: inside :func:`batch_sheets`, the
    batch's query that a pair's sheet query maps to (the same columns and types: a pair's views
    are its batch tables' columns, each moved column cast back to its type), else the query
    itself (a batch's pair's views made first, :func:`_own_views`)."""
    batch = _BATCH
    if batch is not None and batch.rows is not None and query in batch.queries:
        return batch.queries[query]
    _own_views()
    return query


def _types(con: duckdb.DuckDBPyConnection, spec: SheetSpec) -> dict[str, str]:
    """The sheet's column types as :func:`_text_query` writes them (a percent column's: its
    text's, VARCHAR; a cell's of plain columns: the cell's), from the query's own: DuckDB
    parsing and binding _text_query's expressions took ~6 M instructions a sheet, ~40 M with
    stat_result's twelve cells."""
    known = _SHAPES.types.get(spec.query) if _SHAPES is not None else None
    if known is None:
        known = dict(con.execute("SELECT column_name, column_type FROM "
                                 f"(DESCRIBE {_described(spec.query)})").fetchall())
        if _SHAPES is not None:
            _SHAPES.types[spec.query] = known
    return {**known, **dict.fromkeys(spec.percents, "VARCHAR"),
            **dict.fromkeys(spec.cells, _CELL_TYPE)}


def _rows_query(con: duckdb.DuckDBPyConnection, spec: SheetSpec,
                types: dict[str, str] | None = None) -> str:
    """``out_seq`` and each row's cells as one XML string, in no particular order.

    The rows are put in order and get their ``<row r="N">`` tags in Arrow (:func:`_rendered_rows`,
    :func:`_row_tags`): numbering them in SQL took a window and two sorts of every column. One
    ``concat`` of the cells, not a chain of ``||``, copies each row's text once.
    """
    types = types or _types(con, spec)
    cells = ", ".join(_cell_sql(c, types[c], spec.pandas_style) for c in spec.columns)
    marks = spec.marks_query or "SELECT NULL::BIGINT AS out_seq, NULL::VARCHAR AS mark WHERE false"
    return f"""
      WITH q AS ({_text_query(spec)}), mk AS ({marks}),
      styled AS (
        SELECT q.*,
               CASE mk.mark WHEN 'red' THEN ' s="1"' WHEN 'yellow' THEN ' s="2"' ELSE '' END AS _st,
               CASE mk.mark WHEN 'red' THEN ' s="4"' WHEN 'yellow' THEN ' s="5"' ELSE ' s="3"' END AS _stq
        FROM q LEFT JOIN mk ON mk.out_seq = q.out_seq
      )
      SELECT out_seq, concat({cells}) AS xml FROM styled
    """


def _rendered_rows(con: duckdb.DuckDBPyConnection, spec: SheetSpec,
                   types: dict[str, str] | None = None) -> pa.ChunkedArray:
    """Every row's cells as XML, in ``out_seq`` order."""
    _own_views()
    try:
        table = con.cursor().sql(_rows_query(con, spec, types)).to_arrow_table()
    except duckdb.Error as err:
        raise ExportError(f"cannot render the workbook rows: {err}") from err
    import pyarrow.compute as pc  # lazy: ~0.1 s to import; only this renderer (no C) needs it

    # one gather of the rendered strings costs half of an ORDER BY in the query
    return table.column(1).take(pc.sort_indices(table.column(0)))


# Bytes that are never in the markup or in UTF-8 text other than as these characters: the C0
# controls _fix_controls escapes, and the lead bytes of U+FFC0..U+FFFF (U+FFFE, U+FFFF among them).
_CONTROL_BYTES = bytes([*range(0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x0D])
_FFFX = "\uffff".encode()[:2]


def _row_tags(xml: pa.Array, first_row: int) -> bytes:
    """``<row r="first_row">cells</row>...`` for a batch of rendered rows, as UTF-8 bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc  # lazy: as in _rendered_rows

    numbers = pc.cast(pa.array(range(first_row, first_row + len(xml)), pa.int64()), pa.string())
    rows = pc.binary_join_element_wise('<row r="', numbers, '">', xml, "</row>", "")
    whole = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(rows)], pa.int32()), rows), "")
    data = whole[0].as_buffer().to_pybytes()
    # a C translate pass finds the rare control character far faster than a regular expression
    if len(data.translate(None, _CONTROL_BYTES)) != len(data) or _FFFX in data:
        data = _fix_controls(data.decode("utf-8")).encode("utf-8")
    return data


_CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>
<Override PartName="/xl/styles.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.styles+xml"/>
{sheets}
</Types>"""
_ROOT_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/>
</Relationships>"""
_STYLES = f"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<styleSheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">
<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>
<fills count="4"><fill><patternFill patternType="none"/></fill><fill><patternFill patternType="gray125"/></fill>
<fill><patternFill patternType="solid"><fgColor rgb="{RED}"/><bgColor rgb="{RED}"/></patternFill></fill>
<fill><patternFill patternType="solid"><fgColor rgb="{YELLOW}"/><bgColor rgb="{YELLOW}"/></patternFill></fill></fills>
<borders count="1"><border><left/><right/><top/><bottom/><diagonal/></border></borders>
<cellStyleXfs count="1"><xf numFmtId="0" fontId="0" fillId="0" borderId="0"/></cellStyleXfs>
<cellXfs count="6"><xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0"/>
<xf numFmtId="0" fontId="0" fillId="2" borderId="0" xfId="0" applyFill="1"/>
<xf numFmtId="0" fontId="0" fillId="3" borderId="0" xfId="0" applyFill="1"/>
<xf numFmtId="0" fontId="0" fillId="0" borderId="0" xfId="0" quotePrefix="1"/>
<xf numFmtId="0" fontId="0" fillId="2" borderId="0" xfId="0" applyFill="1" quotePrefix="1"/>
<xf numFmtId="0" fontId="0" fillId="3" borderId="0" xfId="0" applyFill="1" quotePrefix="1"/></cellXfs>
<cellStyles count="1"><cellStyle name="Normal" xfId="0" builtinId="0"/></cellStyles>
</styleSheet>"""
# pandas' header: bold, thin borders, centred at the top (one more font, border and cell style)
_PANDAS_STYLES = (_STYLES
                  .replace('<fonts count="1"><font><sz val="11"/><name val="Calibri"/></font></fonts>',
                           '<fonts count="2"><font><sz val="11"/><name val="Calibri"/></font>'
                           '<font><b/><sz val="11"/><name val="Calibri"/></font></fonts>')
                  .replace('<borders count="1"><border><left/><right/><top/><bottom/><diagonal/>'
                           '</border></borders>',
                           '<borders count="2"><border><left/><right/><top/><bottom/><diagonal/>'
                           '</border><border><left style="thin"/><right style="thin"/>'
                           '<top style="thin"/><bottom style="thin"/><diagonal/></border></borders>')
                  .replace('<cellXfs count="6">', '<cellXfs count="7">')
                  .replace('quotePrefix="1"/></cellXfs>',
                           'quotePrefix="1"/>\n<xf numFmtId="0" fontId="1" fillId="0" borderId="1" '
                           'xfId="0" applyFont="1" applyBorder="1" applyAlignment="1">'
                           '<alignment horizontal="center" vertical="top"/></xf></cellXfs>'))
_HEADER_STYLE = ' s="6"'
_SHEET_OPEN = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
               '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">')
_MAX_WIDTH = 60  # characters: a long stack or message is read in the cell, not the column
_NUMBER_WIDTH = 12  # Excel's General format shows a number in 11 characters


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _header_xml(headers: Sequence[str], style: str = "") -> str:
    cells = "".join(
        f'<c r="{_col_letter(i)}1"{style} t="inlineStr"><is><t xml:space="preserve">'
        f'{_xml_text(h)}</t></is></c>'
        for i, h in enumerate(headers))
    return f'<row r="1">{cells}</row>'


@dataclass(frozen=True)
class _Layout:
    """The sheet XML around the rows: sized by each sheet's row count (``<dimension>``, the
    autofilter's range), and the browsing aids of :attr:`SheetSpec.browse`."""

    header: str
    n_cols: int
    widths: Sequence[float] | None  # None: no <cols> (msprobe's layout)
    browse: bool

    def ref(self, rows: int) -> str:
        return f"A1:{_col_letter(max(self.n_cols, 1) - 1)}{rows + 1}"

    def head(self, rows: int) -> bytes:
        """Everything before the first data row of a sheet of ``rows`` data rows."""
        parts = [_SHEET_OPEN, f'<dimension ref="{self.ref(rows)}"/>']
        if self.browse:  # header row and name column stay in view
            parts.append('<sheetViews><sheetView workbookViewId="0"><pane xSplit="1" ySplit="1" '
                         'topLeftCell="B2" activePane="bottomRight" state="frozen"/>'
                         '<selection pane="topRight"/><selection pane="bottomLeft"/>'
                         '<selection pane="bottomRight" activeCell="B2" sqref="B2"/>'
                         "</sheetView></sheetViews>")
        if self.widths:
            parts.append("<cols>" + "".join(
                f'<col min="{i + 1}" max="{i + 1}" width="{w:g}" customWidth="1"/>'
                for i, w in enumerate(self.widths)) + "</cols>")
        parts.append("<sheetData>" + self.header)
        return "".join(parts).encode()

    def tail(self, rows: int) -> bytes:
        filt = f'<autoFilter ref="{self.ref(rows)}"/>' if self.browse else ""
        return f"</sheetData>{filt}</worksheet>".encode()


def _widths(con: duckdb.DuckDBPyConnection, spec: SheetSpec,
            types: dict[str, str] | None = None, source: _CRows | None = None) -> list[float]:
    """Each column as wide as its longest text (header and filter button included), numbers as
    wide as Excel's General format needs, nothing wider than :data:`_MAX_WIDTH`. The longest
    texts are counted in the rows fetched for the C renderer (``source``) when there are, else
    by a query over the sheet."""
    types = types or _types(con, spec)
    texts = [c for c in spec.columns if types[c] == "VARCHAR"]
    longest: dict[str, int] = {}
    if texts:
        counted = _longest_texts(spec, texts, source)
        if counted is not None:
            longest = counted
        else:
            lengths = ", ".join(f'max(length("{c}"))' for c in texts)
            _own_views()
            row = con.cursor().execute(f"SELECT {lengths} FROM ({_text_query(spec)})"
                                       ).fetchall()[0]
            longest = {c: int(n or 0) for c, n in zip(texts, row)}
    return _widths_of(spec, longest)


def _widths_of(spec: SheetSpec, longest: Mapping[str, int]) -> list[float]:
    """:func:`_widths` of the characters of each text column's longest text (``longest``)."""
    widths = []
    for col, head in zip(spec.columns, spec.headers):
        data = longest.get(col, _NUMBER_WIDTH)
        widths.append(float(min(_MAX_WIDTH, max(len(head) + 4, data + 2))))
    return widths


def _longest_texts(spec: SheetSpec, texts: list[str],
                   source: _CRows | None) -> dict[str, int] | None:
    """The characters of each text column's longest value (0 when all are NULL), counted in C
    in the C renderer's columns (a batch's: in the pair's rows), as DuckDB's
    ``max(length(...))`` counts them; None without those columns."""
    if source is None or _sheetxml is None:
        return None
    longest: dict[str, int] = {}
    for name in texts:
        column = source.columns[spec.columns.index(name)]
        if column[0] == "k":  # a chosen column: its texts as the renderer chooses them
            most = (_sheetxml.chosen_chars(column, source.n_rows) if source.base is None else
                    _sheetxml.chosen_chars(column, source.n_rows, source.order, source.base))
            longest[name] = int(most or 0)
            continue
        if column[0] not in ("t", "r"):
            return None
        # a relative error's texts are printed by the renderer: counted from their numbers
        count = _sheetxml.max_chars if column[0] == "t" else _sheetxml.percent_chars
        at = spec.columns.index(name)
        if column[0] == "t" and source.twins and source.twins[at] == 2:
            # NULL where the text is the column's before it (_twins): that one's counted there
            like = source.columns[at - 1][1]
            most = count(column[1], source.n_rows, source.order if source.base is not None
                         else None, source.base or 0, like)
        elif source.base is None:
            most = count(column[1], source.n_rows)
        else:
            most = count(column[1], source.n_rows, source.order, source.base)
        longest[name] = int(most or 0)
    return longest


def _sheet_name(index: int, pandas_style: bool = False) -> str:
    if pandas_style:
        return f"Sheet{index + 1}"
    return "Sheet" if index == 0 else f"Sheet{index + 1}"


def _finish_package(zf: zipfile.ZipFile, n_sheets: int, *, pandas_style: bool = False,
                    styles: str = _STYLES, filters: Sequence[str] = (),
                    extra_names: Sequence[str] = ()) -> None:
    """The package's other parts; ``extra_names``: the names of the sheets after the first
    ``n_sheets`` (msprobe's Sheet, Sheet2, ...); ``filters``: each sheet's autofilter range
    (A1:Z9, "" for none), named as Excel names it (``_xlnm._FilterDatabase``)."""
    names = [_sheet_name(i, pandas_style) for i in range(n_sheets)] + list(extra_names)
    n_sheets = len(names)
    overrides = "\n".join(
        f'<Override PartName="/xl/worksheets/sheet{i + 1}.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        for i in range(n_sheets))
    zf.writestr("[Content_Types].xml", _CONTENT_TYPES.format(sheets=overrides))
    zf.writestr("_rels/.rels", _ROOT_RELS)
    sheets = "".join(f'<sheet name="{_xml_text(name)}" sheetId="{i + 1}" r:id="rId{i + 1}"/>'
                     for i, name in enumerate(names))
    zf.writestr("xl/workbook.xml", (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        f"<sheets>{sheets}</sheets>{_filter_names(filters, names)}</workbook>"))
    rels = "".join(
        f'<Relationship Id="rId{i + 1}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        f'relationships/worksheet" Target="worksheets/sheet{i + 1}.xml"/>' for i in range(n_sheets))
    rels += (f'<Relationship Id="rId{n_sheets + 1}" Type="http://schemas.openxmlformats.org/'
             'officeDocument/2006/relationships/styles" Target="styles.xml"/>')
    zf.writestr("xl/_rels/workbook.xml.rels", (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f"{rels}</Relationships>"))
    zf.writestr("xl/styles.xml", styles)


def _filter_names(filters: Sequence[str], sheets: Sequence[str]) -> str:
    defined = "".join(
        f'<definedName name="_xlnm._FilterDatabase" localSheetId="{i}" hidden="1">'
        f"{_xml_text(_sheet_ref(sheets[i]))}!{_absolute(ref)}</definedName>"
        for i, ref in enumerate(filters) if ref)
    return f"<definedNames>{defined}</definedNames>" if defined else ""


def _sheet_ref(name: str) -> str:
    """A sheet's name in a formula: quoted when it holds more than letters, digits and _."""
    return name if re.fullmatch(r"\w+", name) else "'" + name.replace("'", "''") + "'"


def _absolute(ref: str) -> str:
    """A1:AB287 -> $A$1:$AB$287"""
    return ":".join(re.sub(r"([A-Z]+)(\d+)", r"$\1$\2", part) for part in ref.split(":"))


def write_xlsx(con: duckdb.DuckDBPyConnection, spec: SheetSpec, path: Path,
               on_extra_sheet: Callable[[int], None] | None = None,
               max_rows: int | None = None, mode: int | None = None,
               extra: Sequence[tuple[str, SheetSpec]] = ()) -> int:
    """Write the workbook atomically (temp name, then rename); return the number of sheets.

    Args:
        con: the compare's connection.
        spec: the query, columns, headers and marks to write.
        path: the workbook to write.
        on_extra_sheet: called with the sheet number each time the rows continue on a new sheet.
        max_rows: rows per sheet, header included (default Excel's 1,048,576; read at call time).
        mode: the file's permission bits (default: as the process creates files).
        extra: named sheets written after the main one(s), e.g. ``("blame", spec)``; one that
            passes the row limit continues on ``name (2)``, ...

    Returns:
        The number of sheets written.
    """
    rows_per_sheet = max_rows if max_rows is not None else EXCEL_MAX_ROWS
    if rows_per_sheet < 2:
        raise ExportError(f"max_rows must leave room for the header and a row, got {rows_per_sheet}")
    with atomic_write(path, mode=mode) as tmp:
        return _write_package(con, spec, tmp, on_extra_sheet, rows_per_sheet, extra)


def _write_package(con: duckdb.DuckDBPyConnection, spec: SheetSpec, tmp: Path,
                   on_extra_sheet: Callable[[int], None] | None, max_rows: int,
                   extra: Sequence[tuple[str, SheetSpec]] = ()) -> int:
    bold = spec.pandas_style or spec.browse  # pandas' bold header (its style is style 6)
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=_LEVEL) as zf:
        filters = _write_sheets(zf, con, spec, max_rows, on_extra_sheet)
        n_sheets = len(filters)
        names: list[str] = []
        for name, more in extra:
            more_filters = _write_sheets(zf, con, more, max_rows, None, first=len(filters) + 1)
            names += [name if k == 0 else f"{name} ({k + 1})" for k in range(len(more_filters))]
            filters += more_filters
        _finish_package(zf, n_sheets, pandas_style=spec.pandas_style,
                        styles=_PANDAS_STYLES if bold else _STYLES, filters=filters,
                        extra_names=names)
    return len(filters)


def _write_sheets(zf: zipfile.ZipFile, con: duckdb.DuckDBPyConnection, spec: SheetSpec,
                  max_rows: int, on_extra_sheet: Callable[[int], None] | None,
                  first: int = 1) -> list[str]:
    """The rows of ``spec`` as worksheets ``sheet<first>.xml``, ...; return each one's
    autofilter range ("" without one): one entry per sheet written."""
    # the sheet's column types, asked once (DESCRIBE binds the sheet's query: its renderer and
    # its column widths both need them)
    types = _types(con, spec)
    source = _c_rows(con, spec, types)
    rows = _rendered_rows(con, spec, types) if source is None else None
    total = source.n_rows if source is not None else len(rows or ())
    bold = spec.pandas_style or spec.browse
    ahead = _rendered_ahead(spec, types, source, max_rows) if spec.browse else None
    widths = None
    if spec.browse:
        widths = ahead[1] if ahead is not None else _widths(con, spec, types, source)
    layout = _Layout(_header_xml(spec.headers, _HEADER_STYLE if bold else ""), len(spec.columns),
                     widths, spec.browse)
    with _Sheets(zf, layout, max_rows - 1, total, on_extra_sheet, first) as sheets:
        if ahead is not None:
            assert source is not None
            for part in ahead[0]:
                sheets.add(part.count, functools.partial(part.render, source))
        elif source is not None:
            for start in range(0, source.n_rows, _BATCH_ROWS):
                count = min(_BATCH_ROWS, source.n_rows - start)
                sheets.add(count, functools.partial(source.render, start))
        else:
            assert rows is not None
            for chunk in rows.chunks:
                for start in range(0, len(chunk), _BATCH_ROWS):
                    batch = chunk.slice(start, _BATCH_ROWS)
                    sheets.add(len(batch), functools.partial(_tagged, batch))
        count = sheets.close()
    return sheets.filters if spec.browse else [""] * count


_BATCH_ROWS = 20_000
#: A sheet of at most this many rows is rendered before its head (:func:`_rendered_ahead`): its
#: rendered rows are held until they are written (~0.9 kB a root-8x8-5000 row), as many as the
#: writer thread's overlap held (a batch deflated, the next rendered); a larger one streams
_AHEAD_ROWS = 2 * _BATCH_ROWS


def _rendered_ahead(spec: SheetSpec, types: dict[str, str], source: _CRows | None,
                    max_rows: int) -> tuple[list[_Ahead], list[float]] | None:
    """A batch's pair's sheet (:func:`batch_sheets`) rendered before its head, in batches of
    :data:`_BATCH_ROWS` rows, and the column widths :func:`_widths` gives, from the texts'
    characters the renderer counted as it wrote them (``_sheetxml.render``'s chars: ~10 M
    instructions a 24,500-row pair less than counting them in passes of their own before the
    rows). None where the sheet is not one of a batch's pairs (a single compare's rows are
    rendered while the writer thread deflates the batch before; a pool worker has no idle core
    to overlap them on), has no rows or more than one sheet (or :data:`_AHEAD_ROWS`) holds, or
    a text column is not one the renderer counts."""
    if _BATCH is None or _BATCH.rows is None or source is None or _sheetxml is None \
            or not 0 < source.n_rows <= min(max_rows - 1, _AHEAD_ROWS):
        return None
    texts = [i for i, c in enumerate(spec.columns) if types[c] == "VARCHAR"]
    if any(source.columns[i][0] not in ("t", "r", "k") for i in texts):
        return None
    chars = array.array("q", [-1] * len(spec.columns))
    parts = []
    for start in range(0, source.n_rows, _BATCH_ROWS):
        count = min(_BATCH_ROWS, source.n_rows - start)
        # the sheet's rows are numbered from 2 (the header is row 1): one sheet holds them all
        parts.append(_Ahead(start, count, start + 2,
                            source.render(start, 0, count, start + 2, chars)))
    return parts, _widths_of(spec, {spec.columns[i]: max(0, chars[i]) for i in texts})


@dataclass(frozen=True)
class _Ahead:
    """Rows of a sheet rendered ahead (:func:`_rendered_ahead`)."""

    start: int      # the first's place in the sheet's order
    count: int
    first_row: int  # its row number
    xml: Any        # memoryview: _CRows.render's

    def render(self, source: _CRows, offset: int, count: int, first_row: int) -> Any:
        """:meth:`_CRows.render` of rows ``offset`` .. ``+ count`` of these, numbered from
        ``first_row``: the XML rendered ahead where it is those rows, else rendered now."""
        if offset == 0 and count == self.count and first_row == self.first_row:
            return self.xml
        return source.render(self.start, offset, count, first_row)


def _tagged(xml: pa.Array, offset: int, count: int, first_row: int) -> bytes:
    return _row_tags(xml.slice(offset, count), first_row)


#: A column for the C renderer: ("t", text array), ("r", the numbers of relative errors, each
#: written as its text: _sheetxml.c's pct_text), ("c", n, s, b arrays of a cell) or ("k", flag,
#: text arrays, picks: a chosen column, SheetSpec.chosen), each array as (validity, offsets,
#: data, offset) buffers; a cell's sparse texts (s) with a fifth, each row's place among them
#: (_sheetxml.sparse_rows, :func:`_spread_cell_texts`).
_CArray = tuple[Any, ...]


@dataclass
class _CRows:
    """The sheet's columns as Arrow arrays, rendered into row XML by msq/export/_sheetxml.c."""

    table: Any                # keeps the buffers alive (a pyarrow table, or the buffers)
    columns: list[tuple[Any, ...]]
    marks: pa.Buffer | bytes | None
    order: pa.Buffer | bytes
    n_rows: int
    #: a pair's rows of a batch's (:func:`batch_sheets`): order[base:base + n_rows]
    base: int | None = None
    #: a byte a column: non-zero where its text is compared with the column's before it and,
    #: where the same, that cell copied (:func:`_twins`)
    twins: bytes | None = None

    def render(self, start: int, offset: int, count: int, first_row: int,
               chars: array.array[int] | None = None) -> memoryview:
        """Rows ``start + offset`` .. ``+ count`` of the sheet order, numbered from ``first_row``
        (the C renderer's own buffer, not copied into bytes); ``chars``: an int64 a column,
        each text column's raised to the most characters of its texts in those rows."""
        assert _sheetxml is not None
        return memoryview(_sheetxml.render(self.columns, self.marks, self.order,
                                           (self.base or 0) + start + offset, count, first_row,
                                           self.twins, chars))


def _twins(n_columns: int, texts: Collection[int], percented: Collection[int]) -> bytes:
    """The text columns whose texts the C renderer's query selects NULL where they are the
    column's before them (:func:`_twin_text`), a byte a column (``_sheetxml.render``'s twins,
    2): a text column (not a percent one) right after another that is not such a column, as
    each bench name, dtype and shape follows the NPU's (the same text in all but a few rows of
    a compare) and Err_message the Result (both empty in most rows). Its cell there is the
    cell before it, copied, not rendered again, and DuckDB's Arrow export appends a validity
    bit instead of the text (~100 instructions a text: its copy, a reservation, an offset);
    the percents, numbers' texts, rarely are the same."""
    plain = set(texts) - set(percented)
    twins = bytearray(n_columns)
    for i in range(1, n_columns):
        twins[i] = 2 if i in plain and i - 1 in plain and twins[i - 1] != 2 else 0
    return bytes(twins)


def _twin_text(column: str, before: str) -> str:
    """The SQL of a text column that :func:`_twins` marks (``column``, after ``before``): NULL
    where its text is the one before it, else its text, a NULL one as the empty text (the same
    cell: an empty one)."""
    return f"nullif(coalesce(CAST({column} AS VARCHAR), ''), CAST({before} AS VARCHAR))"


_CELL_TYPE = "UNION(n DOUBLE, s VARCHAR, b BOOLEAN)"
_NUMBER_TYPES = ("DOUBLE", "FLOAT", "BIGINT", "INTEGER", "HUGEINT", "SMALLINT", "TINYINT")


def renderer() -> str:
    """Which renderer writes the workbook rows here, as ``compare -v`` says it."""
    if _sheetxml is not None:
        return "C"
    return f"SQL ({cext.why_not('msq.export._sheetxml')}; same bytes)"


def deflate() -> str:
    """Which deflate compresses the workbook's sheets here, as ``compare -v`` says it (the same
    level either way; ISA-L's output bytes differ from zlib's, the unzipped sheets do not)."""
    if _isal_zlib is not None:
        return "ISA-L"
    return "zlib (the isal package is not installed)"


def _c_buffers(array: pa.Array, kind: pa.DataType) -> _CArray | None:
    import pyarrow as pa

    if array.type != kind:
        return None
    buffers = array.buffers()
    if kind == pa.string():
        return buffers[0], buffers[1], buffers[2], array.offset
    return buffers[0], None, buffers[1], array.offset


def _c_rows(con: duckdb.DuckDBPyConnection, spec: SheetSpec,
            types: dict[str, str] | None = None) -> _CRows | None:
    """The C renderer's input, or None where it does not apply (no C extension, a column of
    another type than text or cell: the SQL renderer writes those)."""
    if _sheetxml is None or len(spec.columns) > 64 or spec.pandas_style:
        return None
    types = types or _types(con, spec)
    if any(t.startswith("UNION") and t != _CELL_TYPE for t in types.values()):
        return None  # a union of fewer members (the SQL renderer writes each member it has)
    batched = _batch_slice(con, spec, types)
    if batched is not None:
        return batched
    _own_views()
    return _c_rows_queried(con, spec, types)


def _batch_slice(con: duckdb.DuckDBPyConnection, spec: SheetSpec,
                 types: dict[str, str]) -> _CRows | None:
    """The pair's rows of its batch's sheet (:func:`batch_sheets`), fetched with the first pair;
    None outside a batch, for a sheet it does not map, or where the batch's rows cannot be read
    in C (the caller then asks the pair's own)."""
    batch = _BATCH
    if batch is None or batch.rows is None or spec.query not in batch.queries or (
            spec.marks_query is not None and spec.marks_query not in batch.queries):
        return None
    key = (spec.query, spec.marks_query, tuple(spec.columns), tuple(spec.percents),
           tuple(spec.cells.items()), tuple(spec.chosen.items()))
    if key not in batch.sources:
        whole = _c_rows_queried(con, dataclasses.replace(
            spec, query=batch.queries[spec.query],
            marks_query=batch.queries[spec.marks_query] if spec.marks_query else None),
            types, fast_only=True)
        batch.sources[key] = None if whole is None or not isinstance(whole.table, dict) else (
            whole, memoryview(whole.table["_out_seq"][4] if whole.n_rows else b"").cast("q"))
    found = batch.sources[key]
    if found is None:
        return None
    whole, seq = found
    if whole.n_rows == 0:
        return dataclasses.replace(whole, base=0)
    order = memoryview(whole.order).cast("q")
    lo, hi = batch.rows
    # the pair's rows are those of its out_seq range: a slice of the batch's out_seq order
    first = bisect.bisect_left(range(whole.n_rows), lo, key=lambda k: seq[order[k]])
    end = bisect.bisect_right(range(first, whole.n_rows), hi, key=lambda k: seq[order[k]]) + first
    return dataclasses.replace(whole, n_rows=max(0, end - first), base=first)


def _c_rows_queried(con: duckdb.DuckDBPyConnection, spec: SheetSpec, types: dict[str, str],
                    fast_only: bool = False) -> _CRows | None:
    """:func:`_c_rows` by the sheet's own query (``fast_only``: None where DuckDB's Arrow
    stream cannot be read in C, without reading it with pyarrow)."""
    select = []
    texts = []  # columns written as text cells (any type but numbers, booleans and cells)
    text_at: dict[int, int] = {}  # a plain text column's place in select
    # a cell's members that are NULL in every row (a difference's boolean, a number's text and
    # boolean): not selected, given to the renderer as all-NULL arrays (:func:`_all_null`):
    # DuckDB's Arrow export appended each NULL (~4 M instructions a 24,500-row pair a column)
    absent: set[str] = set()
    # the cells' text columns read by :func:`_spread_cell_texts` (SheetSpec.cell_texts)
    spread: dict[str, str] = {}
    # the percent columns: their numbers' texts printed in C
    percented = {i for i, c in enumerate(spec.columns) if c in spec.percents}
    # the chosen columns (SheetSpec.chosen) the query has the flag of: each one's flag and own
    # text (their names in select, each selected once) and its picks
    chosen: dict[int, tuple[str, str, tuple[bytes | None, ...]]] = {}
    chosen_from: dict[str, str] = {}  # a flag's or own text's SQL -> its name in select
    for i, column in enumerate(spec.columns):
        col = f'q."{column}"'
        type_name = types[column]
        if i in percented:
            texts.append(i)
            select.append(f"CAST({col} AS DOUBLE) AS p{i}")
        elif column in spec.cells:  # a cell's plain columns, as they are
            shown, flag = spec.cells[column]
            select.append(f"{col} AS n{i}")
            if spec.cell_texts in types:  # read apart, from the rows that have one
                spread[f"s{i}"] = shown
            else:
                select.append(f"{shown} AS s{i}")
            if not flag:
                absent.add(f"b{i}")
            elif spec.cell_texts in types and spec.cell_bools in types:  # likewise
                spread[f"b{i}"] = flag
            else:
                select.append(f"{flag} AS b{i}")
        elif column in spec.chosen and _has_chosen(spec.chosen[column], types):
            flag, own, *picks = spec.chosen[column]
            for sql, prefix in ((f'q."{flag}"', "f"), (own, "o")):
                if sql not in chosen_from:
                    chosen_from[sql] = f"{prefix}{i}"
                    select.append(f"{sql} AS {prefix}{i}")
            chosen[i] = (chosen_from[f'q."{flag}"'], chosen_from[own],
                         tuple(None if p is None else p.encode() for p in picks))
        elif type_name == _CELL_TYPE:
            select += [f"union_extract({col}, 'n') AS n{i}", f"union_extract({col}, 's') AS s{i}",
                       f"union_extract({col}, 'b') AS b{i}"]
        elif type_name in _NUMBER_TYPES or type_name == "BOOLEAN":
            if type_name != "BOOLEAN":
                select.append(f"CAST({col} AS DOUBLE) AS n{i}")
                absent.update((f"s{i}", f"b{i}"))
            else:
                select.append(f"{col}::BOOLEAN AS b{i}")
                absent.update((f"n{i}", f"s{i}"))
        else:
            texts.append(i)
            select.append(f"CAST({col} AS VARCHAR) AS t{i}")
            text_at[i] = len(select) - 1
    twins = _twins(len(spec.columns), texts, percented)
    for i, at in text_at.items():
        if twins[i] == 2:  # NULL where the column before it has the same text (render copies)
            column, before = f'q."{spec.columns[i]}"', f'q."{spec.columns[i - 1]}"'
            select[at] = f"{_twin_text(column, before)} AS t{i}"
    marks = spec.marks_query or "SELECT NULL::BIGINT AS out_seq, NULL::VARCHAR AS mark WHERE false"
    query = f"""
      WITH q AS ({spec.query}), mk AS ({marks})
      SELECT q.out_seq AS _out_seq,
             (CASE mk.mark WHEN 'red' THEN 1 WHEN 'yellow' THEN 2 ELSE 0 END)::UTINYINT AS _mark,
             {", ".join(select)}
      FROM q LEFT JOIN mk ON mk.out_seq = q.out_seq
    """
    try:
        # read from DuckDB's Arrow C stream in C where it can: no pyarrow nor numpy imported
        fast = arrow_columns(SelectStream(con.cursor(), query, _ARROW_ROWS))
        spread_order = None
        sparse: dict[str, bytes] = {}
        if fast is not None and spread:
            spread_order = _spread_cell_texts(con, spec, spread, *fast, sparse)
            if spread_order is None:
                fast = None
        if fast is not None:
            n, got = fast
            for name in absent:
                got[name] = _all_null(name[0], n)
            return _c_rows_of(n, got, len(spec.columns), texts, percented, spread_order, sparse,
                              chosen)
        if spread:  # every row's texts, by the query itself (pyarrow reads it)
            return _c_rows_queried(con, dataclasses.replace(spec, cell_texts=None), types,
                                   fast_only)
        if fast_only:
            return None
        if chosen:  # the chosen columns' own texts (pyarrow reads them)
            return _c_rows_queried(con, dataclasses.replace(spec, chosen={}), types)
        table = con.cursor().sql(query).to_arrow_table().combine_chunks()
    except duckdb.Error as err:
        raise ExportError(f"cannot render the workbook rows: {err}") from err
    import numpy as np
    import pyarrow as pa

    columns: list[tuple[Any, ...]] = []
    for i in range(len(spec.columns)):
        if i in percented:
            pct = _c_buffers(table.column(f"p{i}").chunk(0), pa.float64()) \
                if table.num_rows else (None, None, None, 0)
            if pct is None:
                return None
            columns.append(("r", pct))
        elif i in texts:
            text = _c_buffers(table.column(f"t{i}").chunk(0), pa.string()) \
                if table.num_rows else (None, None, None, 0)
            if text is None:
                return None
            columns.append(("t", text))
        else:
            parts = [(None, None, None, 0) if not table.num_rows else
                     _all_null(p, table.num_rows)[2:] + (0,) if f"{p}{i}" in absent else
                     _c_buffers(table.column(f"{p}{i}").chunk(0), kind)
                     for p, kind in (("n", pa.float64()), ("s", pa.string()), ("b", pa.bool_()))]
            if any(part is None for part in parts):
                return None
            columns.append(("c", *parts))
    n = table.num_rows
    if n == 0:
        return _CRows(table, columns, None, pa.py_buffer(b""), 0)
    # one gather index instead of an ORDER BY of every column
    order = np.argsort(table.column("_out_seq").to_numpy(), kind="stable").astype(np.int64)
    return _CRows(table, columns, table.column("_mark").chunk(0).buffers()[1],
                  pa.py_buffer(order), n, twins=_twins(len(spec.columns), texts, percented))


def _has_chosen(chosen: tuple[str, str, str, str, str | None], types: Mapping[str, str]) -> bool:
    """Whether a sheet query's columns (``types``) hold a chosen column's flag, a boolean
    (:attr:`SheetSpec.chosen`)."""
    return types.get(chosen[0]) == "BOOLEAN"


def _spread_cell_texts(con: duckdb.DuckDBPyConnection, spec: SheetSpec, spread: Mapping[str, str],
                       n: int, got: dict[str, ArrowColumn],
                       places: dict[str, bytes]) -> bytes | None:
    """The cells' texts and booleans (``spread``: each member's name, ``s<i>`` or ``b<i>``, and
    its SQL over the query's columns) of the rows :func:`_c_rows_queried` read without them,
    put into ``got``: the booleans as arrays of all ``n`` rows, the texts as arrays of the rows
    that have one, each row's place among those (``_sheetxml.sparse_rows``, an int32 a row, -1
    where none) in ``places`` by name, one index shared by the texts (the renderer reads them
    through it); the rows' order (their indices in out_seq order, which :func:`_c_rows_of`
    would compute), or None where they cannot be read in C.

    The texts are read from the rows whose :attr:`SheetSpec.cell_texts` column is true alone
    (~6 % of root-8x8-5000's), the booleans from those whose :attr:`SheetSpec.cell_bools` is
    not NULL (~4 %), each by its own query: DuckDB pushes each filter into its scan of the
    table (one query of either filter scanned both columns of every row), and its Arrow export
    does not append the other rows' NULLs (the twelve text columns of stat_result's cells cost
    ~116 M instructions a 4-pair batch read with every row, ~12 M behind the filter; its eight
    booleans ~33 M a 6-pair batch); C places each row among the texts' rows (by out_seq),
    numpy spreads the booleans over the rows (:func:`_spread_bools`). The texts had been spread
    over every row too, an array of ``n`` offsets each (~45 M instructions a 6-pair root batch
    with their copies)."""
    seq = got["_out_seq"]
    if seq[0] != "l":
        return None
    order = stable_order(seq[4]) if n else b""
    strings = {name: shown for name, shown in spread.items() if name[0] == "s"}
    bools = {name: shown for name, shown in spread.items() if name[0] == "b"}
    for names, where, kind in ((strings, f'q."{spec.cell_texts}"', "u"),
                               (bools, f'q."{spec.cell_bools}" IS NOT NULL', "b")):
        if not names:
            continue
        columns = ", ".join(f"{shown} AS {name}" for name, shown in names.items())
        sparse = arrow_columns(SelectStream(con.cursor(), f"""
          WITH q AS ({spec.query})
          SELECT q.out_seq AS _out_seq, {columns} FROM q WHERE {where}
          ORDER BY q.out_seq""", _ARROW_ROWS))
        if sparse is None:
            return None
        m, read = sparse
        if m == 0:
            for name in names:
                got[name] = _all_null(name[0], n)
            continue
        if read["_out_seq"][0] != "l" or any(read[name][0] != kind for name in names):
            return None
        if kind == "b":
            got.update(_spread_bools(order, seq[4], n, m, read, list(names)))
            continue
        rows = _sheetxml.sparse_rows(order, seq[4], n, read["_out_seq"][4])
        for name in names:
            got[name] = read[name]
            places[name] = rows
    return order


def _spread_bools(order: bytes, seq: Any, n: int, m: int, sparse: Mapping[str, ArrowColumn],
                  names: Sequence[str]) -> dict[str, ArrowColumn]:
    """The boolean columns ``names`` of the ``m`` rows ``sparse`` (their ``_out_seq`` in
    order, each a row of the ``n`` whose out_seq are ``seq``, sorted by ``order``) as Arrow
    boolean columns of all ``n`` rows, NULL on the others: by numpy where a pool worker has
    it loaded already, else in Python (a single statistics compare loads no numpy: importing
    it cost a 1,209-row compare ~45 ms of its ~0.4 s)."""
    if "numpy" in sys.modules:
        return _spread_bools_numpy(order, seq, n, m, sparse, names)
    return _spread_bools_python(order, seq, n, m, sparse, names)


def _int64s(buf: Any, n: int) -> memoryview:
    """The first ``n`` int64 values of a buffer, without a copy."""
    view = memoryview(buf)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view[:8 * n].cast("q")


def _spread_bools_python(order: bytes, seq: Any, n: int, m: int,
                         sparse: Mapping[str, ArrowColumn],
                         names: Sequence[str]) -> dict[str, ArrowColumn]:
    """:func:`_spread_bools` in plain Python: each sparse row's place by a binary search of the
    out_seq values in order (O(n) to list them, O(m log n) to find the m rows)."""
    rank = _int64s(order, n)
    values = _int64s(seq, n)
    in_order = [values[i] for i in rank]
    at = [rank[bisect.bisect_left(in_order, s)] for s in _int64s(sparse["_out_seq"][4], m)]
    spread: dict[str, ArrowColumn] = {}
    for name in names:
        _, _, valid, _, data = sparse[name]
        bits = memoryview(data).cast("B")
        known_bits = None if valid is None else memoryview(valid).cast("B")
        out_valid, out_data = bytearray((n + 7) // 8), bytearray((n + 7) // 8)
        unknown = 0
        for j, i in enumerate(at):
            if known_bits is not None and not known_bits[j >> 3] >> (j & 7) & 1:
                unknown += 1
                continue
            out_valid[i >> 3] |= 1 << (i & 7)
            if bits[j >> 3] >> (j & 7) & 1:
                out_data[i >> 3] |= 1 << (i & 7)
        spread[name] = ("b", unknown + n - m, bytes(out_valid), None, bytes(out_data))
    return spread


def _spread_bools_numpy(order: bytes, seq: Any, n: int, m: int,
                        sparse: Mapping[str, ArrowColumn],
                        names: Sequence[str]) -> dict[str, ArrowColumn]:
    """:func:`_spread_bools` by numpy (a batch's sheets: thousands of rows)."""
    import numpy as np

    rank = np.frombuffer(order, np.int64, n)
    at = rank[np.searchsorted(np.frombuffer(seq, np.int64, n)[rank],
                              np.frombuffer(sparse["_out_seq"][4], np.int64, m))]
    spread: dict[str, ArrowColumn] = {}
    full = np.zeros((2, n), bool)  # validity and values, reused column by column
    for name in names:
        _, _, valid, _, data = sparse[name]
        bits = np.unpackbits(np.frombuffer(data, np.uint8), count=m, bitorder="little")
        known = np.ones(m, np.uint8) if valid is None else \
            np.unpackbits(np.frombuffer(valid, np.uint8), count=m, bitorder="little")
        full[:, at] = (known, bits & known)
        packed = np.packbits(full, axis=1, bitorder="little")
        spread[name] = ("b", m - int(np.count_nonzero(known)) + n - m, packed[0].tobytes(), None,
                        packed[1].tobytes())
    return spread


#: Rows an Arrow batch of the C renderer's queries: their rows in one batch up to this many
#: (a 6-pair batch of root-8x8-5000: ~146,000), read where DuckDB wrote them, not copied into
#: one buffer a column (msq/_flatten.c in_place_columns); DuckDB reserves room for this many
#: rows a column up front (address space: only the pages written are memory)
_ARROW_ROWS = 1 << 20


def _all_null(member: str, n: int) -> ArrowColumn:
    """An Arrow column of ``n`` NULLs as :func:`msq.flatten.arrow_columns` reads one, for a
    cell's ``member`` ("n", "s" or "b") not selected (:func:`_c_rows_queried`): its validity
    bits all 0 (the renderer reads no offset nor value of a NULL)."""
    zeros = bytes((n + 7) // 8)
    return {"n": "g", "s": "u", "b": "b"}[member], n, zeros, None, zeros


def _faster_deflate(entry: IO[bytes]) -> None:
    """Deflate a sheet's XML with ISA-L (the ``isal`` package) instead of zlib: the same deflate
    format any zip reader inflates, ~4x less CPU than zlib's fastest level (0.17 against 0.65 s
    on the 95 MB of a 100k-row sheet, and a smaller file). zipfile has no way to choose the
    compressor of an entry: its writer's ``_compressor`` (a zlib compressobj, raw deflate) is
    swapped before the first byte is written. Without ``isal``, or on a zipfile without that
    attribute, zlib deflates, as it always did."""
    if _isal_zlib is None or getattr(entry, "_compressor", None) is None:
        return
    entry._compressor = _isal_zlib.compressobj(  # type: ignore[attr-defined]
        _LEVEL, _isal_zlib.DEFLATED, -15)


#: What zipfile's entry writer (``_ZipWriteFile.write``) keeps of an entry: :func:`_write_entry`
#: does its work with ISA-L's CRC-32 where every one of them is there.
_ENTRY_STATE = ("_file_size", "_crc", "_compressor", "_compress_size", "_fileobj")


def _fast_entry(entry: IO[bytes]) -> bool:
    """The entry can be written by :func:`_write_entry` (ISA-L deflates it: _faster_deflate)."""
    return _isal_zlib is not None and type(entry).__name__ == "_ZipWriteFile" and \
        all(hasattr(entry, name) for name in _ENTRY_STATE) and \
        type(entry._compressor).__module__.startswith("isal")  # type: ignore[attr-defined]


def _write_entry(entry: Any, data: bytes | memoryview) -> None:
    """``entry.write(data)`` as zipfile's writer does it (size, CRC, deflate, write), with
    ISA-L's CRC-32 instead of zlib's (the same checksum; zipfile calls its module's ``crc32``,
    which cannot be chosen per entry): zlib's took ~90 M instructions of a 24,500-row pair's
    ~24 MB of sheet XML, ISA-L's (carry-less multiplication) a tenth of that."""
    entry._file_size += len(data)
    entry._crc = _isal_zlib.crc32(data, entry._crc)
    data = entry._compressor.compress(data)
    entry._compress_size += len(data)
    entry._fileobj.write(data)


def _c_rows_of(n: int, got: dict[str, ArrowColumn], n_columns: int,
               texts: list[int], percented: Collection[int] = (),
               order: bytes | None = None,
               sparse: Mapping[str, bytes] | None = None,
               chosen: Mapping[int, tuple[str, str, tuple[bytes | None, ...]]] | None = None,
               ) -> _CRows | None:
    """:func:`_c_rows` from the buffers of :func:`msq.flatten.arrow_columns` (``percented``:
    the text columns printed from their numbers, ``p<i>``; ``order``: the rows' out_seq order,
    where it was computed already; ``sparse``: the cells' texts read from the rows that have
    one, each row's place among those by name, :func:`_spread_cell_texts`; ``chosen``: the
    chosen columns, each one's flag, own text and picks, :func:`_c_rows_queried`)."""

    def part(name: str, fmt: str) -> _CArray | None:
        kind, _, valid, offsets, data = got[name]
        if kind != fmt:
            return None
        if not n:
            return None, None, None, 0
        if sparse and name in sparse:
            return valid, offsets, data, 0, sparse[name]
        return valid, offsets, data, 0

    columns: list[tuple[Any, ...]] = []
    for i in range(n_columns):
        if chosen and i in chosen:
            flag, own, picks = chosen[i]
            parts = [part(flag, "b"), part(own, "u")]
            if any(p is None for p in parts):
                return None
            columns.append(("k", *parts, picks))
            continue
        if i in percented:
            parts = [part(f"p{i}", "g")]
        elif i in texts:
            parts = [part(f"t{i}", "u")]
        else:
            parts = [part(f"n{i}", "g"), part(f"s{i}", "u"), part(f"b{i}", "b")]
        if any(p is None for p in parts):
            return None
        columns.append(("r" if i in percented else "t" if i in texts else "c", *parts))
    if n == 0:
        return _CRows(got, columns, None, b"", 0)
    seq, mark = got["_out_seq"], got["_mark"]
    if seq[0] != "l" or mark[0] != "C":
        return None
    # one gather index instead of an ORDER BY of every column
    return _CRows(got, columns, mark[4], order if order is not None else stable_order(seq[4]), n,
                  twins=_twins(n_columns, texts, percented))


class _Sheets:
    """Streams rendered rows into sheet1.xml, sheet2.xml, ... (``per_sheet`` data rows each).

    The zip entries are written (CRC and deflate, which release the GIL) by one writer thread,
    in order, while this thread tags the next batch: the two overlap on two cores. At most one
    batch waits, and a writer error surfaces at the next batch.
    """

    def __init__(self, zf: zipfile.ZipFile, layout: _Layout, per_sheet: int, total: int,
                 on_extra_sheet: Callable[[int], None] | None, first: int = 1) -> None:
        self.zf, self.layout, self.per_sheet, self.total = zf, layout, per_sheet, total
        self.first = first  # the number of the first worksheet part (sheet<first>.xml)
        self.on_extra_sheet = on_extra_sheet
        self.filters: list[str] = []  # each sheet's autofilter range, when it has one
        self.count = 0    # sheets opened
        self.in_sheet = 0  # data rows in the open sheet
        self._sheet: IO[bytes] | None = None  # the writer thread's open entry
        self._rows = 0  # its data rows
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="msq-xlsx")
        self._pending: Future[None] | None = None
        self._fast = False  # the open entry is written by _write_entry

    def __enter__(self) -> _Sheets:  # noqa: PYI034 (typing_extensions is not a dependency)
        return self

    def __exit__(self, *exc: object) -> None:
        # after an error or Ctrl-C: let the writer finish its batch, then close the open entry so
        # that the zip can close (the caller removes the unfinished file)
        with interrupts.deferred():  # whole: a second Ctrl-C must not leave the thread running
            self._writer.shutdown(wait=True, cancel_futures=True)
        if self._sheet is not None:
            with contextlib.suppress(Exception):
                self._sheet.close()

    def add(self, count: int, render: Callable[[int, int, int], bytes | memoryview]) -> None:
        """``count`` rows; ``render(offset, n, first_row)`` gives the XML of n of them."""
        start = 0
        while start < count:
            if self.count == 0 or self.in_sheet == self.per_sheet:
                self._next_sheet()
            take = min(count - start, self.per_sheet - self.in_sheet)
            self._submit(self._write, render(start, take, self.in_sheet + 2))
            self.in_sheet += take
            start += take

    def close(self) -> int:
        """Close the last sheet (an empty workbook gets one with the header); return the count."""
        if self.count == 0:
            self._next_sheet()
        self._submit(self._close_entry)
        self._submit(lambda: None)  # waits for the close, and raises what the writer raised
        return self.count

    def _next_sheet(self) -> None:
        if self.count:
            self._submit(self._close_entry)
            if self.on_extra_sheet:
                self.on_extra_sheet(self.count + 1)
        self.count += 1
        self.in_sheet = 0
        # every sheet's size is known before its rows: the <dimension> readers size it by
        rows = max(0, min(self.per_sheet, self.total - (self.count - 1) * self.per_sheet))
        if self.layout.browse:
            self.filters.append(self.layout.ref(rows))
        self._submit(self._open_entry, self.count, rows)

    def _submit(self, task: Callable[..., None], *args: Any) -> None:
        if self._pending is not None:
            self._pending.result()
        self._pending = self._writer.submit(task, *args)

    # -- in the writer thread ------------------------------------------------------------------
    def _open_entry(self, number: int, rows: int) -> None:
        part = self.first - 1 + number
        self._sheet = self.zf.open(f"xl/worksheets/sheet{part}.xml", "w", force_zip64=True)
        _faster_deflate(self._sheet)
        self._fast = _fast_entry(self._sheet)
        self._sheet.write(self.layout.head(rows))
        self._rows = rows

    def _write(self, data: bytes | memoryview) -> None:
        assert self._sheet is not None
        if self._fast:
            _write_entry(self._sheet, data)
        else:
            self._sheet.write(data)

    def _close_entry(self) -> None:
        assert self._sheet is not None
        self._sheet.write(self.layout.tail(self._rows))
        self._sheet.close()
        self._sheet = None
