"""Recording a directory compare: the history attached once for the run, pairs committed a few at a time.

The driver of a directory compare (msq/run_writer.py) records every pair here, whichever engine
computed it; no worker opens the file, so there is no per-pair locking. A pair's rows are
appended (:meth:`RunRecorder.append`) to the transaction of the pairs not yet committed, its
``compares`` and ``blame_runs`` rows held and inserted with the other pairs' at the commit;
:meth:`RunRecorder.commit` commits them together (the driver does so every few
pairs, when it waits for the next pair, and when the run ends or stops): a stopped run keeps
exactly the pairs it committed, and :meth:`RunRecorder.recorded` finds them for ``--resume``.
Another process that wants the file waits until the run ends (``MSQ_DB_TIMEOUT``).

A pair's rows come from the same SQL as a single-card compare's (``sql/history/record/``), run
where the pair was computed (msq/pair_tables.py); here they are appended as Arrow tables. The
names of ``result_rows`` become the keys of the history's ``names`` dictionary here, in Arrow
(:class:`_Names`, the dictionary held for the run), so the append is a plain insert: the same
keys as the single-card recorder's SQL (``recorder._NEW_NAMES``, ``_KEYED_ROWS``) gives, without
its joins on the whole dictionary each pair.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import duckdb

from msq import db, interrupts
from msq.errors import HistoryError
from msq.history import schema
from msq.history.recorder import (
    ALIAS,
    BENCH_SAME,
    BENCH_TWINS,
    BLAME_CLASS_COLUMNS,
    BLAME_RUN_COLUMNS,
    RESULT_CLASS_COLUMNS,
    RESULT_TERMS,
    ROW_GROUP_ROWS,
    _mapping_text,
)
from msq.history.store import first_lines, lock_timeout, open_error, with_lock_retry

if TYPE_CHECKING:
    import pyarrow as pa

    from msq.config import Options

#: The WAL size at which the run's history is checkpointed (a few 24,000-row pairs' rows)
CHECKPOINT_EVERY = "128MB"


class RunRecorder:
    """The history file, attached to the driver's connection ``con`` for the whole run."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: Path) -> None:
        self.con, self.path = con, path
        self._keys: _Keys | None = None  # the history's dictionaries, loaded at the first append
        self._saved: tuple[Any, ...] | None = None  # their state when the transaction began
        # the names, terms, lists of texts and classes new in the open transaction,
        # inserted at its commit: one INSERT each for its pairs, not one a pair (~3.5 M
        # instructions each to register and plan)
        self._pending: dict[str, list[pa.Table]] = {}
        # the compares and blame_runs rows of the open transaction's pairs (one row each a
        # pair), inserted at its commit: one INSERT ... VALUES a table for its pairs, not one a
        # pair (~5 M instructions each to plan and bind a compares row's 36 values)
        self._rows: dict[str, list[tuple[tuple[str, ...], list[Any]]]] = {}
        # the compare_id the next pair appended takes (None: not read yet in this transaction)
        self._next_id: int | None = None
        if not path.parent.is_dir():
            raise HistoryError(f"{path}: its folder does not exist; create it or choose "
                               "another --db")

        def attach() -> None:
            con.execute(f"ATTACH {db.quote_str(path)} AS {ALIAS} (ROW_GROUP_SIZE {ROW_GROUP_ROWS})")

        with_lock_retry(attach, path, lock_timeout())
        # DuckDB checkpoints once the WAL passes 16 MB: after every pair here (~20 MB of rows),
        # rewriting the history's last, half-filled row group each time. Every few pairs instead
        # (close() checkpoints the rest): ~15 % less CPU a pair and a ~15 % smaller file, with the
        # same rows (bench/README, target 5); a killed run's WAL is replayed at the next open.
        con.execute(f"SET checkpoint_threshold = '{CHECKPOINT_EVERY}'")
        home = db.scalar(con, "SELECT current_database()")
        try:
            con.execute("BEGIN TRANSACTION")
            con.execute(f"USE {ALIAS}")
            schema.ensure_schema(con, ALIAS, path)
            schema.load_views(con)
            con.execute(f'USE "{home}"')
            con.execute("COMMIT")
        except BaseException as err:
            for statement in ("ROLLBACK", f'USE "{home}"', f"DETACH {ALIAS}"):
                try:
                    con.execute(statement)
                except duckdb.Error:
                    pass
            if isinstance(err, duckdb.Error):
                raise open_error(path, err) from None
            raise

    def begin(self) -> None:
        """Open the transaction the next pairs are appended to."""
        self.con.execute("BEGIN TRANSACTION")
        self._saved = self._state()
        self._pending, self._rows, self._next_id = {}, {}, None

    def _state(self) -> tuple[Any, ...] | None:
        """The dictionaries held, as the file has them (None: not loaded yet)."""
        return None if self._keys is None else self._keys.state()

    def _load(self) -> _Keys:
        """The history's dictionaries, loaded at the first append of the run (nothing of the
        open transaction is in them yet)."""
        if self._keys is None:
            self._keys = _Keys(_Names(self.con), _Terms(self.con), _Texts(self.con),
                               _Classes(self.con, "blame_classes", BLAME_CLASS_COLUMNS),
                               _Classes(self.con, "result_classes", RESULT_CLASS_COLUMNS),
                               _Reasons(self.con))
            self._saved = self._state()
        return self._keys

    def append(self, rows: dict[str, pa.Table], row: dict[str, Any]) -> int:
        """One pair's rows (by history table: result_rows, and blame_rows and blame_edges when
        the pair has blame) and its compares row, appended to the open transaction (see
        :meth:`begin`); returns its compare_id. After an error the transaction must be rolled
        back (:meth:`rollback`): DuckDB refuses any other statement in it."""
        con = self.con
        try:
            # the next after the largest committed, then after the transaction's pairs (their
            # compares rows go in at its commit): read once a transaction, not once a pair
            if self._next_id is None:
                self._next_id = int(db.scalar(con, "SELECT coalesce(max(compare_id), 0) + 1 "
                                                   f"FROM {ALIAS}.compares"))
            compare_id = self._next_id
            keyed = None
            if "result_rows" in rows:  # first: blame's names take the keys its rows got
                keyed = self._insert_result_rows(rows["result_rows"], compare_id)
            for table, arrow in rows.items():
                if table in ("result_rows", "blame_runs"):
                    continue
                if table == "blame_rows":  # a view: its rows go into blame_runs and blame_data
                    self._insert_blame_rows(arrow, compare_id, rows.get("result_rows"), keyed,
                                            rows.get("blame_runs"))
                    continue
                self._insert_arrow(table, arrow, compare_id)
        except (duckdb.Error, KeyError, ValueError, TypeError) as err:
            # DuckDB's, or pyarrow's on rows not of the history's shape
            raise self._error(err) from err
        self._hold_row("compares", {"compare_id": compare_id, **row})
        self._next_id = compare_id + 1
        return compare_id

    def _hold_row(self, table: str, row: dict[str, Any]) -> None:
        """One row of ``table`` (compares, blame_runs: a pair's one row), inserted at the
        transaction's commit with the other pairs' (:meth:`_insert_rows`)."""
        self._rows.setdefault(table, []).append((tuple(row), list(row.values())))

    def _insert_rows(self, table: str) -> None:
        """The rows of ``table`` held by :meth:`_hold_row`, in the order held: one INSERT ...
        VALUES for each run of rows with the same columns (a pair's rows all have the same),
        their values bound as parameters as one row's were."""
        for columns, run in itertools.groupby(self._rows.pop(table, []), key=lambda r: r[0]):
            values = [values for _, values in run]
            one = f"({', '.join('?' for _ in columns)})"
            self.con.execute(f"INSERT INTO {ALIAS}.{table} ({', '.join(columns)}) "
                             f"VALUES {', '.join(one for _ in values)}",
                             [value for row in values for value in row])

    def _insert_arrow(self, table: str, arrow: pa.Table, compare_id: int | None) -> None:
        """``arrow``'s rows into the history's ``table`` by column name (with ``compare_id``
        first unless None)."""
        con = self.con
        con.register("_pair_rows", arrow)
        try:
            if compare_id is None:
                con.execute(f"INSERT INTO {ALIAS}.{table} BY NAME SELECT * FROM _pair_rows")
            else:
                con.execute(f"INSERT INTO {ALIAS}.{table} BY NAME "
                            "SELECT ?::BIGINT AS compare_id, * FROM _pair_rows", [compare_id])
        finally:
            con.unregister("_pair_rows")

    def _insert_blame_rows(self, rows: pa.Table, compare_id: int, result: pa.Table | None,
                           keyed: pa.Table | None, runs: pa.Table | None = None) -> None:
        """One pair's ``blame_rows``: what its rows share into ``blame_runs`` (once), the rest
        with their names' keys into ``blame_data`` (as ``recorder.insert_blame_table``).
        ``runs``: what they share, one row, when the rows come without it (a pool worker's,
        ``msq.pair_tables._blame_rows``); else it is taken from their first row."""
        if rows.num_rows == 0:
            return
        shared = list(BLAME_RUN_COLUMNS)
        if runs is None:
            runs, rows = rows.select(shared), rows.drop_columns(shared)
        # one row: its values as parameters (registering a one-row Arrow table and planning its
        # INSERT cost ~3.5 M instructions, the VALUES ~1.7 M; bench/README, "Session 20: hist")
        run = runs.select(shared).slice(0, 1).to_pylist()[0]
        self._hold_row("blame_runs", {"compare_id": compare_id, **{c: run[c] for c in shared}})
        keys = self._load()
        data, new = keys.names.key_blame(rows, result, keyed)
        if new is not None:
            self._pending.setdefault("names", []).append(new)
        data, new = keys.classes.key(data)
        if new is not None:
            self._pending.setdefault("blame_classes", []).append(new)
        data, new = keys.reasons.key(data)
        if new is not None:
            self._pending.setdefault("reasons", []).append(new)
        self._insert_arrow("blame_data", data, compare_id)

    def _insert_result_rows(self, rows: pa.Table, compare_id: int) -> pa.Table:
        """One pair's ``result_rows``: its new names into ``names`` (and terms, lists of texts),
        its rows with their keys into ``result_data``; returns the rows with their names' keys
        (not names; their terms and texts as they came)."""
        keys = self._load()
        rows, same = _bench_same(rows)
        keyed, new = keys.names.key(rows, same)
        if new is not None:
            self._pending.setdefault("names", []).append(new)
        data, new = keys.terms.key(keyed, RESULT_TERMS, same)
        if new is not None:
            self._pending.setdefault("terms", []).append(new)
        data, new = keys.results.key(data)
        if new is not None:
            self._pending.setdefault("result_classes", []).append(new)
        if "texts" in data.column_names:  # not in md5 mode
            data, new = keys.texts.key(data)
            if new is not None:
                self._pending.setdefault("texts", []).append(new)
        self._insert_arrow("result_data", data, compare_id)
        return keyed

    def commit(self) -> None:
        """Commit the open transaction: its pairs are recorded. A Ctrl-C meanwhile is held (it
        cannot cut a commit that goes through, nor report it as interrupted); the caller raises
        it once the pairs are written (``interrupts.unsettle``)."""
        import pyarrow as pa

        interrupts.settle()
        try:
            # the transaction's new names, terms, lists of texts, classes and reasons, in the
            # order they were keyed
            for table in ("names", "terms", "texts", "result_classes", "blame_classes",
                          "reasons"):
                parts = self._pending.pop(table, [])
                if parts:
                    self._insert_arrow(table, pa.concat_tables(parts), None)
            # the pairs' one-row tables, in the order of their compare_id
            for table in ("blame_runs", "compares"):
                self._insert_rows(table)
            self.con.execute("COMMIT")
        except duckdb.Error as err:
            raise self._error(err) from err

    def rollback(self) -> None:
        """Drop the open transaction (whole, also after a Ctrl-C)."""
        # no transaction open: nothing to drop
        with interrupts.deferred():
            self._pending, self._rows, self._next_id = {}, {}, None
            with contextlib.suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            # the names, terms, lists of texts and classes the dropped transaction added
            # are gone from the file: from ours too
            if self._saved is None:
                self._keys = None
            elif self._keys is not None:
                self._keys.restore(self._saved)

    def _error(self, err: Exception) -> HistoryError:
        return HistoryError(f"{self.path}: could not record the compare ({first_lines(err)}); "
                            "the pair's outputs were removed and the history holds the pairs "
                            "before it")

    def recorded(self, output_dir: Path, opts: Options) -> set[str]:
        """NPU dump.json paths recorded by an earlier run of this compare: same output
        directory, label and flags, every file it wrote still there."""
        return set(self.recorded_ids(output_dir, opts))

    def recorded_ids(self, output_dir: Path, opts: Options) -> dict[str, int]:
        """:meth:`recorded`, each NPU path with its newest such compare_id."""
        where = {"output_dir": str(Path(output_dir).absolute()), "label": opts.label,
                 "compat": opts.compat, "fuzzy": opts.fuzzy_match, "stack": opts.stack_mode,
                 "auto_analyze": opts.auto_analyze,
                 "data_mapping": _mapping_text(opts.data_mapping),
                 "api_mapping": _mapping_text(opts.api_mapping),
                 "cell_mapping": _mapping_text(opts.cell_mapping),
                 "layer_mapping": _mapping_text(opts.layer_mapping)}
        test = " AND ".join(f"{k} IS NOT DISTINCT FROM ?" for k in where)
        rows = self.con.execute(f"SELECT npu_path, files, compare_id FROM {ALIAS}.compares "
                                f"WHERE {test} ORDER BY compare_id",
                                list(where.values())).fetchall()
        return {npu: int(cid) for npu, files, cid in rows
                if all(os.path.exists(f) for f in files or [])}

    def close(self) -> None:
        with interrupts.deferred():  # whole, also after a Ctrl-C: the file is left checkpointed
            try:
                self.con.execute(f"CHECKPOINT {ALIAS}")
            finally:
                self.con.execute(f"DETACH {ALIAS}")


@dataclass
class _Keys:
    """The history's dictionaries a run's rows are keyed by (names, terms, lists of texts, blame
    and result classes), loaded together and restored together after a dropped transaction."""

    names: _Names
    terms: _Terms
    texts: _Texts
    classes: _Classes  # blame's
    results: _Classes  # the result rows'
    reasons: _Reasons  # blame's

    def _parts(self) -> tuple[Any, ...]:
        return self.names, self.terms, self.texts, self.classes, self.results, self.reasons

    def state(self) -> tuple[Any, ...]:
        return tuple(part.state() for part in self._parts())

    def restore(self, state: tuple[Any, ...]) -> None:
        for part, held in zip(self._parts(), state, strict=True):
            part.restore(held)


class _Dictionary:
    """A dictionary table of the history (``TABLE``: ``KEY`` -> ``VALUE``, key 0 the NULL text;
    :class:`_Names`, :class:`_Reasons`), held by the driver for the run: no other process writes
    the file meanwhile (the driver holds its lock). Texts are looked up, and the new ones keyed,
    with the single-card recorder's rule: the next keys after the largest, in the order of each
    text's first row."""

    TABLE, KEY, VALUE = "names", "name_id", "name"

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        import pyarrow as pa

        table, key, value = f"{ALIAS}.{self.TABLE}", self.KEY, self.VALUE
        known = con.sql(f"SELECT {value}, {key} FROM {table} WHERE {value} IS NOT NULL "
                        f"ORDER BY {key}").to_arrow_table()
        self.hold(known.column(value).combine_chunks().cast(pa.string()),
                  known.column(key).combine_chunks().cast(pa.int32()),
                  int(db.scalar(con, f"SELECT coalesce(max({key}), 0) FROM {table}")))

    @classmethod
    def of(cls, names: pa.Array, ids: pa.Array, top: int, *,
           index: bool = True) -> Self:
        """The dictionary of ``names`` (strings, none NULL) keyed ``ids``, ``top`` the largest
        key, without a file (tests); ``index``: False for Arrow's lookup alone."""
        made = cls.__new__(cls)
        made.hold(names, ids, top, index=index)
        return made

    def hold(self, names: pa.Array, ids: pa.Array, top: int, *, index: bool = True) -> None:
        # the names and their keys as parts, one a transaction's pair that added names: joined
        # only for Arrow's lookup (with the hash table they are not read again; joining them
        # after every pair copied every name held, ~3 M instructions a pair)
        self.names: tuple[pa.Array, ...] = (names,)
        self.ids: tuple[pa.Array, ...] = (ids,)
        self.top = top
        # the same names and keys as a hash table held for the run (msq/history/_names.c): a
        # pair's names probed in it, not in the hash set Arrow's index_in builds of every known
        # name again at each call (~45,000 names after a ranks x steps run's first pair;
        # bench/README, "Session 25: hist"); None without the C extension (the lookup is then
        # Arrow's, with the same keys)
        self.index = _name_index(names, ids) if index else None

    def state(self) -> tuple[Any, ...]:
        return self.names, self.ids, self.top

    def restore(self, state: tuple[Any, ...]) -> None:
        self.names, self.ids, self.top = state
        if self.index is not None:
            held = sum(len(part) for part in self.names)
            # names are only added after those held: the dropped transaction's are the newest
            if len(self.index) > held:
                self.index.truncate(held)
            elif len(self.index) < held:
                self.index = _name_index(*self._known())

    def _known(self) -> tuple[pa.Array, pa.Array]:
        """The names held and their keys, each as one array (for Arrow's lookup)."""
        import pyarrow as pa

        if len(self.names) > 1:
            self.names = (pa.concat_arrays(list(self.names)),)
            self.ids = (pa.concat_arrays(list(self.ids)),)
        return self.names[0], self.ids[0]

    def _lookup(self, names: pa.ChunkedArray, first: pa.Array) -> tuple[pa.Array, pa.Table | None]:
        """The keys of ``names`` (NULL for a NULL name), the names new to the history keyed
        after the largest in the order of ``first`` (each name's row order), and the table
        (name_id, name) of those new ones (None: none), which this dictionary now holds."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        index = self.index
        if index is not None:
            ids = _index_lookup(index, names)
            found = ids
        else:
            known, known_ids = self._known()
            found = _whole(pc.index_in(names, value_set=known))
            ids = pc.take(known_ids, found)
        fresh = pc.and_(pc.is_null(found), _whole(pc.is_valid(names)))
        if not pc.any(fresh).as_py():
            return ids, None
        candidates, firsts = names.filter(fresh), first.filter(fresh)
        # in the order of their first row, each once (the first pair's are most of them):
        # unique keeps each value's first occurrence, in order
        added = pc.unique(candidates.take(pc.sort_indices(firsts)))
        top = self.top
        # (numpy's range: pyarrow converts a Python range int by int, ~100 instructions a key)
        keys = pa.array(np.arange(top + 1, top + 1 + len(added), dtype=np.int32))
        self.names, self.ids = (*self.names, added), (*self.ids, keys)
        self.top += len(added)
        if index is not None:  # held, and the new names' keys probed there
            _index_add(index, added, keys)
            ids = pc.replace_with_mask(ids, fresh, _index_lookup(index, candidates))
            return ids, pa.table({self.KEY: keys, self.VALUE: added})
        # the new names' keys from their place among the added ones alone: not a second
        # lookup in the whole dictionary (~40,000 names hashed again, ~4 ms a pair), and of
        # the new names alone
        place = _whole(pc.index_in(candidates, value_set=added))
        ids = pc.replace_with_mask(ids, fresh, pc.add(place, _int32(top + 1)))
        return ids, pa.table({self.KEY: keys, self.VALUE: added})


class _Names(_Dictionary):
    """The history's ``names`` dictionary (name -> name_id), held for the run
    (:class:`_Dictionary`). A pair's names are looked up, and its new ones keyed, with the
    single-card recorder's rule (``recorder._NEW_NAMES``): the next keys after the largest, in
    the order of each name's first row (op, NPU, bench name within a row; a blame row's op, NPU
    name and via, ``recorder._NEW_BLAME_NAMES``)."""

    COLUMNS = ("op_name", "npu_name", "bench_name")
    KEYS = ("op_id", "npu_id", "bench_id")
    BLAME_COLUMNS = ("op_name", "npu_name", "via")
    BLAME_KEYS = ("op_id", "npu_id", "via_id")

    def key(self, rows: pa.Table, same: pa.Array | None = None,
            ) -> tuple[pa.Table, pa.Table | None]:
        """``rows`` (``result_rows``' shape without compare_id) with the three name columns
        replaced by their keys (0: NULL), and the table (name_id, name) of the names new to the
        history (None: none), which this dictionary now holds. ``same``: the rows whose bench
        name was sent as their NPU name (:func:`_bench_same`; None: every bench name sent)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        count = rows.num_rows
        npu, bench = (rows.column(c).cast(pa.string()) for c in self.COLUMNS[1:])
        # a bench name equal to its row's NPU name (most rows) takes that name's key, not
        # looked up a second time (~5 M instructions a 24,500-row pair): its first row is the
        # NPU name's, so the new names are keyed in the same order. A pool worker says which
        # (``same``); else they are compared here
        other = _whole(pc.invert(pc.fill_null(pc.equal(bench, npu), False))) if same is None \
            else pc.invert(same)
        # every name of the pair as one array's chunks: the op names, the NPU names, then the
        # other bench names
        names = pa.chunked_array([*rows.column(self.COLUMNS[0]).cast(pa.string()).chunks,
                                  *npu.chunks, *bench.filter(other).chunks], pa.string())
        first = _first_rows(rows, len(self.COLUMNS))
        first = pa.concat_arrays([first.slice(0, 2 * count), first.slice(2 * count).filter(other)])
        ids, new = self._lookup(names, first)
        ids = pc.fill_null(ids, 0)
        npu_ids = ids.slice(count, count)
        keys = (ids.slice(0, count), npu_ids,
                pc.replace_with_mask(npu_ids, other, ids.slice(2 * count)))
        keyed = rows.drop_columns(list(self.COLUMNS))
        for key, values in zip(self.KEYS, keys, strict=True):
            keyed = keyed.append_column(key, values)
        return keyed, new

    def key_blame(self, rows: pa.Table, result: pa.Table | None,
                  keyed: pa.Table | None) -> tuple[pa.Table, pa.Table | None]:
        """``blame_rows``' rows (without what ``blame_runs`` holds) with ``op_name``,
        ``npu_name`` and ``via`` replaced by their keys (``op_id``, ``npu_id``, ``via_id``; 0:
        NULL), and the table of the names new to the history (None: none; with msq's rows there
        are none: a blame row is an output row, its via another output row's name).

        ``result`` and ``keyed``: the pair's ``result_rows`` as given to :meth:`key` and as it
        returned them. A blame row's op and NPU names are those of the output row with its
        ``out_seq``: without the hash table they take that row's keys where they are equal, and
        only the others are looked up (a second lookup of ~49,000 names in the whole dictionary
        cost ~33 M instructions a 24,500-row pair, building its hash set again). Rows sent
        without those names (recorder.BLAME_NAMES) take their output row's keys, and only their
        vias are looked up."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not any(c in rows.column_names for c in self.BLAME_COLUMNS[:2]):
            rows = self._output_keys(rows, keyed)
        # the name columns sent, by their slot in a row (op, NPU name, via)
        slots = [i for i, c in enumerate(self.BLAME_COLUMNS) if c in rows.column_names]
        columns = tuple(self.BLAME_COLUMNS[i] for i in slots)
        keys = tuple(self.BLAME_KEYS[i] for i in slots)
        count = rows.num_rows
        names = _texts(rows, columns)
        ids = pa.nulls(len(slots) * count, pa.int32())
        if self.index is not None:  # probed in the hash table: ~2x cheaper than the places
            ids = _index_lookup(self.index, names)
        elif result is not None and keyed is not None and slots[:2] == [0, 1]:
            at = _places(rows.column("out_seq"), result.column("out_seq"))
            at = pa.array(at, pa.int64(), mask=at < 0)
            theirs = _texts(pa.table({c: result.column(c).take(at) for c in columns[:2]}),
                            columns[:2])
            known = pa.concat_arrays([_whole(keyed.column(k).cast(pa.int32()).take(at))
                                      for k in keys[:2]])
            same = _whole(pc.fill_null(pc.equal(names.slice(0, 2 * count), theirs), False))
            ids = pa.concat_arrays([pc.if_else(same, known, ids.slice(0, 2 * count)),
                                    ids.slice(2 * count)])
        rest = pc.and_(pc.is_null(ids), _whole(pc.is_valid(names)))
        new = None
        if pc.any(rest).as_py():
            # each name's place in row order: out_seq, then op, NPU name, via
            every = _first_rows(rows, len(self.BLAME_COLUMNS))
            first = pa.concat_arrays([every.slice(i * count, count) for i in slots])
            found, new = self._lookup(names.filter(rest), first.filter(rest))
            ids = pc.replace_with_mask(ids, rest, found)
        ids = pc.fill_null(ids, 0)
        data = rows.drop_columns(list(columns))
        for i, key in enumerate(keys):
            data = data.append_column(key, ids.slice(i * count, count))
        return data, new

    def _output_keys(self, rows: pa.Table, keyed: pa.Table | None) -> pa.Table:
        """``rows`` (blame rows sent without their names: recorder.BLAME_NAMES) with the keys
        (``op_id``, ``npu_id``) their output rows' names got (``keyed``: the pair's result rows
        as :meth:`key` returned them), found by out_seq (~2 M instructions a 24,500-row pair,
        not a probe of ~49,000 names)."""
        import pyarrow as pa

        if keyed is None:
            raise ValueError("blame rows without their names and without result rows")
        at = _places(rows.column("out_seq"), keyed.column("out_seq"))
        if len(at) and at.min() < 0:
            raise ValueError("blame rows without their names and without their output rows")
        taken = pa.array(at, pa.int64())
        for key in self.BLAME_KEYS[:2]:
            rows = rows.append_column(key, _whole(keyed.column(key)).take(taken))
        return rows


class _Reasons(_Dictionary):
    """The history's ``reasons`` (reason -> reason_id; schema version 13, ``blame_data.reason_id``),
    held by the driver for the run as :class:`_Names` holds the names: a pair's blame reasons
    probed in a hash table of those held (~3,700 distinct a 24,500-row pair, most of them the
    other ranks' and steps' too), the new ones keyed after the largest in the order of their first
    row, as the single-card recorder's SQL keys them (``recorder._NEW_REASONS``)."""

    TABLE, KEY, VALUE = "reasons", "reason_id", "reason"

    def key(self, rows: pa.Table) -> tuple[pa.Table, pa.Table | None]:
        """``rows`` (blame rows) with ``reason`` replaced by its key (``reason_id``, INTEGER; 0:
        NULL) in its place, and the table (reason_id, reason) of the reasons new to the history
        (None: none), which this dictionary now holds."""
        import pyarrow as pa
        import pyarrow.compute as pc

        texts = _texts(rows, ("reason",))
        ids, new = self._lookup(texts, _first_rows(rows, 1))
        at = rows.schema.get_field_index("reason")
        return rows.set_column(at, "reason_id", _whole(pc.fill_null(ids, _int32(0)))
                               .cast(pa.int32())), new


def _bench_same(rows: pa.Table) -> tuple[pa.Table, pa.Array | None]:
    """``rows`` without the column ``BENCH_SAME`` and it, as one boolean array without NULLs
    (recorder.BENCH_TWINS: where true, the row's bench name and shape were sent NULL and are
    its NPU name and shape); None where the rows came without it (every bench column sent as it
    is)."""
    import pyarrow.compute as pc

    if BENCH_SAME not in rows.column_names:
        return rows, None
    same = _whole(pc.fill_null(rows.column(BENCH_SAME), False))
    return rows.drop_columns([BENCH_SAME]), same


def _name_index(names: pa.Array, ids: pa.Array) -> Any:
    """``names`` (strings, none NULL) with their keys ``ids`` as a ``msq.history._names``
    NameIndex; None without the C extension."""
    from msq import cext

    module: Any = cext.load("msq.history._names")
    if module is None:
        return None
    index = module.NameIndex()
    _index_add(index, names, ids)
    return index


def _string_buffers(chunk: pa.Array) -> tuple[Any, ...]:
    """A string array's buffers and extent as NameIndex takes them (no validity without a
    NULL: not tested row by row)."""
    validity, offsets, data = chunk.buffers()
    return validity if chunk.null_count else None, offsets, data, chunk.offset, len(chunk), False


def _index_add(index: Any, names: pa.Array, ids: pa.Array) -> None:
    """``names`` (strings) held by ``index`` with their keys ``ids`` (int32, one a name)."""
    import numpy as np
    import pyarrow as pa

    if len(names):
        keys = np.ascontiguousarray(ids.cast(pa.int32()).to_numpy(zero_copy_only=False))
        index.add(*_string_buffers(names.cast(pa.string())), keys)


def _index_lookup(index: Any, names: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The keys ``index`` holds for ``names`` (int32; NULL for a NULL or a name not held)."""
    import pyarrow as pa

    chunks = names.chunks if isinstance(names, pa.ChunkedArray) else [names]
    parts = []
    for chunk in chunks:
        if len(chunk):
            keys, valid = index.lookup(*_string_buffers(chunk.cast(pa.string())))
            parts.append(pa.Array.from_buffers(
                pa.int32(), len(chunk),
                [None if valid is None else pa.py_buffer(valid), pa.py_buffer(keys)]))
    if len(parts) == 1:
        return parts[0]
    return pa.concat_arrays(parts) if parts else pa.array([], pa.int32())


def _place_index(values: pa.Array) -> Any:
    """``values`` (strings, none NULL, each once) keyed by their places 0, 1, 2, ... as a
    NameIndex (None without the C extension): a pair's terms and class texts probed there cost
    ~40 % fewer instructions than Arrow's index_in (~33 -> ~20 M a root-8x8-5000 pair; a text
    equal to the one before it, most of a class column's rows, is a comparison, not a probe)."""
    import numpy as np
    import pyarrow as pa

    return _name_index(values, pa.array(np.arange(len(values), dtype=np.int32)))


def _synced(index: Any, values: pa.Array) -> Any:
    """``index`` holding ``values`` again after they changed (grown, or restored to fewer:
    values are only added after those held)."""
    import numpy as np
    import pyarrow as pa

    if index is None or len(index) == len(values):
        return index
    if len(index) > len(values):
        index.truncate(len(values))
    else:
        top = len(index)
        _index_add(index, values.slice(top), pa.array(np.arange(top, len(values), dtype=np.int32)))
    return index


def _find_places(index: Any, values: pa.Array, texts: pa.ChunkedArray) -> pa.Array:
    """Each of ``texts``' place among ``values`` (int32; NULL: not there, or NULL), in
    ``index`` (:func:`_place_index`) or, without one, by Arrow's lookup."""
    import pyarrow.compute as pc

    if index is None:
        return _whole(pc.index_in(texts, value_set=values))
    return _index_lookup(index, texts)


class _Terms:
    """The history's ``terms`` (term -> term_id; schema version 8), held by the driver for the
    run as :class:`_Names` holds the names. A pair's term columns (``recorder.RESULT_TERMS``; blame's
    in versions 8 to 10, :class:`_Classes` since 11) are replaced by their keys; the terms new to the history are keyed after
    the largest in their sorted order, as the single-card recorder's SQL keys them
    (``recorder._NEW_TERMS``). DuckDB then stores integers, not texts it would append, scan
    back, analyse and compress (~200 M instructions a 24,500-row pair)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        import pyarrow as pa

        known = con.sql(f"SELECT term, term_id FROM {ALIAS}.terms ORDER BY term_id"
                        ).to_arrow_table()
        self.terms = known.column("term").combine_chunks().cast(pa.string())
        self.index = _place_index(self.terms)  # their places, probed as the names are
        # a term's key is its place in the list (the views read them so): 1, 2, 3, ... (else
        # the pair is not recorded: "could not record the compare (...)")
        if known.column("term_id").to_pylist() != list(range(1, known.num_rows + 1)):
            raise ValueError(f"the history's {known.num_rows} terms are not keyed 1, 2, 3, "
                             "...: the file was changed by hand")

    def state(self) -> Any:
        return self.terms

    def restore(self, state: Any) -> None:
        self.terms = state
        self.index = _synced(self.index, self.terms)

    def key(self, rows: pa.Table, columns: tuple[str, ...], same: pa.Array | None = None,
            ) -> tuple[pa.Table, pa.Table | None]:
        """``rows`` with each of ``columns`` replaced by its keys (``<column>_id``, INTEGER;
        NULL for NULL, in the column's place), and the table (term_id, term) of the terms new to
        the history (None: none), which this dictionary now holds. ``same``: the rows whose
        bench columns were sent as their NPU twins (:func:`_bench_same`): a bench column's key
        there is its twin's, where the twin is one of ``columns``.

        The columns are looked up together, one array of them all: the terms' hash set is built
        once, not once a column, and one pass adds 1 to the places (~20 M instructions less a
        24,500-row pair than a lookup a column; bench/README, "Session 19: hist")."""
        import pyarrow as pa
        import pyarrow.compute as pc

        count = rows.num_rows
        texts = _texts(rows, columns)
        found = _find_places(self.index, self.terms, texts)
        fresh = pc.and_(pc.is_null(found), _whole(pc.is_valid(texts)))
        new = None
        if pc.any(fresh).as_py():
            seen = pc.unique(texts.filter(fresh))
            added = seen.take(pc.array_sort_indices(seen))
            top = len(self.terms)
            self.terms = pa.concat_arrays([self.terms, added])
            self.index = _synced(self.index, self.terms)
            new = pa.table({"term_id": pa.array(range(top + 1, top + 1 + len(added)),
                                                pa.int32()), "term": added})
            # the new terms' places from the added ones alone (the others were found)
            place = _whole(pc.index_in(texts.filter(fresh), value_set=added))
            found = pc.replace_with_mask(found, fresh, pc.add(place, _int32(top)))
        keys = pc.add(found, _int32(1))
        twins = dict(BENCH_TWINS) if same is not None else {}
        for i, column in enumerate(columns):
            at = rows.schema.get_field_index(column)
            ids = keys.slice(i * count, count)
            if twins.get(column) in columns:
                twin = columns.index(twins[column])
                ids = pc.if_else(same, keys.slice(twin * count, count), ids)
            rows = rows.set_column(at, f"{column}_id", ids)
        return rows, new


class _Texts:
    """The history's lists of texts (texts_id -> texts, ``result_data.texts_id``; schema version
    10), held by the driver for the run as :class:`_Names` holds the names. A pair's ``texts``
    (a list of 21 a row, NULL on a row of numbers alone: ~3,300 rows but ~15 lists a 24,500-row
    pair) is replaced by its keys; the lists new to the history are keyed after the largest in
    the order of their first row, as the single-card recorder's SQL keys them
    (``recorder._NEW_TEXTS``). DuckDB then stores one mostly-NULL integer, not ~70,000 list
    members it would append, scan back, analyse and compress (~37 M instructions a pair)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        known = con.execute(f"SELECT texts_id, texts FROM {ALIAS}.texts ORDER BY texts_id"
                            ).fetchall()
        # keyed 1, 2, 3, ... (else the pair is not recorded: "could not record the compare")
        if [key for key, _ in known] != list(range(1, len(known) + 1)):
            raise ValueError(f"the history's {len(known)} lists of texts are not keyed 1, 2, 3, "
                             "...: the file was changed by hand")
        self.keys: dict[tuple[str | None, ...], int] = {tuple(texts): key
                                                         for key, texts in known}

    def state(self) -> Any:
        return self.keys  # not changed in place: key() makes a new dict when it adds

    def restore(self, state: Any) -> None:
        self.keys = state

    def key(self, rows: pa.Table) -> tuple[pa.Table, pa.Table | None]:
        """``rows`` with ``texts`` replaced by its keys (``texts_id``, INTEGER; NULL for NULL, in
        its place), and the table (texts_id, texts) of the lists new to the history (None:
        none), which this dictionary now holds.

        A chunk's rows are grouped by their lists' bytes (:func:`_group_lists`), and each
        distinct list is made a Python tuple once, not each row."""
        import numpy as np
        import pyarrow as pa

        column = rows.column("texts")
        if column.type != pa.list_(pa.string()):
            column = column.cast(pa.list_(pa.string()))
        seqs = _whole(rows.column("out_seq")).cast(pa.int64()).to_numpy(zero_copy_only=False)
        group = np.full(rows.num_rows, -1, np.int64)  # each row's list (-1: NULL)
        lists: dict[tuple[str | None, ...], int] = {}  # the pair's lists, in the order met
        firsts: list[int] = []  # the out_seq of each one's first row
        at = 0
        for chunk in column.chunks:
            if chunk.null_count < len(chunk):
                _group_lists(chunk, seqs[at:at + len(chunk)], group[at:at + len(chunk)],
                             lists, firsts)
            at += len(chunk)
        keys = np.zeros(len(lists), np.int64)
        added: list[tuple[str | None, ...]] = []
        known = self.keys
        for place, texts in enumerate(lists):
            keys[place] = known.get(texts, 0)
        # the new ones after the largest, in the order of their first row
        fresh = [place for place in np.argsort(np.array(firsts, np.int64), kind="stable")
                 if not keys[place]]
        new = None
        if fresh:
            order = list(lists)
            top = len(known)
            known = dict(known)
            for i, place in enumerate(fresh):
                keys[place] = known[order[place]] = top + 1 + i
                added.append(order[place])
            self.keys = known
            new = pa.table({"texts_id": pa.array(range(top + 1, top + 1 + len(added)),
                                                 pa.int32()),
                            "texts": pa.array([list(t) for t in added], pa.list_(pa.string()))})
        ids = (pa.array(keys[np.maximum(group, 0)].astype(np.int32), mask=group < 0) if lists
               else pa.nulls(rows.num_rows, pa.int32()))
        at = rows.schema.get_field_index("texts")
        return rows.set_column(at, "texts_id", ids), new


class _Classes:
    """The history's classes of one table (``result_classes``, schema version 12: class_id ->
    kind, npu_dtype, bench_dtype, result, verdict, failing, err_message, mark, mark_rules,
    severity, ``result_data.class_id``; ``blame_classes``, version 11: class_id -> io, role,
    direction, is_module, collective, err_kind, floor_source, verdict, link,
    ``blame_data.class_id``), held by the driver for the run as :class:`_Names` holds the names.
    A pair's columns of the class (``recorder.RESULT_CLASS_COLUMNS``,
    ``recorder.BLAME_CLASS_COLUMNS``) are replaced by one key; the combinations new to the
    history are keyed after the largest in the order of their first row, as the single-card
    recorder's SQL keys them (``recorder._NEW_CLASSES``). DuckDB then stores one integer a row,
    not ten or nine it would append, scan back, analyse and compress (~58 M instructions a
    24,500-row pair each with their terms' lookups; ~21 and ~45 combinations a pair)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, table: str,
                 columns: tuple[str, ...]) -> None:
        import pyarrow as pa

        self.table, self.columns = table, columns
        known = con.execute(f"SELECT class_id, {', '.join(columns)} "
                            f"FROM {ALIAS}.{table} ORDER BY class_id").fetchall()
        # keyed 1, 2, 3, ... (else the pair is not recorded: "could not record the compare")
        if [row[0] for row in known] != list(range(1, len(known) + 1)):
            raise ValueError(f"the history's {len(known)} {table} are not keyed 1, 2, 3, "
                             "...: the file was changed by hand")
        self.keys: dict[tuple[Any, ...], int] = {tuple(row[1:]): row[0] for row in known}
        # the texts of the known classes, each once (what a pair's texts are looked up in)
        texts = {row[1 + i] for row in known for i, column in enumerate(columns)
                 if column in self.text_columns} - {None}
        self.texts = pa.array(sorted(texts), pa.string())
        # a pair's rows grouped by their combination in one pass in C (msq/history/_names.c),
        # or without the C extension their texts probed in Arrow and their codes combined in
        # numpy (the same keys)
        self.group = _group_rows()
        self.index = None if self.group is not None else _place_index(self.texts)

    @property
    def text_columns(self) -> tuple[str, ...]:
        """The class's columns that are texts."""
        return tuple(c for c in self.columns if c not in _BOOLEANS + _INTEGERS)

    def state(self) -> Any:
        return self.keys, self.texts  # not changed in place: key() makes new ones when it adds

    def restore(self, state: Any) -> None:
        self.keys, self.texts = state
        self.index = _synced(self.index, self.texts)

    def key(self, rows: pa.Table) -> tuple[pa.Table, pa.Table | None]:
        """``rows`` with the class's columns replaced by their class's key (``class_id``,
        INTEGER), and the table (class_id and the columns) of the classes new to the history
        (None: none), which this dictionary now holds.

        The text columns are looked up together in the texts of the classes held (one array of
        them all, as :class:`_Terms` looks up terms; a column that comes dictionary-encoded, its
        dictionaries alone), the booleans taken as 0, 1, 2, an integer as 1 + its distance from
        the pair's least (0: NULL); a row's
        codes are made one number in numpy, the numbers dictionary-encoded, and each distinct
        combination made a Python tuple once. With the C extension (:attr:`group`), the rows
        are grouped by their columns' values in one pass over their buffers instead
        (:meth:`_key_grouped`)."""
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        if self.group is not None:
            grouped = self._key_grouped(rows)
            if grouped is not None:
                return grouped
        count = rows.num_rows
        # what is looked up: each text column's chunks, or its chunks' dictionaries
        parts = [chunk.dictionary if pa.types.is_dictionary(chunk.type) else chunk
                 for column in self.text_columns for chunk in rows.column(column).chunks]
        texts = pa.chunked_array([part.cast(pa.string()) for part in parts], pa.string())
        found = _find_places(self.index, self.texts, texts)
        fresh = pc.and_(pc.is_null(found), _whole(pc.is_valid(texts)))
        if pc.any(fresh).as_py():
            added = pc.unique(texts.filter(fresh))
            top = len(self.texts)
            self.texts = pa.concat_arrays([self.texts, added])
            self.index = _synced(self.index, self.texts)
            place = _whole(pc.index_in(texts.filter(fresh), value_set=added))
            found = pc.replace_with_mask(found, fresh, pc.add(place, _int32(top)))
        # each text's place among self.texts + 1 (0: NULL), part after part
        places = pc.fill_null(pc.add(found, _int32(1)), _int32(0)).to_numpy()
        by_column: dict[str, Any] = {}  # each text column's places, a row's each
        at = 0
        for column in self.text_columns:
            pieces = []
            for chunk in rows.column(column).chunks:
                if pa.types.is_dictionary(chunk.type):  # its rows' places from its dictionary's
                    here = np.concatenate([[0], places[at:at + len(chunk.dictionary)]])
                    index = pc.fill_null(chunk.indices.cast(pa.int32()), -1).to_numpy()
                    pieces.append(here[index + 1])  # (-1, NULL: 0)
                    at += len(chunk.dictionary)
                else:
                    pieces.append(places[at:at + len(chunk)])
                    at += len(chunk)
            by_column[column] = (np.concatenate(pieces) if len(pieces) != 1 else pieces[0]
                                 ) if pieces else np.zeros(0, np.int32)
        size = len(self.texts) + 1
        values: list[Any] = [None, *self.texts.to_pylist()]
        codes = np.zeros(count, np.int64)  # the row's combination so far, as one number
        width = 1  # codes are below this
        columns: list[Any] = []  # each column's code of each row
        least: dict[str, int] = {}  # each integer column's least value in the pair
        for column in self.columns:
            if column in _BOOLEANS:  # 0: NULL, 1: False, 2: True
                flags = _whole(rows.column(column)).cast(pa.int8())
                code = pc.fill_null(pc.add(flags, _int8(1)), _int8(0)).to_numpy()
                base = 3
            elif column in _INTEGERS:  # 0: NULL, 1 + (value - the least)
                numbers = _whole(rows.column(column)).cast(pa.int64())
                low, high = pc.min_max(numbers).values()
                if low.as_py() is None:
                    code, base = np.zeros(count, np.int64), 1
                else:
                    least[column] = low.as_py()
                    code = pc.fill_null(numbers, low.as_py() - 1).to_numpy() - (low.as_py() - 1)
                    base = high.as_py() - low.as_py() + 2
            else:
                code, base = by_column[column], size
            if width * base >= 2 ** 62:  # made dense again: as many codes as distinct ones
                dense = pc.dictionary_encode(pa.array(codes))
                codes = dense.indices.to_numpy().astype(np.int64)
                width = len(dense.dictionary)
            codes = codes * base + code
            width *= base
            columns.append(code)
        # numbered in the order each combination first comes: a row is the first of its own
        # when its number is above every number before it
        encoded = pc.dictionary_encode(pa.array(codes))
        which = encoded.indices.to_numpy()
        highest = np.maximum.accumulate(which)
        heads = np.flatnonzero(np.concatenate([[True], highest[1:] > highest[:-1]]))
        classes = [tuple((None, False, True)[code[head]] if column in _BOOLEANS
                         else (None if not code[head] else int(code[head]) - 1 + least[column])
                         if column in _INTEGERS else values[code[head]]
                         for column, code in zip(self.columns, columns, strict=True))
                   for head in heads.tolist()]
        return self._keyed(rows, classes, which, heads)

    def _key_grouped(self, rows: pa.Table) -> tuple[pa.Table, pa.Table | None] | None:
        """:meth:`key` by :attr:`group`: the rows numbered by their combination of the
        columns' values in the order of its first row, in one pass over the columns' Arrow
        buffers (a row equal to the row before takes its number without a hash; both tables'
        keying ~42 -> ~30 M instructions a root-8x8-5000 pair; bench/README, "Session 26:
        drv"),
        and each combination made a Python tuple from its first row. None: a column of a type
        the pass does not read (the caller keys the rows as without it)."""
        import numpy as np
        import pyarrow as pa

        batches = [batch for batch in rows.select(list(self.columns)).to_batches()
                   if batch.num_rows]
        specs = []
        for batch in batches:
            spec = tuple(_group_spec(batch.column(i), column)
                         for i, column in enumerate(self.columns))
            if any(one is None for one in spec):
                return None
            specs.append((batch.num_rows, spec))
        which_bytes, heads_bytes = self.group(specs)
        which = np.frombuffer(which_bytes, np.int32)
        heads = np.frombuffer(heads_bytes, np.int64)
        # each combination's values: its first row's (~20-45 rows a pair), taken batch by
        # batch (a take of the table joined its chunks first: a copy of every row)
        classes: list[tuple[Any, ...]] = []
        start = 0
        for batch in batches:
            end = start + batch.num_rows
            here = heads[(heads >= start) & (heads < end)] - start
            if len(here):
                first = batch.take(pa.array(here)).to_pydict()
                classes += zip(*(first[column] for column in self.columns), strict=True)
            start = end
        return self._keyed(rows, classes, which, heads)

    def _keyed(self, rows: pa.Table, classes: list[tuple[Any, ...]], which: Any,
               heads: Any) -> tuple[pa.Table, pa.Table | None]:
        """:meth:`key`'s result from the pair's combinations: ``classes`` (each a tuple of
        the columns' values, in the order of its first row in ``rows``), ``which`` (each row's
        place among them) and ``heads`` (each one's first row)."""
        import numpy as np
        import pyarrow as pa

        count = rows.num_rows
        kinds = len(classes)
        seqs = _whole(rows.column("out_seq")).cast(pa.int64()).to_numpy(zero_copy_only=False)
        if count < 2 or bool((seqs[1:] > seqs[:-1]).all()):  # in row order: its first row's
            firsts = seqs[heads]
        else:
            firsts = np.full(kinds, np.iinfo(np.int64).max)
            np.minimum.at(firsts, which, seqs)
        known = self.keys
        keys = np.array([known.get(c, 0) for c in classes], np.int64)
        new = None
        # the new ones after the largest, in the order of their first row
        fresh_places = [k for k in np.argsort(firsts, kind="stable").tolist() if not keys[k]]
        if fresh_places:
            top = len(known)
            known = dict(known)
            for i, k in enumerate(fresh_places):
                keys[k] = known[classes[k]] = top + 1 + i
            self.keys = known
            made = [classes[k] for k in fresh_places]
            new = pa.table({"class_id": pa.array(range(top + 1, top + 1 + len(made)),
                                                 pa.int32()),
                            **{column: pa.array([c[i] for c in made],
                                                pa.bool_() if column in _BOOLEANS
                                                else pa.int16() if column in _INTEGERS
                                                else pa.string())
                               for i, column in enumerate(self.columns)}})
        # (np.take: an index array's fancy indexing cost ~20 instructions a row)
        ids = pa.array(keys.astype(np.int32).take(which))
        return rows.drop_columns(list(self.columns)).append_column("class_id", ids), new


#: The class columns that are booleans, and integers (result_classes.severity, a SMALLINT); the
#: others are texts
_BOOLEANS = ("is_module", "collective", "failing")
_INTEGERS = ("severity",)


def _group_rows() -> Any:
    """``msq.history._names.group_rows`` (:meth:`_Classes._key_grouped`); None without the C
    extension."""
    from msq import cext

    module: Any = cext.load("msq.history._names")
    return None if module is None else module.group_rows


def _group_spec(array: pa.Array, column: str) -> tuple[Any, ...] | None:
    """One batch's ``column`` as ``group_rows`` reads it (see msq/history/_names.c): a text
    column's buffers (a dictionary's, and its indices'), a boolean's or an integer's; None for a
    type it does not read."""
    import pyarrow as pa

    kind = array.type
    if column in _BOOLEANS or column in _INTEGERS:
        # (a boolean of another type, an integer column of NULLs' type: keyed by the numpy
        # path, which casts them)
        width = (0 if kind == pa.bool_() else None) if column in _BOOLEANS else _int_width(kind)
        if width is None:
            return None
        validity, values = array.buffers()
        return validity if array.null_count else None, values, array.offset, width
    if pa.types.is_dictionary(kind):
        width = _int_width(kind.index_type)
        if width is None:
            return None
        indices = array.indices
        validity, values = indices.buffers()
        return (*_text_buffers(array.dictionary),
                validity if indices.null_count else None, values, indices.offset, width)
    return _text_buffers(array)


def _int_width(kind: pa.DataType) -> int | None:
    """The bytes a value of integer type ``kind`` takes (1, 2, 4: ``group_rows`` tells an
    integer column's values apart by their bytes, and reads a dictionary's indices unsigned
    below 4 bytes); None for another type."""
    import pyarrow as pa

    if pa.types.is_integer(kind) and kind.bit_width <= 32:
        return kind.bit_width // 8
    return None


def _text_buffers(array: pa.Array) -> tuple[Any, ...]:
    """A text array's buffers and extent as NameIndex.lookup takes them (other types cast to
    strings first)."""
    import pyarrow as pa

    if not (pa.types.is_string(array.type) or pa.types.is_large_string(array.type)):
        array = array.cast(pa.string())
    validity, offsets, data = array.buffers()
    return (validity if array.null_count else None, offsets, data, array.offset, len(array),
            pa.types.is_large_string(array.type))


def _group_lists(chunk: pa.ListArray, seqs: Any, group: Any,
                 lists: dict[tuple[str | None, ...], int], firsts: list[int]) -> None:
    """The lists of ``chunk`` (one chunk of a pair's ``texts``; ``seqs`` its rows' out_seq):
    each valid row's place among ``lists`` written into ``group`` (the lists new to ``lists``
    added, in any order, each with the out_seq of its first row in ``firsts``).

    A row's list is told from the others by two byte strings made over Arrow's buffers, not
    copied: its members' lengths and validity, and its members' bytes laid end to end; equal
    lists have equal strings (but where a NULL member has bytes behind it: then two groups of
    one list, made one by its tuple here). Each is dictionary-encoded (one hash a row, not one
    a member: ~9 M instructions a 24,500-row pair instead of ~19 M), and only each distinct
    list is made a Python tuple."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(chunk)
    valid = _validity(chunk)
    rows = np.flatnonzero(valid)
    bounds = _offsets(chunk)  # each row's first member (and the end of the last)
    members = chunk.values
    ends = _offsets(members)  # each member's first byte
    first, last = int(bounds[0]), int(bounds[-1])
    # a member's length and validity as one number: 2 x length + 1 when valid
    shape = np.diff(ends[first:last + 1]) * 2 + _validity(members.slice(first, last - first))
    keep = pa.array(valid)
    blobs = (pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer((bounds - first) * 8),
                                                        pa.py_buffer(shape)]),
             pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(ends[bounds]),
                                                        members.buffers()[2]]))
    shapes, texts = (pc.dictionary_encode(blob.filter(keep)) for blob in blobs)
    pairs = (shapes.indices.to_numpy().astype(np.int64) * len(texts.dictionary)
             + texts.indices.to_numpy())
    kinds, heads, which = np.unique(pairs, return_index=True, return_inverse=True)
    firsts_here = np.full(len(kinds), np.iinfo(np.int64).max)
    np.minimum.at(firsts_here, which, seqs[rows])
    places = np.empty(len(kinds), np.int64)
    for i, head in enumerate(heads):
        made = tuple(chunk[int(rows[head])].as_py())
        place = lists.get(made)
        if place is None:
            place = lists[made] = len(firsts)
            firsts.append(int(firsts_here[i]))
        else:
            firsts[place] = min(firsts[place], int(firsts_here[i]))
        places[i] = place
    group[rows] = places[which.reshape(-1)]


def _validity(array: pa.Array) -> Any:
    """``array``'s validity as numpy booleans (all True without a NULL: db.valid_mask)."""
    import numpy as np

    mask = db.valid_mask(array)
    return np.ones(len(array), bool) if mask is None else mask


def _offsets(array: pa.Array) -> Any:
    """The offsets of a list or string ``array`` (its ``len + 1`` of them, as int64 numpy),
    from its buffer."""
    import numpy as np

    offsets = np.frombuffer(array.buffers()[1], np.int32)
    return offsets[array.offset:array.offset + len(array) + 1].astype(np.int64)


def _texts(rows: pa.Table, columns: tuple[str, ...]) -> pa.ChunkedArray:
    """``columns`` of ``rows`` one after the other, as the chunks of one string array: not
    copied (``combine_chunks`` and ``concat_arrays`` copied every text twice, ~20 M
    instructions a 24,500-row pair; bench/README, "Session 20: hist"). Arrow's lookups and
    comparisons take it chunk by chunk, with one hash set a call."""
    import pyarrow as pa

    return pa.chunked_array([chunk for column in columns
                             for chunk in rows.column(column).cast(pa.string()).chunks],
                            pa.string())


def _whole(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``values`` as one array (a lookup's keys or a test's booleans of a chunked array: a few
    bytes a value to copy)."""
    import pyarrow as pa

    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _first_rows(rows: pa.Table, slots: int) -> pa.Array:
    """Each name's place in row order when a row's ``slots`` names are laid out column after
    column (as :meth:`_Names.key` concatenates them): ``out_seq * slots + slot``."""
    import numpy as np
    import pyarrow as pa

    seq = rows.column("out_seq").combine_chunks().cast(pa.int64()).to_numpy() * slots
    return pa.array(np.concatenate([seq + slot for slot in range(slots)]))


def _places(seqs: pa.ChunkedArray, of: pa.ChunkedArray) -> Any:
    """Where each of ``seqs`` is in ``of`` (a numpy int64 array; -1: not there, or NULL), ``of``
    being unique. By an inverse permutation when ``of`` is 0 .. n-1 in any order (a pair's
    out_seqs: ~2 M instructions a 24,500-row pair), else by a lookup (~6 M)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    want = pc.fill_null(seqs.combine_chunks().cast(pa.int64()), -1).to_numpy()
    have = of.combine_chunks().cast(pa.int64())
    n = len(have)
    if n and not have.null_count:
        pos = have.to_numpy()
        if pos.min() >= 0 and pos.max() < n:
            inverse = np.full(n, -1, np.int64)
            inverse[pos] = np.arange(n)
            if (inverse >= 0).all():  # each of 0 .. n-1 once
                inside = (want >= 0) & (want < n)
                return np.where(inside, inverse[np.where(inside, want, 0)], -1)
    found = pc.index_in(seqs.combine_chunks().cast(pa.int64()), value_set=have)
    return pc.fill_null(found, -1).to_numpy().astype(np.int64)


def _int8(value: int) -> pa.Scalar:
    """``value`` as an Arrow int8 scalar (as :func:`_int32`)."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.array([value], np.int8))[0]


def _int32(value: int) -> pa.Scalar:
    """``value`` as an Arrow int32 scalar, made from numpy: pyarrow's conversion of a Python
    value tries to import dateutil each time where it is not installed (~0.4 M instructions, a
    dozen stat calls), 24 times a pair in the driver."""
    import numpy as np
    import pyarrow as pa

    return pa.array(np.array([value], np.int32))[0]
