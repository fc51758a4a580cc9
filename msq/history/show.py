"""``msq show`` from the history database: one compare by its id, or the latest run.

A run is what one ``msq compare`` recorded: one compare, or one per rank and step pair of a
directory compare. The history keeps no run id, so a run is found from its latest compare back:
the compares just before it with the same output folder, label, flags and dump root, each rank
and step once.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import duckdb

from msq.errors import HistoryError
from msq.history.query import connect_read
from msq.result import MarkedRow, ShownCompare, ShownRun, pair_title

#: Why a row is marked, as the history keeps it (result_rows): the default mode's reason (the rule
#: that fired, with its numbers), else the names of the rules (compat mode)
REASON_COLUMN = "coalesce(nullif(reason, ''), mark_rules)"
#: A history of schema version 1 (before the reason column) is read without migrating it
RULES_ONLY = "mark_rules"

#: The compares columns that must agree for two compares to belong to one run
_RUN_KEY = ("output_dir", "label", "mode", "compat", "fuzzy", "stack", "auto_analyze",
            "data_mapping", "api_mapping", "cell_mapping", "layer_mapping")
_COMPARE_COLUMNS = ("compare_id", "started_at", "seconds", "label", "mode", "compat", "rank",
                    "step", "npu_path", "bench_path", "files", "n_rows", "n_matched",
                    "n_npu_only", "n_bench_only", "n_red", "n_yellow", "suspect_line", "suspect")


def show_compare(path: Path, compare_id: int, limit: int | None) -> ShownRun:
    """One recorded compare; ``limit``: at most that many marked rows (None: all)."""
    con = connect_read(path)
    try:
        rows = _compares(con, "WHERE compare_id = ?", [compare_id])
        if not rows:
            last = con.execute("SELECT max(compare_id) FROM compares").fetchall()[0][0]
            raise HistoryError(f"{path}: no compare {compare_id} (the ids go from 1 to {last}); "
                               "msq runs lists them")
        return _with_blame(con, ShownRun(str(path), _with_marks(con, rows, limit)))
    finally:
        con.close()


def show_latest_run(path: Path, output_dir: Path | None, limit: int | None) -> ShownRun:
    """The latest run recorded in ``path`` (into ``output_dir`` when given)."""
    con = connect_read(path)
    try:
        where, params = "", []
        if output_dir is not None:
            where, params = "WHERE output_dir = ?", [os.path.abspath(output_dir)]
        candidates = _compares(con, where + " ORDER BY compare_id DESC", params)
        if not candidates:
            raise HistoryError(f"{path}: no compare recorded"
                               + (f" into {output_dir}" if output_dir is not None else ""))
        run = _latest_run(candidates)
        run.sort(key=lambda c: (c["step"] if c["step"] is not None else -1,
                                c["rank"] if c["rank"] is not None else -1, c["compare_id"]))
        return _with_blame(con, ShownRun(str(path), _with_marks(con, run, limit)))
    finally:
        con.close()


def _compares(con: duckdb.DuckDBPyConnection, tail: str, params: list[Any]) -> list[dict[str, Any]]:
    cols = ", ".join(dict.fromkeys(_COMPARE_COLUMNS + _RUN_KEY))
    cur = con.cursor()
    names_rows = cur.execute(f"SELECT {cols} FROM compares {tail}", params).fetchall()
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in names_rows]


def _latest_run(newest_first: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The latest compare and those before it that belong to the same run."""
    first = newest_first[0]
    key, root = [first[k] for k in _RUN_KEY], _dump_root(first)
    run, seen = [first], {(first["step"], first["rank"])}
    for compare in newest_first[1:]:
        place = (compare["step"], compare["rank"])
        if [compare[k] for k in _RUN_KEY] != key or _dump_root(compare) != root or place in seen:
            break
        run.append(compare)
        seen.add(place)
    return run


_STEP_RANK = re.compile(r"^(step\d+|rank\d*)$")


def _dump_root(compare: dict[str, Any]) -> str:
    """The NPU dump's folder above its step and rank directories."""
    folder = Path(compare["npu_path"] or "").parent
    while _STEP_RANK.match(folder.name):
        folder = folder.parent
    return str(folder)


def _with_marks(con: duckdb.DuckDBPyConnection, compares: list[dict[str, Any]],
                limit: int | None) -> list[ShownCompare]:
    ids = [c["compare_id"] for c in compares]
    cap = "" if limit is None else f"WHERE n <= {int(limit)}"
    marked: dict[int, list[MarkedRow]] = {i: [] for i in ids}
    totals: dict[int, int] = dict.fromkeys(ids, 0)
    why = REASON_COLUMN if _has_reason(con) else RULES_ONLY
    rows = con.execute(f"""
        SELECT compare_id, out_seq, mark, name, reason, total FROM (
          SELECT compare_id, out_seq, mark, coalesce(npu_name, bench_name) AS name,
                 coalesce({why}, '') AS reason,
                 row_number() OVER (PARTITION BY compare_id ORDER BY out_seq) AS n,
                 count(*) OVER (PARTITION BY compare_id) AS total
          FROM result_rows WHERE mark IS NOT NULL AND list_contains(?, compare_id)) {cap}
        ORDER BY compare_id, out_seq""", [ids]).fetchall()
    for compare_id, out_seq, mark, name, reason, total in rows:
        marked[compare_id].append(MarkedRow(int(out_seq), mark, name or "", reason))
        totals[compare_id] = int(total)
    return [_shown(c, marked[c["compare_id"]], totals[c["compare_id"]]) for c in compares]


def _with_blame(con: duckdb.DuckDBPyConnection, run: ShownRun) -> ShownRun:
    """``run`` with each compare's blame summary and, for a run of several compares, where the
    error enters first over all of them: what ``msq compare`` printed, read from the history's
    blame rows (the same rows the compare summarized: its local sources, worst first, at most
    :data:`msq.blame.summary.MAX_SOURCES` a compare, and its collectives)."""
    if not _has_blame(con):  # compat mode and --no-blame record none; versions 1-2 had none
        return run
    from msq.blame.ranks import RankBlame, combine
    from msq.blame.summary import summarize_recorded_many

    found = summarize_recorded_many(con, "", [c.compare_id for c in run.compares if c.compare_id])
    for shown in run.compares:
        if shown.compare_id in found:
            shown.blame = found[shown.compare_id][0]
    parts = [RankBlame(c.rank, c.step, c.blame) for c in run.compares if c.blame is not None]
    if len(run.compares) > 1 and parts:
        run.blame = combine(parts)
    return run


def _has_blame(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the history has blame's rows and edges (schema version 3 on; a table, or a view
    since version 6)."""
    return con.execute(
        "SELECT count(DISTINCT name) FROM (SELECT view_name AS name FROM duckdb_views() "
        "WHERE database_name = current_database() UNION ALL SELECT table_name FROM "
        "duckdb_tables() WHERE database_name = current_database()) "
        "WHERE name IN ('blame_rows', 'blame_edges')").fetchall()[0][0] == 2


def _has_reason(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether result_rows has the reason column (read-only opens do not migrate old files)."""
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE database_name = current_database() "
        "AND table_name = 'result_rows' AND column_name = 'reason'").fetchall()[0][0])


def _shown(c: dict[str, Any], marked: list[MarkedRow], total: int) -> ShownCompare:
    return ShownCompare(
        mode=c["mode"], rows=c["n_rows"] or 0, matched=c["n_matched"] or 0,
        npu_only=c["n_npu_only"] or 0, bench_only=c["n_bench_only"] or 0, red=c["n_red"] or 0,
        yellow=c["n_yellow"] or 0, suspect_seq=c["suspect_line"], suspect=c["suspect"],
        compare_id=c["compare_id"], rank=c["rank"], step=c["step"],
        title=pair_title(c["step"], c["rank"]), compat=c["compat"], label=c["label"],
        started_at=c["started_at"], seconds=c["seconds"], npu_path=c["npu_path"] or "",
        bench_path=c["bench_path"] or "", files=list(c["files"] or []), marked=marked,
        marked_total=total)
