"""The compare's database opened in a thread while msq.pipeline is imported (msq/opening.py).

msq.runner begins to open a single-card compare's database (DuckDB's instance, its schema) on
the other core; msq.pipeline.prepare takes it, or opens its own when that failed. The compare
and its outputs are the same either way.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

from msq import db, procs
from msq.config import input_from_api, options_from_kwargs
from msq.opening import EarlyDatabase, early_views, schema_texts, start_opening
from msq.pipeline import compute, run_compare
from tests.dumps import fwd, t, write_pair
from tests.xlsx_read import rows


def _opts(**kwargs: Any) -> Any:
    return options_from_kwargs(False, True, False, {"record": False, **kwargs})


def _threads(con: duckdb.DuckDBPyConnection) -> int:
    return int(db.scalar(con, "SELECT current_setting('threads')"))


def _tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [name for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]


def test_the_early_database_has_the_schema_run_schema_makes() -> None:
    early = start_opening(_opts())
    con = early.take(1)
    own = db.connect(threads=1)
    db.run_schema(own)
    try:
        assert con is not None
        assert _tables(con) == _tables(own)
        macros = ("SELECT function_name FROM duckdb_functions() WHERE NOT internal "
                  "ORDER BY 1")
        assert con.execute(macros).fetchall() == own.execute(macros).fetchall()
        assert _threads(con) == 1
        assert db.scalar(con, "SELECT current_setting('enable_progress_bar')") is False
        assert con in procs._OPEN  # tracked: pools fork from a forkserver while it lives
    finally:
        con.close()
        own.close()
    assert len(schema_texts()) == len(db.sql_files("compare/schema"))


@pytest.mark.parametrize(("workers", "wanted"), [(None, 1), (None, None), (3, 3), (3, 2)])
def test_take_sets_the_thread_count_the_compare_asks_for(workers: int | None,
                                                          wanted: int | None) -> None:
    default = _threads(db.connect())
    con = start_opening(_opts(workers=workers)).take(wanted)
    try:
        assert _threads(con) == (default if wanted is None else wanted)
    finally:
        con.close()


@pytest.mark.parametrize("kwargs", [{}, {"compat": "msprobe-1.1"}, {"data_mapping": {}},
                                    {"blame": False}])
def test_the_early_views_and_the_pipelines_are_the_views_it_created_alone(
        tmp_path: Path, kwargs: dict[str, Any]) -> None:
    """The views created with the database (its colour rules' and blame's among them) and those
    the pipeline and blame add are the views a compare created before, each once: after the
    compare, the same views (with their SQL) and tables."""
    inp = input_from_api(_pair(tmp_path))
    views = "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal ORDER BY 1"
    tables = "SELECT table_name FROM duckdb_tables() ORDER BY 1"
    seen = []
    for early in (None, EarlyDatabase(1, schema_texts(), early_views(_opts(**kwargs)))):
        con, *_ = compute(inp, _opts(**kwargs), tmp_path / "out", "", None, opened=early)
        try:
            seen.append((con.execute(views).fetchall(), con.execute(tables).fetchall()))
        finally:
            con.close()
        if early is not None:
            assert {"marks", "verdicts", "op_keys"} <= early.views  # the colour rules' too
    assert seen[0] == seen[1]


def test_no_early_views_with_a_users_views(tmp_path: Path) -> None:
    assert early_views(_opts(sql_dir=str(tmp_path))) == {}


@pytest.mark.parametrize(("kwargs", "blame"), [({}, True), ({"blame": False}, False),
                                               ({"compat": "msprobe-1.1"}, False)])
def test_blames_views_are_made_early_when_blame_runs(kwargs: dict[str, Any],
                                                    blame: bool) -> None:
    """msq.blame.compute.run_blame then skips them (views_made)."""
    names = set(early_views(_opts(**kwargs)))
    assert ({"blame_keys", "blame_edges", "blame_rows"} <= names) is blame
    assert ("op_keys" in names) is True


def test_a_failed_opening_gives_none_and_closes_nothing_twice() -> None:
    early = EarlyDatabase(1, ["CREATE TABLE broken ("])
    assert early.take(1) is None
    assert early.take(1) is None  # taken once
    early.close()  # nothing left to close


def test_close_closes_a_database_nobody_took() -> None:
    early = start_opening(_opts())
    early.close()
    assert early.take(1) is None
    early.close()


def _dumps() -> tuple[dict[str, Any], dict[str, Any]]:
    data = {f"Functional.relu.{i}.forward": fwd(t(mx=1.0 + i), out=t(mx=2.0 + i))
            for i in range(4)}
    bench = {name: fwd(t(mx=1.0 + i), out=t(mx=2.5 + i * 2)) for i, name in enumerate(data)}
    return data, bench


def _pair(tmp_path: Path) -> dict[str, str]:
    cfg = json.loads(write_pair(tmp_path, *_dumps()).read_text())
    return {"npu_json_path": cfg["npu_path"], "bench_json_path": cfg["bench_path"],
            "stack_json_path": cfg["stack_path"]}


@pytest.mark.parametrize("schema", [None, ["CREATE TABLE broken ("]])
def test_compute_takes_the_early_database_or_opens_its_own(tmp_path: Path,
                                                          schema: list[str] | None) -> None:
    """The early database (or, when its opening failed, one opened as before) gives the compare
    it gave without one."""
    inp = input_from_api(_pair(tmp_path))
    opts = _opts()
    early = EarlyDatabase(1, schema_texts() if schema is None else schema, early_views(opts))
    rows = []
    for opened in (None, early):
        con, mode, _, result = compute(inp, opts, tmp_path / "out", "", None, opened=opened)
        try:
            assert _threads(con) == 1  # a small compare's database: one thread
            rows.append((mode, result.rows, result.red, result.yellow, con.execute(
                "SELECT * FROM result_statistics ORDER BY out_seq").fetchall(),
                result.blame, con.execute("SELECT * FROM blame_rows ORDER BY ALL").fetchall(),
                con.execute("SELECT * FROM blame_edges ORDER BY ALL").fetchall()))
        finally:
            con.close()
    assert rows[0] == rows[1]
    assert rows[0][2] > 0  # some rows differ: the marks are compared too
    assert rows[0][6]  # blame's rows are compared too
    early.close()


def test_run_compare_with_the_early_database_writes_the_same_outputs(tmp_path: Path) -> None:
    inp = input_from_api(_pair(tmp_path))
    plain = run_compare(inp, tmp_path / "plain", _opts())
    opts = _opts()
    early = start_opening(opts)
    taken = run_compare(inp, tmp_path / "early", opts, opened=early)
    early.close()  # taken: a no-op
    assert (taken.rows, taken.red, taken.yellow) == (plain.rows, plain.red, plain.yellow)
    for pattern in ("compare_result_*.xlsx", "advisor_*.txt"):
        (a,), (b,) = (sorted((tmp_path / d).glob(pattern)) for d in ("plain", "early"))
        if pattern.endswith(".txt"):
            assert a.read_bytes() == b.read_bytes()
        else:
            assert rows(a) == rows(b)


def test_the_command_line_compare_opens_its_database_early(tmp_path: Path) -> None:
    """``msq compare`` of one card takes the database its thread began to open (-vv says so);
    the compare is the usual one."""
    cfg = write_pair(tmp_path, *_dumps())
    out = subprocess.run([sys.executable, "-m", "msq", "compare", str(cfg), "-o",
                          str(tmp_path / "out"), "-vv", "--no-history"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "database: opened while msq.pipeline was imported" in out.stderr
    assert len(list((tmp_path / "out").glob("compare_result_*.xlsx"))) == 1


def test_a_kept_database_lives_until_the_process_ends(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """``keep`` (the msq command, which ends with os._exit): the compare's database is not torn
    down as the compare returns; a failed compare, or one whose database may have spilled to its
    temporary directory, is not kept."""
    from msq import opening

    monkeypatch.chdir(tmp_path)  # an in-memory database's temporary directory: ./.tmp
    monkeypatch.setattr(opening, "_KEPT", [])
    inp = input_from_api(_pair(tmp_path))
    early = start_opening(_opts(), keep=True)
    run_compare(inp, tmp_path / "kept", _opts(), opened=early)
    early.keep()
    early.close()
    assert len(opening._KEPT) == 1
    (con,) = opening._KEPT
    assert con.execute("SELECT count(*) FROM result_statistics").fetchall()[0][0] > 0
    opening.drop_kept()
    assert opening._KEPT == []

    (tmp_path / ".tmp").mkdir()  # DuckDB's temporary directory exists: may hold its files
    early = start_opening(_opts(), keep=True)
    run_compare(inp, tmp_path / "spilled", _opts(), opened=early)
    early.keep()
    early.close()
    assert opening._KEPT == []

    early = start_opening(_opts(), keep=True)  # taken, then the compare fails: close() lets go
    assert early.take(1) is not None
    early.close()
    early.keep()
    assert opening._KEPT == []
    plain = start_opening(_opts())  # without keep: nothing is kept
    assert plain.take(1) is not None
    plain.keep()
    plain.close()
    assert opening._KEPT == []


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a new interpreter (imports as a command's are), which must succeed."""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return out


def test_the_command_preloads_duckdb_and_forks_safely(tmp_path: Path) -> None:
    """msq/__main__.py maps DuckDB's library in a thread (preload_duckdb); a fork meanwhile
    waits for it, and the child can still load extension modules."""
    code = ("import os, sys, threading; from msq import __main__ as m\n"
            "m.preload_duckdb()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    import _duckdb; _duckdb.connect().execute('SELECT 1').fetchall(); os._exit(0)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "import duckdb\n"
            "print(os.waitstatus_to_exitcode(status), duckdb.connect().execute('SELECT 42')"
            ".fetchall()[0][0])\n")
    out = _python(code)
    assert out.stdout.split() == ["0", "42"]


def test_duckdb_imports_without_importlib_metadata_and_the_same_version() -> None:
    """msq.opening.import_duckdb: duckdb.__version__ as importlib.metadata gives it, without
    importing importlib.metadata (~15 ms); the stand-in is gone afterwards."""
    code = ("import sys; from msq.opening import import_duckdb\n"
            "import_duckdb()\n"
            "import duckdb\n"
            "print(any(m.split('.')[0] == 'email' or m.startswith('importlib.metadata')\n"
            "          for m in sys.modules), duckdb.__version__)\n"
            "import importlib.metadata as m\n"
            "print(type(m).__name__, m.__name__, m.version('duckdb'), hasattr(m, 'entry_points'))\n")
    out = _python(code)
    first, second = out.stdout.splitlines()
    import importlib.metadata

    assert first == f"False {importlib.metadata.version('duckdb')}"
    assert second == f"module importlib.metadata {importlib.metadata.version('duckdb')} True"


def test_the_stand_in_gives_other_names_from_the_real_module() -> None:
    """What else duckdb's import (or anything it imports) asks importlib.metadata for comes
    from the real module, the version of another distribution too."""
    code = ("import sys, types\n"
            "from msq import opening\n"
            "opening.installed_version = lambda name: '9.9.9'  # as if read from METADATA\n"
            "import builtins\n"
            "real_import = builtins.__import__\n"
            "seen = []\n"
            "def spy(name, *args, **kwargs):\n"
            "    if name == 'duckdb' and not seen:\n"
            "        meta = sys.modules['importlib.metadata']\n"
            "        seen.append((meta.version('duckdb'), meta.version('click'),\n"
            "                     callable(meta.entry_points)))\n"
            "    return real_import(name, *args, **kwargs)\n"
            "builtins.__import__ = spy\n"
            "opening.import_duckdb()\n"
            "builtins.__import__ = real_import\n"
            "import duckdb, importlib.metadata as m\n"
            "print(seen[0], duckdb.__version__, m.version('click'))\n")
    out = _python(code)
    import importlib.metadata

    click = importlib.metadata.version("click")
    assert out.stdout.strip() == f"('9.9.9', '{click}', True) 9.9.9 {click}"


@pytest.mark.parametrize("layout", ["dist-info", "two", "egg-info", "folded", "none"])
def test_installed_version_reads_only_a_plain_dist_info(tmp_path: Path, layout: str,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """installed_version finds what importlib.metadata finds (the first sys.path entry holding
    the distribution), else says it cannot (None: the plain import then)."""
    import importlib.metadata

    from msq.opening import installed_version

    meta = "Metadata-Version: 2.1\nName: Some_Pkg\nVersion: 1.2.3\n\nbody\n"
    first, later = tmp_path / "first", tmp_path / "later"
    for folder in (first, later):
        folder.mkdir()
    (later / "some_pkg-7.0.dist-info").mkdir()
    (later / "some_pkg-7.0.dist-info" / "METADATA").write_text(meta.replace("1.2.3", "7.0"))
    if layout in ("dist-info", "two", "folded"):
        info = first / "Some.Pkg-1.2.3.dist-info"
        info.mkdir()
        text = meta.replace("Version: 1.2.3", "Version: 1.2.3\n x") if layout == "folded" else meta
        (info / "METADATA").write_text(text)
    if layout == "two":
        (first / "some_pkg-1.0.dist-info").mkdir()
    if layout == "egg-info":
        (first / "some_pkg-1.2.3.egg-info").mkdir()
    monkeypatch.setattr(sys, "path", [str(first), str(tmp_path / "missing"), str(later)])
    want = {"dist-info": "1.2.3", "none": "7.0"}.get(layout)
    assert installed_version("some-pkg") == want
    if want is not None:
        assert importlib.metadata.version("some-pkg") == want


def test_the_command_starts_numpy_without_blas_threads() -> None:
    """msq/__main__.py tells OpenBLAS to start no threads before numpy loads (a statistics
    compare imports numpy through pyarrow and the history, and its pool workers inherit the
    environment): numpy imported after the command ran finds OPENBLAS_NUM_THREADS=1 and the
    process has its one thread. A user's own value is kept."""
    code = ("import atexit, os, sys\n"
            "def after():\n"
            "    import numpy\n"
            "    print(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')))\n"
            "atexit.register(after)\n"
            "sys.argv = ['msq', '--version']\n"
            "from msq.__main__ import run\n"
            "run()\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["1", "1"]
    kept = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env={**env, "OPENBLAS_NUM_THREADS": "2"})
    assert kept.stdout.split()[-2] == "2"
