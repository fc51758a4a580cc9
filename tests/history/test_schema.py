"""The history schema: versions checked, unknown files refused, migrations (msq/history/schema.py)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from msq import db as db_sql
from msq import history
from msq.cli import main
from msq.errors import HistoryError
from msq.history import schema
from msq.history.schema import MIGRATION_MEMORY, memory_capped, size_bytes
from tests.history.builders import (
    LINEAR1_OUT,
    as_version_3,
    as_version_5,
    as_version_6,
    blame_as_version_5,
    count,
    run_api,
    set_version,
    single_card,
)


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
    now = schema.SCHEMA_VERSION
    later = now + 1
    migrations = tmp_path / "migrations"
    migrations.mkdir()
    monkeypatch.setattr(schema, "SCHEMA_VERSION", later)
    monkeypatch.setattr(schema, "_migration_folder", lambda: migrations)
    # a broken migration leaves the file as it was
    (migrations / f"v{later}.sql").write_text("ALTER TABLE result_data ADD COLUMN note VARCHAR;\n"
                                              "ALTER TABLE no_such_table ADD COLUMN x INTEGER;\n")
    with pytest.raises(HistoryError, match=f"migrating to history schema version {later} failed"):
        run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(now),)]
    assert count(db) == 1
    (migrations / f"v{later}.sql").write_text(
        "ALTER TABLE result_data ADD COLUMN note VARCHAR;\n"
        f"UPDATE result_data SET note = 'before v{later}';\n")
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(later),)]
    assert history.query(db, "SELECT compare_id, count(*), count(note) FROM result_rows "
                             "GROUP BY ALL ORDER BY 1").rows == [(1, 13, 13), (2, 13, 0)]


def test_a_version_1_file_gains_the_reason_column(made: tuple[Path, Path], tmp_path: Path) -> None:
    """Schema version 2 (sql/history/migrate/v2.sql): result_rows.reason; the rows recorded
    before keep it NULL, the new ones carry the default mode's Reason."""
    _, db = made
    as_version_3(db)
    con = duckdb.connect(str(db))  # the file as version 1 wrote it: no reason column, no blame
    con.execute("ALTER TABLE result_rows DROP COLUMN reason")
    con.execute("DROP TABLE blame_rows")
    con.execute("DROP TABLE blame_edges")
    con.close()
    set_version(db, "1")
    before = history.query(db, "SELECT * FROM result_rows").columns
    red = single_card(tmp_path / "red", {LINEAR1_OUT: {"Max": 3.0}})
    run_api(red, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    assert history.query(db, "SELECT * FROM result_rows").columns == [*before, "reason"]
    rows = history.query(db, "SELECT compare_id, npu_name, mark, reason FROM result_rows "
                             "WHERE mark IS NOT NULL OR reason IS NOT NULL ORDER BY 1, out_seq").rows
    assert [r[0] for r in rows] == [2], "the old compare has no reasons, the new one its red row"
    (_, name, mark, reason), = rows
    assert (name, mark) == ("Functional.linear.1.forward.output.0", "red")
    assert reason.startswith("scale-aware error 0.667 >= 0.1, from Max: NPU 9.38, bench 3.12")
    # a new file has the same columns, in the same order
    fresh = tmp_path / "fresh.duckdb"
    run_api(red, tmp_path / "out2", db=fresh)
    assert history.query(fresh, "SELECT * FROM result_rows").columns == [*before, "reason"]


def test_a_version_2_file_gets_the_blame_tables(made: tuple[Path, Path], tmp_path: Path) -> None:
    """Version 3 added blame: a file written before it is migrated at its next recording, its
    compares kept (without blame rows), the new compare with them."""
    cj, _ = made
    old = tmp_path / "v2.duckdb"
    run_api(cj, tmp_path / "scratch", db=old)
    as_version_3(old)  # then without blame and without rows: an empty version-2 file
    con = duckdb.connect(str(old))
    for statement in ("DROP TABLE blame_rows", "DROP TABLE blame_edges",
                      "DELETE FROM result_rows", "DELETE FROM compares",
                      "UPDATE meta SET value = '2' WHERE key = 'schema_version'"):
        con.execute(statement)
    con.close()
    run_api(cj, tmp_path / "out", db=old)
    assert history.query(old, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    got = history.query(old, "SELECT compare_id, count(*), count(verdict) FROM blame "
                             "GROUP BY ALL").rows
    assert got == [(1, 13, 13)]
    # the migrations make what a new file's schema makes: the same tables, views and columns
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    layout = ("SELECT table_name, column_name, data_type FROM information_schema.columns "
              "ORDER BY table_name, ordinal_position")
    assert history.query(old, layout).rows == history.query(fresh, layout).rows


def _as_version_4(db: Path) -> None:
    """Rewrite a history into the layout schema version 4 wrote: result_data with the 21
    <metric>_text columns (no texts map), the view result_rows reading them."""
    con = duckdb.connect(str(db))
    blame_as_version_5(con)
    con.execute("CREATE TABLE v4_data AS SELECT d.compare_id, d.out_seq, d.kind, d.op_id, "
                "d.npu_id, d.bench_id, r.* EXCLUDE (compare_id, out_seq, kind, op_name, "
                "npu_name, bench_name) FROM result_data d JOIN result_rows r "
                "USING (compare_id, out_seq) ORDER BY compare_id, out_seq")
    con.execute("DROP VIEW result_rows")
    con.execute("DROP TABLE result_data")
    con.execute("ALTER TABLE v4_data RENAME TO result_data")
    con.execute(db_sql.sql_file("history/migrate/v4.sql").text.split("DROP TABLE result_rows;\n")[1])
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()


def test_a_version_4_file_gets_its_texts_in_one_map(made: tuple[Path, Path],
                                                     tmp_path: Path) -> None:
    """Version 5 keeps result_data's <metric>_text columns in one map, texts: a version-4 file
    is migrated at its next recording, its result_rows the same columns and rows as before (the
    texts of every column kept), the new compare recorded alike; a new file's result_data and
    result_rows are what the migration makes."""
    cj, db = made
    _as_version_4(db)
    con = duckdb.connect(str(db))
    texts = [c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'result_data' "
        "AND column_name LIKE '%\\_text' ESCAPE '\\' ORDER BY column_index").fetchall()]
    assert len(texts) == 21
    # every text column holds a text somewhere (a tensor-mode one too)
    for i, column in enumerate(texts):
        con.execute(f"UPDATE result_data SET {column} = 'text {i}' WHERE out_seq = {i % 5}")
    con.close()
    before = history.query(db, "SELECT * FROM result_rows ORDER BY compare_id, out_seq")
    assert sum(r.count(None) for r in before.rows) < len(before.rows) * len(before.columns)
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    after = history.query(db, "SELECT * FROM result_rows WHERE compare_id = 1 ORDER BY out_seq")
    assert after.columns == before.columns
    assert after.rows == before.rows
    # (a key into texts since version 10)
    assert history.query(db, "SELECT count(*) FROM result_data WHERE texts_id IS NOT NULL "
                             "AND compare_id = 1").rows == [(5,)]
    # the new compare: the same rows as the first one had before the texts were set
    new = history.query(db, "SELECT * EXCLUDE (compare_id) FROM result_rows WHERE compare_id = 2 "
                            "ORDER BY out_seq").rows
    assert len(new) == len(before.rows)
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for query in ("SELECT * FROM result_rows", "SELECT * FROM result_data"):
        assert history.query(fresh, query).columns == history.query(db, query).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id) FROM result_rows "
                                "ORDER BY out_seq").rows == new


def test_a_version_5_file_gets_its_blame_rows_keyed(made: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    """Version 6 stores blame_rows as blame_data (names as keys) and blame_runs (one row a
    compare): a version-5 file is migrated at its next recording, blame_rows and the view blame
    the same columns and rows as before, including names the history did not hold and
    NULL names; the new compare is recorded alike, and a new file is laid out as the migrated one."""
    cj, db = made
    as_version_5(db)
    con = duckdb.connect(str(db))
    assert con.execute("SELECT table_type FROM information_schema.tables "
                       "WHERE table_name = 'blame_rows'").fetchall() == [("BASE TABLE",)]
    # a name no output row has (two rows: keyed once), a NULL name, a noise run
    con.execute("UPDATE blame_rows SET npu_name = 'not.an.output.row' WHERE out_seq IN (1, 4)")
    con.execute("UPDATE blame_rows SET op_name = NULL WHERE out_seq = 2")
    con.execute("UPDATE blame_rows SET noise_source = 'noise 7'")
    top = con.execute("SELECT max(name_id) FROM names").fetchone()[0]
    con.close()
    queries = ("SELECT * FROM blame_rows ORDER BY compare_id, out_seq",
               "SELECT * FROM blame ORDER BY compare_id, out_seq")
    before = [history.query(db, q) for q in queries]
    assert len(before[0].rows) == 13 and before[0].columns[4:6] == ["op_name", "npu_name"]
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    for query, old in zip(queries, before):
        after = history.query(db, query.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
        assert (after.columns, after.rows) == (old.columns, old.rows)
    assert history.query(db, "SELECT name_id FROM names WHERE name = 'not.an.output.row'").rows \
        == [(top + 1,)]
    assert history.query(db, "SELECT count(*), count(DISTINCT run_id) FROM blame_runs").rows == [
        (2, 2)]
    # the new compare: the rows the first one had before they were changed
    new = history.query(db, "SELECT * EXCLUDE (compare_id, run_id, noise_source) FROM blame_rows "
                            "WHERE compare_id = 2 ORDER BY out_seq").rows
    old = [r[:1] + r[2:-1] for r in before[0].rows]
    assert len(new) == 13 and sum(a != b for a, b in zip(new, (r[1:] for r in old))) == 3
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for query in ("SELECT * FROM blame_rows", "SELECT * FROM blame_data",
                  "SELECT * FROM blame_runs"):
        assert history.query(fresh, query).columns == history.query(db, query).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows "
                                "ORDER BY out_seq").rows == \
        history.query(db, "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows "
                          "WHERE compare_id = 2 ORDER BY out_seq").rows


def _limit(con: duckdb.DuckDBPyConnection) -> int:
    return size_bytes(str(con.execute("SELECT current_setting('memory_limit')").fetchone()[0]))


def test_a_migration_runs_under_a_memory_cap_and_gives_the_limit_back() -> None:
    con = duckdb.connect()
    default = _limit(con)
    assert default > size_bytes(MIGRATION_MEMORY)  # this machine: 80 % of 24 GB
    with memory_capped(con, MIGRATION_MEMORY):
        assert _limit(con) == size_bytes(MIGRATION_MEMORY)
    assert _limit(con) == default
    # a connection with a lower limit (the run writer's 384 MB) keeps it
    con.execute("SET memory_limit = '384MB'")
    low = _limit(con)
    with memory_capped(con, MIGRATION_MEMORY):
        assert _limit(con) == low
    assert _limit(con) == low


@pytest.mark.parametrize(("text", "expected"), [("384.0 MiB", 384 * 2**20), ("1GiB", 2**30),
                                                ("2GB", 2 * 10**9), ("18.8 GiB", int(18.8 * 2**30)),
                                                ("0 bytes", 0)])
def test_duckdb_sizes_are_read_in_their_units(text: str, expected: int) -> None:
    assert size_bytes(text) == expected


def test_an_unreadable_size_is_refused() -> None:
    with pytest.raises(ValueError, match="not a DuckDB size"):
        size_bytes("a lot")


def test_a_version_6_file_gets_other_modes_columns_in_lists(made: tuple[Path, Path],
                                                          tmp_path: Path) -> None:
    """Version 7 keeps result_data's tensor metrics (five DOUBLEs) and md5s, npu_stack and
    data_name (four VARCHARs) in two lists, tensor_metrics and mode_texts, each NULL when all its
    members are: a version-6 file is migrated at its next recording, its result_rows the same
    columns and rows as before (every member set somewhere, NaN and infinities kept), the new
    compare recorded alike; a new file's result_data and result_rows are what the migration
    makes."""
    cj, db = made
    as_version_6(db)
    con = duckdb.connect(str(db))
    members = ["cosine", "max_abs_err", "max_rel_err", "one_thousandth_err_ratio",
               "five_thousandths_err_ratio", "npu_md5", "bench_md5", "npu_stack", "data_name"]
    numbers = ["'nan'::DOUBLE", "0.5", "'-inf'::DOUBLE", "1e-300", "'inf'::DOUBLE"]
    for i, column in enumerate(members):  # each alone on its row, and all of them on row 12
        value = numbers[i] if i < 5 else f"'text {i}'"
        con.execute(f"UPDATE result_data SET {column} = {value} WHERE out_seq IN ({i}, 12)")
    con.close()
    before = history.query(db, "SELECT * FROM result_rows ORDER BY compare_id, out_seq")
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    after = history.query(db, "SELECT * FROM result_rows WHERE compare_id = 1 ORDER BY out_seq")
    assert after.columns == before.columns
    assert repr(after.rows) == repr(before.rows)  # NaN equal to NaN
    assert history.query(db, "SELECT count(tensor_metrics), count(mode_texts), "
                             "list(out_seq ORDER BY out_seq) FILTER (tensor_metrics IS NULL "
                             "AND mode_texts IS NULL) FROM result_data WHERE compare_id = 1"
                             ).rows == [(6, 5, [9, 10, 11])]
    assert history.query(db, "SELECT mode_texts FROM result_data WHERE compare_id = 1 "
                             "AND out_seq = 7").rows == [([None, None, "text 7", None],)]
    # the new compare: the rows the first one had before, its lists all NULL (statistics)
    new = history.query(db, "SELECT * EXCLUDE (compare_id) FROM result_rows WHERE compare_id = 2 "
                            "ORDER BY out_seq").rows
    assert len(new) == len(before.rows) == 13
    assert history.query(db, "SELECT count(tensor_metrics), count(mode_texts) FROM result_data "
                             "WHERE compare_id = 2").rows == [(0, 0)]
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for query in ("SELECT * FROM result_rows", "SELECT * FROM result_data"):
        assert history.query(fresh, query).columns == history.query(db, query).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id) FROM result_rows "
                                "ORDER BY out_seq").rows == new


def test_a_version_7_file_gets_its_short_texts_as_terms(made: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    """Version 8 keeps result_data's and blame_data's short texts (kind, dtypes, shapes, result,
    verdict, ...; blame's io, role, ...) once each in ``terms`` and the rows their keys: a
    version-7 file is migrated at its next recording, its result_rows and blame_rows the same
    columns and rows as before (a NULL text, a text on one row alone), the terms keyed 1, 2, 3,
    ... in their sorted order, the new compare's new terms after them; a new file's tables
    and views are laid out as the migration makes them."""
    from msq.history.recorder import BLAME_TERMS, RESULT_TERMS_8
    from tests.history.builders import as_version_7

    cj, db = made
    as_version_7(db)
    con = duckdb.connect(str(db))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'terms'"
                           ).fetchall()[0][0]
    con.execute("UPDATE result_data SET npu_shape = 'a shape of its own' WHERE out_seq = 3")
    con.execute("UPDATE result_data SET err_message = NULL WHERE out_seq = 4")
    con.execute("UPDATE blame_data SET link = 'a link of its own' WHERE out_seq = 2")
    con.close()
    queries = ("SELECT * FROM result_rows ORDER BY compare_id, out_seq",
               "SELECT * FROM blame_rows ORDER BY compare_id, out_seq, io, op_seq")
    before = [history.query(db, query) for query in queries]
    assert before[1].rows
    run_api(cj, tmp_path / "out", db=db)
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    for query, old in zip(queries, before, strict=True):
        after = history.query(db, query.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
        assert after.columns == old.columns
        assert repr(after.rows) == repr(old.rows)  # NaN equal to NaN
    terms = history.query(db, "SELECT term_id, term FROM terms ORDER BY term_id").rows
    assert [key for key, _ in terms] == list(range(1, len(terms) + 1))
    migrated = [term for _, term in terms]
    texts = {t for (t,) in history.query(
        db, "SELECT DISTINCT unnest([" + ", ".join(RESULT_TERMS_8) + "]) FROM result_rows "
            "WHERE compare_id = 1 UNION SELECT DISTINCT unnest([" + ", ".join(BLAME_TERMS) +
            "]) FROM blame_rows WHERE compare_id = 1").rows if t is not None}
    assert "a shape of its own" in texts and "a link of its own" in texts
    assert sorted(migrated[:len(texts)]) == migrated[:len(texts)] == sorted(texts)
    # the new compare recorded alike (its rows the first one's but the three changed cells)
    assert history.query(db, "SELECT count(*) FROM result_rows WHERE compare_id = 2").rows == [
        (len(before[0].rows),)]
    assert history.query(db, "SELECT count(*) FROM result_rows WHERE compare_id = 2 "
                             "AND err_message IS NULL").rows == [(0,)]
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for table in ("result_rows", "result_data", "blame_rows", "blame_data", "terms"):
        query = f"SELECT * FROM {table}"
        assert history.query(fresh, query).columns == history.query(db, query).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id) FROM result_rows "
                                "ORDER BY out_seq").rows == history.query(
        db, "SELECT * EXCLUDE (compare_id) FROM result_rows WHERE compare_id = 2 "
            "ORDER BY out_seq").rows


def test_a_version_8_file_gets_blame_rows_joined_to_its_terms(made: tuple[Path, Path],
                                                               tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture
                                                               ) -> None:
    """Version 9 replaces the view blame_rows alone (its terms joined by key, not read from a
    list of every term): a version-8 file gives the same columns and rows after its next
    recording (the migration says so, at -v only: "its views only" up to version 9), and a new
    file's view is the migration's."""
    from tests.history.builders import as_version_8

    cj, db = made
    as_version_8(db)
    old_view = history.query(db, "SELECT sql FROM duckdb_views() WHERE view_name = 'blame_rows'"
                             ).rows[0][0]
    assert "list(term" in old_view
    query = "SELECT * FROM blame_rows ORDER BY compare_id, out_seq, io, op_seq"
    before = history.query(db, query)
    assert before.rows and {r[before.columns.index("verdict")] for r in before.rows} - {None}
    with caplog.at_level("INFO", logger="msq"):
        run_api(cj, tmp_path / "out", db=db)
    told = [r for r in caplog.records if "migrating the history" in r.getMessage()]
    # (on to version 10, which rewrites the result rows: told so, at -v on a small file)
    assert [(r.levelname, "its views only" in r.getMessage()) for r in told] == [
        ("INFO", schema.SCHEMA_VERSION == 9)]
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    after = history.query(db, query.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
    assert after.columns == before.columns
    assert repr(after.rows) == repr(before.rows)  # NaN equal to NaN
    new_view = history.query(db, "SELECT sql FROM duckdb_views() WHERE view_name = 'blame_rows'"
                             ).rows[0][0]
    # (version 11 reads them from blame_classes)
    assert "list(term" not in new_view and "JOIN blame_classes" in new_view
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    assert history.query(fresh, "SELECT sql FROM duckdb_views() WHERE view_name = 'blame_rows'"
                         ).rows == [(new_view,)]


def test_a_version_9_file_gets_its_lists_of_texts_keyed(made: tuple[Path, Path],
                                                        tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Version 10 keeps each distinct list of result_data's texts once in ``texts`` and the rows
    its key (texts_id): a version-9 file is migrated at its next recording (told: it rewrites
    every result row), its result_rows the same columns and rows as before (a list on one row
    alone, one on two rows, lists with NULL members), the lists keyed 1, 2, 3, ... in the order
    of their first row, each once, the new compare's rows keyed to them (and a new list of its own after
    them); a new file's tables and views are laid out as the migration makes them."""
    from tests.history.builders import as_version_9

    cj, db = made
    as_version_9(db)
    con = duckdb.connect(str(db))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'texts'"
                           ).fetchall()[0][0]
    own = ", ".join(["NULL", "'a text of its own'"] + ["NULL"] * 19)
    other = ", ".join(["'N/A'"] * 4 + ["''"] + ["NULL"] * 16)
    con.execute(f"UPDATE result_data SET texts = [{own}]::VARCHAR[] WHERE out_seq IN (5, 3)")
    con.execute(f"UPDATE result_data SET texts = [{other}]::VARCHAR[] WHERE out_seq = 1")
    con.execute("UPDATE result_data SET texts = NULL WHERE out_seq = 4")
    con.close()
    query = "SELECT * FROM result_rows ORDER BY compare_id, out_seq"
    before = history.query(db, query)
    lists = history.query(db, "SELECT texts FROM result_data WHERE texts IS NOT NULL "
                              "ORDER BY compare_id, out_seq").rows
    assert len(lists) > 2 and any(None in t for (t,) in lists)
    with caplog.at_level("INFO", logger="msq"):
        run_api(cj, tmp_path / "out", db=db)
    told = [r.getMessage() for r in caplog.records if "migrating the history" in r.getMessage()]
    assert len(told) == 1 and "rewrites its" in told[0]
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    after = history.query(db, query.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
    assert after.columns == before.columns
    assert repr(after.rows) == repr(before.rows)  # NaN equal to NaN
    keyed = history.query(db, "SELECT texts_id, texts FROM texts ORDER BY texts_id").rows
    firsts = []
    for (t,) in lists:
        if t not in firsts:
            firsts.append(t)
    assert [k for k, _ in keyed] == list(range(1, len(keyed) + 1))
    assert [t for _, t in keyed][:len(firsts)] == firsts
    # each list once; the new compare's rows (the first one's but its two changed cells) keyed
    # to the lists there are, a list of its own after them
    assert history.query(db, "SELECT count(*) = count(DISTINCT texts) FROM texts").rows == [
        (True,)]
    assert history.query(db, "SELECT count(*) FROM result_data d LEFT JOIN texts t "
                             "USING (texts_id) WHERE d.texts_id IS NOT NULL AND t.texts IS NULL"
                         ).rows == [(0,)]
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for table in ("result_rows", "result_data", "texts"):
        query_all = f"SELECT * FROM {table}"
        assert history.query(fresh, query_all).columns == history.query(db, query_all).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id) FROM result_rows "
                                "ORDER BY out_seq").rows == history.query(
        db, "SELECT * EXCLUDE (compare_id) FROM result_rows WHERE compare_id = 2 "
            "ORDER BY out_seq").rows
    assert history.query(fresh, "SELECT sql FROM duckdb_views() WHERE view_name = 'result_rows'"
                         ).rows == history.query(
        db, "SELECT sql FROM duckdb_views() WHERE view_name = 'result_rows'").rows


def test_a_version_10_file_gets_its_blame_classes_keyed(made: tuple[Path, Path],
                                                         tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Version 11 keeps each distinct combination of blame_data's io, role, direction,
    is_module, collective, err_kind, floor_source, verdict and link once in ``blame_classes``
    and the rows its key (class_id): a version-10 file is migrated at its next recording (told:
    it rewrites every row), its blame_rows the same columns and rows as before (a class of one
    row alone, classes with NULLs), the classes keyed 1, 2, 3, ... in the order of their first
    row, each once, the new compare's rows keyed to them; a new file's tables and view are laid
    out as the migration makes them, its classes the same."""
    from msq.history.recorder import BLAME_CLASS_COLUMNS
    from tests.history.builders import as_version_10

    cj, db = made
    as_version_10(db)
    con = duckdb.connect(str(db))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() "
                           "WHERE table_name = 'blame_classes'").fetchall()[0][0]
    con.execute("INSERT INTO terms SELECT max(term_id) + 1, 'a link of its own' FROM terms")
    con.execute("UPDATE blame_data SET link_id = (SELECT max(term_id) FROM terms) "
                "WHERE out_seq = 2")
    con.close()
    cols = ", ".join(BLAME_CLASS_COLUMNS)
    query = "SELECT * FROM blame_rows ORDER BY compare_id, out_seq"
    before = history.query(db, query)
    rows = history.query(db, f"SELECT {cols} FROM blame_rows ORDER BY compare_id, out_seq").rows
    firsts: list[tuple] = []
    for row in rows:
        if row not in firsts:
            firsts.append(row)
    assert len(firsts) > 2 and any(None in c for c in firsts)
    assert [c for c in firsts if c[-1] == "a link of its own"] and [
        c for c in rows if c[-1] == "a link of its own"] == [
        c for c in firsts if c[-1] == "a link of its own"]
    with caplog.at_level("INFO", logger="msq"):
        run_api(cj, tmp_path / "out", db=db)
    told = [r.getMessage() for r in caplog.records if "migrating the history" in r.getMessage()]
    assert len(told) == 1 and "rewrites its" in told[0]
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    after = history.query(db, query.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
    assert after.columns == before.columns
    assert repr(after.rows) == repr(before.rows)  # NaN equal to NaN
    keyed = history.query(db, f"SELECT class_id, {cols} FROM blame_classes ORDER BY class_id"
                          ).rows
    # each once, in the order of their first row; the new compare (the first one's rows but
    # its one changed link) brings none
    assert [k for k, *_ in keyed] == list(range(1, len(keyed) + 1))
    assert [tuple(c) for _, *c in keyed] == firsts
    second = history.query(db, f"SELECT {cols} FROM blame_rows WHERE compare_id = 2 "
                               "ORDER BY out_seq").rows
    assert len(second) == len([r for r in before.rows if r[0] == 1])
    assert {tuple(r) for r in second} == {c for c in firsts if c[-1] != "a link of its own"}
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for table in ("blame_rows", "blame_data", "blame_classes"):
        query_all = f"SELECT * FROM {table}"
        assert history.query(fresh, query_all).columns == history.query(db, query_all).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows "
                                "ORDER BY out_seq").rows == history.query(
        db, "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows WHERE compare_id = 2 "
            "ORDER BY out_seq").rows
    assert {tuple(c) for _, *c in history.query(fresh, "SELECT * FROM blame_classes").rows
            } == {tuple(r) for r in second}
    for name in ("blame_rows", "blame_data", "blame_classes"):
        sql = ("SELECT sql FROM duckdb_views() WHERE view_name = ?" if name == "blame_rows"
               else "SELECT sql FROM duckdb_tables() WHERE table_name = ?")
        assert history.query(fresh, sql.replace("?", f"'{name}'")).rows == history.query(
            db, sql.replace("?", f"'{name}'")).rows


def test_a_version_11_file_gets_its_result_classes_keyed(made: tuple[Path, Path],
                                                          tmp_path: Path,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Version 12 keeps each distinct combination of result_data's kind, npu_dtype,
    bench_dtype, result, verdict, failing, err_message, mark, mark_rules and severity once in
    ``result_classes`` and the rows its key (class_id): a version-11 file is migrated at its
    next recording (told: it rewrites every row), its result_rows the same columns and rows as
    before (a class of one row alone, classes with NULLs), the classes keyed 1, 2, 3, ... in the
    order of their first row, each once, the new compare's rows keyed to them; a new file's
    tables and view are laid out as the migration makes them, its classes the same."""
    from msq.history.recorder import RESULT_CLASS_COLUMNS
    from tests.history.builders import as_version_11

    cj, db = made
    as_version_11(db)
    con = duckdb.connect(str(db))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() "
                           "WHERE table_name = 'result_classes'").fetchall()[0][0]
    assert con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'result_data' "
                       "AND column_name IN ('kind_id', 'verdict_id', 'failing', 'severity')"
                       ).fetchall() == [(4,)]
    con.execute("INSERT INTO terms SELECT max(term_id) + 1, 'a message of its own' FROM terms")
    con.execute("UPDATE result_data SET err_message_id = (SELECT max(term_id) FROM terms), "
                "severity = 7 WHERE out_seq = 2")
    con.execute("UPDATE result_data SET mark_id = NULL, failing = NULL WHERE out_seq = 3")
    con.close()
    cols = ", ".join(RESULT_CLASS_COLUMNS)
    query = "SELECT * FROM result_rows ORDER BY compare_id, out_seq"
    before = history.query(db, query)
    rows = history.query(db, f"SELECT {cols} FROM result_rows ORDER BY compare_id, out_seq").rows
    firsts: list[tuple] = []
    for row in rows:
        if row not in firsts:
            firsts.append(row)
    own = [c for c in firsts if "a message of its own" in c]
    assert len(firsts) > 2 and any(None in c for c in firsts)
    assert own and own[0][-1] == 7 and [c for c in rows if "a message of its own" in c] == own
    with caplog.at_level("INFO", logger="msq"):
        run_api(cj, tmp_path / "out", db=db)
    told = [r.getMessage() for r in caplog.records if "migrating the history" in r.getMessage()]
    assert len(told) == 1 and "rewrites its" in told[0]
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    after = history.query(db, query.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
    assert after.columns == before.columns
    assert repr(after.rows) == repr(before.rows)  # NaN equal to NaN
    keyed = history.query(db, f"SELECT class_id, {cols} FROM result_classes ORDER BY class_id"
                          ).rows
    # each once, in the order of their first row; the new compare (the first one's rows but
    # the changed ones) brings those of its rows 2 and 3 as they are computed, if new
    assert [k for k, *_ in keyed] == list(range(1, len(keyed) + 1))
    assert [tuple(c) for _, *c in keyed][:len(firsts)] == firsts
    second = history.query(db, f"SELECT {cols} FROM result_rows WHERE compare_id = 2 "
                               "ORDER BY out_seq").rows
    assert len(second) == len([r for r in before.rows if r[0] == 1])
    assert {tuple(c) for _, *c in keyed} == set(firsts) | {tuple(r) for r in second}
    assert history.query(db, "SELECT count(*) FROM result_data d LEFT JOIN result_classes c "
                             "USING (class_id) WHERE c.class_id IS NULL").rows == [(0,)]
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for table in ("result_rows", "result_data", "result_classes"):
        query_all = f"SELECT * FROM {table}"
        assert history.query(fresh, query_all).columns == history.query(db, query_all).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id) FROM result_rows "
                                "ORDER BY out_seq").rows == history.query(
        db, "SELECT * EXCLUDE (compare_id) FROM result_rows WHERE compare_id = 2 "
            "ORDER BY out_seq").rows
    assert {tuple(c) for _, *c in history.query(fresh, "SELECT * FROM result_classes").rows
            } == {tuple(r) for r in second}
    for name in ("result_rows", "result_data", "result_classes"):
        sql = ("SELECT sql FROM duckdb_views() WHERE view_name = ?" if name == "result_rows"
               else "SELECT sql FROM duckdb_tables() WHERE table_name = ?")
        assert history.query(fresh, sql.replace("?", f"'{name}'")).rows == history.query(
            db, sql.replace("?", f"'{name}'")).rows


#: The columns whose compression a new history's DDL names (sql/history/schema/), and the method:
#: the one DuckDB picks for them itself on root-8x8-5000, bench stat and llama_port alike, named so
#: that its checkpoint analyses no other (bench/README.md, "Session 20: hist")
NAMED_COMPRESSION = {
    ("result_data", "compare_id"): "RLE",
    **{("result_data", c): "BitPacking" for c in (
        "out_seq", "class_id", "npu_id", "bench_id", "npu_shape_id", "bench_shape_id")},
    ("result_data", "reason"): "DICT_FSST",
    ("blame_data", "compare_id"): "RLE",
    **{("blame_data", c): "BitPacking" for c in ("out_seq", "op_seq", "op_id", "npu_id",
                                                 "class_id", "reason_id", "via_id")},
    ("blame_edges", "compare_id"): "RLE",
    ("blame_edges", "consumer_seq"): "BitPacking",
}


def _named_compression(con: duckdb.DuckDBPyConnection, table: str) -> dict[tuple[str, str], str]:
    ddl = con.execute("SELECT sql FROM duckdb_tables() WHERE table_name = ?", [table]).fetchall()
    return {(table, col): method
            for col, method in re.findall(r"(\w+) [A-Z]+(?:\[\])? USING COMPRESSION (\w+)",
                                          ddl[0][0])}


def test_a_new_history_names_the_compression_of_its_steady_columns(
        hist: Path, one_compare: tuple[Path, Path]) -> None:
    """Both recorders' files (a directory compare's driver, a single-card compare) name the
    methods of NAMED_COMPRESSION and no other, and DuckDB wrote those columns with them (or as
    Constant: a segment of one value is kept as its statistics, whatever the column names)."""
    for db in (hist, one_compare[1]):
        con = duckdb.connect(str(db), read_only=True)
        try:
            named: dict[tuple[str, str], str] = {}
            for table in ("result_data", "blame_data", "blame_edges"):
                named |= _named_compression(con, table)
            assert named == NAMED_COMPRESSION
            for (table, col), method in NAMED_COMPRESSION.items():
                used = {r[0] for r in con.execute(
                    "SELECT DISTINCT compression FROM pragma_storage_info(?) "
                    "WHERE column_name = ? AND segment_type <> 'VALIDITY'", [table, col]).fetchall()}
                assert used and used <= {method, "Constant"}, (db, table, col, used)
        finally:
            con.close()


def test_a_version_12_file_gets_its_reasons_and_vias_keyed(made: tuple[Path, Path],
                                                           tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture
                                                           ) -> None:
    """Version 13 keeps each distinct blame reason once in ``reasons`` and a row's via in
    ``names``, blame_data holding their keys (reason_id, via_id; 0: NULL), and blame_edges' side
    and how as ENUMs: a version-12 file is migrated at its next recording (told: it rewrites
    every row), its blame_rows, blame and blame_edges the same columns and rows as before (a NULL
    reason and via, a via names lacked), the reasons keyed 1, 2, 3, ... in the order of their
    first row, each once, the new compare's rows keyed to them; a new file's tables and view are
    laid out as the migration makes them, its reasons the same."""
    from tests.history.builders import as_version_12

    cj, db = made
    as_version_12(db)
    con = duckdb.connect(str(db))
    assert not con.execute("SELECT count(*) FROM duckdb_tables() "
                           "WHERE table_name = 'reasons'").fetchall()[0][0]
    assert con.execute("SELECT data_type FROM duckdb_columns() WHERE table_name = 'blame_edges' "
                       "AND column_name IN ('side', 'how')").fetchall() == [("VARCHAR",)] * 2
    assert con.execute("SELECT count(*) FROM blame_edges").fetchall()[0][0] > 0
    con.execute("UPDATE blame_data SET via = 'a via of its own' WHERE out_seq = 2")
    con.execute("UPDATE blame_data SET via = NULL, reason = NULL WHERE out_seq = 3")
    con.execute("UPDATE blame_data SET reason = 'a reason of its own ' || (out_seq % 3) "
                "WHERE out_seq > 4")
    con.close()
    queries = {name: f"SELECT * FROM {name} ORDER BY ALL"
               for name in ("blame_rows", "blame", "blame_edges")}
    before = {name: history.query(db, q) for name, q in queries.items()}
    rows = history.query(db, "SELECT reason FROM blame_rows ORDER BY compare_id, out_seq").rows
    firsts = list(dict.fromkeys(r for (r,) in rows if r is not None))
    assert len(firsts) > 2 and (None,) in rows
    with caplog.at_level("INFO", logger="msq"):
        run_api(cj, tmp_path / "out", db=db)
    told = [r.getMessage() for r in caplog.records if "migrating the history" in r.getMessage()]
    assert len(told) == 1 and "rewrites its" in told[0]
    assert history.query(db, "SELECT value FROM meta WHERE key = 'schema_version'").rows == [
        (str(schema.SCHEMA_VERSION),)]
    for name, q in queries.items():
        after = history.query(db, q.replace("ORDER BY", "WHERE compare_id = 1 ORDER BY"))
        assert after.columns == before[name].columns
        assert repr(after.rows) == repr(before[name].rows), name  # NaN equal to NaN
    con = duckdb.connect(str(db), read_only=True)
    try:
        assert con.execute("SELECT data_type FROM duckdb_columns() "
                           "WHERE table_name = 'blame_edges' AND column_name IN ('side', 'how')"
                           ).fetchall() == [("ENUM('bench', 'npu')",), (
                               ("ENUM('constant', 'external', 'hash', 'md5', 'reshape', "
                                "'statistics')"),)]
        keyed = con.execute("SELECT reason_id, reason FROM reasons ORDER BY reason_id").fetchall()
        # each once, in the order of their first row, 0 the NULL one; then the new compare's
        # new ones (none: its reasons are the first one's before the changes above)
        second = [r for (r,) in con.execute("SELECT reason FROM blame_rows WHERE compare_id = 2 "
                                            "ORDER BY out_seq").fetchall()]
        assert keyed == [(0, None), *((i + 1, r) for i, r in enumerate(firsts))]
        assert None not in second and set(second) <= set(firsts)
        assert con.execute("SELECT count(*) FROM names WHERE name = 'a via of its own'"
                           ).fetchall() == [(1,)]
        assert con.execute("SELECT count(*) FROM blame_data WHERE compare_id = 2 "
                           "AND reason_id = 0").fetchall() == [(0,)]
    finally:
        con.close()
    fresh = tmp_path / "fresh.duckdb"
    run_api(cj, tmp_path / "out2", db=fresh)
    for table in ("blame_rows", "blame_data", "reasons", "blame_edges"):
        query_all = f"SELECT * FROM {table}"
        assert history.query(fresh, query_all).columns == history.query(db, query_all).columns
    assert history.query(fresh, "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows "
                                "ORDER BY out_seq").rows == history.query(
        db, "SELECT * EXCLUDE (compare_id, run_id) FROM blame_rows WHERE compare_id = 2 "
            "ORDER BY out_seq").rows
    assert history.query(fresh, "SELECT * FROM reasons ORDER BY reason_id").rows == [
        (0, None), *((i + 1, r) for i, r in enumerate(dict.fromkeys(second)))]
    for name in ("blame_rows", "blame_data", "reasons", "blame_edges"):
        sql = ("SELECT sql FROM duckdb_views() WHERE view_name = ?" if name == "blame_rows"
               else "SELECT sql FROM duckdb_tables() WHERE table_name = ?")
        assert history.query(fresh, sql.replace("?", f"'{name}'")).rows == history.query(
            db, sql.replace("?", f"'{name}'")).rows
