"""The per-row error figure (sql/rules/row_error.sql) on hand-made rows, in a real DuckDB.

One figure per output row, relative and comparable across rows: statistics mode from the four
statistics (scale-aware: a mean that cancels to ~0 cannot blow it up), tensor mode the relative
L2 error from the metrics pass, md5 mode 0/1.
"""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pytest

from msq import db

COLS = ("side, row_seq, op_seq, row_in_op, name, disp_name, match_name, io, disp_io, dtype, shape, "
        "md5, data_name, is_tensor, numel, max_num, max_kind, max_str, min_num, min_kind, min_str, "
        "mean_num, mean_kind, mean_str, norm_num, norm_kind, norm_str")


def _con(mode: str) -> duckdb.DuckDBPyConnection:
    con = db.connect()
    db.run_schema(con)
    db.load_views(con, variants=[mode])
    con.execute("INSERT INTO settings VALUES (?, false, false, false, false, false, false)", [mode])
    return con


def _tensor(con: duckdb.DuckDBPyConnection, side: str, seq: int, stats: tuple[float, ...],
            numel: int = 16, md5: str | None = None) -> None:
    mx, mn, mean, norm = stats
    con.execute(f"INSERT INTO tensors ({COLS}) VALUES (?, ?, 0, ?, 'x', 'x', 'x', 'output', "
                "'output', 'torch.float32', '[16]', ?, '-1', true, ?, ?, 'f', NULL, ?, 'f', NULL, "
                "?, 'f', NULL, ?, 'f', NULL)", [side, seq, seq, md5, numel, mx, mn, mean, norm])


def _value(con: duckdb.DuckDBPyConnection, side: str, seq: int, value: Any) -> None:
    num = float(value) if isinstance(value, (int, float)) else None
    kind = "f" if isinstance(value, float) else ("i" if isinstance(value, int) else "s")
    text = None if isinstance(value, float) else str(value)
    con.execute(f"INSERT INTO tensors ({COLS}) VALUES (?, ?, 0, ?, 'x', 'x', 'x', 'input', 'input', "
                "'<class ''int''>', '[]', NULL, '-1', false, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?)", [side, seq, seq] + [num, kind, text] * 4)


def _pair(con: duckdb.DuckDBPyConnection, out_seq: int, kind: str = "matched") -> None:
    con.execute("INSERT INTO compare_rows VALUES (?, ?, ?, ?, ?, false)",
                [out_seq, out_seq, out_seq if kind != "bench_only" else None,
                 out_seq if kind != "npu_only" else None, kind])


def _err(con: duckdb.DuckDBPyConnection, out_seq: int) -> tuple[float | None, str]:
    row = con.execute("SELECT err, err_kind FROM row_error WHERE out_seq = ?", [out_seq]).fetchone()
    assert row is not None
    return row[0], row[1]


def test_statistics_figure_is_scale_aware() -> None:
    con = _con("statistics")
    # equal statistics
    _tensor(con, "npu", 0, (1.0, -1.0, 0.1, 2.0))
    _tensor(con, "bench", 0, (1.0, -1.0, 0.1, 2.0))
    # means of -5.6e-9 vs 3.7e-9 on a tensor of norm 4, 16 elements (rms 1): a relative error of
    # the mean would be 250 %; against the rms it is ~1e-8
    _tensor(con, "npu", 1, (2.0, -2.0, -5.6e-9, 4.0))
    _tensor(con, "bench", 1, (2.0, -2.0, 3.7e-9, 4.0))
    # a norm 10 % larger: 0.1 / 1.1
    _tensor(con, "npu", 2, (1.0, -1.0, 0.0, 1.1))
    _tensor(con, "bench", 2, (1.0, -1.0, 0.0, 1.0))
    # the max moves by 0.5 on a magnitude of 2: 0.25
    _tensor(con, "npu", 3, (1.5, -2.0, 0.0, 3.0))
    _tensor(con, "bench", 3, (1.0, -2.0, 0.0, 3.0))
    for i in range(4):
        _pair(con, i)
    assert _err(con, 0) == (0.0, "statistics")
    err, kind = _err(con, 1)
    assert kind == "statistics" and err == pytest.approx(9.3e-9, rel=1e-6)
    assert _err(con, 2)[0] == pytest.approx(0.1 / 1.1)
    assert _err(con, 3)[0] == pytest.approx(0.25)


def test_shared_inf_is_no_error_one_sided_inf_is_infinite() -> None:
    con = _con("statistics")
    inf = math.inf
    _tensor(con, "npu", 0, (1.0, -inf, -inf, inf))
    _tensor(con, "bench", 0, (1.0, -inf, -inf, inf))
    _tensor(con, "npu", 1, (inf, 0.0, inf, inf))
    _tensor(con, "bench", 1, (3.0, 0.0, 1.0, 5.0))
    # both sides have the same -inf min, their max differ: the scale is the finite magnitude
    _tensor(con, "npu", 2, (2.0, -inf, -inf, inf))
    _tensor(con, "bench", 2, (1.0, -inf, -inf, inf))
    for i in range(3):
        _pair(con, i)
    assert _err(con, 0)[0] == 0.0
    assert _err(con, 1) == (math.inf, "inf/nan on one side")
    assert _err(con, 2)[0] == pytest.approx(0.5)


def test_md5_mode_is_equal_or_differs_and_values_compare_as_numbers() -> None:
    con = _con("md5")
    _tensor(con, "npu", 0, (1.0, 0.0, 0.5, 1.0), md5="aa")
    _tensor(con, "bench", 0, (1.0, 0.0, 0.5, 1.0), md5="aa")
    _tensor(con, "npu", 1, (1.0, 0.0, 0.5, 1.0), md5="aa")
    _tensor(con, "bench", 1, (1.0, 0.0, 0.5, 1.0), md5="bb")  # same statistics, other bytes
    _value(con, "npu", 2, 3)
    _value(con, "bench", 2, 4)
    _value(con, "npu", 3, "mean")
    _value(con, "bench", 3, "sum")
    _tensor(con, "npu", 4, (1.0, 0.0, 0.5, 1.0), md5="aa")
    for i in range(4):
        _pair(con, i)
    _pair(con, 4, "npu_only")
    assert _err(con, 0) == (0.0, "md5")
    assert _err(con, 1) == (1.0, "md5")
    assert _err(con, 2) == (pytest.approx(0.25), "value")
    assert _err(con, 3) == (1.0, "value")
    assert _err(con, 4) == (None, "unmatched")


def test_tensor_mode_is_the_relative_l2_error_of_the_metrics_pass() -> None:
    con = _con("tensor")
    for i in range(3):
        _tensor(con, "npu", i, (1.0, -1.0, 0.0, 2.0))
        _tensor(con, "bench", i, (1.0, -1.0, 0.0, 2.0))
        _pair(con, i)
    con.execute("INSERT INTO tensor_metrics (out_seq, status, sq_diff, npu_sq, bench_sq) VALUES "
                "(0, 'ok', 0.04, 4.0, 3.0), (1, 'nanpos', NULL, NULL, NULL), "
                "(2, 'no_data', NULL, NULL, NULL)")
    assert _err(con, 0) == (pytest.approx(0.1), "relative L2")  # sqrt(0.04) / sqrt(4)
    assert _err(con, 1) == (math.inf, "inf/nan positions differ")
    assert _err(con, 2) == (0.0, "statistics")  # no tensors read: the dump's statistics
