"""Blame over a whole run: every rank and step of one msq compare together.

Each rank pair is compared on its own (in its own process); a collective's output that its own
rank's inputs do not explain is left *inherited* there, provisionally. This pass puts the ranks
side by side with the history's own ``blame`` view (``sql/history/views/blame.sql``): the inputs
of the same call on every rank decide, and the run's local sources are ranked worst first. The
run's first local source (earliest step, then execution order) goes to the console and to a
small JSON file for scripts.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from msq import db
from msq.blame.summary import ROW_FIELDS, BlameSummary, PackedRows, sheet_row

if TYPE_CHECKING:
    import pyarrow as pa

VIEW = "blame"
#: Local sources listed in the JSON file (the history holds them all).
JSON_SOURCES = 20


def new_run_id() -> str:
    """An id shared by every compare of one msq compare (the history's ``blame_rank`` scope)."""
    return uuid.uuid4().hex


@dataclass
class RankBlame:
    """The blame of one compare of a run: which rank and step, its summary, its files."""

    rank: int | None
    step: int | None
    summary: BlameSummary
    title: str = ""


@dataclass
class RunBlame:
    """The run's local sources after weighing every rank, worst first (``blame_rank``).

    A run of many ranks and steps can hold tens of thousands of local sources (root-8x8-5000:
    48k): the console and the JSON file need the first, the worst, the top twenty and the count,
    so the rows stay an Arrow table, in no order, until :attr:`sources` is read (~0.25 s of
    Python objects at the run's end, with the workers idle): ordered by ``blame_rank`` there, or
    the first ``n`` of them alone (:meth:`top`).
    """

    counts: dict[str, int] = field(default_factory=dict)
    compares: int = 0
    inputs: int = 0
    linked: int = 0
    noise_source: str | None = None
    #: The local source met first: the earliest step, then execution order, then rank.
    first: dict[str, Any] | None = None
    n_sources: int = 0
    _rows: Any = field(default=None, repr=False)  # the list in blame_rank order, or a pa.Table

    @property
    def sources(self) -> list[dict[str, Any]]:
        """Every local source, worst first, as dicts of :data:`VIEW_COLUMNS`."""
        if not isinstance(self._rows, list):
            self._rows = [] if self._rows is None else \
                self._rows.sort_by("blame_rank").to_pylist()
        return self._rows

    def top(self, n: int) -> list[dict[str, Any]]:
        """The ``n`` worst local sources."""
        if isinstance(self._rows, list) or self._rows is None:
            return self.sources[:n]
        import numpy as np
        import pyarrow as pa

        k = min(n, self._rows.num_rows)
        if k <= 0:
            return []
        # (blame_rank is 1, 2, ... over the run's local rows: each row's own, never NULL; its k
        # smallest by numpy's partition, not pyarrow's select_k over the table's chunks, ~7 M
        # instructions a call); each row sliced (a take of the table's chunks concatenated each
        # column first: ~1.5 ms for 20 rows)
        ranks = self._rows.column("blame_rank").to_numpy()
        best = np.argpartition(ranks, k - 1)[:k] if k < len(ranks) else range(len(ranks))
        return pa.concat_tables([self._rows.slice(int(i), 1) for i in best]) \
            .sort_by("blame_rank").to_pylist()

    @property
    def worst(self) -> dict[str, Any] | None:
        return next(iter(self.top(1)), None)


def _first(sources: list[dict[str, Any]]) -> dict[str, Any] | None:
    """:attr:`RunBlame.first` of a list in blame_rank order (ties: the better ranked)."""
    return min(sources, default=None, key=lambda s: (
        -1 if s["step"] is None else s["step"], s["op_seq"],
        -1 if s["rank"] is None else s["rank"], s["out_seq"]))


#: :func:`_first`'s order in SQL (blame_rank last: ``min`` keeps the first of equal keys).
_FIRST_ORDER = "coalesce(step, -1), op_seq, coalesce(rank, -1), out_seq, blame_rank"


def view_file() -> db.SqlFile:
    """The history's ``blame`` view (one file serves the history and this pass)."""
    return db.sql_file(f"history/views/{VIEW}.sql")


#: The columns of :func:`_rows_table`: each row's fields, then its compare's.
_TABLE_COLUMNS = (*ROW_FIELDS, "compare_id", "run_id", "floor_factor", "amp_limit")


def _rows_table(parts: list[RankBlame], run_id: str) -> pa.Table:
    """Each compare's local and collective rows (each row once), as one table. Built column by
    column, as ``pa.Table.from_pylist`` builds it from a dict a row (the same lists, the same
    types inferred), without the ~52k merged dicts of root-8x8-5000 (0.29 -> 0.1 s), each
    row's fields taken at once (``itemgetter``) and turned into columns by ``zip`` (~0.17 ->
    ~0.06 s of the run's end, when nothing else runs)."""
    import pyarrow as pa  # lazy: a directory run's pass only

    tables = _arrow_parts(parts, run_id)
    if tables is not None:
        return pa.concat_tables(tables) if any(t.num_rows for t in tables) else pa.table({})
    columns: dict[str, list[Any]] = {k: [] for k in _TABLE_COLUMNS}
    fields = itemgetter(*ROW_FIELDS)
    for compare_id, part in enumerate(parts, start=1):
        seen: set[int] = set()
        rows = []
        for row in [*part.summary.sources, *part.summary.collectives]:
            if row["out_seq"] not in seen:
                seen.add(row["out_seq"])
                rows.append(row)
        try:  # each row's fields as one tuple, the tuples turned into columns (in C)
            values: list[Sequence[Any]] = list(zip(*map(fields, rows))) or [()] * len(ROW_FIELDS)
        except KeyError:  # a row without some field (None there, as .get gives)
            values = [[row.get(k) for row in rows] for k in ROW_FIELDS]
        for k, column in zip(ROW_FIELDS, values, strict=True):
            columns[k] += column
        for k, value in (("compare_id", compare_id), ("run_id", run_id),
                         ("floor_factor", part.summary.floor_factor),
                         ("amp_limit", part.summary.amp_limit)):
            columns[k] += [value] * len(rows)
    if not columns["out_seq"]:
        return pa.table({})
    return pa.Table.from_arrays([columns[k] for k in _TABLE_COLUMNS], names=list(_TABLE_COLUMNS))


def _arrow_parts(parts: list[RankBlame], run_id: str) -> list[pa.Table] | None:
    """:func:`_rows_table`'s rows of each compare, from its rows' own Arrow tables where some
    compare's are (a batch of pairs' summaries, msq.blame.summary.summarize_batch: their
    columns those of ROW_FIELDS, the types the dicts would give), without a Python object a
    value; else None (dicts alone: a single compare's summaries, the recorded ones of
    ``--resume``). The compares whose rows are dicts among them (a pair a directory run
    compared on its own, not in a batch: root-8x8-5000's last pairs) are made tables of the
    others' schema (:func:`_dict_table`; None where their values do not fit it): one such
    compare sent the whole run's rows through Python objects, ~4x the pass.
    The compares' rows as one table (in a list), their constant columns made and their rows
    taken twice found once for all of them, not with ~8 pyarrow calls a compare (64 pairs of
    root-8x8-5000: ~16 -> ~8 ms)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    given: list[tuple[pa.Table | Sequence[dict[str, Any]],
                      pa.Table | Sequence[dict[str, Any]]]] = []
    schema = None
    for part in parts:
        pair = []
        for rows in (part.summary.sources, part.summary.collectives):
            table = rows.table() if isinstance(rows, PackedRows) else None
            if table is not None:
                # (the names of a schema checked once: its tables share one schema object,
                # PackedRows.table, which an equality finds by identity)
                if (schema is None or not table.schema.equals(schema)) \
                        and table.column_names != list(ROW_FIELDS):
                    return None
                schema = schema or table.schema
            pair.append(rows if table is None else table)
        given.append((pair[0], pair[1]))
    if schema is None:  # dicts alone: as they are (their types inferred)
        return None
    tables, ids, counts, factors, limits, collective = [], [], [], [], [], []
    for compare_id, (part, (sources, collectives)) in enumerate(zip(parts, given, strict=True),
                                                                start=1):
        for rows, is_collective in ((sources, False), (collectives, True)):
            if not isinstance(rows, pa.Table) and not len(rows):
                continue  # (no table made of no rows: ~0.3 ms each)
            table = rows if isinstance(rows, pa.Table) else _dict_table(rows, schema)
            if table is None:
                return None
            if table.num_rows:
                tables.append(table)
                ids.append(compare_id)
                counts.append(table.num_rows)
                factors.append(part.summary.floor_factor)
                limits.append(part.summary.amp_limit)
                collective.append(is_collective)
    if not tables:  # (a column of no value would be of Arrow's null type)
        return []
    table = pa.concat_tables(tables)
    n = np.asarray(counts)
    compare_ids = np.repeat(np.asarray(ids, dtype=np.int64), n)
    factor_of = np.repeat(np.asarray(factors, dtype=np.float64), n)
    limit_of = np.repeat(np.asarray(limits, dtype=np.float64), n)
    of_collectives = np.repeat(np.asarray(collective, dtype=bool), n)
    # each row once: a collective's row among its compare's local sources is not taken again
    # (none: a collective's verdict is never local, sql/compare/blame/blame_rows.sql). A row
    # found in both lists is one row, with one ``collective``: a collective op's row, as every
    # row of collectives is, among the sources only where one of them is a collective op's.
    if of_collectives.any() and not of_collectives.all():
        flagged = table.column("collective").fill_null(False).to_numpy(zero_copy_only=False)
        among = ~of_collectives & (flagged | ~flagged[of_collectives].all())
        if among.any():
            key = pa.array(compare_ids * (1 << 32) + table.column("out_seq").to_numpy())
            found = pc.is_in(key, value_set=key.filter(pa.array(among)))
            keep = ~(of_collectives & found.to_numpy(zero_copy_only=False))
            if not keep.all():
                table = table.filter(pa.array(keep))
                compare_ids, factor_of, limit_of = (compare_ids[keep], factor_of[keep],
                                                    limit_of[keep])
    # (the types a list of the values gives: the dicts' table's)
    for name, column in (("compare_id", pa.array(compare_ids, pa.int64())),
                         ("run_id", pa.repeat(pa.scalar(run_id, pa.string()), table.num_rows)),
                         ("floor_factor", pa.array(factor_of, pa.float64())),
                         ("amp_limit", pa.array(limit_of, pa.float64()))):
        table = table.append_column(name, column)
    return [table]


def _dict_table(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table | None:
    """A compare's rows given as dicts (ROW_FIELDS each) as a table of ``schema`` (the other
    compares' tables'); None where a value does not fit its column's type (the pass then builds
    every column from the dicts, as :func:`_rows_table` did for all)."""
    import pyarrow as pa

    try:
        return pa.Table.from_pylist(list(rows), schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None


#: The columns of the history's view ``blame``, in its order (what :func:`combine` gives).
VIEW_COLUMNS = ("compare_id", "run_id", "label", "rank", "step", "out_seq", "op_seq", "op_name",
                "npu_name", "io", "role", "direction", "err_kind", "input_err", "output_err",
                "floor", "floor_source", "amplification", "verdict", "reason", "blame_rank",
                "link", "via", "band")


def _one_compare(part: RankBlame, run_id: str) -> list[dict[str, Any]]:
    """The view's local rows for a run of one compare, without DuckDB.

    One compare has no other rank to weigh a collective by (the view's peers are the other
    ranks' calls), so the view keeps every verdict, and its local rows are the compare's own
    local sources, in the same order (output_err descending, then op_seq, out_seq: the step and
    rank are the same on every row). Amplification is the same formula on the same numbers.
    """
    fixed = {"compare_id": 1, "run_id": run_id, "label": None, "rank": part.rank,
             "step": part.step}
    return [{k: fixed[k] if k in fixed else rank if k == "blame_rank" else src.get(k)
             for k in VIEW_COLUMNS}
            for rank, src in enumerate(part.summary.sources, start=1)]


#: The view's columns that the run's weighing gives (its compare's rank, step and label; what
#: the other ranks decide of a collective's output; the rank) and the row's key: what
#: :func:`combine` fetches of the view. Its other columns are the rows' own, as given.
_WEIGHED = ("compare_id", "out_seq", "label", "rank", "step", "input_err", "amplification",
            "verdict", "reason", "blame_rank")


def _local_rows(weighed: pa.Table, rows: pa.Table) -> pa.Table:
    """The view's local rows (:data:`VIEW_COLUMNS` but blame_rank, :func:`_blame_ranks`) of the
    :data:`_WEIGHED` columns fetched (``weighed``) and the others taken from the rows the view read
    (``rows``: one a compare and out_seq), each row's by its compare and out_seq: the view passes
    them through as they are (the same values and Arrow types, DuckDB's VARCHAR read from and given
    as Arrow strings), and fetching them back out of DuckDB was ~35 % of the run pass (49k local
    rows' ten texts: root-8x8-5000, bench/README "Session 24: blame")."""
    import numpy as np
    import pyarrow as pa

    def key(table: pa.Table) -> Any:  # compare_id and out_seq as one number (out_seq < 2**32)
        return (table.column("compare_id").to_numpy().astype(np.int64) << 32) \
            + table.column("out_seq").to_numpy().astype(np.int64)

    keys = key(rows)
    order = np.argsort(keys, kind="stable")
    wanted = key(weighed)
    at = order[np.searchsorted(keys, wanted, sorter=order)] if len(wanted) else order[:0]
    if len(wanted) and not np.array_equal(keys[at], wanted):
        raise AssertionError("the view gave a local row that its rows do not hold")
    taken = pa.array(at)
    names = [name for name in VIEW_COLUMNS if name != "blame_rank"]
    return pa.Table.from_arrays(
        [weighed.column(name) if name in _WEIGHED else rows.column(name).take(taken)
         for name in names], names=names)


def _view_con(parts: list[RankBlame], rows: pa.Table, stored: bool) -> duckdb.DuckDBPyConnection:
    """A new DuckDB with the run's ``compares``, ``rows`` as ``blame_rows`` and the history's
    view ``blame`` over them."""
    import pyarrow as pa

    # one thread: the run's end, where the history is checkpointed on the other core (and a
    # few thousand rows: DuckDB's second thread only added work, ~10 M instructions)
    con = duckdb.connect(config={"threads": 1})
    try:
        con.execute("CREATE TABLE compares (compare_id BIGINT, rank INTEGER, step INTEGER, "
                    "label VARCHAR)")
        # one INSERT (executemany: one statement a compare, ~0.07 s for 64)
        con.execute("INSERT INTO compares SELECT unnest(range(1, ? + 1)), unnest(?::INTEGER[]), "
                    "unnest(?::INTEGER[]), NULL",
                    [len(parts), [p.rank for p in parts], [p.step for p in parts]])
        if stored:
            db.insert_arrow(con, "blame_rows", rows, create=True)
        else:
            # the rows read in place, not stored in a table first (DuckDB's per-text statistics
            # and checks). The view reads the run's id only to tell runs apart (its calls' and
            # peers' keys, the rank's partition), and every row is of this run: read with a
            # one-letter id (DuckDB keeps a text of up to 12 bytes inline, the 32-letter id
            # apart), the rows' own taken back by _local_rows, not fetched
            con.register("blame_rows", rows.set_column(
                rows.schema.get_field_index("run_id"), "run_id",
                pa.repeat(pa.scalar("r", pa.string()), rows.num_rows)))
        db.create_view(con, view_file())
    except BaseException:
        con.close()
        raise
    return con


def _weigh_view(parts: list[RankBlame], table: pa.Table) -> tuple[pa.Table, int | None, int]:
    """The view's local rows of the run's rows ``table`` (every row through the view), the
    first's blame_rank (None: no local row) and how many collectives' outputs its weighing made
    local: what :func:`_weigh` gives where it cannot."""
    import pyarrow as pa

    # a column with no value in any row, of Arrow's null type (rows of dicts: a column of no
    # value in any of them), is read stored, as a table makes it (an INTEGER)
    stored = any(pa.types.is_null(column.type) for column in table.schema)
    con = _view_con(parts, table, stored)
    try:
        # the local rows fetched at once, in no order (RunBlame orders them by blame_rank when
        # read); read in place, the rows' own columns taken back (_local_rows), not fetched
        local = f"FROM {VIEW} WHERE verdict = 'local'"
        if stored:
            rows = con.sql(f"SELECT * {local}").to_arrow_table()
        else:
            weighed = con.sql(f"SELECT {', '.join(_WEIGHED)} {local}").to_arrow_table()
            rows = _local_rows(weighed, table).append_column(
                "blame_rank", weighed.column("blame_rank")).select(list(VIEW_COLUMNS))
        con.register("local", rows)
        # a collective judged local here was counted inherited by its rank: how many moved
        first_rank, moved = con.execute(
            f"SELECT (SELECT blame_rank FROM local ORDER BY {_FIRST_ORDER} LIMIT 1), "
            "(SELECT count(*) FROM local WHERE role = 'output' AND "
            f"starts_with(reason, '{_MOVED}'))").fetchall()[0]
    finally:
        con.close()
    return rows, first_rank, int(moved)


#: The view's reason of a collective's output its weighing made local (sql/history/views/blame.sql)
_MOVED = "error enters in the collective"


def _weigh(parts: list[RankBlame], run_id: str) -> tuple[pa.Table, int | None, int] | None:
    """:func:`_weigh_view`'s answer with the view run over the collective ops' rows alone, and
    the local rows ranked here; None where that does not hold (the caller runs the view over
    every row).

    The view changes a collective op's row alone (its calls and peers are the collective
    outputs' rows; a row's weighing reads that row and them), and a collective op's row is never
    local in its compare (sql/compare/blame/blame_rows.sql): every local source a compare gives
    is one of the view's local rows as it is, its amplification the view's formula of its own
    errors. Only blame_rank is of all local rows: the view's order, sorted here. The view's run
    over root-8x8-5000's ~52k rows (its joins, its window over the ~48k local rows and taking
    them back) was ~270 M instructions of the run's end, when nothing else runs; the sources
    are one table of the compares' own (their chunks, no row copied)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    sources = _rows_table([_part_of(p, collectives=False) for p in parts], run_id)
    collectives = _rows_table([_part_of(p, collectives=True) for p in parts], run_id)
    if not sources.num_rows:
        return None
    tables = [t for t in (sources, collectives) if t.num_rows]
    if any(pa.types.is_null(f.type) for t in tables for f in t.schema) \
            or any(t.schema != sources.schema for t in tables):
        return None  # (the rows' types as one table of them all gives them: the view's)
    output_err = sources.column("output_err")
    if pc.any(sources.column("collective")).as_py() \
            or not pc.all(pc.equal(sources.column("verdict"), "local")).as_py() \
            or output_err.null_count or pc.any(pc.is_nan(output_err)).as_py():
        return None
    found = [_own_rows(parts, sources)]
    if collectives.num_rows:
        weighed = _weigh_collectives(parts, collectives)
        if weighed is None:  # (a NaN, -0.0 or NULL the view orders its own way: the view)
            return None
        if weighed.num_rows:
            found.append(_local_rows(weighed, collectives).cast(found[0].schema))
    local = pa.concat_tables(found)
    ranks = _blame_ranks(local)
    local = local.append_column("blame_rank", pa.array(ranks, pa.int64())) \
        .select(list(VIEW_COLUMNS))
    moved = pc.and_(pc.equal(local.column("role"), "output"),
                    pc.starts_with(local.column("reason"), _MOVED))
    return local, _first_rank(local, ranks), int(pc.sum(moved.fill_null(False)).as_py() or 0)


#: What the view's calls (sql/history/views/blame.sql) take of a collective op's name: its API
_API = re.compile(r"^Distributed\.([A-Za-z_]+)\.")
#: The APIs whose calls the view weighs by the other ranks' sends, and those sends
_RECVS, _SENDS = ("recv", "irecv"), ("send", "isend")


def _weigh_collectives(parts: list[RankBlame],
                       rows: pa.Table) -> pa.Table | None:
    """The view's local rows of the collective ops' rows ``rows`` (its :data:`_WEIGHED`
    columns but blame_rank), weighed here as the view weighs them (sql/history/views/blame.sql:
    calls, peers, judged, final), without a DuckDB (~180 M instructions of root-8x8-5000's run
    pass to start one, bind the view and run it over ~4,300 rows). None where a value would
    need DuckDB's own rules (a NaN, which DuckDB orders above every number; a -0.0; a NULL name
    or threshold): the view runs then."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    # (one chunk: the compares' 64 chunks filtered chunk by chunk cost ~14 M instructions)
    rows = rows.select(["compare_id", "out_seq", "op_name", "role", "verdict", "reason",
                        "collective", "input_err", "output_err", "amp_limit"]).combine_chunks()
    if rows.column("op_name").null_count or rows.column("amp_limit").null_count:
        return None
    for name in ("input_err", "output_err", "amp_limit"):  # (a NULL error is none of these)
        values = rows.column(name).fill_null(1.0).to_numpy()
        if np.isnan(values).any() or (np.signbit(values) & (values == 0)).any():
            return None
    # the rows read below: the collectives' outputs (their calls, and the rows weighed) and the
    # local ones (made again as the view's); not the others (~half of root-8x8-5000's 4,348),
    # made Python objects for nothing (to_pydict ~15 M instructions of the run's end)
    read = pc.or_kleene(pc.and_kleene(pc.equal(rows.column("role"), "output"),
                                      rows.column("collective")),
                        pc.equal(rows.column("verdict"), "local")).fill_null(False)
    cols = rows.filter(read).to_pydict()
    ids, ops, roles = cols["compare_id"], cols["op_name"], cols["role"]
    ins, outs, amps = cols["input_err"], cols["output_err"], cols["amp_limit"]
    steps = [parts[i - 1].step for i in ids]
    ranks = [parts[i - 1].rank for i in ids]
    # calls: each collective output's call (step, rank, op), the largest input error among its
    # rows (NULLs left out; all NULL: NULL)
    calls: dict[tuple[Any, Any, str], float | None] = {}
    for k, role in enumerate(roles):
        if role == "output" and cols["collective"][k]:
            key = (steps[k], ranks[k], ops[k])
            calls[key] = _larger(calls.get(key), ins[k])
    # peers: the calls of the same step (NULL the same) on other ranks, of the same op or, for
    # a recv, any send
    by_op: dict[tuple[Any, str], list[tuple[Any, float | None]]] = {}
    sends: dict[Any, list[tuple[Any, float | None]]] = {}
    for (step, rank, op), err in calls.items():
        by_op.setdefault((step, op), []).append((rank, err))
        if _api(op) in _SENDS:
            sends.setdefault(step, []).append((rank, err))
    peers: dict[tuple[Any, Any, str], float | None] = {}
    for step, rank, op in calls:
        found = [err for other, err in by_op[(step, op)] if other != rank]
        if _api(op) in _RECVS:
            found += [err for other, err in sends.get(step, []) if other != rank]
        if found:
            peer: float | None = None
            for err in found:
                peer = _larger(peer, err)
            peers[(step, rank, op)] = peer
    made: dict[str, list[Any]] = {name: [] for name in _WEIGHED[:-1]}
    for k, verdict in enumerate(cols["verdict"]):
        # judged: the row's peers by its compare's step and rank (an equality: NULL finds none)
        peer = peers.get((steps[k], ranks[k], ops[k])) \
            if steps[k] is not None and ranks[k] is not None else None
        inp, out, limit = ins[k], outs[k], amps[k]
        weighed = (cols["collective"][k] and roles[k] == "output" and verdict == "inherited"
                   and peer is not None and out is not None
                   and out > limit * (0.0 if inp is None else inp))
        reason = cols["reason"][k]
        if weighed:
            assert peer is not None and out is not None  # (weighed says so)
            inp = _larger(inp, peer)
            assert inp is not None
            if out > limit * inp:
                verdict, reason = "local", (f"{_MOVED}: the inputs of every rank do not "
                                            "explain it")
            else:
                reason = "through the collective: explained by the inputs of another rank"
        if verdict != "local":
            continue
        for name, value in (("compare_id", ids[k]), ("out_seq", cols["out_seq"][k]),
                            ("label", None), ("rank", ranks[k]), ("step", steps[k]),
                            ("input_err", inp), ("amplification", _amplification(out, inp)),
                            ("verdict", verdict), ("reason", reason)):
            made[name].append(value)
    types = {"compare_id": pa.int64(), "out_seq": rows.schema.field("out_seq").type,
             "label": pa.string(), "rank": pa.int32(), "step": pa.int32(),
             "input_err": pa.float64(), "amplification": pa.float64(), "verdict": pa.string(),
             "reason": pa.string()}
    return pa.table({name: pa.array(values, types[name]) for name, values in made.items()})


def _larger(a: float | None, b: float | None) -> float | None:
    """The larger of two errors, a NULL left out (DuckDB's max and greatest; no NaN here)."""
    return b if a is None else a if b is None or a >= b else b


def _api(op: str) -> str:
    found = _API.match(op)
    return found.group(1) if found else ""


def _amplification(out: float | None, inp: float | None) -> float | None:
    """The view's amplification of a row's errors."""
    if out is None or inp is None:
        return None
    if inp > 0 and math.isfinite(inp):
        return out / inp
    return math.inf if inp == 0 and out > 0 else None


def _part_of(part: RankBlame, collectives: bool) -> RankBlame:
    """``part`` with its local sources alone, or its collectives' rows alone."""
    kept = replace(part.summary, sources=[]) if collectives \
        else replace(part.summary, collectives=[])
    return replace(part, summary=kept)


def _own_rows(parts: list[RankBlame], rows: pa.Table) -> pa.Table:
    """Local rows of the run that the view passes through as they are (not a collective op's),
    as its rows (:data:`VIEW_COLUMNS` but blame_rank): their compare's rank and step, no label,
    the amplification of their errors by the view's formula."""
    import numpy as np
    import pyarrow as pa

    ids = pa.array(rows.column("compare_id").to_numpy() - 1)
    out, inp = rows.column("output_err"), rows.column("input_err")
    o, i = out.fill_null(np.nan).to_numpy(), inp.fill_null(np.nan).to_numpy()
    both = ~(_nulls(out) | _nulls(inp))
    # the view's CASE: output / input where the input is finite and > 0, inf where it is 0 and
    # the output > 0, else NULL
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = both & (i > 0) & np.isfinite(i)
        infinite = both & ~ratio & (i == 0) & (o > 0)
        amp = np.where(ratio, o / np.where(ratio, i, 1.0), np.inf)
    made = {
        "label": pa.nulls(rows.num_rows, pa.string()),
        "rank": pa.array([p.rank for p in parts], pa.int32()).take(ids),
        "step": pa.array([p.step for p in parts], pa.int32()).take(ids),
        "amplification": pa.array(amp, pa.float64(), mask=~(ratio | infinite)),
    }
    names = [name for name in VIEW_COLUMNS if name != "blame_rank"]
    return pa.Table.from_arrays([made[name] if name in made else rows.column(name)
                                 for name in names], names=names)


def _nulls(column: Any) -> Any:
    """Where a (chunked) column is NULL, as numpy booleans."""
    return column.is_null().to_numpy(zero_copy_only=False)


def _blame_ranks(local: pa.Table) -> Any:
    """Each local row's blame_rank (numpy int64): the view's row_number() over the run's local
    rows (one run) ORDER BY output_err DESC, step NULLS FIRST, op_seq, rank NULLS FIRST,
    out_seq. (No NULL or NaN error: :func:`_weigh`. Arrow's sort of the key columns: numpy's
    lexsort of eight keys was ~60 M instructions for root-8x8-5000's ~48k rows.)"""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    # (a NULL step or rank as a number below every INTEGER: first)
    keys = pa.table({name: local.column(name).cast(pa.int64()).fill_null(-2**40)
                     if name in ("step", "rank") else local.column(name)
                     for name in ("output_err", "step", "op_seq", "rank", "out_seq")})
    # (one chunk: Arrow's sort of a table of a chunk a compare merged the chunks' orders, ~25 M
    # instructions, where one chunk's is a radix sort, ~6 M)
    order = pc.sort_indices(keys.combine_chunks(), sort_keys=[
        ("output_err", "descending"), ("step", "ascending"), ("op_seq", "ascending"),
        ("rank", "ascending"), ("out_seq", "ascending")]).to_numpy()
    ranks = np.empty(local.num_rows, np.int64)
    ranks[order] = np.arange(1, local.num_rows + 1, dtype=np.int64)
    return ranks


def _first_rank(local: pa.Table, ranks: Any) -> int | None:
    """The blame_rank of the least local row by :data:`_FIRST_ORDER` (None: no row): each key
    in turn among the rows least by the keys before it."""
    import numpy as np

    at = np.arange(local.num_rows)
    for key in (local.column("step").fill_null(-1), local.column("op_seq"),
                local.column("rank").fill_null(-1), local.column("out_seq")):
        values = key.to_numpy()[at]
        at = at[values == values.min()] if len(at) else at
    return int(ranks[at].min()) if len(at) else None


def combine(parts: list[RankBlame], run_id: str | None = None) -> RunBlame:
    """Weigh the ranks of a run together (see the module docstring)."""
    run_id = run_id or new_run_id()
    result = RunBlame(compares=len(parts))
    for part in parts:
        for verdict, n in part.summary.counts.items():
            result.counts[verdict] = result.counts.get(verdict, 0) + n
        result.inputs += part.summary.inputs
        result.linked += part.summary.linked
        result.noise_source = result.noise_source or part.summary.noise_source
    if len(parts) == 1:  # a single card: nothing to weigh (~0.1 s of DuckDB saved at the end)
        sources = _one_compare(parts[0], run_id)
        result._rows, result.n_sources, result.first = sources, len(sources), _first(sources)
        return result

    weighed = _weigh(parts, run_id)
    if weighed is None:
        table = _rows_table(parts, run_id)
        if table.num_rows == 0:
            return result
        weighed = _weigh_view(parts, table)
    result._rows, first_rank, moved = weighed
    result.n_sources = result._rows.num_rows
    if first_rank is not None:
        import pyarrow.compute as pc

        at = pc.index(result._rows.column("blame_rank"), first_rank).as_py()
        result.first = result._rows.slice(at, 1).to_pylist()[0]
    if moved:
        result.counts["local"] = result.counts.get("local", 0) + moved
        result.counts["inherited"] = result.counts.get("inherited", 0) - moved
    return result


def _plain(value: Any) -> Any:
    """JSON-safe: inf and NaN become null (strict JSON has neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def source_json(src: dict[str, Any]) -> dict[str, Any]:
    keys = ("rank", "step", "npu_name", "op_name", "input_err", "output_err", "amplification",
            "floor", "floor_source", "reason", "blame_rank")
    out = {k: _plain(src.get(k)) for k in keys}
    out["row"] = sheet_row(src["out_seq"])
    out["amplification_infinite"] = src.get("amplification") == math.inf
    return out


def write_json(run: RunBlame, path: Path) -> Path:
    """The run's first and worst local sources (and the next ones) as a small JSON file; returns
    the name written."""
    doc = {
        "first_local_source": source_json(run.first) if run.first else None,
        "worst_local_source": source_json(run.worst) if run.worst else None,
        "local_sources": [source_json(s) for s in run.top(JSON_SOURCES)],
        "n_local_sources": run.n_sources,
        "verdicts": run.counts,
        "compares": run.compares,
        "tensor_inputs": run.inputs,
        "linked_inputs": run.linked,
        "noise_source": run.noise_source,
    }
    with db.new_file(path) as staged:  # never over another run's file: _2, ... when taken
        staged.tmp.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n",
                              encoding="utf-8")
    return staged.path
