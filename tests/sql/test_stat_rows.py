"""``stat_rows`` (sql/compare/rules/statistics/stat_rows.sql) writes shown_stat's, shown_diff's and
shown_rel's cases out (sql/compare/schema/10_macros.sql), each cell as plain columns, with each
statistic's "both sides are numbers" test made once a row: on every combination of numbers, kinds,
texts and row kinds its statistics and differences are the macros' cells once plain_cell makes
them again (member and value), and its relative errors the macros' texts (a relative error is a
number, <stat>_rel_pct, whose text rel_text prints)."""

from __future__ import annotations

from msq import db
from msq.config import Options
from msq.opening import rules_variant, unused_views

_NUMS = ["1.5", "0.0", "1.0", "-2.0", "NULL", "'nan'", "'inf'", "'-inf'", "1e308", "-1e308"]
_KINDS = ["'f'", "'i'", "'b'", "'s'", "'o'", "'n'", "NULL"]
_ROW_KINDS = ["'matched'", "'npu_only'", "'bench_only'", "'mapped'"]
_STATS = ("max", "min", "mean", "norm")
_SHOWN = {"max": "max", "min": "min", "mean": "mean", "norm": "l2norm"}
#: a statistic's text (its <stat>_str) by the row's place: a string, strings that read as
#: non-finite numbers, none
_TEXTS = ["'x'", "'inf'", "'nan'", "'-inf'", "NULL"]


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
    texts = ", ".join(_TEXTS)
    cols = ", ".join(
        f"g{i}.n AS n_{stat}, g{i}.nk AS n_{stat}_k, g{i}.b AS b_{stat}, g{i}.bk AS b_{stat}_k, "
        f"[{texts}][(a.r + {i}) % {len(_TEXTS)} + 1] AS n_{stat}_s, "
        f"[{texts}][(a.r + {i} + 2) % {len(_TEXTS)} + 1] AS b_{stat}_s"
        for i, stat in enumerate(_STATS))
    joins = " ".join(f"JOIN g g{i} ON g{i}.r = a.r_{stat}" for i, stat in enumerate(_STATS))
    names = ", ".join(f"'x' AS \"{c}\"" for c in (
        "NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape",
        "Bench Tensor Shape"))
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
    def differs(want: str, got: str) -> str:
        return (f"union_tag({want}) IS DISTINCT FROM union_tag({got}) OR "
                f"CAST({want} AS VARCHAR) IS DISTINCT FROM CAST({got} AS VARCHAR)")

    for stat in _STATS:
        args = f"d.kind = 'matched', n_{stat}, n_{stat}_k, b_{stat}, b_{stat}_k"
        checks.append(differs(f"shown_diff({args})",
                              f"plain_cell(s.{stat}_diff, s.{stat}_diff_text, NULL)"))
        for side, name, absent in (("n", "NPU", "bench_only"), ("b", "Bench", "npu_only")):
            col = f'{name} {_SHOWN[stat]}'
            checks.append(differs(
                f"shown_stat(d.kind = '{absent}', d.{side}_{stat}, d.{side}_{stat}_k, "
                f"d.{side}_{stat}_s)",
                f'plain_cell(s."{col}", s."{col} (text)", s."{col} (bool)")'))
        # the relative error as a number (in percent, or its fixed text's code)
        checks.append(f"shown_rel({args}) IS DISTINCT FROM rel_text(s.{stat}_rel_pct)")
    query = (f"FROM stat_rows s JOIN display_rows d USING (out_seq) WHERE {' OR '.join(checks)}")
    assert con.execute("SELECT count(*) FROM stat_rows").fetchall() == [(n_rows,)]
    assert con.execute(f"SELECT s.out_seq {query} LIMIT 5").fetchall() == []
    # the inputs reach every case: each member and text of the differences, each kind of
    # relative error text
    texts = {t for (t,) in con.execute(
        "SELECT DISTINCT coalesce(max_diff_text, CASE WHEN max_diff IS NOT NULL THEN 'n' END) "
        "FROM stat_rows").fetchall()}
    assert texts == {"n", "N/A", "None", "nan\t", "inf\t", "-inf\t"}
    # each member of a statistic, each text, and a boolean statistic without a number (all
    # three columns NULL)
    shown = {t for (t,) in con.execute(
        'SELECT DISTINCT coalesce("NPU max (text)", CASE WHEN "NPU max" IS NOT NULL THEN \'n\' '
        'WHEN "NPU max (bool)" IS NOT NULL THEN \'b\' ELSE \'none\' END) FROM stat_rows').fetchall()}
    assert shown == {"n", "b", "none", "N/A", "None", "nan\t", "inf\t", "-inf\t", "x"}
    rels = {t if t in ("N/A", " ", "0.0%", "nan%", "inf%") else "number" for (t,) in con.execute(
        "SELECT DISTINCT rel_text(max_rel_pct) FROM stat_rows").fetchall()}
    assert rels == {"N/A", " ", "0.0%", "nan%", "inf%", "number"}
