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

import os
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from pathlib import Path

import duckdb

from msq.errors import ExportError

EXCEL_MAX_ROWS = 1_048_576
RED, YELLOW = "FFFF0000", "00FFFF00"
_FORMULA_START = "=+-@＝＋－＠"
# XML 1.0 forbids most control characters; Excel's own escape is _xHHHH_.


@dataclass(frozen=True)
class SheetSpec:
    """What to write: the view (or query), its columns, the header labels and the marks."""

    query: str                # SELECT returning out_seq plus the columns, ordered by out_seq
    columns: Sequence[str]    # column names of the query to write, in order
    headers: Sequence[str]    # header labels (row 1)
    marks_query: str | None   # SELECT out_seq, mark ('red'|'yellow')


def _col_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = chr(65 + rem) + letters
    return letters


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


def _bool_cell_sql(expr: str) -> str:
    return (f"CASE WHEN {expr} IS NULL THEN '<c' || _st || '/>' ELSE '<c' || _st || "
            f"' t=\"b\"><v>' || (CASE WHEN {expr} THEN '1' ELSE '0' END) || '</v></c>' END")


def _cell_sql(column: str, type_name: str) -> str:
    col = f'"{column}"'
    if type_name.startswith("UNION"):
        return (
            f"CASE union_tag({col}) "
            f"WHEN 'n' THEN {_num_cell_sql(f'union_extract({col}, {chr(39)}n{chr(39)})')} "
            f"WHEN 'b' THEN {_bool_cell_sql(f'union_extract({col}, {chr(39)}b{chr(39)})')} "
            f"ELSE {_text_cell_sql(f'union_extract({col}, {chr(39)}s{chr(39)})')} END"
        )
    if type_name in ("DOUBLE", "FLOAT", "BIGINT", "INTEGER", "HUGEINT", "SMALLINT", "TINYINT"):
        return _num_cell_sql(col)
    if type_name == "BOOLEAN":
        return _bool_cell_sql(col)
    return _text_cell_sql(f"CAST({col} AS VARCHAR)")


def _rows_query(con: duckdb.DuckDBPyConnection, spec: SheetSpec, max_rows: int) -> str:
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {spec.query})").fetchall())
    cells = " || ".join(_cell_sql(c, types[c]) for c in spec.columns)
    marks = spec.marks_query or "SELECT NULL::BIGINT AS out_seq, NULL::VARCHAR AS mark WHERE false"
    return f"""
      WITH q AS ({spec.query}), mk AS ({marks}),
      styled AS (
        SELECT q.*, row_number() OVER (ORDER BY q.out_seq) - 1 AS _i,
               CASE mk.mark WHEN 'red' THEN ' s="1"' WHEN 'yellow' THEN ' s="2"' ELSE '' END AS _st,
               CASE mk.mark WHEN 'red' THEN ' s="4"' WHEN 'yellow' THEN ' s="5"' ELSE ' s="3"' END AS _stq
        FROM q LEFT JOIN mk ON mk.out_seq = q.out_seq
      ),
      numbered AS (
        SELECT *, (_i // {max_rows - 1}) AS _sheet,
               CAST(_i % {max_rows - 1} + 2 AS VARCHAR) AS _r
        FROM styled
      )
      SELECT _sheet, '<row r="' || _r || '">' || {cells} || '</row>' AS xml
      FROM numbered ORDER BY _i
    """


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
_SHEET_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
               '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">'
               "<sheetData>")
_SHEET_TAIL = "</sheetData></worksheet>"


def _xml_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _header_xml(headers: Sequence[str]) -> str:
    cells = "".join(
        f'<c r="{_col_letter(i)}1" t="inlineStr"><is><t xml:space="preserve">{_xml_text(h)}</t></is></c>'
        for i, h in enumerate(headers))
    return f'<row r="1">{cells}</row>'


def _sheet_name(index: int) -> str:
    return "Sheet" if index == 0 else f"Sheet{index + 1}"


def _finish_package(zf: zipfile.ZipFile, n_sheets: int) -> None:
    overrides = "\n".join(
        f'<Override PartName="/xl/worksheets/sheet{i + 1}.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/>'
        for i in range(n_sheets))
    zf.writestr("[Content_Types].xml", _CONTENT_TYPES.format(sheets=overrides))
    zf.writestr("_rels/.rels", _ROOT_RELS)
    sheets = "".join(f'<sheet name="{_sheet_name(i)}" sheetId="{i + 1}" r:id="rId{i + 1}"/>'
                     for i in range(n_sheets))
    zf.writestr("xl/workbook.xml", (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        f"<sheets>{sheets}</sheets></workbook>"))
    rels = "".join(
        f'<Relationship Id="rId{i + 1}" Type="http://schemas.openxmlformats.org/officeDocument/2006/'
        f'relationships/worksheet" Target="worksheets/sheet{i + 1}.xml"/>' for i in range(n_sheets))
    rels += (f'<Relationship Id="rId{n_sheets + 1}" Type="http://schemas.openxmlformats.org/'
             'officeDocument/2006/relationships/styles" Target="styles.xml"/>')
    zf.writestr("xl/_rels/workbook.xml.rels", (
        '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        f"{rels}</Relationships>"))
    zf.writestr("xl/styles.xml", _STYLES)


def write_xlsx(con: duckdb.DuckDBPyConnection, spec: SheetSpec, path: Path,
               on_extra_sheet: Callable[[int], None] | None = None,
               max_rows: int | None = None) -> int:
    """Write the workbook atomically (temp name, then rename); return the number of sheets.

    Args:
        con: the compare's connection.
        spec: the query, columns, headers and marks to write.
        path: the workbook to write.
        on_extra_sheet: called with the sheet number each time the rows continue on a new sheet.
        max_rows: rows per sheet, header included (default Excel's 1,048,576; read at call time).

    Returns:
        The number of sheets written.
    """
    rows_per_sheet = max_rows if max_rows is not None else EXCEL_MAX_ROWS
    if rows_per_sheet < 2:
        raise ExportError(f"max_rows must leave room for the header and a row, got {rows_per_sheet}")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        n_sheets = _write_package(con, spec, tmp, on_extra_sheet, rows_per_sheet)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n_sheets


def _write_package(con: duckdb.DuckDBPyConnection, spec: SheetSpec, tmp: Path,
                   on_extra_sheet: Callable[[int], None] | None, max_rows: int) -> int:
    header = _header_xml(spec.headers)
    try:
        cursor = con.cursor()
        cursor.execute(_rows_query(con, spec, max_rows))
    except duckdb.Error as err:
        raise ExportError(f"cannot render the workbook rows: {err}") from err
    n_sheets = 0
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        sheet = None
        current = -1
        while True:
            batch = cursor.fetchmany(20000)
            if not batch:
                break
            for sheet_no, rows in groupby(batch, key=itemgetter(0)):
                if sheet_no != current:
                    if sheet is not None:
                        sheet.write(_SHEET_TAIL.encode())
                        sheet.close()
                    current = sheet_no
                    n_sheets += 1
                    if sheet_no > 0 and on_extra_sheet:
                        on_extra_sheet(sheet_no + 1)
                    sheet = zf.open(f"xl/worksheets/sheet{n_sheets}.xml", "w", force_zip64=True)
                    sheet.write((_SHEET_HEAD + header).encode())
                assert sheet is not None
                sheet.write(_fix_controls("".join(xml for _, xml in rows)).encode())
        if sheet is None:
            n_sheets = 1
            zf.writestr("xl/worksheets/sheet1.xml", _SHEET_HEAD + header + _SHEET_TAIL)
        else:
            sheet.write(_SHEET_TAIL.encode())
            sheet.close()
        _finish_package(zf, n_sheets)
    return n_sheets
