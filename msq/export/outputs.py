"""Turn the result views into files: the workbook, CSV/Parquet copies and the advisor text."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import duckdb

from msq import interrupts
from msq.config import Options
from msq.db import (
    atomic_write,
    csv_guard,
    final_name,
    new_file,
    publish,
    quote_ident,
    quote_str,
    remove_stale_temporaries,
)
from msq.errors import ExportError, UsageError
from msq.export.xlsx import SheetSpec, same_fact, write_xlsx
from msq.result import CompareResult, sheet_row

log = logging.getLogger("msq")

#: What msq writes into an output folder (their temporaries are removed once stale)
OUTPUT_NAMES = ("compare_result", "advisor", "data_mapping", "blame")
_NAMES = ("NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
          "Bench Tensor Shape")
_STATS = ("NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max", "Bench min", "Bench mean",
          "Bench l2norm")
COLUMNS: dict[str, tuple[str, ...]] = {
    "statistics": _NAMES + ("Max diff", "Min diff", "Mean diff", "L2norm diff", "MaxRelativeErr",
                            "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr") + _STATS
    + ("Result", "Err_message"),
    "md5": _NAMES + ("NPU MD5", "BENCH MD5", "Result"),
    "tensor": _NAMES + ("Cosine", "MaxAbsErr", "MaxRelativeErr", "One Thousandth Err Ratio",
                        "Five Thousandths Err Ratio") + _STATS + ("Accuracy Reached or Not",
                                                                  "Err_message"),
}


#: The default mode's column after msprobe's: which rule marked the row and with what numbers,
#: a note when the dtypes differ in precision, or why the row is unmatched (docs/rules.md).
REASON = "Reason"


def columns_for(mode: str, stack_mode: bool, compat: bool = True) -> list[str]:
    """The exact header of a mode's workbook (spec §5.2); the default mode adds Reason."""
    cols = list(COLUMNS[mode])
    if stack_mode:
        cols.append("NPU_Stack_Info")
    if mode == "tensor":
        cols.append("Data_name")
    if not compat:
        cols.append(REASON)
    return cols


def ensure_output_dir(path: Path) -> None:
    """Create the output directory and prove it is writable before any work starts."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o750)
    except FileExistsError:
        raise ExportError(f"{path}: exists and is not a directory; choose another -o") from None
    except OSError as err:
        raise ExportError(f"{path}: cannot create the output directory ({err.strerror}); "
                          "choose another -o") from None
    if not path.is_dir():
        raise ExportError(f"{path}: is not a directory; choose another -o")
    try:
        with interrupts.deferred(), tempfile.NamedTemporaryFile(dir=path,
                                                               prefix=".msq-write-test-"):
            pass  # whole: a Ctrl-C in between would leave the probe behind
    except OSError as err:
        raise ExportError(f"{path}: output directory is not writable ({err.strerror}); "
                          "fix its permissions or choose another -o") from None
    removed = remove_stale_temporaries(path, OUTPUT_NAMES)
    if removed:
        log.info("%s: removed %d temporary files left by an interrupted msq", path, removed)


def check_formats(formats: tuple[str, ...]) -> tuple[str, ...]:
    known = [*WRITERS, *UPPER_FORMATS]
    bad = [f for f in formats if f not in known]
    if bad or not formats:
        raise UsageError(f"unknown output format(s) {', '.join(bad) or '(none)'}; "
                         f"try one of: {', '.join(known)}")
    return formats


def result_view(mode: str) -> str:
    return f"result_{mode}"


#: The view the default mode materialises for a mode's result view when that view is one over
#: it: statistics' relative errors stay numbers there (stat_result, whose texts result_statistics
#: prints), and the workbook's C renderer prints them (:data:`PERCENT_COLUMNS`).
RESULT_TABLES = {"statistics": "stat_result"}

def result_table(mode: str) -> str:
    """What the default mode materialises of a mode's result (:data:`RESULT_TABLES`, else the
    result view itself)."""
    return RESULT_TABLES.get(mode, result_view(mode))


def write_outputs(con: duckdb.DuckDBPyConnection, mode: str, out_dir: Path, opts: Options,
                  suffix: str, stamp: str, result: CompareResult,
                  writers: Mapping[str, Callable[[Path], None]] | None = None) -> None:
    """Write every requested output of one compare into ``out_dir``.

    ``writers``: the writers of ``UPPER_FORMATS``, each a function of the file to write, handed
    over by the caller (the pipeline).
    """
    cols = columns_for(mode, opts.stack_mode, opts.is_compat)
    base = f"compare_result{suffix}_{stamp}"
    out_dir = Path(os.path.abspath(out_dir))  # the result names its files by absolute path
    for fmt in check_formats(opts.formats):
        path = out_dir / f"{base}.{fmt}"
        # new_file: another compare into this folder in the same second keeps its own file
        with _writing(path), new_file(path) as staged:
            if fmt in WRITERS:
                WRITERS[fmt](con, mode, cols, staged.tmp)
            else:
                (writers or {})[fmt](staged.tmp)
        # no log line: the console summary says "wrote <path>" (it was said twice with -v)
        result.files.append(staged.path)
    if opts.auto_analyze:
        with _writing(out_dir / f"advisor{suffix}_*.txt"):
            result.files.append(write_advisor(out_dir, suffix, result, compat=opts.is_compat,
                                              stamp=stamp))


_MARKS = "SELECT out_seq, mark FROM marks"


def batch_workbook_queries(mode: str, ranges: Sequence[tuple[int, int]],
                           result_rows: str) -> dict[str, str]:
    """The sheets' queries of a batch's pair's workbook (:func:`_write_workbook`: the main
    sheet's, its result a view over the result table, and blame's) and the same rows over the
    batch's tables (msq.pipeline.split_batch's ``batch_<name>``), for
    msq.export.xlsx.batch_sheets; ``ranges``: each pair's out_seq range in the batch
    (msq.pipeline.BatchPlace.out_range); ``result_rows``: the SELECT of the batch's result
    table's rows (msq.pipeline.batch_result_rows)."""
    from msq.blame.export import batch_sheet_query, sheet_query

    return {f"SELECT * FROM {result_table(mode)}": result_rows,
            _MARKS: "SELECT out_seq, mark FROM batch_marks",
            sheet_query(): batch_sheet_query(ranges)}


def _write_workbook(con: duckdb.DuckDBPyConnection, mode: str, cols: list[str],
                    path: Path) -> None:
    marks = None if mode == "md5" else _MARKS
    # the writer puts the rows in order itself, after rendering them
    rows = f"SELECT * FROM {result_view(mode)}"
    percents: tuple[str, ...] = ()
    cells: dict[str, tuple[str, str | None]] = {}
    cell_texts = cell_bools = None
    chosen: dict[str, tuple[str, str, str, str, str | None]] = {}
    result_is_table, compat, blame = _workbook_facts(con, mode)
    if mode in RESULT_TABLES and not result_is_table:
        # the result view is ours, over the materialised stat_result (a user's or --compat's is
        # a table by now): its relative errors are printed by the renderer from their numbers,
        # its statistics and differences are read from their plain columns (PLAIN_CELLS), their
        # texts and booleans from the rows that have one (has_cell_text, cell_bools)
        rows, percents, cells = (f"SELECT * FROM {result_table(mode)}", PERCENT_COLUMNS,
                                 PLAIN_CELLS)
        cell_texts, cell_bools, chosen = CELL_TEXTS, CELL_BOOLS, CHOSEN_TEXTS

    shown = final_name(path)  # the writers write a temporary (see write_outputs)

    def extra_sheet(number: int) -> None:
        log.warning("more than 1,048,575 rows: continuing on sheet %d of %s", number, shown)

    # the default mode's workbook is for browsing 100k rows; --compat keeps msprobe's layout
    browse = not compat
    extra = _blame_sheet() if blame else []
    sheets = write_xlsx(con, SheetSpec(rows, cols, cols, marks, browse=browse,
                                       percents=percents, cells=cells,
                                       cell_texts=cell_texts, cell_bools=cell_bools,
                                       chosen=chosen), path,
                        on_extra_sheet=extra_sheet, extra=extra) - len(extra)
    if sheets > 1:
        log.warning("%s holds %d sheets (Excel's row limit)", shown.name, sheets)


def _workbook_facts(con: duckdb.DuckDBPyConnection, mode: str) -> tuple[bool, bool, bool]:
    """What the workbook's sheets depend on, asked in one query (three took ~9 M instructions
    of a pair), once a batch of pairs (msq.export.xlsx.same_fact): whether the mode's result
    view is a table (a user's or --compat's), whether the compare is --compat's (the
    settings), and whether it has blame (the default mode: blame's sheet goes beside
    msprobe's), i.e. ``blame_rows`` or its batch's ``batch_blame_rows`` is a table
    (msq.db.has_table with ``batched``)."""
    return same_fact(f"workbook facts {mode}", lambda: _ask_workbook_facts(con, mode))


def _ask_workbook_facts(con: duckdb.DuckDBPyConnection, mode: str) -> tuple[bool, bool, bool]:
    row = con.execute(
        "SELECT count(*) FILTER (WHERE table_name = ?) > 0, (SELECT compat FROM settings), "
        "count(*) FILTER (WHERE table_name IN ('blame_rows', 'batch_blame_rows')) > 0 "
        "FROM duckdb_tables() WHERE database_name = current_database()",
        [result_view(mode)]).fetchone()
    assert row is not None  # an aggregate's one row
    return bool(row[0]), bool(row[1]), bool(row[2])


def _blame_sheet() -> list[tuple[str, SheetSpec]]:
    """The ``blame`` sheet: the local sources, worst first (msq.blame.export)."""
    from msq.blame.export import sheet_spec

    return [("blame", sheet_spec())]


def _write_csv(con: duckdb.DuckDBPyConnection, mode: str, cols: list[str], path: Path) -> None:
    write_table(con, mode, cols, path, "csv")


def _write_parquet(con: duckdb.DuckDBPyConnection, mode: str, cols: list[str],
                   path: Path) -> None:
    write_table(con, mode, cols, path, "parquet")


#: A format's writer: (the compare's connection, its mode, the workbook's columns, the file).
#: It reads the views result_<mode> and marks and writes the file atomically (db.atomic_write).
Writer = Callable[[duckdb.DuckDBPyConnection, str, list[str], Path], None]

#: One writer per ``--format``: a new output format is a module of msq/export/ and a line here.
WRITERS: dict[str, Writer] = {"xlsx": _write_workbook, "csv": _write_csv,
                              "parquet": _write_parquet}

#: Formats written by a layer above export, which hands its writer to write_outputs: ``html``,
#: the report (msq/report), reads the compare's rows in the history's shape and its header
#: (paths, flags, advisor), more than a Writer is given.
UPPER_FORMATS = ("html",)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A full disk or a vanished folder while writing: one line naming the file, no traceback
    (the writers have already removed their temporary file)."""
    try:
        yield
    except (OSError, duckdb.IOException) as err:
        reason = err.strerror if isinstance(err, OSError) else None
        if reason is None:  # DuckDB's COPY: '... "errno":"28"}' carries the system's reason
            found = re.search(r'"errno":\s*"(\d+)"', str(err))
            reason = os.strerror(int(found.group(1))) if found else str(err).splitlines()[0]
        raise ExportError(f"{path}: cannot write it ({reason}); check the free space and "
                          "permissions of the output directory, or choose another -o") from None


def place_file(path: Path, data: bytes | Path) -> Path:
    """Publish an output rendered elsewhere (a directory compare's pair, msq/pair_tables.py)
    as the writers above publish theirs: atomically, never over another file (a taken name
    gets ``_2``, ...); returns the name it got. ``data``: the content, or a file holding it:
    a pool worker's temporary in ``path``'s folder (msq.db.staging) is renamed into place
    (publish: a hard link and an unlink, no byte copied); a file elsewhere is copied by the
    kernel, not through this process's memory."""
    if isinstance(data, Path) and _same_folder(data, path):
        with _writing(path):
            return publish(data, path)
    with _writing(path), new_file(path) as staged:
        if isinstance(data, Path):
            shutil.copyfile(data, staged.tmp)
        else:
            staged.tmp.write_bytes(data)
    return staged.path


def _same_folder(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are in one folder (by the file system: a worker and the driver
    may spell it differently)."""
    try:
        return a.parent.samefile(b.parent)
    except OSError:
        return False


#: Why a row is marked: the column of the ``marks`` view that CSV, Parquet, the console's gate
#: line and the first red row carry (the rules that fired). One name to change when the marks
#: say more (which rule fired with what numbers).
MARK_REASON = "rules"

#: After the workbook's columns, CSV and Parquet carry each row's colour and why: (header, SQL).
MARK_COLUMNS = (("Mark", "m.mark"), ("Mark_rules", f"m.{MARK_REASON}"))

#: The statistics mode's relative errors are texts in the workbook ("12.5%"); Parquet holds
#: their number (12.5), as the history's max_rel_pct ... columns do. stat_result holds them as
#: numbers (rel_pct: in percent, or a fixed text's code), printed by the workbook's renderer.
PERCENT_COLUMNS = ("MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr")

#: stat_result's cells as plain columns (sql/compare/reports/statistics/stat_result.sql): each
#: workbook column (its number's column), the SQL of its text and of its boolean (None: a
#: difference has none): members of the lists cell_texts and cell_bools, in this order, which
#: are NULL on the rows without any (a member of a NULL list is NULL); result_statistics makes
#: the cells of them (plain_cell), the workbook's C renderer reads them.
PLAIN_CELLS: dict[str, tuple[str, str | None]] = {
    **{c: (f"cell_texts[{i}]", None)
       for i, c in enumerate(("Max diff", "Min diff", "Mean diff", "L2norm diff"), 1)},
    **{c: (f"cell_texts[{i + 4}]", f"cell_bools[{i}]") for i, c in enumerate(_STATS, 1)}}

#: stat_result's boolean column: whether a row has any of :data:`PLAIN_CELLS`' texts (the
#: workbook's C renderer reads the texts of those rows alone: msq.export.xlsx.SheetSpec).
CELL_TEXTS = "has_cell_text"

#: stat_result's column that is not NULL on the rows with any of :data:`PLAIN_CELLS`' booleans
#: (the workbook's C renderer reads them from those rows alone: msq.export.xlsx.SheetSpec).
CELL_BOOLS = "cell_bools"

#: stat_result's Result and Err_message as the workbook's C renderer makes them where the rows
#: hold the flag they are made of (a batch's stat_result, its warn: msq.pipeline.STAT_RESULT_WARN):
#: {column: (the flag's column, the SQL of the row's own text (NULL on most rows), the text
#: where the flag is false, where true, where the row has its own text (None: that text))},
#: the texts of sql/compare/reports/statistics/stat_result.sql's CASEs: a matched row's by its
#: warn, an unmatched row's 'N/A' and its Err_message, made by DuckDB on those rows alone (a
#: CASE computes its ELSE for the rows its WHEN leaves) (msq.export.xlsx.SheetSpec.chosen)
_UNMATCHED_MESSAGE = "CASE kind WHEN 'matched' THEN NULL ELSE \"Err_message\" END"
CHOSEN_TEXTS: dict[str, tuple[str, str, str, str, str | None]] = {
    "Result": ("warn", _UNMATCHED_MESSAGE, "", "Warning", "N/A"),
    "Err_message": ("warn", _UNMATCHED_MESSAGE, "", "Need double check api accuracy.", None)}


def table_columns(cols: list[str]) -> list[str]:
    """The header of the CSV and Parquet outputs: the workbook's, then the marks."""
    return [*cols, *(name for name, _ in MARK_COLUMNS)]


def write_table(con: duckdb.DuckDBPyConnection, mode: str, cols: list[str], path: Path,
                fmt: str) -> None:
    """CSV or Parquet: the workbook's columns and the marks (:data:`MARK_COLUMNS`).

    CSV: every cell is text as in the workbook, quoted, and cells that look like formulas are
    prefixed. Parquet: typed columns; a number-or-text cell is a DOUBLE (NaN and infinities
    kept; NULL where the workbook shows a text such as N/A, None or unsupported)."""
    view = result_view(mode)
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {view})").fetchall())
    if fmt == "csv":
        exprs = [_csv_expr(f"r.{quote_ident(c)}", c) for c in cols]
    else:
        exprs = [f"{_typed_expr(f'r.{quote_ident(c)}', types[c], mode, c)} AS {quote_ident(c)}"
                 for c in cols]
    has_marks = mode != "md5"  # md5 mode has no highlighting (and a directory run no marks)
    for name, sql in MARK_COLUMNS:
        value = sql if has_marks else "NULL::VARCHAR"
        # CSV: an unmarked row's cells are "" (every cell quoted); Parquet: NULL
        exprs.append(_csv_expr(f"coalesce({value}, '')", name) if fmt == "csv"
                     else f"{value} AS {quote_ident(name)}")
    source = f"{view} r" + (" LEFT JOIN marks m USING (out_seq)" if has_marks else "")
    # Every CSV cell quoted: where ';' is the list separator, a spreadsheet splits an unquoted
    # "a;=1+1" into two cells and evaluates the second.
    options = "FORMAT csv, HEADER true, FORCE_QUOTE *" if fmt == "csv" else "FORMAT parquet"
    query = f"SELECT {', '.join(exprs)} FROM {source} ORDER BY r.out_seq"
    with atomic_write(path) as tmp:
        con.execute(f"COPY ({query}) TO {quote_str(tmp)} ({options})")


def _typed_expr(expr: str, type_name: str, mode: str, col: str) -> str:
    """A workbook column as a typed Parquet column."""
    if type_name.startswith("UNION"):
        text = f"replace(union_extract({expr}, 's'), chr(9), '')"
        return (f"CASE union_tag({expr}) WHEN 'n' THEN union_extract({expr}, 'n') "
                f"WHEN 'b' THEN CAST(union_extract({expr}, 'b') AS DOUBLE) "
                f"WHEN 's' THEN CASE {text} WHEN 'nan' THEN 'nan'::DOUBLE "
                f"WHEN 'inf' THEN 'inf'::DOUBLE WHEN '-inf' THEN '-inf'::DOUBLE END END")
    if mode == "statistics" and col in PERCENT_COLUMNS:
        return f"TRY_CAST(rtrim({expr}, '%') AS DOUBLE)"
    return expr


def _csv_expr(expr: str, name: str) -> str:
    return f'{csv_guard(f"CAST({expr} AS VARCHAR)")} AS {quote_ident(name)}'


def write_advisor(out_dir: Path, suffix: str, result: CompareResult, *, compat: bool,
                  stamp: str | None = None) -> Path:
    """The three-line advisor file (spec §6), written atomically under a name no other file has
    (see :func:`msq.db.new_file`).

    ``Line`` is msprobe's 0-based line under ``--compat``; in the default mode it is the sheet
    row that holds the suspect, the row the console names (docs/compat.md). ``stamp``: the
    compare's, so that its files share one time in their names (else the time now)."""
    stamp = stamp or time.strftime("%Y%m%d%H%M%S")
    path = out_dir / f"advisor{suffix}_{stamp}.txt"
    text = (f"Line: {advisor_line(result, compat)}\nSuspect Nodes: {result.suspect}\n"
            f"Expert Advice: {result.advice}\n")
    if result.blame is not None:  # the default mode: where the error enters (--compat: none)
        from msq.blame.summary import advisor_text

        text += advisor_text(result.blame)
    with new_file(path) as staged:
        staged.tmp.write_text(text, encoding="utf-8")
    return staged.path


def advisor_line(result: CompareResult, compat: bool) -> str:
    """What follows ``Line:``: msprobe's 0-based line (compat), else the suspect's sheet row."""
    ref = result.suspect_ref
    if compat or ref is None:
        return result.suspect_line
    sheet, row = sheet_row(ref.out_seq)
    return str(row) if sheet == 1 else f"{row} (Sheet{sheet})"
