"""The statistics cells (sql/compare/schema/10_macros.sql): ``shown_stat`` and ``shown_diff`` are
written as one CASE of cells over one CASE of texts (cheaper to plan and to run than nested cell
macros). Every input they can meet gives the cell the nested form gave: same member, same value.
"""

from __future__ import annotations

from msq import db

#: The nested form they replace (the shipped macros until session 8), spelled out here.
_NESTED = """
CREATE MACRO old_stat_cell(num, kind, txt) AS (
  CASE
    WHEN kind IN ('f', 'i') AND isfinite(num) THEN union_value(n := num)::cell
    WHEN kind = 'b' THEN union_value(b := num = 1)::cell
    WHEN kind IN ('f', 'i') THEN num_cell(num)
    WHEN kind IN ('s', 'o') THEN text_cell(txt)
    ELSE union_value(s := 'None')::cell
  END);
CREATE MACRO old_shown_stat(absent, num, kind, txt) AS (
  CASE
    WHEN absent THEN union_value(s := 'N/A')::cell
    WHEN kind IN ('f', 'i') AND isfinite(num) THEN union_value(n := num)::cell
    ELSE old_stat_cell(num, kind, txt)
  END);
CREATE MACRO old_stat_diff(n, nk, b, bk) AS (
  CASE WHEN NOT coalesce(is_num(nk) AND is_num(bk), false) THEN union_value(s := 'None')::cell
       WHEN isfinite(n - b) THEN union_value(n := n - b)::cell
       ELSE num_cell(n - b) END);
CREATE MACRO old_shown_diff(matched, n, nk, b, bk) AS (
  CASE WHEN NOT matched THEN union_value(s := 'N/A')::cell
       WHEN is_num(nk) AND is_num(bk) AND isfinite(n - b) THEN union_value(n := n - b)::cell
       ELSE old_stat_diff(n, nk, b, bk) END);
"""

_NUMS = ["1.5", "0.0", "1.0", "-2.0", "NULL", "'nan'", "'inf'", "'-inf'", "1e308", "-1e308"]
_KINDS = ["'f'", "'i'", "'b'", "'s'", "'o'", "'x'", "NULL"]
_TEXTS = ["NULL", "'inf'", "'-inf'", "'nan'", "'abc'", "''", "'None'"]
_FLAGS = ["true", "false", "NULL"]


def _values(name: str, items: list[str], cast: str) -> str:
    rows = ", ".join(f"({v})" for v in items)
    return f"(SELECT {cast.format('x')} AS {name} FROM (VALUES {rows}) t(x))"


def _differences(con: object, new: str, old: str, source: str) -> list[tuple[object, ...]]:
    # member and value text of each cell (a NaN compares equal to itself as text)
    return con.execute(  # type: ignore[attr-defined, no-any-return]
        f"SELECT * FROM (SELECT *, union_tag({new}) AS t1, CAST({new} AS VARCHAR) AS v1, "
        f"union_tag({old}) AS t2, CAST({old} AS VARCHAR) AS v2 FROM {source}) "
        "WHERE t1 IS DISTINCT FROM t2 OR v1 IS DISTINCT FROM v2").fetchall()


def test_shown_stat_and_shown_diff_give_the_nested_forms_cells() -> None:
    con = db.connect()
    db.run_schema(con)
    con.execute(_NESTED)
    nums = _values("num", _NUMS, "CAST({} AS DOUBLE)")
    stat_source = (f"{_values('absent', _FLAGS, 'CAST({} AS BOOLEAN)')}, {nums}, "
                   f"{_values('kind', _KINDS, 'CAST({} AS VARCHAR)')}, "
                   f"{_values('txt', _TEXTS, 'CAST({} AS VARCHAR)')}")
    assert con.execute(f"SELECT count(*) FROM {stat_source}").fetchall() == [
        (len(_FLAGS) * len(_NUMS) * len(_KINDS) * len(_TEXTS),)]
    assert _differences(con, "shown_stat(absent, num, kind, txt)",
                        "old_shown_stat(absent, num, kind, txt)", stat_source) == []
    diff_source = (f"{_values('matched', _FLAGS, 'CAST({} AS BOOLEAN)')}, {nums}, "
                   f"{_values('nk', _KINDS, 'CAST({} AS VARCHAR)')}, "
                   f"{_values('b', _NUMS, 'CAST({} AS DOUBLE)')}, "
                   f"{_values('bk', _KINDS, 'CAST({} AS VARCHAR)')}")
    assert _differences(con, "shown_diff(matched, num, nk, b, bk)",
                        "old_shown_diff(matched, num, nk, b, bk)", diff_source) == []
    # the cases the inputs above reach: every member and every text the cells can hold
    tags = {t for (t,) in con.execute(
        f"SELECT DISTINCT union_tag(shown_stat(absent, num, kind, txt)) FROM {stat_source}"
    ).fetchall()}
    assert tags == {"n", "s", "b"}
    texts = {v for (v,) in con.execute(
        "SELECT DISTINCT union_extract(shown_diff(matched, num, nk, b, bk), 's') "
        f"FROM {diff_source}"
    ).fetchall()}
    assert {"N/A", "None", "nan\t", "inf\t", "-inf\t"} <= texts
