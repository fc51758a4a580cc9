"""``stat_rows`` (sql/compare/rules/statistics/stat_rows.sql) writes shown_stat's, shown_diff's and
shown_rel's cases out (sql/compare/schema/10_macros.sql), each cell as plain columns, with each
statistic's "both sides are numbers" test made once a row: on every combination of the numbers and
kinds the readers give (a number exactly for kinds i, f and b: stat_rows reads the kind from it,
and both readers keep to it on a dump of every kind), texts and row kinds its statistics and
differences are the macros' cells once plain_cell makes them again (member and value), and its
relative errors the macros' texts (a relative error is a number, <stat>_rel_pct, whose text
rel_text prints)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from msq import db, pipeline
from msq.config import Options
from msq.opening import rules_variant, unused_views

_NUMS = ["1.5", "0.0", "1.0", "-2.0", "NULL", "'nan'", "'inf'", "'-inf'", "1e308", "-1e308"]
#: each statistic's (number, kind) as the readers give them (msq/flatten.py's _kind,
#: msq/_flatten.c's stat_cols): a number exactly for kinds f (any double), i (a whole number, its
#: text in <stat>_str) and b (1 or 0); none for n (null), s (a string, or an int too large for a
#: double), o (any other value), nor on a side a row does not have (kind NULL)
_PAIRS = ([(n, "'f'") for n in _NUMS if n != "NULL"]
          + [(n, "'i'") for n in ("0.0", "1.0", "-2.0", "1e308", "-1e308")]
          + [("1.0", "'b'"), ("0.0", "'b'")]
          + [("NULL", k) for k in ("'s'", "'o'", "'n'", "NULL")])
_ROW_KINDS = ["'matched'", "'npu_only'", "'bench_only'", "'mapped'"]
_STATS = ("max", "min", "mean", "norm")
_SHOWN = {"max": "max", "min": "min", "mean": "mean", "norm": "l2norm"}
#: a statistic's text (its <stat>_str) by the row's place: a string, strings that read as
#: non-finite numbers, none
_TEXTS = ["'x'", "'inf'", "'nan'", "'-inf'", "NULL"]


def _values(name: str, items: list[str], cast: str) -> str:
    rows = ", ".join(f"({v})" for v in items)
    return f"(SELECT CAST(x AS {cast}) AS {name} FROM (VALUES {rows}) t(x))"


def _pairs(num: str, kind: str) -> str:
    rows = ", ".join(f"({n}, {k})" for n, k in _PAIRS)
    return (f"(SELECT CAST(x AS DOUBLE) AS {num}, CAST(k AS VARCHAR) AS {kind} "
            f"FROM (VALUES {rows}) t(x, k))")


def _grid() -> str:
    """display_names' columns that stat_rows reads, one row per combination; the four statistics
    take the combinations in four different orders (each column of the row its own case)."""
    source = f"{_values('kind', _ROW_KINDS, 'VARCHAR')}, {_pairs('n', 'nk')}, {_pairs('b', 'bk')}"
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
    # a matched row has both sides' rows, so each statistic a kind on both (kind NULL: the side
    # of an unmatched row that it does not have)
    both = " OR ".join(f"g{i}.nk IS NULL OR g{i}.bk IS NULL" for i in range(len(_STATS)))
    return (f"WITH g AS ({rows}) SELECT a.r AS out_seq, a.kind, 'None' AS stack, {names}, "
            f"{cols} FROM g a {joins} WHERE a.kind <> 'matched' OR NOT ({both})")


def test_stat_rows_differences_and_relative_errors_are_the_macros() -> None:
    con = db.connect()
    db.run_schema(con)
    opts = Options()
    db.load_views(con, variants=["statistics", rules_variant(opts)], skip=unused_views(opts))
    con.execute("INSERT INTO settings (mode, compat) VALUES ('statistics', false)")
    con.execute(f"CREATE OR REPLACE VIEW display_names AS {_grid()}")
    # every combination but a matched row's statistic without a kind on a side (1,456 of 1,600)
    n_rows = con.execute("SELECT count(*) FROM display_names").fetchall()[0][0]
    assert n_rows > len(_ROW_KINDS) * len(_PAIRS) ** 2 * 0.9
    checks = []
    def differs(want: str, got: str) -> str:
        return (f"union_tag({want}) IS DISTINCT FROM union_tag({got}) OR "
                f"CAST({want} AS VARCHAR) IS DISTINCT FROM CAST({got} AS VARCHAR)")

    for i, stat in enumerate(_STATS):
        args = f"d.kind = 'matched', n_{stat}, n_{stat}_k, b_{stat}, b_{stat}_k"
        checks.append(differs(f"shown_diff({args})",
                              f"plain_cell(s.{stat}_diff, s.cell_texts[{i + 1}], NULL)"))
        for k, (side, name, absent) in enumerate((("n", "NPU", "bench_only"),
                                                  ("b", "Bench", "npu_only"))):
            col = f'{name} {_SHOWN[stat]}'
            checks.append(differs(
                f"shown_stat(d.kind = '{absent}', d.{side}_{stat}, d.{side}_{stat}_k, "
                f"d.{side}_{stat}_s)",
                f'plain_cell(s."{col}", s.cell_texts[{5 + 4 * k + i}], '
                f's.cell_bools[{1 + 4 * k + i}])'))
        # the relative error as a number (in percent, or its fixed text's code)
        checks.append(f"shown_rel({args}) IS DISTINCT FROM rel_text(s.{stat}_rel_pct)")
    query = (f"FROM stat_rows s JOIN display_names d USING (out_seq) WHERE {' OR '.join(checks)}")
    assert con.execute("SELECT count(*) FROM stat_rows").fetchall() == [(n_rows,)]
    assert con.execute(f"SELECT s.out_seq {query} LIMIT 5").fetchall() == []
    # the inputs reach every case: each member and text of the differences, each kind of
    # relative error text
    texts = {t for (t,) in con.execute(
        "SELECT DISTINCT coalesce(cell_texts[1], CASE WHEN max_diff IS NOT NULL THEN 'n' END) "
        "FROM stat_rows").fetchall()}
    assert texts == {"n", "N/A", "None", "nan\t", "inf\t", "-inf\t"}
    # each member of a statistic and each text
    shown = {t for (t,) in con.execute(
        'SELECT DISTINCT coalesce(cell_texts[5], CASE WHEN "NPU max" IS NOT NULL THEN \'n\' '
        'WHEN cell_bools[1] IS NOT NULL THEN \'b\' ELSE \'none\' END) FROM stat_rows').fetchall()}
    assert shown == {"n", "b", "N/A", "None", "nan\t", "inf\t", "-inf\t", "x"}
    rels = {t if t in ("N/A", " ", "0.0%", "nan%", "inf%") else "number" for (t,) in con.execute(
        "SELECT DISTINCT rel_text(max_rel_pct) FROM stat_rows").fetchall()}
    assert rels == {"N/A", " ", "0.0%", "nan%", "inf%", "number"}
    # has_cell_text (tested on the numbers) is whether a text was made, on rows with booleans
    # and without (every row of the grid has a text: a difference of a string's statistic)
    _has_cell_text_is_any_text(con, "stat_rows")
    kinds = set(con.execute("SELECT DISTINCT has_cell_text, cell_bools IS NULL "
                            "FROM stat_rows").fetchall())
    assert kinds == {(True, True), (True, False)}, kinds


def test_readers_give_a_number_exactly_for_kinds_i_f_and_b(tmp_path: Path) -> None:
    """What stat_rows reads a statistic's kind from (its number: NULL exactly when the kind is
    none of i, f and b), on a dump of every kind of statistic, read by the C reader and by the
    Python one (an integer too large for a double and a list value: the Python one alone, the C
    one leaves such a dump to it)."""
    from msq import loader
    from msq.flatten import C_PADDING
    from tests.dumps import fwd, t, write_dump

    data = {
        "Functional.linear.0.forward": fwd(
            t([2, 3], mx=float("nan"), mn=float("-inf"), mean=float("inf"), norm=-0.0),
            t([1], mx=3, mn=-4, mean=True, norm=None), t([1], mx="text", mn=10**17, mean=1e308,
                                                       norm=False),
            {"type": "int", "value": -7}, {"type": "float", "value": 1e-300},
            {"type": "bool", "value": True}, {"type": "str", "value": "inf"},
            {"type": "NoneType", "value": None}, {"type": "slice", "value": [0, None, 2]},
            {"type": "torch.Size", "value": [2, 3]}, {"type": "weird"}, None),
        # read by the Python reader alone (the C one leaves such a dump to it)
        "Functional.huge.0.forward": fwd({"type": "int", "value": 10**400},
                                         {"type": "tuple", "value": [1, 2]}),
    }
    path = write_dump(tmp_path, data)
    sides = [("python", path, loader._read_side("npu", path, False))]
    small = write_dump(tmp_path / "c", {"Functional.linear.0.forward":
                                        data["Functional.linear.0.forward"]})
    if C_PADDING is not None:  # msq._flatten built
        c_side = loader._read_side_c("npu", small, False)
        assert c_side is not None, "the C reader left the dump to the Python one"
        sides.append(("c", small, c_side))
    kinds = set()
    for reader, _, side in sides:
        for row in side.rows.to_pylist():
            for stat in _STATS:
                kind, num = row[f"{stat}_kind"], row[f"{stat}_num"]
                kinds.add(kind)
                assert (num is not None) == (kind in ("i", "f", "b")), (reader, row)
    assert kinds == {"f", "i", "b", "n", "s", "o"}


#: stat_judged's join of the verdicts as it was: every verdict
_EVERY_VERDICT = "FROM stat_rows s LEFT JOIN verdicts v USING (out_seq)"


def test_stat_result_reads_a_verdict_that_says_nothing_as_no_verdict() -> None:
    """stat_result joins only the verdicts that say something (a reason, a mark or an unmatched
    reason): on every combination of a verdict's reason ('', NULL, a text), mark and unmatched
    reason, and on a row without a verdict, of each row kind, in the default mode and under
    --compat, its rows are those of the join of every verdict."""
    con = db.connect()
    db.run_schema(con)
    opts = Options()
    db.load_views(con, variants=["statistics", rules_variant(opts)], skip=unused_views(opts))
    con.execute(f"CREATE OR REPLACE VIEW display_names AS {_grid()}")
    con.execute("DROP VIEW verdicts")
    # 12 combinations and a 13th: no verdict, by out_seq
    con.execute(
        "CREATE TABLE verdicts AS SELECT d.out_seq, c.mark, NULL::VARCHAR AS rule, c.reason, "
        "c.unmatched_reason, NULL::VARCHAR AS unmatched_kind FROM display_names d JOIN "
        "(SELECT row_number() OVER () - 1 AS k, * FROM (VALUES ('', NULL, NULL), (NULL, NULL, "
        "NULL), ('why', NULL, NULL), ('', 'red', NULL), (NULL, 'yellow', NULL), ('why', 'red', "
        "NULL), ('', NULL, 'gone'), (NULL, NULL, 'gone'), ('why', NULL, 'gone'), ('', 'red', "
        "'gone'), (NULL, 'red', 'gone'), ('why', 'red', 'gone')) t(reason, mark, "
        "unmatched_reason)) c ON c.k = d.out_seq % 13")
    # (the join is stat_judged's, which stat_result reads)
    shipped = db.sql_file("compare/reports/statistics/stat_judged.sql").body
    start = shipped.index("FROM stat_rows s LEFT JOIN (")
    end = shipped.index("v USING (out_seq)", start) + len("v USING (out_seq)")
    every = db.sql_file("compare/reports/statistics/stat_result.sql").body.replace(
        pipeline.STAT_RESULT_JUDGED, f"FROM ({shipped[:start] + _EVERY_VERDICT + shipped[end:]})")
    for compat in (True, False):
        con.execute("DELETE FROM settings")
        con.execute("INSERT INTO settings (mode, compat) VALUES ('statistics', ?)", [compat])
        want = con.execute(f"SELECT * FROM ({every}) ORDER BY out_seq").fetchall()
        got = con.execute("SELECT * FROM stat_result ORDER BY out_seq").fetchall()
        differ = [(w, g) for w, g in zip(want, got, strict=True) if repr(w) != repr(g)]
        assert len(got) > 1000 and not differ, (compat, differ[:2])
        if not compat:  # what the default mode materialises: --compat false in the text
            bound = pipeline.bound_result("statistics")
            assert bound is not None and pipeline.STAT_RESULT_COMPAT not in bound
            got = con.execute(f"SELECT * FROM ({bound}) ORDER BY out_seq").fetchall()
            differ = [(w, g) for w, g in zip(want, got, strict=True) if repr(w) != repr(g)]
            assert not differ, ("bound", differ[:2])
    # the default mode's cases reach each text: a Warning, a Reason, an unmatched row's reason
    texts = set(con.execute(
        'SELECT DISTINCT "Result", "Err_message" LIKE \'%: gone.\', "Reason" <> \'\' '
        "FROM (SELECT * FROM stat_result WHERE NOT (SELECT compat FROM settings)) "
        "UNION ALL SELECT 'compat', NULL, NULL").fetchall())
    assert {("Warning", False, True), ("", False, False), ("N/A", True, True),
            ("N/A", False, False), ("N/A", False, True)} <= texts
    # has_cell_text (the workbook reads the cells' texts of its rows alone): whether any of the
    # twelve cells' texts is not NULL, tested on the numbers (plain_stat_has_text), and
    # cell_texts NULL exactly where it is false; cell_bools NULL exactly where every boolean is
    # (the grid's rows each have a text; the rows without are the workbooks' of tests/export
    # and tests/test_golden*, and stat_rows' grid below)
    _has_cell_text_is_any_text(con, "stat_result")


def _has_cell_text_is_any_text(con: Any, table: str) -> None:
    """``table``'s has_cell_text is whether any of cell_texts' twelve members is not NULL, and
    cell_texts is NULL where it is false; cell_bools is NULL exactly where its eight members
    all are."""
    texts = " OR ".join(f"cell_texts[{i}] IS NOT NULL" for i in range(1, 13))
    bools = " OR ".join(f"cell_bools[{i}] IS NOT NULL" for i in range(1, 9))
    flags = con.execute(
        f"SELECT DISTINCT has_cell_text IS NOT DISTINCT FROM ({texts}), "
        "(cell_texts IS NULL) = NOT has_cell_text, len(cell_texts), "
        f"(cell_bools IS NULL) = NOT ({bools}), len(cell_bools) FROM {table}").fetchall()
    assert {row[:2] + row[3:4] for row in flags} == {(True, True, True)}, flags
    assert {row[2] for row in flags} <= {12, None} and {row[4] for row in flags} <= {8, None}


def test_stat_rows_does_not_bind_display_rows_statistics_cells() -> None:
    """stat_rows reads display_names, not display_rows: display_rows' eight shown_stat cells
    (unions, each with two more macros) are not bound and optimised for a statistics compare
    only to be dropped (bench/README, "Session 29: rows"). Without display_rows, stat_rows gives
    the same rows; display_rows is display_names' columns and its eight cells after them."""
    con = db.connect()
    db.run_schema(con)
    opts = Options()
    db.load_views(con, variants=["statistics", rules_variant(opts)], skip=unused_views(opts))
    con.execute("INSERT INTO settings (mode, compat) VALUES ('statistics', false)")
    names = [c for (c,) in con.execute(
        "SELECT column_name FROM (DESCRIBE SELECT * FROM display_names)").fetchall()]
    shown = [c for (c,) in con.execute(
        "SELECT column_name FROM (DESCRIBE SELECT * FROM display_rows)").fetchall()]
    assert shown == names + [f"{side} {_SHOWN[stat]}" for side in ("NPU", "Bench")
                             for stat in _STATS]
    con.execute(f"CREATE OR REPLACE VIEW display_names AS {_grid()}")
    # (as texts: a NaN is not equal to itself)
    rows = repr(con.execute("SELECT * FROM stat_rows ORDER BY out_seq").fetchall())
    con.execute("DROP VIEW display_rows")
    assert repr(con.execute("SELECT * FROM stat_rows ORDER BY out_seq").fetchall()) == rows
