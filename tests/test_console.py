"""What the CLI prints (msq/console.py)."""

from __future__ import annotations

from msq.console import render_table
from msq.history import Table


def test_render_table_aligns_numbers_and_marks_nulls() -> None:
    text = render_table(Table(
        ["name", "n", "x"], ["VARCHAR", "BIGINT", "DOUBLE"],
        [("a\tb", 1, 0.5), (None, 12345, float("nan")), ("long name", None, 1e-20)]))
    assert text == ("name       n      x\n"
                    "---------  -----  -----\n"
                    "a\\tb           1    0.5\n"
                    "NULL       12345    nan\n"
                    "long name   NULL  1e-20\n"
                    "(3 rows)\n")
    assert render_table(Table([], [], [])) == "OK\n"
