"""Blame's outputs of one compare: its own sheet in the workbook (the local sources, worst
first) and ``blame_*.csv/.parquet`` (every compared row).

The msprobe-format sheet is left as it is; blame goes beside it (the compare's ``blame`` view).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import duckdb

from msq.blame import batch_texts
from msq.blame.summary import WORST_FIRST
from msq.config import Options
from msq.db import csv_guard, new_file, quote_ident, quote_str
from msq.export.xlsx import SheetSpec
from msq.result import CompareResult

log = logging.getLogger("msq")

#: The columns of blame's CSV/Parquet files and sheet, in order (the view ``blame``; ``row`` is
#: the workbook row of the compared row).
COLUMNS = ("row", "npu_name", "op_name", "io", "role", "direction", "verdict", "blame_rank",
           "input_err", "output_err", "amplification", "floor", "floor_source", "err_kind",
           "reason", "via", "link", "candidates", "out_seq")
TEXT = {"npu_name", "op_name", "io", "role", "direction", "verdict", "floor_source", "err_kind",
        "reason", "via", "link"}


def blame_query() -> str:
    """Every blame row in workbook order, with the workbook row it describes."""
    cols = ", ".join("out_seq + 2 AS row" if c == "row" else quote_ident(c) for c in COLUMNS)
    return f"SELECT {cols} FROM blame ORDER BY out_seq"


#: The blame sheet of the workbook: the local sources, worst first (every row is in the CSV,
#: Parquet and the history: a second full-size sheet would double the workbook's time).
SHEET_COLUMNS = ("blame_rank", "row", "npu_name", "input_err", "output_err", "amplification",
                 "floor", "floor_source", "reason", "via", "op_name", "err_kind")
SHEET_HEADERS = ("Blame rank", "Row", "NPU Name", "Input error", "Output error", "Amplification",
                 "Floor", "Floor source", "Why", "Worst input", "Op", "Error figure")


_CELL = "UNION(n DOUBLE, s VARCHAR, b BOOLEAN)"
_FIGURES = ("input_err", "output_err", "amplification", "floor")


def _sheet_cell(col: str) -> str:
    if col == "row":
        return "out_seq + 2 AS row"
    if col in _FIGURES:  # inf is a number no cell can hold: written as the text "inf"
        q = quote_ident(col)
        # the type spelled out (the schema's type cell): a directory compare's driver has none
        return (f"CASE WHEN {q} IS NULL OR isfinite({q}) THEN union_value(n := {q})::{_CELL} "
                f"ELSE union_value(s := CAST({q} AS VARCHAR))::{_CELL} END AS {q}")
    return quote_ident(col)


def _rank(partition: str = "") -> str:
    """blame_rank of a local row: the view ``blame``'s (sql/compare/blame/blame.sql), numbered
    over the local rows alone, as there (``partition``: a column whose rows are numbered apart,
    a batch's pair)."""
    by = f"PARTITION BY {partition} " if partition else ""
    return f"row_number() OVER ({by}ORDER BY {WORST_FIRST})"


def sheet_query() -> str:
    """The rows of blame's sheet: the local rows of ``blame_rows`` with their ``blame_rank``,
    as the view ``blame`` has them (read straight: the view joins its ranks back to every
    blame row and then drops all but the local ones, ~45 M instructions a pair of a root run
    for a few dozen rows)."""
    cols = ", ".join(f"{_rank()} AS blame_rank" if c == "blame_rank" else _sheet_cell(c)
                     for c in SHEET_COLUMNS)
    # the writer puts rows in out_seq order: the rank is the order here
    return (f"SELECT blame_rank - 1 AS out_seq, * "
            f"FROM (SELECT {cols} FROM blame_rows WHERE verdict = 'local')")


def batch_sheet_query(ranges: Sequence[tuple[int, int]]) -> str:
    """:func:`sheet_query` of every pair of a batch in one query over ``batch_blame_rows``
    (msq.export.xlsx.batch_sheets), ``ranges`` each pair's out_seq range in the batch (lo > hi:
    none). A pair's rows are those its own query gives, with its own ranks and rows (its
    out_seq less its range's start, as msq.pipeline.pair_views numbers it; a constant does not
    change the rank's order; its texts made from the batch's codes, msq.blame.BATCH_TEXTS),
    numbered ``lo + blame_rank - 1``: a pair's slice of the batch's
    out_seq order is its sheet, in rank order (a pair has no more local rows than rows)."""
    starts = " ".join(f"WHEN out_seq BETWEEN {lo} AND {hi} THEN {lo}"
                      for lo, hi in ranges if lo <= hi)
    start = f"CASE {starts} END" if starts else "NULL::BIGINT"
    cols = ", ".join(f"{_rank('_lo')} AS blame_rank" if c == "blame_rank" else _sheet_cell(c)
                     for c in SHEET_COLUMNS)
    return (f"SELECT _lo + blame_rank - 1 AS out_seq, * EXCLUDE (_lo) "
            f"FROM (SELECT _lo, {cols} FROM (SELECT * REPLACE (out_seq - _lo AS out_seq) "
            f"FROM (SELECT * {batch_texts()}, {start} AS _lo FROM batch_blame_rows "
            "WHERE verdict = 'local') "
            f"WHERE _lo IS NOT NULL))")


def sheet_spec() -> SheetSpec:
    """The workbook's ``blame`` sheet (see ``SHEET_COLUMNS``), in blame_rank order."""
    return SheetSpec(sheet_query(), SHEET_COLUMNS, SHEET_HEADERS, None, browse=True)


def write_table(con: duckdb.DuckDBPyConnection, path: Path, fmt: str) -> Path:
    """``blame_*.csv`` (every cell quoted, formula-like texts guarded) or typed Parquet; never
    over another file (a taken name gets ``_2``, ...): returns the name written."""
    if fmt == "csv":
        select = ", ".join(f"{csv_guard(quote_ident(c))} AS {quote_ident(c)}" if c in TEXT
                           else quote_ident(c) for c in COLUMNS)
        options = "FORMAT csv, HEADER true, FORCE_QUOTE *"
    else:
        select, options = "*", "FORMAT parquet"
    with new_file(path) as staged:
        con.execute(f"COPY (SELECT {select} FROM ({blame_query()})) TO {quote_str(staged.tmp)} "
                    f"({options})")
    return staged.path


def write_blame_outputs(con: duckdb.DuckDBPyConnection, out_dir: Path, opts: Options,
                        suffix: str, stamp: str, result: CompareResult) -> None:
    """The blame files of the formats asked for (the workbook's blame sheet is written with the
    workbook itself)."""
    for fmt in opts.formats:
        if fmt not in ("csv", "parquet"):
            continue
        path = write_table(con, out_dir / f"blame{suffix}_{stamp}.{fmt}", fmt)
        result.files.append(path)
        log.info("Blame is in %s", path)
