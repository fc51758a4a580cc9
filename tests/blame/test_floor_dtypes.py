"""Blame's dtype floor of a compared row: the larger of its NPU and bench rows' dtype floors, and
the dtype it is of (sql/compare/blame/blame_tensors.sql). The bench row's dtype comes from
row_error (its b_dtype_raw: where the dtypes differ or the NPU row has none), not from a join of
the bench rows: every pairing of dtypes, a missing one on either side included, gives what the
bench row's own dtype gives."""

from __future__ import annotations

from pathlib import Path

from tests.blame.test_links import pair
from tests.blame.util import blame_con, rows
from tests.dumps import fwd, t

#: (NPU dtype, bench dtype) of each output of one op: a missing dtype on either side or both
DTYPES = [(None, "torch.float16"), ("torch.float32", "torch.float16"),
          ("torch.float16", "torch.float16"), (None, None), ("torch.float32", None),
          ("torch.bfloat16", "torch.float32"), (None, "torch.int64")]

#: each row's dtype floor and dtype from the bench row's own dtype (its join, as blame_tensors
#: made them before row_error carried the bench dtype)
BY_JOIN = """
SELECT t.disp_name AS name,
  CASE WHEN t.dtype = b.dtype THEN blame_row_floor(t.dtype)
       ELSE greatest(blame_row_floor(t.dtype), blame_row_floor(b.dtype)) END AS dtype_floor,
  CASE WHEN t.dtype = b.dtype THEN t.dtype
       WHEN blame_row_floor(t.dtype) >= blame_row_floor(b.dtype) THEN t.dtype
       ELSE b.dtype END AS floor_dtype
FROM tensors t
LEFT JOIN compare_rows r ON r.npu_row = t.row_seq AND r.kind = 'matched'
LEFT JOIN tensors b ON b.side = 'bench' AND b.row_seq = r.bench_row
WHERE t.side = 'npu'
ORDER BY name
"""


def _dump(side: int) -> dict[str, object]:
    """An op a pairing of dtypes (``side``: 0 the NPU's, 1 the bench's): the compatible ones
    matched, the others (a missing dtype against another) each side's own row."""
    return {f"Torch.op{i}.0.forward": fwd(t(mx=1.0), out=t(dtype=pairing[side], mx=2.0 + i))
            for i, pairing in enumerate(DTYPES)}


def test_a_rows_floor_is_its_bench_rows_whatever_dtype_is_missing(tmp_path: Path) -> None:
    con = blame_con(*pair(tmp_path, _dump(0), _dump(1)))
    made = rows(con, "SELECT npu_name AS name, dtype_floor, floor_dtype FROM blame_tensors "
                     "ORDER BY name")
    assert made == rows(con, BY_JOIN) and len(made) == 2 * len(DTYPES)
    floors = {r["npu_name"]: (r["floor"], r["floor_source"])
              for r in rows(con, "SELECT npu_name, floor, floor_source FROM blame_rows")}
    # matched rows of two dtypes: the larger floor, and the dtype it is of
    assert floors["Torch.op1.0.forward.output.0"] == (1e-3, "dtype float16")
    assert floors["Torch.op5.0.forward.output.0"] == (1.6e-2, "dtype bfloat16")
    assert floors["Torch.op2.0.forward.output.0"] == (1e-3, "dtype float16")
    assert floors["Torch.op3.0.forward.output.0"] == (0.0, None)
