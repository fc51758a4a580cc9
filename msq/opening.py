"""A single-card compare's database, opened in a thread while ``msq.pipeline`` is imported.

``msq compare`` spends its first ~0.15 s importing duckdb's Python layer, click and msq itself,
on one core. Opening the compare's in-memory database (DuckDB's instance, ~25 ms CPU), running
its schema (``sql/compare/schema``, ~20 ms, mostly DuckDB's parser) and creating the views every
compare of its kind reads (~10 ms, blame's ~10 more) need only the C module ``_duckdb``, and release the GIL: in a
thread they run on the second core meanwhile (:func:`start_opening`, from
:func:`msq.runner.run_single_card`). :func:`msq.pipeline.prepare` takes the connection
(:meth:`EarlyDatabase.take`) instead of opening its own, and creates the views that depend on the
dumps (the mode's, MindSpore's); when the thread failed, or was not started, it opens one as
before, and any error is reported from there, with its file.

This module imports nothing heavy, and the thread nothing but ``_duckdb`` (the main thread's
``import duckdb`` waits for that import, then goes on with duckdb's Python layer); the SQL
texts are read before it starts (msq.sqlfiles).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import threading
import types
from typing import TYPE_CHECKING, Any

from msq import interrupts, procs
from msq.sqlfiles import COMPARE_VIEWS, sql_files, view_files, view_statement

if TYPE_CHECKING:
    from msq.config import Options

#: Blame's view folder (msq.blame.compute.run_blame loads it, less the views made here).
BLAME_VIEWS = ("compare/blame",)

#: The databases kept until the process ends (:meth:`EarlyDatabase.keep`).
_KEPT: list[Any] = []


def drop_kept() -> None:
    """Free the kept databases now (the process does not end with ``os._exit`` after all: the
    interpreter's teardown must not meet an open DuckDB database)."""
    _KEPT.clear()


def unused_views(opts: Options) -> set[str]:
    """The shipped views this compare does not read: not created (parsing a view costs
    ~0.3-3 ms, whatever the compare's size). ``row_pairs_mapped`` pairs -dm's and -lm's rows,
    ``hl_values`` feeds --compat's colour rules, and ``unmatched_reasons`` the default mode's
    verdicts, which create it once the rows are paired (msq.pipeline.create_unmatched_reasons).
    A user's views (--sql-dir) may read any view: then every one is created."""
    if opts.sql_dir:
        return set()
    unused = {"unmatched_reasons"}
    if opts.data_mapping is None and not opts.layer_mapping:
        unused.add("row_pairs_mapped")
    if not opts.is_compat:
        unused.add("hl_values")
    return unused


def rules_variant(opts: Options) -> str:
    """The colour rules' folder: msprobe's under --compat (sql/compare/rules/compat/), msq's own
    by default (sql/compare/rules/default/)."""
    return "compat" if opts.is_compat else "default"


class EarlyDatabase:
    """The compare's database being opened in a daemon thread (see the module docstring).

    ``threads``: DuckDB's thread count to open it with (``SET threads``, as
    :func:`msq.db.connect` does); :meth:`take` changes it when the compare asks for another.
    """

    def __init__(self, threads: int, schema: list[str],
                 views: dict[str, str] | None = None, keep: bool = False) -> None:
        self._threads = threads
        self._keep = keep
        self._given: Any = None  # the connection take() gave, while keep may still hold it
        self._schema = schema
        self._views = views or {}
        #: the views the thread created (by name), once :meth:`take` gave the connection
        self.views: set[str] = set()
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
            # as msq.db.connect: from now on a pool forks its workers from a forkserver
            procs.track(con)
            self._con = con
            # as msq.db.connect
            con.execute("SET enable_progress_bar = false")
            con.execute(f"SET threads = {int(self._threads)}")
            for text in self._schema:
                con.execute(text)
            for statement in self._views.values():
                con.execute(statement)
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
        self._con = None  # the caller's now
        self.views = set(self._views)
        if self._keep:
            self._given = con
        return con

    def keep(self) -> None:
        """The compare completed: keep its database until the process ends (when opened with
        ``keep``: msq.runner.KEEP_UNTIL_EXIT), unless DuckDB may have spilled to its temporary
        directory (freeing the database deletes what it wrote there; an ``os._exit`` would
        leave it behind): kept only while that directory does not exist."""
        con, self._given = self._given, None
        if con is None:
            return
        try:
            (temp,), = con.execute("SELECT current_setting('temp_directory')").fetchall()
        except Exception:  # noqa: BLE001 (not kept: freed as without keep)
            return
        if temp and not os.path.lexists(temp):
            _KEPT.append(con)

    def close(self) -> None:
        """Close the connection unless it was taken (the compare failed before it opened its
        database); waits for the thread, whole (the cleanup of an interrupted compare)."""
        self._given = None  # not kept (the compare failed): freed once the compare let it go
        with interrupts.deferred():
            interrupts.wait_for(self._done)
        if not self._taken:
            self._taken = True
            self._close(self._con)

    def _close(self, con: Any) -> None:
        self._con = None  # no longer counted as open (msq.procs holds it weakly)
        if con is not None:
            with contextlib.suppress(Exception):  # a connection the compare never used
                con.close()


def import_duckdb() -> None:
    """Import duckdb's Python layer without importing ``importlib.metadata`` for its version.

    ``duckdb/_version.py`` sets ``duckdb.__version__`` with ``importlib.metadata.version``,
    whose import (email, zipfile, csv, socket, ...) is ~15 ms of a small compare's main thread,
    for the one header ``Version:`` of duckdb's installed METADATA. While ``import duckdb``
    runs, ``importlib.metadata`` is a stand-in whose ``version("duckdb")`` reads that header
    where importlib.metadata would find it (:func:`installed_version`); anything else it is
    asked goes to the real module. The stand-in is gone once the import is over. Where the
    version cannot be read that way (an egg, a zip on the path, two candidates, ...), this is
    the plain ``import duckdb``; once duckdb or importlib.metadata is imported, nothing."""
    if "duckdb" in sys.modules or "importlib.metadata" in sys.modules:
        return
    found = installed_version("duckdb")
    if found is None:
        import duckdb  # the plain import

        return
    stand_in = types.ModuleType("importlib.metadata", "msq's stand-in while duckdb imports")

    def real() -> Any:
        sys.modules.pop("importlib.metadata", None)
        try:
            return importlib.import_module("importlib.metadata")
        finally:
            sys.modules["importlib.metadata"] = stand_in

    def version(name: str) -> str:
        return found if name == "duckdb" else str(real().version(name))

    def other(name: str) -> Any:
        # a module's __getattr__ (PEP 562): every other name from the real module, but the
        # module attributes the import system probes (__path__: "from importlib.metadata import
        # version" looks for submodules only in a package)
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(real(), name)

    vars(stand_in).update(version=version, __getattr__=other)
    sys.modules["importlib.metadata"] = stand_in
    try:
        import duckdb  # noqa: F401
    finally:
        if sys.modules.get("importlib.metadata") is stand_in:
            del sys.modules["importlib.metadata"]


_DIST_SUFFIXES = (".dist-info", ".egg-info", ".egg")


def installed_version(name: str) -> str | None:
    """``importlib.metadata.version(name)`` as Python 3.10-3.13 find it (the first entry of
    ``sys.path`` holding a ``<name>-*.dist-info``, the ``Version`` header of its METADATA),
    for a plain ``.dist-info`` in a folder; None for anything else (an egg, a zip or a file on
    the path, several candidates in one folder, no METADATA, a folded header)."""
    want = re.sub(r"[-_.]+", "_", name).lower()
    for entry in sys.path:
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.exists(folder):  # a zip importlib.metadata would read: not here
                return None
            continue
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        hits = [n for n in names if n.lower().endswith(_DIST_SUFFIXES)
                and re.sub(r"[-_.]+", "_", n.lower().rpartition(".")[0].partition("-")[0])
                == want]
        if not hits:
            continue
        if len(hits) > 1 or not hits[0].lower().endswith(".dist-info"):
            return None
        return _metadata_version(os.path.join(folder, hits[0], "METADATA"))
    return None


def _metadata_version(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as meta:
            lines = meta.read().split("\n")
    except (OSError, UnicodeDecodeError):
        return None
    for i, line in enumerate(lines):
        if not line.strip():  # the end of the headers
            return None
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "version":
            if i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):  # folded: not here
                return None
            return value.strip() or None
    return None


def schema_texts() -> list[str]:
    """The texts of ``sql/compare/schema/*.sql`` in file-name order (what
    :func:`msq.db.run_schema` executes)."""
    return [file.text for file in sql_files("compare/schema")]


def early_views(opts: Options) -> dict[str, str]:
    """The statements creating the views every compare of these options reads, by name: the
    shipped folders' own and their colour rules' (not the mode's nor MindSpore's, which the
    dumps decide; msq.pipeline.prepare creates those), and blame's (its thread, from
    msq.blame.run, would create them in the middle of the compare). Created ``WITH (DEFER_BINDING)``, as
    :func:`msq.db.load_views` creates msq's views; none with a user's views (--sql-dir), which
    load with the others, each bound at once."""
    if opts.sql_dir:
        return {}
    files, _ = view_files(COMPARE_VIEWS, variants=[rules_variant(opts)], skip=unused_views(opts))
    if opts.blame and not opts.is_compat:  # blame runs (msq.blame.run.blame_on): its views too
        files += view_files(BLAME_VIEWS)[0]
    return {file.name: view_statement(file, defer=True) for file in files}


def start_opening(opts: Options, keep: bool = False) -> EarlyDatabase:
    """Start opening a single-card compare's database (see :class:`EarlyDatabase`), with
    ``--workers`` DuckDB threads, else one (a small compare's; :meth:`EarlyDatabase.take` resets
    it for a large one); ``keep``: see :meth:`EarlyDatabase.keep`."""
    return EarlyDatabase(opts.workers or 1, schema_texts(), early_views(opts), keep=keep)
