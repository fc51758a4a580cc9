"""Where a report's rows come from: a compare's live connection, or the history database.

Both sources end in the same three temporary relations on one DuckDB connection, which the
report's SQL (``sql/report/``) reads:

- ``rep_compares(compare_id, mode, label, step, rank, ord)``: the compares shown, ``ord`` their
  display order (step, rank);
- ``rep_rows``: their output rows, in the history's ``result_rows`` shape (a live compare builds
  the same rows with ``sql/history/record/hist_rows_<mode>.sql`` before recording them);
- ``rep_blame(compare_id, out_seq, input_err, output_err, amplification, verdict, blame_rank,
  reason)``: the blame verdicts (issue 13, docs/schema.md) when a ``blame`` table or view
  exists, else empty.

The compares' headers (paths, flags, counts, the advisor's suspect and advice) travel beside
them as plain dicts.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from msq import db
from msq.errors import HistoryError, SqlFileError
from msq.history import connect_read, parse_rank_step
from msq.history.recorder import prepare_rows
from msq.version import VERSION as __version__

if TYPE_CHECKING:
    from msq.config import Options
    from msq.result import CompareResult

log = logging.getLogger("msq")

BLAME = "blame"
BLAME_COLUMNS = ("compare_id", "out_seq", "input_err", "output_err", "amplification", "verdict",
                 "blame_rank")
_EMPTY_BLAME = ("SELECT NULL::BIGINT AS compare_id, NULL::BIGINT AS out_seq, "
                "NULL::DOUBLE AS input_err, NULL::DOUBLE AS output_err, "
                "NULL::DOUBLE AS amplification, NULL::VARCHAR AS verdict, "
                "NULL::BIGINT AS blame_rank, NULL::VARCHAR AS reason WHERE false")
# the compares columns a report header shows (the history's names; a live compare fills the same)
HEADER_COLUMNS = ("compare_id", "started_at", "seconds", "label", "mode", "framework", "compat",
                  "fuzzy", "stack", "auto_analyze", "cross_framework", "data_mapping",
                  "api_mapping", "cell_mapping", "layer_mapping", "npu_path", "bench_path",
                  "stack_path", "rank", "step", "msq_version", "output_dir", "files", "n_rows",
                  "n_matched", "n_npu_only", "n_bench_only", "n_red", "n_yellow",
                  "suspect_line", "suspect")


@dataclass
class ReportSource:
    """A connection holding ``rep_compares``, ``rep_rows`` and ``rep_blame``, and the headers."""

    con: duckdb.DuckDBPyConnection
    compares: list[dict[str, Any]]
    origin: str                      # "compare" (live) or the history file's path
    blame: bool = False              # blame verdicts were found
    owns_connection: bool = False

    def close(self) -> None:
        if self.owns_connection:
            self.con.close()


# --------------------------------------------------------------------------------------------
# a compare's live connection


def live_source(con: duckdb.DuckDBPyConnection, mode: str, result: CompareResult,
                opts: Options) -> ReportSource:
    """The rows of the compare being written, from its own connection (a private cursor).

    Args:
        con: the compare's connection, with its ``result_<mode>`` and ``marks`` tables.
        mode: statistics, md5 or tensor.
        result: the compare's counts and advisor finding (its files are not all written yet).
        opts: the compare's options (flags for the header).

    Returns:
        The source; its connection is a cursor of ``con`` that the caller closes.
    """
    cur = con.cursor()
    # the recorder's own SQL (a directory compare's pair renders its page where it runs, from
    # its own connection too)
    rows_sql = prepare_rows(cur, mode)
    have = {d[0] for d in cur.execute(f"SELECT * FROM ({rows_sql}) LIMIT 0").description}
    # the mode's rows hold the mode's columns; the others are NULL, as in result_rows; the metric
    # cells' texts come as one list, texts (result_data's, schema version 5; none in md5 mode),
    # and other modes' columns as two (tensor_metrics, mode_texts: version 7), spread into their
    # columns as the view result_rows spreads them
    spread = {name: f"{packed}[{k}]" for packed, k, name in packed_columns() if packed in have}
    select = ", ".join(f'"{name}"' if name in have else
                       f'{spread[name]} AS "{name}"' if name in spread else
                       f'NULL::{dtype} AS "{name}"'
                       for name, dtype in result_rows_columns() if name != "compare_id")
    cur.execute(f"CREATE OR REPLACE TEMP VIEW rep_rows AS "
                f"SELECT 0::BIGINT AS compare_id, {select} FROM (\n{rows_sql}\n)")
    rank, step = parse_rank_step(Path(result.npu_path))
    header = _live_header(mode, result, opts, rank, step)
    _create_compares(cur, [header])
    blame = _create_blame(cur, _find_relation(cur, BLAME), live_id=0)
    return ReportSource(cur, [header], "compare", blame=blame, owns_connection=True)


def packed_columns() -> tuple[tuple[str, int, str], ...]:
    """(list column of result_data, place in it, column) of each column of the history's view
    ``result_rows`` that result_data keeps in a list (texts, tensor_metrics, mode_texts), read
    from the view's own DDL."""
    return _result_rows()[1]


def result_rows_columns() -> tuple[tuple[str, str], ...]:
    """(name, type) of the history's ``result_rows`` view, from its DDL."""
    return _result_rows()[0]


@lru_cache(maxsize=1)
def _result_rows() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, int, str], ...]]:
    """The history's ``result_rows``: its columns, and where its texts come from (one scratch
    database made from sql/history/schema for both)."""
    scratch = duckdb.connect()
    try:
        db.run_schema(scratch, "history/schema")
        columns = tuple(scratch.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'result_rows' "
            "ORDER BY column_index").fetchall())
        sql = str(db.scalar(scratch, "SELECT sql FROM duckdb_views() "
                                     "WHERE view_name = 'result_rows' AND NOT internal"))
    finally:
        scratch.close()
    packed = tuple((column, int(k), name) for column, k, name in
                   re.findall(r"\br\.(\w+)\[(\d+)\]\s+AS\s+(\w+)\b", sql, re.IGNORECASE))
    texts = tuple(item for item in packed if item[0] == "texts" and item[2].endswith("_text"))
    if not texts:
        raise RuntimeError("the history's view result_rows spreads no texts[k] AS <metric>_text")
    return columns, packed


def _live_header(mode: str, result: CompareResult, opts: Options, rank: int | None,
                 step: int | None) -> dict[str, Any]:
    def absolute(path: str | None) -> str | None:
        return str(Path(path).absolute()) if path else None

    return {
        "compare_id": 0, "started_at": _now(), "seconds": None, "label": opts.label,
        "mode": mode, "framework": opts.framework, "compat": opts.compat,
        "fuzzy": opts.fuzzy_match, "stack": opts.stack_mode, "auto_analyze": opts.auto_analyze,
        "cross_framework": None, "data_mapping": _text(opts.data_mapping),
        "api_mapping": _text(opts.api_mapping), "cell_mapping": _text(opts.cell_mapping),
        "layer_mapping": _text(opts.layer_mapping),
        "npu_path": absolute(result.npu_path), "bench_path": absolute(result.bench_path),
        "stack_path": None, "rank": rank, "step": step, "msq_version": __version__,
        "output_dir": None, "files": [str(f) for f in result.files], "n_rows": result.rows,
        "n_matched": result.matched, "n_npu_only": result.unmatched_npu,
        "n_bench_only": result.unmatched_bench, "n_red": result.red, "n_yellow": result.yellow,
        "suspect_line": None if result.suspect_line == "NA" else int(result.suspect_line),
        "suspect": None if result.suspect == "NA" else result.suspect,
        "advice": result.advice,
    }


def _text(value: Any) -> str | None:
    if value is None or value is False:
        return None
    return "builtin" if value is True else str(value)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


# --------------------------------------------------------------------------------------------
# the history database


def history_source(path: Path, compare_id: int | None = None, label: str | None = None,
                   timeout: float | None = None) -> ReportSource:
    """One compare, or one run (every step and rank of a label), from the history file.

    Args:
        path: the history database.
        compare_id: ``--compare``: that compare alone.
        label: ``--label``: the newest compare of each step and rank recorded with this label.
        timeout: seconds to wait for a locked file.

    Returns:
        The source, over a read-only connection to ``path`` that it owns.

    With neither, the newest compare's run: its label's compares, or, for an unlabelled compare,
    the unlabelled compares written into the same output directory (newest per step and rank).
    """
    con = connect_read(path, timeout)
    try:
        ids = _select_compares(con, path, compare_id, label)
        _create_history_compares(con, ids)
        con.execute("CREATE OR REPLACE TEMP VIEW rep_rows AS SELECT r.* FROM result_rows r "
                    "SEMI JOIN rep_compares c USING (compare_id)")
        headers = _history_headers(con)
        blame = _create_blame(con, _find_relation(con, BLAME))
        source = ReportSource(con, headers, str(path), blame=blame, owns_connection=True)
        _add_advice(source)
        return source
    except BaseException:
        con.close()
        raise


def _select_compares(con: duckdb.DuckDBPyConnection, path: Path, compare_id: int | None,
                     label: str | None) -> list[int]:
    if compare_id is not None:
        found = con.execute("SELECT compare_id FROM compares WHERE compare_id = ?",
                            [compare_id]).fetchall()
        if not found:
            raise HistoryError(f"{path}: no compare {compare_id} recorded; "
                               f"`msq runs --db {path}` lists them")
        return [compare_id]
    if label is None:
        newest = con.execute("SELECT label, output_dir FROM compares "
                             "ORDER BY compare_id DESC LIMIT 1").fetchall()
        if not newest:
            raise HistoryError(f"{path}: no compare recorded yet")
        label, output_dir = newest[0]
        if label is None:
            return _latest(con, "label IS NULL AND output_dir IS NOT DISTINCT FROM ?",
                           [output_dir])
    ids = _latest(con, "label = ?", [label])
    if not ids:
        raise HistoryError(f"{path}: no compare recorded with label {label!r}; "
                           f"`msq runs --db {path}` lists the labels")
    return ids


def _latest(con: duckdb.DuckDBPyConnection, where: str, params: list[Any]) -> list[int]:
    """The newest compare of each (step, rank) among those ``where`` selects (a re-run replaces
    its results, as in the ``regressions`` view)."""
    rows = con.execute(f"SELECT compare_id FROM compares WHERE {where} "
                       "QUALIFY row_number() OVER (PARTITION BY step, rank "
                       "ORDER BY started_at DESC, compare_id DESC) = 1 ORDER BY compare_id",
                       params).fetchall()
    return [r[0] for r in rows]


def _create_history_compares(con: duckdb.DuckDBPyConnection, ids: list[int]) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE rep_compares AS "
                "SELECT compare_id, mode, label, step, rank, "
                "CAST(row_number() OVER (ORDER BY step NULLS FIRST, rank NULLS FIRST, "
                "compare_id) - 1 AS INTEGER) AS ord "
                "FROM compares WHERE list_contains(?, compare_id)", [ids])


def _history_headers(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    have = {r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'compares' "
        "AND database_name = current_database()").fetchall()}
    cols = [c for c in HEADER_COLUMNS if c in have]
    rel = con.execute(f"SELECT {', '.join('h.' + c for c in cols)} FROM compares h "
                      "JOIN rep_compares c USING (compare_id) ORDER BY c.ord")
    names = [d[0] for d in rel.description]
    headers = []
    for row in rel.fetchall():
        header = dict(zip(names, row))
        started = header.get("started_at")
        if isinstance(started, dt.datetime):
            header["started_at"] = started.isoformat(timespec="seconds")
        headers.append(header)
    return headers


def _add_advice(source: ReportSource) -> None:
    """The advisor's text of each compare: from its advisor file when that still exists, else
    derived again from the recorded rows by the advisor's own SQL."""
    for header in source.compares:
        text = _advice_from_file(header.get("files") or [])
        if text is None:
            text = _advice_from_rows(source.con, int(header["compare_id"]))
        header["advice"] = text


def _advice_from_file(files: list[str]) -> str | None:
    for name in files:
        path = Path(name)
        if not (path.name.startswith("advisor") and path.suffix == ".txt"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        _, found, advice = text.partition("Expert Advice: ")
        # one line: what follows it (blame's lines in the default mode) the report shows itself
        return advice.partition("\n")[0] if found else None
    return None


def _advice_from_rows(con: duckdb.DuckDBPyConnection, compare_id: int) -> str | None:
    try:
        body = db.sql_file("compare/reports/advisor_finding.sql").body
    except SqlFileError:  # the advisor's SQL moved: leave the text out rather than fail
        return None
    con.execute("CREATE OR REPLACE TEMP VIEW failing_rows AS SELECT out_seq, npu_name AS name "
                f"FROM result_rows WHERE compare_id = {compare_id} AND failing")
    try:
        row = con.execute(body).fetchone()
    except duckdb.Error as err:  # an advisor rule this history cannot feed: leave the text out
        log.debug("advisor text not derived for compare %d: %s", compare_id, err)
        return None
    return None if row is None else str(row[2])


# --------------------------------------------------------------------------------------------
# shared


def _create_compares(con: duckdb.DuckDBPyConnection, headers: list[dict[str, Any]]) -> None:
    con.execute("CREATE OR REPLACE TEMP TABLE rep_compares (compare_id BIGINT, mode VARCHAR, "
                "label VARCHAR, step INTEGER, rank INTEGER, ord INTEGER)")
    for ord_, h in enumerate(headers):
        con.execute("INSERT INTO rep_compares VALUES (?, ?, ?, ?, ?, ?)",
                    [h["compare_id"], h["mode"], h["label"], h["step"], h["rank"], ord_])


def _find_relation(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """``name`` quoted when a table or view of that name is visible (temp or main), else None."""
    rows = con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = ? "
        "AND database_name IN (current_database(), 'temp') "
        "UNION ALL SELECT 1 FROM duckdb_views() WHERE view_name = ? AND NOT internal "
        "AND database_name IN (current_database(), 'temp')", [name, name]).fetchall()
    return f'"{name}"' if rows else None


def _create_blame(con: duckdb.DuckDBPyConnection, relation: str | None,
                  live_id: int | None = None) -> bool:
    """``rep_blame`` over a blame relation honouring issue 13's contract, else empty; True
    when it holds rows of the compares shown (``rep_compares``).

    ``live_id``: a live compare's blame has no compare id yet; its rows get this one.
    """
    body = _EMPTY_BLAME
    if relation is not None:
        cols = {d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description}
        missing = [c for c in BLAME_COLUMNS if c not in cols and
                   not (c == "compare_id" and live_id is not None)]
        if missing:
            log.warning("the blame relation lacks %s: the report falls back to the advisor's "
                        "suspect", ", ".join(missing))
        else:
            cid = "compare_id" if "compare_id" in cols else f"{live_id}::BIGINT"
            reason = "reason::VARCHAR" if "reason" in cols else "NULL::VARCHAR"
            body = (f"SELECT {cid} AS compare_id, out_seq::BIGINT AS out_seq, "
                    "input_err::DOUBLE AS input_err, output_err::DOUBLE AS output_err, "
                    "amplification::DOUBLE AS amplification, verdict::VARCHAR AS verdict, "
                    f"blame_rank::BIGINT AS blame_rank, {reason} AS reason "
                    f"FROM {relation} "
                    f"QUALIFY row_number() OVER (PARTITION BY {cid}, out_seq "
                    "ORDER BY blame_rank NULLS LAST) = 1")
    con.execute(f"CREATE OR REPLACE TEMP VIEW rep_blame AS {body}")
    if body is _EMPTY_BLAME:
        return False
    # a history (schema 3) always has the view blame, but a compare run with --no-blame (or
    # --compat, or recorded before blame) has no rows in it: that report keeps the advisor's
    # suspect and own figures rather than an empty blame
    return bool(db.scalar(con, "SELECT EXISTS (SELECT 1 FROM rep_blame b "
                               "SEMI JOIN rep_compares c USING (compare_id))"))
