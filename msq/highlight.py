"""Highlight windows: which rows the colour rules weigh against each other (spec §5.5.1).

The rules themselves are SQL (``sql/compare/rules/marks.sql``); this module only decides the windows.
msprobe 1.1.0 groups rows with a small state machine over the displayed names that mis-groups ops
with only inputs or only outputs; ``--compat`` replays it, the default mode groups rows by op.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import duckdb

from msq import db
from msq.flatten import C_PADDING, Columns


def _state_and_api(name: str) -> tuple[str, str]:
    state = "input" if "input" in name else "output"
    return state, name.split(state, 1)[0]


def compat_windows(names: Sequence[str]) -> list[tuple[int, int, bool]]:
    """(row index, window number, is input) per row, exactly as msprobe 1.1.0 groups them."""
    out: list[tuple[int, int, bool]] = []
    total = len(names)
    windows = [0]

    def emit(start: int, n_in: int, n_out: int) -> None:
        win = windows[0]
        windows[0] += 1
        for idx in range(start, min(start + n_in + n_out, total)):
            out.append((idx, win, idx - start < n_in))

    start = n_in = n_out = count = 0
    last_api: str | None = None
    last_state: str | None = None
    for idx, name in enumerate(names):
        state, api = _state_and_api(name)
        if idx == 0:
            count, last_api, last_state = 1, api, state
        elif api == last_api:
            if state == last_state:
                count += 1
            else:
                n_in, count, last_state = count, 1, state
        else:
            n_out = count
            emit(start, n_in, n_out)
            start += n_in + n_out
            n_in, n_out, count, last_api, last_state = 1, 0, 1, api, state
    if total:
        if last_state == "input":
            n_in = count
        else:
            n_out = count
        emit(start, n_in, n_out)
    return out


def write_windows(con: duckdb.DuckDBPyConnection, compat: bool) -> None:
    """Fill ``hl_windows`` for the compare in ``con``."""
    if not compat:
        con.execute("""
            INSERT INTO hl_windows
            SELECT r.out_seq, r.ord, coalesce(n.disp_io, b.disp_io) = 'input'
            FROM compare_rows r
            LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
            LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row""")
        return
    rows = con.execute("""
        SELECT r.out_seq, coalesce(n.disp_name, 'N/A') FROM compare_rows r
        LEFT JOIN tensors n ON n.side = 'npu' AND n.row_seq = r.npu_row
        ORDER BY r.out_seq""").fetchall()
    seqs = [r[0] for r in rows]
    wins = compat_windows([r[1] for r in rows])
    out_seq = [seqs[i] for i, _, _ in wins]
    win = [w for _, w, _ in wins]
    is_input = [x for _, _, x in wins]
    if C_PADDING is not None:
        # as the C reader's columns, through the Arrow C stream: pyarrow's import (~0.1 s CPU)
        # was a --compat statistics compare's only one
        n = len(wins)
        db.insert_arrow(con, "hl_windows", Columns([[
            ("out_seq", "i64", n, 0, None, array("q", out_seq).tobytes(), None),
            ("win", "i64", n, 0, None, array("q", win).tobytes(), None),
            ("is_input", "i32", n, 0, None, array("i", is_input).tobytes(), None),
        ]]), select="out_seq, win, is_input::BOOLEAN")
        return
    import pyarrow as pa  # lazy: no C reader

    db.insert_arrow(con, "hl_windows", pa.table({
        "out_seq": pa.array(out_seq, pa.int64()), "win": pa.array(win, pa.int64()),
        "is_input": pa.array(is_input, pa.bool_())}))
