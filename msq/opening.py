"""A single-card compare's database, opened in a thread while ``msq.pipeline`` is imported.

``msq compare`` spends its first ~0.15 s importing duckdb's Python layer, click and msq itself,
on one core. Opening the compare's in-memory database (DuckDB's instance, ~25 ms CPU) and
running its schema (``sql/compare/schema``, ~20 ms, mostly DuckDB's parser) need only the C
module ``_duckdb``, and both release the GIL: in a thread they run on the second core meanwhile
(:func:`start`, from :func:`msq.runner.run_single_card`). :func:`msq.pipeline.prepare` takes the
connection (:meth:`EarlyDatabase.take`) instead of opening its own; when the thread failed, or
was not started, it opens one as before, and any error is reported from there, with its file.

This module imports nothing heavy, and the thread nothing but ``_duckdb`` (the main thread's
``import duckdb`` waits for that import, then goes on with duckdb's Python layer); the schema's
texts are read before it starts.
"""

from __future__ import annotations

import contextlib
import threading
from importlib import resources
from typing import Any

from msq import interrupts, procs

#: The schema's folder inside the shipped ``sql/`` (msq.db.run_schema's default).
SCHEMA = ("compare", "schema")


class EarlyDatabase:
    """The compare's database being opened in a daemon thread (see the module docstring).

    ``threads``: DuckDB's thread count to open it with (``SET threads``, as
    :func:`msq.db.connect` does); :meth:`take` changes it when the compare asks for another.
    """

    def __init__(self, threads: int, schema: list[str]) -> None:
        self._threads = threads
        self._schema = schema
        self._con: Any = None
        self._error: BaseException | None = None
        self._taken = False
        self._done = threading.Event()  # the thread's last act (waited on by interrupts.wait_for)
        self._thread = threading.Thread(target=self._open, name="msq-open", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        try:
            import _duckdb  # the C module only: duckdb's Python layer is the main thread's

            con = _duckdb.connect(":memory:")
            self._con = con
            # as msq.db.connect
            con.execute("SET enable_progress_bar = false")
            con.execute(f"SET threads = {int(self._threads)}")
            for text in self._schema:
                con.execute(text)
        except BaseException as err:  # noqa: BLE001 (the pipeline opens its own; errors there)
            self._error = err
        finally:
            self._done.set()

    def take(self, threads: int | None) -> Any:
        """The open connection with its schema (the caller owns it from now on), with DuckDB's
        ``threads`` set to ``threads`` (None: DuckDB's default); None when opening failed (the
        caller opens its own, which reports the error)."""
        interrupts.wait_for(self._done)  # Ctrl-C still raising (not Thread.join: see there)
        if self._taken:
            return None
        self._taken = True
        con = self._con
        if con is None or self._error is not None:
            self._close(con)
            return None
        try:
            if threads is None:
                con.execute("RESET threads")
            elif threads != self._threads:
                con.execute(f"SET threads = {int(threads)}")
        except Exception:  # noqa: BLE001 (as above: the caller opens its own)
            self._close(con)
            return None

        procs.track(con)  # as msq.db.connect: its threads make fork unsafe while it lives
        return con

    def close(self) -> None:
        """Close the connection unless it was taken (the compare failed before it opened its
        database); waits for the thread, whole (the cleanup of an interrupted compare)."""
        with interrupts.deferred():
            interrupts.wait_for(self._done)
        if not self._taken:
            self._taken = True
            self._close(self._con)

    @staticmethod
    def _close(con: Any) -> None:
        if con is not None:
            with contextlib.suppress(Exception):  # a connection the compare never used
                con.close()


def schema_texts() -> list[str]:
    """The texts of ``sql/compare/schema/*.sql`` in file-name order (what
    :func:`msq.db.run_schema` executes)."""
    where: Any = resources.files("msq.sql")
    for part in SCHEMA:
        where = where / part
    files = sorted((f for f in where.iterdir() if f.name.endswith(".sql")), key=lambda f: f.name)
    return [f.read_text(encoding="utf-8") for f in files]


def start_opening(workers: int | None) -> EarlyDatabase:
    """Start opening a single-card compare's database (see :class:`EarlyDatabase`), with
    ``workers`` DuckDB threads (``--workers``), else one (a small compare's; :meth:`take` resets
    it for a large one)."""
    return EarlyDatabase(workers or 1, schema_texts())
