"""A pool worker's kept compare database (msq.pair_tables.WorkerDatabase).

Real pairs compared one after the other in one kept database, as a pool worker compares them,
give the files and history rows of pairs compared each in a new database: another mode in
between, unmatched rows, a broken pair (which discards the database; the next pair opens a new
one), the same pair again. After each pair the database's catalog is that of a new one (its
reset checks it, and a failed check would discard it).
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from msq.config import Options
from msq.distributed import PairJob, discover_jobs
from msq.pair_tables import PairFailure, PairTables, WorkerDatabase, compute_pair
from tests.dumps import bwd, fwd, t, write_dump


@pytest.fixture(autouse=True)
def _no_kept_database():
    WorkerDatabase.discard()
    yield
    WorkerDatabase.discard()


def _dumps(root: Path) -> list[PairJob]:
    """Four rank pairs: a red row (rank0), md5 dumps (rank1), rows only one side has (rank2),
    a broken bench dump (rank3)."""
    for side in ("npu", "bench"):
        base = {"Functional.linear.0.forward": fwd(t(), out=t(mx=9.0 if side == "npu" else 1.0)),
                "Functional.relu.0.forward": fwd(t(), out=t()),
                "Functional.relu.0.backward": bwd([t(mn=-2.0)], [t()])}
        write_dump(root / side / "step0" / "rank0", base)
        md5 = {"Functional.linear.0.forward": fwd(t(md5="00aa"), out=t(md5="11bb" if side == "npu"
                                                                        else "22cc"))}
        write_dump(root / side / "step0" / "rank1", md5, task="statistics")
        extra = dict(base)
        extra["Tensor.add.0.forward" if side == "npu" else "Torch.cat.0.forward"] = \
            fwd(t(), t(), out=t(mean=0.5))
        write_dump(root / side / "step0" / "rank2", extra)
        write_dump(root / side / "step0" / "rank3", base)
    (root / "bench" / "step0" / "rank3" / "dump.json").write_text("{broken")
    return discover_jobs(root / "npu" / "step0", root / "bench" / "step0", False)


def _value(v: Any) -> Any:
    if isinstance(v, float):
        return ("nan",) if math.isnan(v) else v.hex()
    return v


def _seen(out: PairTables | PairFailure) -> Any:
    """What a pair gives the driver: its files (workbook parts but docProps; names without
    their time stamps), history rows (but run ids; NaN as NaN), summary; or its failure."""
    if isinstance(out, PairFailure):
        return out.message
    files = []
    for name, data in out.files:
        name = re.sub(r"_\d{14}", "", name)
        if data[:2] == b"PK":
            zipped = zipfile.ZipFile(io.BytesIO(data))
            files.append((name, [(i.filename, hashlib.sha1(zipped.read(i)).hexdigest())
                                 for i in zipped.infolist()
                                 if not i.filename.startswith("docProps")]))
        else:
            files.append((name, hashlib.sha1(data).hexdigest()))
    rows = {table: (rows.schema, [tuple(_value(v) for k, v in row.items() if k != "run_id")
                                  for row in rows.to_pylist()])
            for table, rows in out.history.items()}
    return files, rows, out.summary, out.mode


def test_pairs_in_a_kept_database_are_pairs_in_new_ones(tmp_path):
    jobs = _dumps(tmp_path)
    opts = Options(workers=1, record=True, formats=("xlsx", "csv"))
    order = [0, 1, 2, 0, 3, 2, 1, 0]
    new = {i: _seen(compute_pair(jobs[i], opts, tmp_path / "new")) for i in set(order)}
    assert isinstance(new[3], str) and "rank3" in new[3]
    assert WorkerDatabase._kept is None  # not asked for: none kept
    databases = []
    for i in order:
        out = compute_pair(jobs[i], opts, tmp_path / "kept", kept=True)
        assert _seen(out) == new[i], jobs[i].title
        databases.append(WorkerDatabase._kept)
    # one database for the pairs before the broken one, a new one after it
    before, after = databases[:order.index(3)], databases[order.index(3) + 1:]
    assert all(d is before[0] for d in before) and all(d is after[0] for d in after)
    assert before[0] is not None and after[0] is not None and after[0] is not before[0]
    assert databases[order.index(3)] is None


def test_the_reset_gives_a_new_databases_catalog(tmp_path):
    jobs = _dumps(tmp_path)
    opts = Options(workers=1, record=True)
    database = WorkerDatabase.get(opts)
    assert database is not None
    template = database._snapshot()
    views = dict(database._con.execute(WorkerDatabase._VIEWS).fetchall())
    macros = database._con.execute(WorkerDatabase._MACROS).fetchall()
    # the history's record macros are the database's own (a batch's history rows read them)
    assert {("hist_plain_num",), ("hist_code_pct",)} <= set(macros)
    compute_pair(jobs[2], opts, tmp_path, kept=True)
    assert WorkerDatabase._kept is database
    assert database._snapshot() == template
    assert dict(database._con.execute(WorkerDatabase._VIEWS).fetchall()) == views
    assert database._con.execute(WorkerDatabase._MACROS).fetchall() == macros
    tables = [name for name, _ in database._con.execute(WorkerDatabase._TABLES).fetchall()]
    assert all(database._con.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0] == 0
               for name in tables)


def test_no_kept_database_with_a_users_views_or_threads(tmp_path):
    (tmp_path / "views").mkdir()
    assert WorkerDatabase.get(Options(workers=1, sql_dir=str(tmp_path / "views"))) is None
    assert WorkerDatabase.get(Options(workers=2)) is None
    assert WorkerDatabase.get(Options(workers=1)) is not None


def test_materialised_views_are_renamed_back_only_when_they_are_the_databases_own(
        tmp_path, monkeypatch):
    """A kept database's pair leaves each view it materialises as ``_src_<view>`` (msq.db
    KEEP_SOURCES); the reset renames it back when it is the database's own (its catalog oid,
    not its text, which the reset does not read), and creates the view again from its statement
    when the pair had replaced it (by the same text too): the next pair never reads a view (or
    rows) the previous pair left."""
    import duckdb

    from msq import db

    opts = Options(workers=1, record=True)
    database = WorkerDatabase.get(opts)
    assert database is not None
    views = dict(database._con.execute(WorkerDatabase._VIEWS).fetchall())
    cur = database.take(1)
    assert db.KEEP_SOURCES
    cur.execute("INSERT INTO settings VALUES ('statistics', false, false, false, false, false, "
                "false)")
    db.materialize(cur, "op_keys")  # the database's own view
    cur.execute("CREATE OR REPLACE VIEW op_candidates AS SELECT 1 AS replaced")  # a pair's own
    db.materialize(cur, "op_candidates")
    left = database._con.execute(WorkerDatabase._VIEW_OIDS).fetchall()
    assert {"_src_op_keys", "_src_op_candidates"} <= {name for name, _ in left}
    assert database._renamed_back(left, set()) == {"_src_op_keys": "op_keys"}
    # a view replaced by its very text is not the database's own: made again from its statement
    cur.execute(dict(database._con.execute(WorkerDatabase._VIEWS).fetchall())["row_pairs"]
                .replace("CREATE VIEW", "CREATE OR REPLACE VIEW", 1))
    cur.close()
    statements: list[str] = []
    execute = duckdb.DuckDBPyConnection.execute

    def noted(con: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(str(query))
        return execute(con, query, *args, **kwargs)

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "execute", noted)
    database.reset()
    monkeypatch.undo()
    # the views known by their oids, not their texts (which DuckDB renders each time)
    assert not any("duckdb_views()" in sql and "view_name, sql" in sql for sql in statements)
    script = next(sql for sql in statements if "DROP TABLE" in sql)
    assert 'DROP VIEW "row_pairs"' in script and 'DROP VIEW "op_keys"' not in script
    assert not db.KEEP_SOURCES
    assert dict(database._con.execute(WorkerDatabase._VIEWS).fetchall()) == views
    assert database._con.execute("SELECT * FROM settings").fetchall() == []
    # a compare outside the kept database drops what it materialises
    database.take(1).close()
    WorkerDatabase.discard()
    assert not db.KEEP_SOURCES
    con = db.connect(threads=1)
    con.execute("CREATE TABLE t AS SELECT 1 AS a; CREATE VIEW v AS SELECT a FROM t")
    db.materialize(con, "v")
    assert con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall() == []
    con.close()


def test_a_kept_database_keeps_its_blocks_memory(tmp_path):
    """A kept worker database runs task after task: its blocks come from DuckDB's block
    allocator (pair_tables.WORKER_BLOCK_MEMORY), not faulted in anew by each task; a pair
    compared in it still gives the catalog back as a new database's."""
    jobs = _dumps(tmp_path)
    opts = Options(workers=1, record=True)
    WorkerDatabase.discard()
    database = WorkerDatabase.get(opts)
    assert database is not None
    setting = "SELECT current_setting('block_allocator_memory')"
    assert database._con.execute(setting).fetchall()[0][0] == "366.2 MiB"  # 384 MB
    template = database._snapshot()
    compute_pair(jobs[2], opts, tmp_path, kept=True)
    assert WorkerDatabase._kept is database and database._snapshot() == template
