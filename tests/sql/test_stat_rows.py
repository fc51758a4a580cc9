"""``stat_rows`` (sql/compare/rules/statistics/stat_rows.sql) writes shown_diff's and shown_rel's
cases out (sql/compare/schema/10_macros.sql), with each statistic's "both sides are numbers" test
made once a row: on every combination of numbers, kinds and row kinds its differences and
relative errors are the macros' cells and texts (member and value; a relative error is a number,
<stat>_rel_pct, whose text rel_text prints)."""

from __future__ import annotations

from msq import db
from msq.config import Options
from msq.opening import rules_variant, unused_views

_NUMS = ["1.5", "0.0", "1.0", "-2.0", "NULL", "'nan'", "'inf'", "'-inf'", "1e308", "-1e308"]
_KINDS = ["'f'", "'i'", "'b'", "'s'", "'o'", "'n'", "NULL"]
_ROW_KINDS = ["'matched'", "'npu_only'", "'bench_only'", "'mapped'"]
_STATS = ("max", "min", "mean", "norm")


def _values(name: str, items: list[str], cast: str) -> str:
    rows = ", ".join(f"({v})" for v in items)
    return f"(SELECT CAST(x AS {cast}) AS {name} FROM (VALUES {rows}) t(x))"


def _grid() -> str:
    """display_rows' columns that stat_rows reads, one row per combination; the four statistics
    take the combinations in four different orders (each column of the row its own case)."""
    source = (f"{_values('kind', _ROW_KINDS, 'VARCHAR')}, {_values('n', _NUMS, 'DOUBLE')}, "
              f"{_values('nk', _KINDS, 'VARCHAR')}, {_values('b', _NUMS, 'DOUBLE')}, "
              f"{_values('bk', _KINDS, 'VARCHAR')}")
    stats = []
    for i, stat in enumerate(_STATS):
        # the i-th statistic reads the combination of the row i places on (a rotation)
        shift = f"(row_number() OVER () + {i * 997}) % count(*) OVER ()"
        stats.append(f"{shift} AS r_{stat}")
    rows = f"SELECT row_number() OVER () - 1 AS r, *, {', '.join(stats)} FROM {source}"
    cols = ", ".join(
        f"g{i}.n AS n_{stat}, g{i}.nk AS n_{stat}_k, g{i}.b AS b_{stat}, g{i}.bk AS b_{stat}_k"
        for i, stat in enumerate(_STATS))
    joins = " ".join(f"JOIN g g{i} ON g{i}.r = a.r_{stat}" for i, stat in enumerate(_STATS))
    names = ", ".join(f"'x' AS \"{c}\"" for c in (
        "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
        "Bench Tensor Shape", "NPU max", "NPU min", "NPU mean", "NPU l2norm", "Bench max",
        "Bench min", "Bench mean", "Bench l2norm"))
    return (f"WITH g AS ({rows}) SELECT a.r AS out_seq, a.kind, 'None' AS stack, {names}, "
            f"{cols} FROM g a {joins}")


def test_stat_rows_differences_and_relative_errors_are_the_macros() -> None:
    con = db.connect()
    db.run_schema(con)
    opts = Options()
    db.load_views(con, variants=["statistics", rules_variant(opts)], skip=unused_views(opts))
    con.execute("INSERT INTO settings (mode, compat) VALUES ('statistics', false)")
    con.execute(f"CREATE OR REPLACE VIEW display_rows AS {_grid()}")
    n_rows = len(_ROW_KINDS) * len(_NUMS) ** 2 * len(_KINDS) ** 2
    checks = []
    for stat in _STATS:
        args = f"d.kind = 'matched', n_{stat}, n_{stat}_k, b_{stat}, b_{stat}_k"
        want_diff, got_diff = f"shown_diff({args})", f"s.{stat}_diff"
        checks.append(f"union_tag({want_diff}) IS DISTINCT FROM union_tag({got_diff}) OR "
                      f"CAST({want_diff} AS VARCHAR) IS DISTINCT FROM CAST({got_diff} AS VARCHAR)")
        # the relative error as a number (in percent, or its fixed text's code)
        checks.append(f"shown_rel({args}) IS DISTINCT FROM rel_text(s.{stat}_rel_pct)")
    query = (f"FROM stat_rows s JOIN display_rows d USING (out_seq) WHERE {' OR '.join(checks)}")
    assert con.execute("SELECT count(*) FROM stat_rows").fetchall() == [(n_rows,)]
    assert con.execute(f"SELECT s.out_seq {query} LIMIT 5").fetchall() == []
    # the inputs reach every case: each member and text of the differences, each kind of
    # relative error text
    texts = {t for (t,) in con.execute(
        "SELECT DISTINCT coalesce(union_extract(max_diff, 's'), union_tag(max_diff)::VARCHAR) "
        "FROM stat_rows").fetchall()}
    assert texts == {"n", "N/A", "None", "nan\t", "inf\t", "-inf\t"}
    rels = {t if t in ("N/A", " ", "0.0%", "nan%", "inf%") else "number" for (t,) in con.execute(
        "SELECT DISTINCT rel_text(max_rel_pct) FROM stat_rows").fetchall()}
    assert rels == {"N/A", " ", "0.0%", "nan%", "inf%", "number"}
