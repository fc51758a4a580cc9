"""Blame's dtype floors (sql/compare/schema/15_error_macros.sql): ``blame_row_floor`` gives the
commonest dtypes' floors as constants before it asks ``blame_dtype_floor``; each of them, and
every other dtype, gets from it what ``blame_dtype_floor`` gives (value and type)."""

from __future__ import annotations

from msq import db

#: Every dtype blame_dtype_floor lists, the constants blame_row_floor has, and others
DTYPES = ["torch.float32", "<class 'int'>", "torch.float16", "torch.bfloat16", "BFloat16",
          "bfloat16", "Float16", "float16", "torch.half", "Float32", "float32", "torch.float",
          "torch.complex64", "Complex64", "complex64", "torch.float64", "Float64", "float64",
          "torch.double", "torch.complex128", "Complex128", "complex128", "torch.float8_e4m3fn",
          "Float8E5M2", "<class 'float'>", "<class 'bool'>", "torch.int64", "torch.bool", "slice",
          "", None]


def test_row_floor_is_the_dtype_floor():
    con = db.connect()
    db.run_schema(con)
    rows = con.execute(
        "SELECT d, blame_row_floor(d) AS a, blame_dtype_floor(d) AS b, typeof(blame_row_floor(d)),"
        " typeof(blame_dtype_floor(d)) FROM (SELECT unnest(?::VARCHAR[]) AS d)", [DTYPES]
    ).fetchall()
    assert len(rows) == len(DTYPES)
    assert [r for r in rows if r[1] != r[2] or r[3] != r[4]] == []
    # the constants are not all one value: a floor that moved in one place alone would show
    assert len({r[1] for r in rows}) == 6
