"""The history schema: versions checked, unknown files refused, migrations (msq/history/schema.py)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from msq import history
from msq.cli import main
from msq.errors import HistoryError
from msq.history import schema
from tests.history.builders import count, run_api, set_version, single_card


def test_newer_schema_is_refused_by_name(made: tuple[Path, Path], tmp_path: Path) -> None:
    cj, db = made
    set_version(db, "99")
    with pytest.raises(HistoryError, match=re.escape(f"{db}: history schema version 99 is newer")):
        run_api(cj, tmp_path / "out", db=db)
    result = CliRunner().invoke(main, ["runs", "--db", str(db)])
    assert result.exit_code == 1 and "upgrade msq" in result.stderr
    set_version(db, "1")
    assert count(db) == 1


def test_unknown_databases_are_refused(tmp_path: Path) -> None:
    cj = single_card(tmp_path / "dumps")
    other = tmp_path / "other.duckdb"
    con = duckdb.connect(str(other))
    con.execute("CREATE TABLE accounts (id INTEGER)")
    con.close()
    with pytest.raises(HistoryError, match="not an msq history"):
        run_api(cj, tmp_path / "out", db=other)
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database\n" * 200)
    with pytest.raises(HistoryError, match=re.escape(f"{junk}: exists but is not a DuckDB")):
        run_api(cj, tmp_path / "out", db=junk)
    assert junk.read_text() == "not a database\n" * 200
    with pytest.raises(HistoryError, match="no history database here"):
        history.query(tmp_path / "absent.duckdb", "SELECT 1")


def test_older_schema_is_migrated_in_the_same_transaction(made: tuple[Path, Path], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cj, db = made
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    monkeypatch.setattr(schema, "SCHEMA_VERSION", 2)
    monkeypatch.setattr(schema, "_migration_folder", lambda: migrations)
    # a broken migration leaves the file as it was
    (migrations / "v2.sql").write_text("ALTER TABLE result_rows ADD COLUMN note VARCHAR;\n"
                                       "ALTER TABLE no_such_table ADD COLUMN x INTEGER;\n")
    with pytest.raises(HistoryError, match="migrating to history schema version 2 failed"):
        run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [("1",)]
    assert count(db) == 1
    (migrations / "v2.sql").write_text(
        "ALTER TABLE result_rows ADD COLUMN note VARCHAR;\n"
        "UPDATE result_rows SET note = 'before v2';\n")
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [("2",)]
    assert history.query(db, "SELECT compare_id, count(*), count(note) FROM result_rows "
                             "GROUP BY ALL ORDER BY 1").rows == [(1, 13, 13), (2, 13, 0)]
