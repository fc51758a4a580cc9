"""What blame tells the user: the local sources (worst first, and the first in execution order),
the verdict counts, how many inputs were linked, and the rows a directory compare weighs across
ranks (collectives). A plain record, so that it crosses process boundaries with the result.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, overload

import duckdb

from msq import db
from msq.blame import BATCH_TEXTS

if TYPE_CHECKING:
    import pyarrow as pa

#: Local sources kept in a summary (worst first); the blame outputs and the history hold them all.
MAX_SOURCES = 1000
#: Columns of a blame row that a summary carries for the cross-rank pass (see msq.blame.ranks).
ROW_FIELDS = ("out_seq", "op_seq", "op_name", "npu_name", "io", "role", "direction", "is_module",
              "collective", "err_kind", "input_err", "output_err", "floor", "floor_source",
              "amplification", "verdict", "reason", "link", "candidates", "via", "band")
#: The local sources' order, worst first: blame_rank's (sql/compare/blame/blame.sql), the
#: summary's and blame's workbook sheet's (msq.blame.export).
WORST_FIRST = "output_err DESC, op_seq, out_seq"
#: blame_rows' ENUM columns (sql/compare/schema/40_blame.sql), which a summary holds as texts.
_ENUM_FIELDS = ("io", "role", "direction", "verdict", "link")


@dataclass
class BlameSummary:
    """Blame of one compare (one rank pair of one step).

    Attributes:
        counts: rows per verdict (local, inherited, clean).
        sources: the local rows, worst first (at most ``MAX_SOURCES``), as dicts of ``ROW_FIELDS``.
        collectives: the rows of collective and point-to-point ops (the cross-rank pass needs them).
        inputs: NPU tensor inputs; linked: those linked to a producing output.
        links: linked inputs per link kind (hash, md5, statistics, reshape, external).
        noise_source: the reference noise run the floors came from, or None (dtype floors).
        floor_factor, amp_limit: the thresholds used (see msq.blame).
        bands: ``(npu_name, band)`` of the rows that add an error over their inputs: the noise
            bands this compare gives when it is a reference noise run (msq.blame.noise).
    """

    counts: dict[str, int] = field(default_factory=dict)
    sources: Sequence[dict[str, Any]] = field(default_factory=list)
    collectives: Sequence[dict[str, Any]] = field(default_factory=list)
    inputs: int = 0
    linked: int = 0
    links: dict[str, int] = field(default_factory=dict)
    noise_source: str | None = None
    floor_factor: float = 0.0
    amp_limit: float = 0.0
    bands: list[tuple[str, float]] = field(default_factory=list)
    rank: int | None = None  # the compare's rank (directory compares; None for one card)

    @property
    def first(self) -> dict[str, Any] | None:
        """The local source that comes first in execution order (None when there is none)."""
        return self.first_and_worst()[0]

    def first_and_worst(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """:attr:`first` and the worst local source (the first of :attr:`sources`), from one
        read of the rows (a packed summary's are unpickled on each read)."""
        table = self.sources.table() if isinstance(self.sources, PackedRows) else None
        if table is not None:  # two rows read of the table (the driver reads every pair's)
            if not table.num_rows:
                return None, None
            import pyarrow.compute as pc

            # min's: the first of the least (op_seq, out_seq) (a stable sort's first)
            at = pc.sort_indices(table, sort_keys=[("op_seq", "ascending"),
                                                   ("out_seq", "ascending")])[0].as_py()
            return table.slice(at, 1).to_pylist()[0], table.slice(0, 1).to_pylist()[0]
        rows = list(self.sources)
        first = min(rows, key=lambda s: (s["op_seq"], s["out_seq"]), default=None)
        return first, rows[0] if rows else None

    def packed(self) -> BlameSummary:
        """This summary with its rows packed (:class:`PackedRows`): what a pair of a directory
        compare hands to the driver, which keeps every pair's summary until the run's end."""
        return replace(self, sources=PackedRows(self.sources),
                       collectives=PackedRows(self.collectives))

    def unpacked(self) -> BlameSummary:
        """This summary with plain lists of rows (what the Python API hands back: a caller may
        change them or turn the summary into JSON); itself when nothing is packed."""
        if not isinstance(self.sources, PackedRows) and \
                not isinstance(self.collectives, PackedRows):
            return self
        return replace(self, sources=list(self.sources), collectives=list(self.collectives))


def unpack_blame(results: Sequence[Any]) -> None:
    """Each result's blame summary (``result.blame``) with plain lists of rows, in place: what
    the Python API hands back (a directory compare's pairs send their rows to the driver as
    :class:`PackedRows`, which a caller could read but not change or turn into JSON)."""
    for result in results:
        if getattr(result, "blame", None) is not None:
            result.blame = result.blame.unpacked()


class PackedRows(Sequence[dict[str, Any]]):
    """A summary's rows (dicts of :data:`ROW_FIELDS`) kept as one blob, read back on each use: a
    list of new dicts, equal to the rows given (a NaN as in any copy: not equal to itself), its
    repr theirs.

    A directory compare's driver keeps every pair's summary until the run's end (the run's
    blame weighs them together). As dicts, root-8x8-5000's ~800 rows a pair grew the driver by
    ~5 MB a pair (~340 MB of 64 pairs: the dicts, and the allocator's arenas they pinned among
    the freed rest of each pair's result); as one blob a pair, ~0.3 MB. The blob is made by the
    pool worker (or Ray task) and crosses to the driver as bytes, never unpickled there but when
    the rows are read: the console's lines of the pair and the run's blame at its end.

    The blob is the rows pickled (:class:`PackedRows` of a list), or, from a batch of pairs
    (:func:`summarize_batch`, :meth:`of_table`), their Arrow table as an IPC stream: the rows
    never become Python objects in the worker (fetched as dicts and pickled they cost ~60 M
    instructions a pair, bench/README "Session 22: blame"), and the run's blame reads the table
    itself (:meth:`table`; msq.blame.ranks). Either reads back as the same dicts.
    """

    __slots__ = ("_arrow", "_blob", "_len")
    _blob: bytes
    _len: int
    _arrow: bool

    def __init__(self, rows: Sequence[dict[str, Any]]) -> None:
        if isinstance(rows, PackedRows):
            self._blob, self._len, self._arrow = rows._blob, rows._len, rows._arrow
        else:
            self._blob = pickle.dumps(list(rows), protocol=pickle.HIGHEST_PROTOCOL)
            self._len, self._arrow = len(rows), False

    @classmethod
    def of_table(cls, table: pa.Table) -> PackedRows:
        """The rows of an Arrow table (one a row, its columns the dicts' keys in order; texts,
        not dictionaries: a dictionary's values read back as texts, but the run's blame would
        get them as another type), as an IPC stream."""
        import pyarrow as pa  # lazy: a batch of pairs' summary only (its worker has it)

        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        packed = cls.__new__(cls)
        packed._blob, packed._len, packed._arrow = sink.getvalue().to_pybytes(), table.num_rows, True
        return packed

    def table(self) -> pa.Table | None:
        """The rows as the Arrow table they were given as (:meth:`of_table`); None when they
        were given as dicts. Their schema is one object for every table of that schema
        (:func:`_stream_schema`)."""
        if not self._arrow:
            return None
        import pyarrow as pa

        messages = pa.ipc.MessageReader.open_stream(self._blob)
        schema = _stream_schema(messages.read_next_message())
        if schema is None:  # (dictionaries: read as a stream reads them)
            return pa.ipc.open_stream(self._blob).read_all()
        return pa.Table.from_batches([pa.ipc.read_record_batch(message, schema)
                                      for message in messages], schema)

    def rows(self) -> list[dict[str, Any]]:
        """The rows, as new dicts."""
        table = self.table()
        if table is not None:
            return table.to_pylist()
        # the blob is this run's own (pickled by its pool worker or Ray task, as the pair's
        # whole result is on its way to the driver): nothing from a dump is unpickled here
        rows: list[dict[str, Any]] = pickle.loads(self._blob)
        return rows

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, Any]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, Any] | list[dict[str, Any]]:
        table = self.table()
        if table is None:
            return self.rows()[index]
        # a table's rows made dicts only where read (the advisor's first five)
        places = range(self._len)[index]  # an int out of range raises IndexError, as a list's
        if isinstance(places, int):
            return table.slice(places, 1).to_pylist()[0]
        if places.step == 1:
            return table.slice(places.start, len(places)).to_pylist()
        import pyarrow as pa

        return table.take(pa.array(places, type=pa.int64())).to_pylist()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.rows())

    def __add__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return self.rows() + list(other)

    def __radd__(self, other: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(other) + self.rows()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PackedRows | list):
            return self.rows() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a list's: unhashable

    def __repr__(self) -> str:
        return repr(self.rows())

    def __getstate__(self) -> tuple[bytes, int, bool]:
        return self._blob, self._len, self._arrow

    def __setstate__(self, state: tuple[bytes, int] | tuple[bytes, int, bool]) -> None:
        self._blob, self._len = state[0], state[1]
        self._arrow = bool(state[2]) if len(state) > 2 else False


#: The schemas of :meth:`PackedRows.table`'s tables, by their IPC message (None: a schema with
#: dictionaries). The run's blame pass reads ~128 summaries' tables of one schema (a batch's
#: summaries are all of one SELECT) and concatenates them: each read anew, its schema was
#: decoded again and Arrow compared each one with the first by its fingerprint, computed for
#: each (~19 M instructions of root-8x8-5000's pass, when the driver runs alone); one object,
#: compared by identity.
_SCHEMAS: dict[bytes, pa.Schema | None] = {}
#: At most this many schemas kept (a process comparing many kinds of dumps keeps reading)
_MAX_SCHEMAS = 64


def _stream_schema(message: pa.ipc.Message) -> pa.Schema | None:
    """The schema of an IPC stream's first ``message``, one object for each schema (None where
    it has dictionaries: a stream's reader reads those)."""
    import pyarrow as pa

    key = message.metadata.to_pybytes()
    if key not in _SCHEMAS:
        if len(_SCHEMAS) >= _MAX_SCHEMAS:
            _SCHEMAS.clear()
        schema = pa.ipc.read_schema(message)
        _SCHEMAS[key] = None if any(pa.types.is_dictionary(f.type) for f in schema) else schema
    return _SCHEMAS[key]


#: The order of a summary's verdict counts: local, inherited, clean (any other after them).
VERDICT_ORDER = ("CASE verdict WHEN 'local' THEN 0 WHEN 'inherited' THEN 1 WHEN 'clean' THEN 2 "
                 "ELSE 3 END, verdict")


def _dicts(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cur = con.execute(sql)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


def summarize(con: duckdb.DuckDBPyConnection, bands: bool = True) -> BlameSummary:
    """The summary of the blame tables in ``con`` (see :func:`msq.blame.compute.run_blame`);
    ``bands``: with the rows' noise bands (a reference noise run's compare needs them)."""
    cols = ", ".join(ROW_FIELDS)
    # in a fixed order, the most severe first (the JSON's keys): a GROUP BY's follows the rows'
    # order in the table
    counts = dict(con.execute("SELECT verdict, count(*) FROM blame_rows WHERE verdict IS NOT NULL "
                              f"GROUP BY verdict ORDER BY {VERDICT_ORDER}").fetchall())
    links = dict(con.execute("SELECT how, count(*) FROM blame_edges WHERE side = 'npu' "
                             "GROUP BY how ORDER BY how").fetchall())
    factor, limit, noise = con.execute(
        "SELECT floor_factor, amp_limit, noise_source FROM blame_params").fetchone() or (0, 0, None)
    return BlameSummary(
        counts={k: int(v) for k, v in counts.items()},
        sources=_dicts(con, f"SELECT {cols} FROM blame_rows WHERE verdict = 'local' "
                            f"ORDER BY {WORST_FIRST} LIMIT {MAX_SOURCES}"),
        collectives=_dicts(con, f"SELECT {cols} FROM blame_rows WHERE collective "
                                "ORDER BY out_seq"),
        inputs=int(sum(links.values())), linked=int(sum(v for k, v in links.items()
                                                        if k != "external")),
        links={k: int(v) for k, v in links.items()}, noise_source=noise,
        floor_factor=float(factor), amp_limit=float(limit),
        bands=[(str(n), float(b)) for n, b in con.execute(
            "SELECT npu_name, band FROM blame_rows WHERE band > 0 ORDER BY out_seq").fetchall()]
        if bands else [])


def summarize_batch(con: duckdb.DuckDBPyConnection, places: list[tuple[int, int, int, int]],
                    bands: bool = False) -> dict[int, BlameSummary]:
    """Each pair's :func:`summarize` of a batch of pairs' blame tables at once (msq.pipeline
    .batch_results; before the batch's tables are split by pair): one query a figure, grouped by
    pair. ``places``: each pair's number, first and last out_seq and op_base (what its own
    compare numbers from 0: the rows' out_seq and op_seq are given as its own compare's)."""
    # (a pair's number as a UTINYINT where it fits: the counts' GROUP BY on it and the verdict
    # takes DuckDB ~25 % less, bench/README "Session 22: blame"; the ranges tested by halves)
    small = all(0 <= k < 256 for k, *_ in places)
    of = (f"{db.range_case('out_seq', [(k, lo, hi) for k, lo, hi, _ in places])}"
          f"::{'UTINYINT' if small else 'INTEGER'}"
          if any(hi >= lo for _, lo, hi, _ in places) else "NULL::INTEGER")
    out_base = {k: lo for k, lo, _, _ in places}
    op_base = {k: base for k, _, _, base in places}
    rows = f"(SELECT {of} AS pair, * FROM blame_rows)"
    counts: dict[int, dict[str, int]] = {k: {} for k, *_ in places}
    for k, verdict, n in con.execute(
            f"SELECT pair, verdict, count(*) FROM {rows} WHERE verdict IS NOT NULL "
            f"GROUP BY pair, verdict ORDER BY pair, {VERDICT_ORDER}").fetchall():
        counts[k][verdict] = int(n)
    links: dict[int, dict[str, int]] = {k: {} for k, *_ in places}
    for k, how, n in con.execute("SELECT pair, how, count(*) FROM blame_edges WHERE side = 'npu' "
                                 "GROUP BY ALL ORDER BY pair, how").fetchall():
        links[k][how] = int(n)
    # (fetchall: DuckDB 2 refuses new work on a connection with an unfinished result)
    factor, limit, noise = next(iter(con.execute(
        "SELECT floor_factor, amp_limit, noise_source FROM blame_params").fetchall()), (0, 0, None))

    # each pair's rows as its own compare numbers them, blame's ENUMs as the texts they are and
    # op_seq a BIGINT: the columns (names, order, types) that the rows' dicts would give the
    # run's table (msq.blame.ranks._rows_table); the texts the batch stores as codes made for
    # the rows read alone (msq.blame.BATCH_TEXTS)
    def base(column: str, bases: dict[int, int]) -> str:
        return (f"{column} - CASE pair {' '.join(f'WHEN {k} THEN {b}' for k, b in bases.items())}"
                " END")

    select = ", ".join(
        f"{base('out_seq', out_base)} AS out_seq" if name == "out_seq" else
        f"({base('op_seq', op_base)})::BIGINT AS op_seq" if name == "op_seq" else
        f"{name}::VARCHAR AS {name}" if name in _ENUM_FIELDS else
        f"{BATCH_TEXTS[name]} AS {name}" if name in BATCH_TEXTS else name for name in ROW_FIELDS)

    def by_pair(sql: str) -> dict[int, PackedRows]:
        """The rows of ``sql`` (ordered by pair) as each pair's table."""
        import pyarrow as pa  # lazy: a batch's worker has it (its history rows)

        table = pa.table(db.SelectStream(  # the text run as it is (no relation binding it first)
            con, f"SELECT pair, {select} FROM ({sql}) ORDER BY pair, _nth"))
        pairs = table.column(0).to_pylist()
        rows = table.drop_columns(["pair"])
        found, start = {}, 0
        for k in sorted(k for k, *_ in places):  # (the rows' order)
            end = start
            while end < len(pairs) and pairs[end] == k:
                end += 1
            found[k] = PackedRows.of_table(rows.slice(start, end - start))
            start = end
        if start != len(pairs):
            raise AssertionError(f"blame rows of no pair of the batch {sorted(set(pairs))}")
        return found

    sources = by_pair(f"SELECT *, row_number() OVER (PARTITION BY pair ORDER BY {WORST_FIRST}) "
                      f"AS _nth FROM {rows} WHERE verdict = 'local' QUALIFY _nth <= {MAX_SOURCES}")
    collectives = by_pair(f"SELECT *, out_seq AS _nth FROM {rows} WHERE collective")
    noise_bands: dict[int, list[tuple[str, float]]] = {k: [] for k, *_ in places}
    if bands:
        for k, name, band in con.execute(f"SELECT pair, npu_name, band FROM {rows} "
                                         "WHERE band > 0 ORDER BY pair, out_seq").fetchall():
            noise_bands[k].append((str(name), float(band)))
    return {k: BlameSummary(
        counts=counts[k], sources=sources[k], collectives=collectives[k],
        inputs=int(sum(links[k].values())),
        linked=int(sum(v for how, v in links[k].items() if how != "external")),
        links=links[k], noise_source=noise, floor_factor=float(factor),
        amp_limit=float(limit), bands=noise_bands[k]) for k, *_ in places}


def summarize_recorded_many(con: duckdb.DuckDBPyConnection, catalog: str,
                            compare_ids: Sequence[int]) -> dict[int, tuple[BlameSummary, str]]:
    """Recorded compares' summaries and run ids, from the history attached as ``catalog`` (what
    ``--resume`` brings to the run's blame for the pairs it skips, and ``msq show`` prints), in
    one query a figure grouped by compare; the compares without blame rows are left out.
    ``catalog`` empty: the tables and views the connection finds first."""
    ids = ", ".join(str(int(i)) for i in compare_ids)
    if not ids:
        return {}
    # no catalog: the connection's own (a reader's temp blame_rows first: msq.history.query)
    prefix = f"{catalog}." if catalog else ""
    rows, edges = f"{prefix}blame_rows", f"{prefix}blame_edges"
    where = f"FROM {rows} WHERE compare_id IN ({ids})"
    heads = {int(c): (run_id, factor, limit, noise) for c, run_id, factor, limit, noise in
             con.execute(f"SELECT compare_id, any_value(run_id), any_value(floor_factor), "
                         f"any_value(amp_limit), any_value(noise_source) {where} "
                         "GROUP BY compare_id").fetchall()}
    counts: dict[int, dict[str, int]] = {c: {} for c in heads}
    for c, verdict, n in con.execute(f"SELECT compare_id, verdict, count(*) {where} AND verdict "
                                     f"IS NOT NULL GROUP BY compare_id, verdict ORDER BY compare_id, "
                                     f"{VERDICT_ORDER}").fetchall():
        counts[int(c)][verdict] = int(n)
    links: dict[int, dict[str, int]] = {c: {} for c in heads}
    for c, how, n in con.execute(f"SELECT compare_id, how, count(*) FROM {edges} WHERE compare_id "
                                 f"IN ({ids}) AND side = 'npu' GROUP BY ALL "
                                 "ORDER BY compare_id, how").fetchall():
        links.setdefault(int(c), {})[how] = int(n)
    cols = ", ".join(ROW_FIELDS)

    def by_compare(sql: str) -> dict[int, list[dict[str, Any]]]:
        found: dict[int, list[dict[str, Any]]] = {c: [] for c in heads}
        for row in _dicts(con, sql):
            found[int(row.pop("compare_id"))].append(row)
        return found

    sources = by_compare(f"SELECT compare_id, {cols} {where} AND verdict = 'local' QUALIFY "
                         f"row_number() OVER (PARTITION BY compare_id ORDER BY {WORST_FIRST}) "
                         f"<= {MAX_SOURCES} ORDER BY compare_id, {WORST_FIRST}")
    collectives = by_compare(f"SELECT compare_id, {cols} {where} AND collective "
                             "ORDER BY compare_id, out_seq")
    found = {}
    for c, (run_id, factor, limit, noise) in heads.items():
        linked = links.get(c, {})
        found[c] = (BlameSummary(
            counts=counts[c], sources=sources[c], collectives=collectives[c],
            inputs=int(sum(linked.values())),
            linked=int(sum(v for k, v in linked.items() if k != "external")),
            links=linked, noise_source=noise, floor_factor=float(factor or 0.0),
            amp_limit=float(limit or 0.0)), str(run_id))
    return found


def fmt_err(value: float | None) -> str:
    """An error figure for people: 3 significant digits, 0, inf or "-"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf"
    return f"{value:.3g}"


def sheet_row(out_seq: int) -> int:
    """The workbook row that holds output row ``out_seq`` (row 1 is the header)."""
    return int(out_seq) + 2


def source_line(src: dict[str, Any], rank: int | None = None) -> str:
    """One local source in words: where, and why (input error -> output error, amplification)."""
    where = f"rank {rank}: " if rank is not None else ""
    head = f"{where}{src['npu_name']} (sheet row {sheet_row(src['out_seq'])}): "
    floor = f"floor {fmt_err(src['floor'])} ({src['floor_source']})"
    if src.get("input_err") is None:
        # an input with no producer in the dump (external): nothing upstream to compare with,
        # so no "input error - -> ... (x-)" figures, but what it is and its own error
        return f"{head}{src.get('role') or 'input'} with error {fmt_err(src['output_err'])}, {floor}"
    return (f"{head}input error {fmt_err(src['input_err'])} -> output error "
            f"{fmt_err(src['output_err'])} (x{fmt_err(src.get('amplification'))}), {floor}")


def linked_line(summary: BlameSummary) -> str:
    """How many inputs blame could link to the op that produced them."""
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(summary.links.items()) if k != "external")
    return (f"{summary.linked} of {summary.inputs} tensor inputs linked to their producer"
            f"{f' ({kinds})' if kinds else ''}")


#: Local sources the advisor file names.
ADVISOR_SOURCES = 5


def counts_line(summary: BlameSummary) -> str:
    """``1 local source, 248 inherited, 408 clean``."""
    local = summary.counts.get("local", 0)
    return (f"{local} local source{'' if local == 1 else 's'}, "
            f"{summary.counts.get('inherited', 0)} inherited, {summary.counts.get('clean', 0)} clean")


def advisor_text(summary: BlameSummary) -> str:
    """The advisor file's blame section: the top local sources, each with why."""
    head = "Where the error enters (blame, local sources worst first; see docs/blame.md):\n"
    if not summary.sources:
        return head + ("  no local source: every difference is within its floor or explained by "
                       "its inputs\n")
    lines = [f"  {i}. {source_line(src, summary.rank)}; {src['reason']}"
             for i, src in enumerate(summary.sources[:ADVISOR_SOURCES], start=1)]
    more = len(summary.sources) - ADVISOR_SOURCES
    if more > 0:
        lines.append(f"  ... and {more} more (the blame sheet and the history's blame view "
                     "list them all)")
    return head + "\n".join(lines) + "\n"
