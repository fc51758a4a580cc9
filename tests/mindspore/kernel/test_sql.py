"""The kernel SQL views on synthetic tables: DuckDB arithmetic against numpy's (1.1.0 baseline)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa

from msq.mindspore.kernel.compare import NPY_FILES, NPY_METRICS, STAT_ROWS, _connect


def stat_table(side: str, stats: np.ndarray) -> pa.Table:
    count = len(stats)
    return pa.table({
        "side": [side] * count, "rank": [0] * count, "step": [0] * count,
        "seq": list(range(count)), "name": [f"{side}{i}" for i in range(count)],
        "compare_key": [f"k{i}" for i in range(count)], "ts": list(range(count)),
        "dtype": ["float32"] * count, "shape": ["(2,)"] * count,
        **{name: pa.array(stats[:, col], pa.float32())
           for col, name in enumerate(("max", "min", "mean", "norm"))},
    }, schema=STAT_ROWS)


def expected_rel(diff: np.float32, bench: np.float32) -> str:
    """1.1.0 under numpy 1.x: float32 diff / bench, widened to float64 by ``* 100``."""
    if not bench > 0:
        return "0%"
    return repr(float(diff / bench) * 100) + "%"


def test_statistic_arithmetic_matches_numpy() -> None:
    rng = np.random.default_rng(11)
    count = 3000
    scale = 10.0 ** rng.integers(-20, 20, (count, 4))
    npu = (rng.standard_normal((count, 4)) * scale).astype(np.float32)
    bench = (npu * rng.normal(1, 0.7, (count, 4))).astype(np.float32)
    bench[::5] = -bench[::5]
    bench[::17, 0] = 0
    npu[::23, 0] = np.nan
    tables = {"kernel_npy_files": NPY_FILES.empty_table(),
              "kernel_stat_rows": pa.concat_tables([stat_table("npu", npu),
                                                    stat_table("bench", bench)]),
              "kernel_npy_metrics": NPY_METRICS.empty_table()}
    con = _connect(tables)
    rows = con.execute('SELECT "Max diff", "Min diff", "Mean diff", "L2norm diff", '
                       '"MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", '
                       '"NormRelativeErr", "Accuracy Reached or Not" '
                       "FROM k20_stat_result ORDER BY row_order").fetchall()
    assert len(rows) == count
    with np.errstate(all="ignore"):
        for i, row in enumerate(rows):
            diffs = np.abs(npu[i] - bench[i])
            for got, want in zip(row[:4], diffs):
                assert got == float(want) or (math.isnan(got) and math.isnan(want))
            assert list(row[4:8]) == [expected_rel(d, b) for d, b in zip(diffs, bench[i])]
            larger = max(npu[i][0], bench[i][0])
            magnitude = float(diffs[0]) / (float(larger) + 1e-10)
            assert row[8] == ("No" if magnitude > 0.5 else "Yes")
