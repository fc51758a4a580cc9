"""msprobe 1.1.0's streaming op matcher, kept only for ``--compat msprobe-1.1`` (spec §3.1).

It walks both op lists one op per side per step, keeps FIFO queues and pairs the first match it
finds, so its output depends on queue order and it stops early when one side runs dry (the
truncation bug). Which two ops *can* match is decided in SQL (the ``op_candidates`` view); this
module only replays the walk and writes the ``op_pairs`` table.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb


def _find_hit(q_npu: list[int], q_bench: list[int],
              can_match: set[tuple[int, int]]) -> tuple[int, int] | None:
    newest_npu, newest_bench = q_npu[-1], q_bench[-1]
    for j, bench_op in enumerate(q_bench[:-1]):
        if (newest_npu, bench_op) in can_match:
            return len(q_npu) - 1, j
    if (newest_npu, newest_bench) in can_match:
        return len(q_npu) - 1, len(q_bench) - 1
    for i, npu_op in enumerate(q_npu[:-1]):
        if (npu_op, newest_bench) in can_match:
            return i, len(q_bench) - 1
    return None


def stream_match(npu_ops: Iterable[tuple[int, int]], bench_ops: Iterable[tuple[int, int]],
                 can_match: set[tuple[int, int]]) -> list[tuple[int, int | None]]:
    """Replay the 1.1.0 walk over ``(op_seq, n_rows)`` lists; return (npu_op, bench_op|None) in order."""
    npu_iter, bench_iter = iter(npu_ops), iter(bench_ops)
    q_npu: list[int] = []
    q_bench: list[int] = []
    out: list[tuple[int, int | None]] = []
    npu_done = bench_done = False
    while not (npu_done and bench_done):
        npu_grew = bench_grew = False
        nxt = next(npu_iter, None)
        if nxt is None:
            npu_done = True
        elif nxt[1] > 0:
            q_npu.append(nxt[0])
            npu_grew = True
        nxt = next(bench_iter, None)
        if nxt is None:
            bench_done = True
        elif nxt[1] > 0:
            q_bench.append(nxt[0])
            bench_grew = True
        if npu_done and bench_done and not (npu_grew or bench_grew):
            break
        if (not q_npu and not q_bench) or not (npu_grew or bench_grew):
            continue
        if not q_npu or not q_bench:
            break  # 1.1.0 stops reading here: later NPU ops never reach the report
        hit = _find_hit(q_npu, q_bench, can_match)
        if hit is None:
            continue
        i, j = hit
        out.extend((op, None) for op in q_npu[:i])
        out.append((q_npu[i], q_bench[j]))
        del q_npu[: i + 1]
        del q_bench[: j + 1]
    out.extend((op, None) for op in q_npu)
    return out


def write_compat_pairs(con: duckdb.DuckDBPyConnection, candidates: str = "op_candidates") -> None:
    """Fill ``op_pairs`` with the 1.1.0 walk.

    Args:
        con: the compare's connection.
        candidates: the view of the op pairs that can match (``npu_op``, ``bench_op``):
            ``op_candidates``, or ``ms_user_api_compat_candidates`` under a user api mapping.
    """
    can_match = set(con.execute(f"SELECT npu_op, bench_op FROM {candidates}").fetchall())
    sides = {}
    for side in ("npu", "bench"):
        sides[side] = con.execute(
            "SELECT op_seq, n_rows FROM ops WHERE side = ? ORDER BY op_seq", [side]).fetchall()
    pairs = stream_match(sides["npu"], sides["bench"], can_match)
    # two lists of ints as parameters, unnested side by side (in step: same length): ~10 ms for
    # 20k ops, and no pyarrow import (~0.1 s CPU, the only one of a --compat statistics compare)
    con.execute(
        "INSERT INTO op_pairs SELECT i - 1, n, b, "
        "CASE WHEN b IS NULL THEN 'unmatched_npu' ELSE 'matched' END "
        "FROM (SELECT generate_subscripts($1::INTEGER[], 1) AS i, unnest($1::INTEGER[]) AS n, "
        "unnest($2::INTEGER[]) AS b) ORDER BY i",
        [[p[0] for p in pairs], [p[1] for p in pairs]])
