"""Recording a directory compare: the history attached once for the run, pairs committed a few at a time.

The driver of a directory compare (msq/run_writer.py) records every pair here, whichever engine
computed it; no worker opens the file, so there is no per-pair locking. A pair's rows and its
``compares`` row are appended (:meth:`RunRecorder.append`) to the transaction of the pairs not
yet committed; :meth:`RunRecorder.commit` commits them together (the driver does so every few
pairs, when it waits for the next pair, and when the run ends or stops): a stopped run keeps
exactly the pairs it committed, and :meth:`RunRecorder.recorded` finds them for ``--resume``.
Another process that wants the file waits until the run ends (``MSQ_DB_TIMEOUT``).

A pair's rows come from the same SQL as a single-card compare's (``sql/history/record/``), run
where the pair was computed (msq/pair_tables.py); here they are appended as Arrow tables.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from msq import db, interrupts
from msq.errors import HistoryError
from msq.history import schema
from msq.history.recorder import (
    ALIAS,
    ROW_GROUP_ROWS,
    _insert_compare,
    _mapping_text,
    insert_result_rows,
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

    def append(self, rows: dict[str, pa.Table], row: dict[str, Any]) -> int:
        """One pair's rows (by history table: result_rows, and blame_rows and blame_edges when
        the pair has blame) and its compares row, appended to the open transaction (see
        :meth:`begin`); returns its compare_id. After an error the transaction must be rolled
        back (:meth:`rollback`): DuckDB refuses any other statement in it."""
        con = self.con
        try:
            compare_id = int(db.scalar(con, "SELECT coalesce(max(compare_id), 0) + 1 "
                                            f"FROM {ALIAS}.compares"))
            for table, arrow in rows.items():
                con.register("_pair_rows", arrow)
                try:
                    if table == "result_rows":  # a view: its rows go into names and result_data
                        insert_result_rows(con, "_pair_rows", compare_id)
                        continue
                    con.execute(f"INSERT INTO {ALIAS}.{table} BY NAME "
                                "SELECT ?::BIGINT AS compare_id, * FROM _pair_rows", [compare_id])
                finally:
                    con.unregister("_pair_rows")
            _insert_compare(con, compare_id, row)
        except duckdb.Error as err:
            raise self._error(err) from err
        return compare_id

    def commit(self) -> None:
        """Commit the open transaction: its pairs are recorded. A Ctrl-C meanwhile is held (it
        cannot cut a commit that goes through, nor report it as interrupted); the caller raises
        it once the pairs are written (``interrupts.unsettle``)."""
        interrupts.settle()
        try:
            self.con.execute("COMMIT")
        except duckdb.Error as err:
            raise self._error(err) from err

    def rollback(self) -> None:
        """Drop the open transaction (whole, also after a Ctrl-C)."""
        # no transaction open: nothing to drop
        with interrupts.deferred(), contextlib.suppress(duckdb.Error):
            self.con.execute("ROLLBACK")

    def _error(self, err: duckdb.Error) -> HistoryError:
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
