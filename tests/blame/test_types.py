"""Blame's closed texts are ENUMs in its own tables (sql/compare/schema/40_blame.sql) and texts
wherever they leave them: the view ``blame`` (reports, CSV, Parquet) and the history's SELECT of
blame's edges (its SELECT of blame's rows keeps them: handed over as Arrow dictionaries)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from msq.history.recorder import prepare_blame
from tests.blame.util import blame_con

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
#: blame's tables' ENUM columns and their types
ENUMS = {("blame_rows", "io"): "blame_io", ("blame_rows", "role"): "blame_role",
         ("blame_rows", "direction"): "blame_direction", ("blame_rows", "verdict"): "blame_verdict",
         ("blame_rows", "link"): "blame_link", ("blame_edges", "how"): "blame_link"}


def _types(con: duckdb.DuckDBPyConnection, relation: str) -> dict[str, str]:
    return dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {relation})")
                .fetchall())


def _enum(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    return con.execute(f"SELECT enum_range(NULL::{name})").fetchall()[0][0]


@pytest.mark.parametrize("fixture", ["stat", "tensor"])
def test_the_closed_texts_are_enums_in_blames_tables_and_texts_outside(fixture: str) -> None:
    dump = FIXTURES / fixture
    con = blame_con(dump / "npu/step0/rank/dump.json", dump / "bench/step0/rank/dump.json")
    for (table, column), enum in ENUMS.items():
        assert _types(con, table)[column] == str(_enum_type(con, enum)), (table, column)
    view = _types(con, "blame")
    selects = dict(prepare_blame(con))
    hist = {table: _types(con, f"(\n{sql}\n)") for table, sql in selects.items()}
    for (table, column), enum in ENUMS.items():
        if table == "blame_rows":
            assert view[column] == "VARCHAR", column
            # the history's blame rows keep the ENUMs: a pool worker hands them over as Arrow
            # dictionaries, which the driver looks up by their dictionaries alone (bench/README,
            # "Session 23: hist"); blame_edges' how is a text there
            assert hist[table][column] == str(_enum_type(con, enum)), (table, column)
        else:
            assert hist[table][column] == "VARCHAR", (table, column)
    # the texts are the same wherever they are read (the tables' ENUMs fetched, the view's and
    # the history SELECT's texts), and some of each are there to compare
    got = con.execute("SELECT b.io, b.role, b.direction, b.verdict, b.link, v.io, v.role, "
                      "v.direction, v.verdict, v.link "
                      "FROM blame_rows b JOIN blame v USING (out_seq)").fetchall()
    assert got and all(r[:5] == r[5:] for r in got)
    assert {r[3] for r in got} - {None} and {r[1] for r in got} >= {"output"}
    hist_rows = con.execute(f"SELECT out_seq, io, role, direction, verdict, link "
                            f"FROM (\n{selects['blame_rows']}\n) ORDER BY out_seq").fetchall()
    assert hist_rows == con.execute("SELECT out_seq, io, role, direction, verdict, link "
                                    "FROM blame_rows ORDER BY out_seq").fetchall()
    hows = con.execute(f"SELECT how FROM (\n{selects['blame_edges']}\n)").fetchall()
    assert sorted(hows) == sorted(con.execute("SELECT how::VARCHAR FROM blame_edges").fetchall())


def _enum_type(con: duckdb.DuckDBPyConnection, name: str) -> str:
    return "ENUM(" + ", ".join("'" + v.replace("'", "''") + "'" for v in _enum(con, name)) + ")"


def test_a_link_sorts_as_its_text() -> None:
    """The summary counts the links in the order of their texts (``ORDER BY how``): the ENUM's
    values are in that order."""
    con = duckdb.connect()
    from msq.sqlfiles import sql_root

    con.execute((sql_root() / "compare" / "schema" / "40_blame.sql").read_text())
    values = _enum(con, "blame_link")
    assert values == sorted(values)
    assert set(values) == {"constant", "external", "hash", "md5", "reshape", "statistics"}
