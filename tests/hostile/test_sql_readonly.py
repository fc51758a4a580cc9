"""``msq sql`` reads the history and nothing else, whatever the query says.

Each attack of the hardening probe (issue 17, item 2), run against a real history file:
* ATTACH another history READ_WRITE and empty it; ATTACH a hard link to the opened file itself;
* COPY TO, EXPORT DATABASE, INSTALL, LOAD, SET, PRAGMA, CALL, write statements, and any of them
  hidden behind a harmless first statement;
* ``-o`` naming the database (directly, through a hard link or a symlink, or its WAL).
Every one is refused with one line, and every file is left byte for byte as it was. The reads
(SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, PIVOT, EXPLAIN) keep working.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import duckdb
import pytest

from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import OP, cli, error_line


def recorded_history(root: Path, name: str = "h.duckdb") -> Path:
    """A history file holding one real compare."""
    data = {OP: fwd(t(mx=3.0), out=t())}
    cfg = write_pair(root / f"dumps_{name}", data, {OP: fwd(t(), out=t())})
    db = root / name
    code, text = cli("compare", str(cfg), "-o", str(root / f"out_{name}"), "--db", str(db), "-q")
    assert code == 0, text
    return db


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rows(db: Path) -> tuple[int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT (SELECT count(*) FROM compares), "
                           "(SELECT count(*) FROM result_rows)").fetchall()[0]
    finally:
        con.close()


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("histories")
    return recorded_history(root, "h.duckdb"), recorded_history(root, "other.duckdb")


@pytest.fixture
def two(templates: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """The history that msq sql opens, and another one next to it (this test's own copies)."""
    copies = []
    for template in templates:
        shutil.copyfile(template, tmp_path / template.name)
        copies.append(tmp_path / template.name)
    return copies[0], copies[1]


def refused(db: Path, query: str, *flags: str) -> str:
    code, text = cli("sql", query, "--db", str(db), *flags)
    assert code == (2 if "-o" in flags else 1), text
    return error_line(text)


def test_attach_cannot_empty_another_history(two: tuple[Path, Path]) -> None:
    db, other = two
    before = digest(other)
    line = refused(db, f"ATTACH '{other}' AS o (READ_WRITE); DELETE FROM o.result_rows")
    assert "read-only" in line and "ATTACH" in line
    assert digest(other) == before and rows(other) == (1, 2)


def test_a_hard_link_to_the_opened_file_cannot_write_it(two: tuple[Path, Path]) -> None:
    db, _ = two
    link = db.with_name("link.duckdb")
    os.link(db, link)
    before = digest(db)
    for query in (f"ATTACH '{link}' AS o; DELETE FROM o.compares",
                  f"ATTACH '{link}' AS o (READ_WRITE)",
                  f"SELECT * FROM read_blob('{link}')"):
        refused(db, query)
    for fmt in ("table", "csv", "json", "parquet"):
        line = refused(db, "SELECT 1", "--format", fmt, "-o", str(link))
        assert "is the history database" in line
    assert digest(db) == before and rows(db) == (1, 2)


@pytest.mark.parametrize("fmt", ["table", "csv", "json", "parquet"])
def test_output_cannot_be_the_database(two: tuple[Path, Path], fmt: str) -> None:
    db, _ = two
    before = digest(db)
    symlink = db.with_name("alias.duckdb")
    symlink.symlink_to(db.name)
    for dest in (db, symlink, db.with_name(db.name + ".wal"),
                 db.parent / "." / db.name):
        line = refused(db, "SELECT 1", "--format", fmt, "-o", str(dest))
        assert "is the history database" in line, line
    assert digest(db) == before and rows(db) == (1, 2)
    assert not db.with_name(db.name + ".wal").exists()


@pytest.mark.parametrize("query, kind", [
    ("COPY (SELECT * FROM compares) TO '{dir}/leak.csv'", "COPY"),
    ("COPY compares TO '{dir}/leak.csv'", "COPY"),
    ("EXPORT DATABASE '{dir}/leak'", "EXPORT"),
    ("INSTALL httpfs", "INSTALL/LOAD"),
    ("LOAD httpfs", "INSTALL/LOAD"),
    ("FORCE INSTALL '{dir}/x.duckdb_extension'", "INSTALL/LOAD"),
    ("SET enable_external_access = true", "SET"),
    ("RESET threads", "SET"),
    ("SET VARIABLE v = 1", "SET"),
    ("PRAGMA enable_profiling", "PRAGMA"),
    ("PRAGMA version", "PRAGMA"),
    ("CALL pragma_version()", "CALL"),
    ("CHECKPOINT", "CALL"),
    ("DELETE FROM compares", "DELETE"),
    ("CREATE TEMP TABLE x AS SELECT 1", "CREATE"),
    ("DETACH h", "DETACH"),
    ("BEGIN", "TRANSACTION"),
    ("VACUUM", "VACUUM"),
    ("SELECT 1; COPY compares TO '{dir}/leak.csv'", "COPY"),
    ("SELECT 1; ATTACH ':memory:' AS m", "ATTACH"),
])
def test_only_reads_are_accepted(two: tuple[Path, Path], query: str, kind: str) -> None:
    db, _ = two
    before = sorted(p.name for p in db.parent.iterdir())
    line = refused(db, query.format(dir=db.parent))
    assert "read-only" in line and f"{kind} " in line, line
    assert sorted(p.name for p in db.parent.iterdir()) == before  # no file written, no WAL


def test_files_outside_the_history_are_not_read(two: tuple[Path, Path]) -> None:
    db, other = two
    (db.parent / "plain.csv").write_text("a\n1\n")
    for query in (f"SELECT * FROM read_csv('{db.parent / 'plain.csv'}')",
                  f"SELECT * FROM '{other}'", "SELECT * FROM glob('/etc/*')"):
        line = refused(db, query)
        assert "SQL error" in line


def test_extensions_are_neither_installed_nor_loaded(two: tuple[Path, Path]) -> None:
    db, _ = two
    code, text = cli("sql", "SELECT current_setting('autoinstall_known_extensions')::VARCHAR, "
                     "current_setting('autoload_known_extensions')::VARCHAR, "
                     "current_setting('enable_external_access')::VARCHAR, "
                     "current_setting('lock_configuration')::VARCHAR",
                     "--db", str(db), "--format", "csv")
    assert code == 0, text
    assert text.splitlines()[1] == '"false","false","false","true"'
    # a function of a known but unloaded extension is not fetched on the fly
    refused(db, "SELECT * FROM read_xlsx('x.xlsx')")


@pytest.mark.parametrize("query", [
    "SELECT count(*) AS n FROM compares",
    "WITH c AS (SELECT * FROM compares) SELECT count(*) AS n FROM c",
    "FROM runs SELECT count(*) AS n",
    "DESCRIBE compares",
    "SHOW TABLES",
    "SUMMARIZE compares",
    "PIVOT (SELECT mode, n_rows FROM compares) ON mode USING sum(n_rows)",
    "EXPLAIN SELECT * FROM result_rows",
    "SELECT 1 AS a; SELECT 2 AS b",
    "SELECT * FROM query('SELECT count(*) FROM compares')",
])
def test_reads_still_work(two: tuple[Path, Path], query: str) -> None:
    db, _ = two
    code, text = cli("sql", query, "--db", str(db), "--format", "csv")
    assert code == 0, text
    assert text.strip()
