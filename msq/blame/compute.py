"""Build a compare's blame tables: parameters, module nesting, noise bands, then the views.

The views live in ``sql/compare/blame/`` (one per file): ``blame_keys`` (content keys of every tensor
row), ``blame_edges`` (the dataflow: each input linked to its producer), ``blame_tensors``
(every NPU tensor row with its compared row's error and, for an input, its link),
``blame_ops`` (the error each op's inputs bring) and ``blame_rows`` (the verdict of every
compared row). Each but ``blame_ops`` is materialised in turn (with ``row_error``): the next ones
and every output read it again.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from msq import db
from msq.blame import AMP_LIMIT, FLOOR_FACTOR
from msq.errors import DumpError
from msq.jsonio import read_construct

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("msq")

# each is read by several views after it: computed once (row_error first: every step reads it);
# blame_ops (one row an op) is read by blame_rows alone, which plans it in (its own table cost
# more than it saves)
MATERIALIZED = ("row_error", "blame_keys", "blame_edges", "blame_tensors", "blame_rows")
# (their rows' order is their plan's, which may differ between a compare and a batch of pairs,
# msq.pipeline.compute_batch: every reader but the history orders them; the history stores a
# pair's rows in the order they come, as the result's. Ordered here, blame_rows and
# blame_edges cost ~31 M instructions a 24,500-row pair more, bench/README "Session 17: pairs")

#: The blame rows whose names a batch of pairs reads (:func:`run_batch_blame` with
#: ``all_names`` false): the local rows (each pair's summary and blame sheet) and the collective
#: ops' (the run's blame pass, msq.blame.ranks). The history takes every row's names from its
#: output row (msq.pair_tables._batch_history_rows).
NAMED_ROWS = "verdict = 'local' OR collective"
#: blame_rows' names (those of its output row: its NPU op's and NPU tensor row's)
NAMES = ("op_name", "npu_name")
def batch_rows_select(names: bool = True, coded: bool = True) -> str:
    """A batch's ``blame_rows`` (:func:`db.materialize`'s ``select``): blame_judged's rows, the
    reason as its kind, the floor source (``coded``) as a ``blame_floor`` (blame_rows' texts
    made only where a reader reads them, :data:`msq.blame.BATCH_TEXTS`: storing ~146,000 reasons and
    floor sources of a 6-pair root batch cost DuckDB their texts' appends, UTF-8 checks and
    scans back, bench/README "Session 29: blame"); ``names`` false: its names on the
    :data:`NAMED_ROWS` alone, NULL on the others (~97 % of a root batch's rows): storing every
    row's two names cost ~38 M instructions of a 6-pair root batch's ~827 M, for rows whose
    names nothing of the batch reads (bench/README "Session 28: blame")."""
    made = [f"CASE WHEN {NAMED_ROWS} THEN {name} END AS {name}" for name in NAMES] if not names else []
    if coded:
        made.append("blame_floor_code(floor_source) AS floor_source")
    replaced = f"REPLACE ({', '.join(made)}) " if made else ""
    return f"SELECT * {replaced}FROM blame_judged"


def materialize_rows(con: duckdb.DuckDBPyConnection, names: bool) -> None:
    """A batch's ``blame_rows`` stored (:func:`batch_rows_select`), its floor sources as texts
    where one is not a ``blame_floor`` (a dtype that row_dtype lacks: the batch's dtypes are
    texts then too, msq.pipeline.CODED_DTYPE), which stops the first SELECT."""
    try:
        db.materialize(con, "blame_rows", batch_rows_select(names))
    except duckdb.ConversionException:
        db.materialize(con, "blame_rows", batch_rows_select(names, coded=False))


def nesting_rows(construct: dict[str, Any]) -> list[tuple[str, str]]:
    """``(op, ancestor)`` for every op of construct.json and every module above it, any depth.

    construct.json maps each op to its parent module (or null); a cycle (a damaged file) stops
    the walk instead of looping.
    """
    rows = []
    for op, parent in construct.items():
        seen: set[str] = set()
        while isinstance(parent, str) and parent not in seen:
            rows.append((op, parent))
            seen.add(parent)
            parent = construct.get(parent)
    return rows


def load_nesting(con: duckdb.DuckDBPyConnection, side: str, dump_json: Path, pair: int = 0) -> int:
    """Fill ``blame_nesting`` from the construct.json beside ``dump_json``; return its rows.
    ``pair``: the dump's pair in a batch of pairs (:func:`run_batch_blame`).

    construct.json is optional for a compare (msprobe does not read it): a missing one means no
    nesting (the L1 level writes it empty), a broken one is reported and skipped.
    """
    path = dump_json.parent / "construct.json"
    if not path.is_file():
        return 0
    try:
        construct = read_construct(path)
    except DumpError as err:
        log.warning("blame: %s; module nesting not used", err)
        return 0
    rows = nesting_rows(construct)
    if rows:
        ops, ancestors = zip(*rows)
        # as list parameters: no pyarrow on a statistics compare's path (its import is ~0.25 s)
        con.execute("INSERT INTO blame_nesting (side, op_name, ancestor, pair) "
                    "SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), ?",
                    [side, list(ops), list(ancestors), pair])
    return len(rows)


def run_blame(con: duckdb.DuckDBPyConnection, mode: str, npu_json: Path, bench_json: Path, *,
              run_id: str | None = None, bands: pa.Table | None = None,
              noise_source: str | None = None, user_dirs: Iterable[Path] = (),
              row_error_table: bool = False, views_made: Collection[str] = ()) -> None:
    """Compute blame for the compare in ``con`` (its rows, errors and metrics are in place).

    Args:
        con: the compare's connection (``compare_rows``, ``row_error``, ``tensor_metrics``).
        mode: statistics, md5 or tensor.
        run_id: the msq compare this compare is part of (every rank and step of it).
        npu_json: the NPU dump.json (its construct.json gives the module nesting).
        bench_json: the bench dump.json.
        bands: ``npu_name, band`` of a reference noise run (see :mod:`msq.blame.noise`).
        noise_source: what the bands come from (a path or a history label), for the outputs.
        user_dirs: user SQL folders (a ``blame/`` folder there overrides a view by name).
        row_error_table: ``row_error`` is a table already (the pipeline's case): not looked up
            in the catalog again (a lookup waits while the pipeline's other cursor writes).
        views_made: blame's shipped views created already (with the compare's database, see
            msq/opening.py): not created again.
    """
    con.execute("INSERT INTO blame_params VALUES (?, ?, ?, ?)",
                [run_id, FLOOR_FACTOR, AMP_LIMIT, noise_source if bands is not None else None])
    load_nesting(con, "npu", npu_json)
    load_nesting(con, "bench", bench_json)
    if bands is not None and bands.num_rows:
        db.insert_arrow(con, "blame_bands", bands.select(["npu_name", "band"]))
    _make_tables(con, mode, user_dirs, views_made, row_error_table)


def _make_tables(con: duckdb.DuckDBPyConnection, mode: str, user_dirs: Iterable[Path],
                 views_made: Collection[str], row_error_table: bool,
                 batch_names: bool | None = None) -> None:
    """Blame's views created (but ``views_made``) and materialised (``row_error`` only when it
    is not a table yet; ``batch_names`` not None: a batch's, ``blame_rows`` as
    :func:`materialize_rows` stores it, with every row's names or not), once its parameters and
    nesting are in place."""
    db.load_views(con, folders=("compare/blame",), user_dirs=user_dirs, variants=[mode],
                  skip=views_made)
    for view in MATERIALIZED:
        if view == "blame_rows" and batch_names is not None:
            materialize_rows(con, batch_names)
        elif not (row_error_table and view == "row_error"):
            db.materialize(con, view)


def run_batch_blame(con: duckdb.DuckDBPyConnection, mode: str,
                    dumps: list[tuple[int, Path, Path]], *, run_id: str,
                    views_made: Collection[str] = (), all_names: bool = True) -> None:
    """Blame of a batch of pairs at once (msq.pipeline.compute_batch: their rows in one set of
    tables, each op and row marked with its pair, ``row_error`` a table already): what
    :func:`run_blame` computes for one compare, for every pair in one set of queries. The
    views keep each key, name join and window within its pair (sql/compare/blame), so that a
    pair's rows are those of its own compare. ``dumps``: each pair's number and its NPU and
    bench dump.json. No noise bands (blame_rows finds a row's band by name alone): a run with a
    reference noise run compares its pairs one by one. ``all_names`` false: blame_rows' names
    on :data:`NAMED_ROWS` alone (:func:`batch_rows_select`), for a batch whose pairs read no
    view of blame_rows but their blame sheet's local rows (their workbook alone) and want no
    bands (each row's name)."""
    con.execute("INSERT INTO blame_params VALUES (?, ?, ?, NULL)", [run_id, FLOOR_FACTOR, AMP_LIMIT])
    for pair, npu_json, bench_json in dumps:
        load_nesting(con, "npu", npu_json, pair)
        load_nesting(con, "bench", bench_json, pair)
    _make_tables(con, mode, (), views_made, row_error_table=True, batch_names=all_names)
