"""Write a kernel compare table to xlsx with xlsxwriter (spec §8.4).

The header is bold and bordered as pandas writes it. A sheet holds Excel's 1,048,576 rows
(header included); further rows continue on ``Sheet2``, ``Sheet3``, ... each with the header.
Text is always written with ``write_string``, so a name such as ``=cmd|...`` stays text.
The workbook is written under a temporary name in the output directory and renamed when complete
(mode 0640).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import xlsxwriter
from xlsxwriter.exceptions import XlsxWriterException

from msq.db import atomic_write
from msq.errors import ExportError

EXCEL_MAX_ROWS = 1_048_576
"""Rows of one worksheet, header included."""

_OPTIONS = {
    "constant_memory": True,
    "strings_to_formulas": False,
    "strings_to_numbers": False,
    "strings_to_urls": False,
}
_HEADER = {"bold": True, "border": 1, "align": "center", "valign": "top"}


def _write_cell(sheet: Any, row: int, col: int, value: object) -> None:
    if value is None or value == "":
        return
    if isinstance(value, bool):
        sheet.write_boolean(row, col, value)
    elif isinstance(value, (int, float)):
        number = float(value)
        if math.isnan(number):
            return  # pandas writes NaN as an empty cell
        if math.isinf(number):
            sheet.write_string(row, col, "inf" if number > 0 else "-inf")
        else:
            sheet.write_number(row, col, number)
    else:
        sheet.write_string(row, col, str(value))


class _Sheets:
    """Hands out the next row, opening ``SheetN`` (with its header) when one is full."""

    def __init__(self, book: Any, headers: Sequence[str], max_rows: int) -> None:
        self.book, self.headers, self.max_rows = book, headers, max_rows
        self.header_format = book.add_format(_HEADER)
        self.sheet: Any = None
        self.count = 0
        self.row = max_rows

    def next_row(self) -> tuple[Any, int]:
        if self.row >= self.max_rows:
            self.count += 1
            self.sheet = self.book.add_worksheet(f"Sheet{self.count}")
            for col, title in enumerate(self.headers):
                self.sheet.write_string(0, col, title, self.header_format)
            self.row = 1
        self.row += 1
        return self.sheet, self.row - 1


def write_workbook(path: Path, headers: Sequence[str],
                   batches: Iterable[Sequence[Sequence[object]]], *,
                   max_rows: int = EXCEL_MAX_ROWS) -> int:
    """Write ``headers`` and the rows of ``batches`` to ``path``; return the data row count.

    Args:
        path: the final file name; it appears only once the workbook is complete.
        headers: column titles, written on every sheet.
        batches: row batches in output order (e.g. ``cursor.fetchmany`` results).
        max_rows: rows per sheet including the header (Excel's limit unless testing).
    """
    if max_rows < 2:
        raise ValueError("max_rows must leave room for the header and one row")
    written = 0
    try:
        with atomic_write(path, mode=0o640) as temp:
            book = xlsxwriter.Workbook(str(temp), _OPTIONS)
            sheets = _Sheets(book, headers, max_rows)
            for batch in batches:
                for values in batch:
                    sheet, row = sheets.next_row()
                    for col, value in enumerate(values):
                        _write_cell(sheet, row, col, value)
                    written += 1
            if sheets.sheet is None:
                sheets.next_row()  # header-only workbook
            book.close()
    except (OSError, XlsxWriterException) as err:
        raise ExportError(f"cannot write {path}: {err}; check the output directory's free "
                          "space and permissions.") from err
    return written
