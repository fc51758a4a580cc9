"""What the CLI prints: the summary of ``msq compare``, the text tables of ``msq sql``/``msq runs``.

Rendering lives here, at the CLI's edge; the library returns data (:class:`msq.result.CompareResult`,
:class:`msq.history.Table`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from msq.errors import printable

if TYPE_CHECKING:  # msq.history loads duckdb: only when a history command runs
    from msq.history import Table


def print_summary(results: Sequence[Any], *, quiet: bool = False) -> None:
    """One block per compare: rows, matches, marks, the first suspect and the files written."""
    if quiet:
        return
    for res in results:
        if res.mode == "kernel":
            for path in res.files:
                click.echo(f"wrote {path}")
            continue
        title = getattr(res, "title", "") or ""
        click.echo(f"msq compare{(' ' + title) if title else ''}: {res.mode} mode, {res.rows} rows "
                   f"({res.matched} matched, {res.unmatched_npu} NPU-only"
                   f"{f', {res.unmatched_bench} bench-only' if res.unmatched_bench else ''}), "
                   f"{res.red} red, {res.yellow} yellow, {res.seconds:.1f}s")
        if res.suspect != "NA":
            click.echo(f"  first suspect: row {res.suspect_line}: {printable(str(res.suspect))}")
        else:
            click.echo("  no suspect: every row meets the accuracy rules")
        for path in res.files:
            click.echo(f"  wrote {path}")
        if getattr(res, "history_db", None) is not None:
            click.echo(f"  recorded as compare {res.history_id} in {res.history_db}")
        if res.rows == 0:
            click.echo("  nothing to compare: no rows matched (no workbook written)")


# --------------------------------------------------------------------------------------------
# fixed-width text tables


def format_value(value: Any) -> str:
    """One cell as text: NULL, shortest round-trip floats, times to the second, escaped newlines."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    text = str(value)
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


_NUMERIC = re.compile(r"^(TINYINT|SMALLINT|INTEGER|BIGINT|HUGEINT|UTINYINT|USMALLINT|UINTEGER|"
                      r"UBIGINT|UHUGEINT|FLOAT|DOUBLE|DECIMAL.*)$")


def render_table(table: Table) -> str:
    """A fixed-width text table: header, dashes, rows (numbers right-aligned), row count."""
    if not table.columns:
        return "OK\n"
    cells = [[format_value(v) for v in row] for row in table.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(table.columns)]
    right = [bool(_NUMERIC.match(t)) for t in table.types]
    lines = [_line(table.columns, widths, [False] * len(widths)),
             _line(["-" * w for w in widths], widths, right)]
    lines += [_line(r, widths, right) for r in cells]
    count = len(table.rows)
    lines.append(f"({count} row{'' if count == 1 else 's'})")
    return "\n".join(lines) + "\n"


def _line(values: Sequence[str], widths: Sequence[int], right: Sequence[bool]) -> str:
    parts = [v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right)]
    return "  ".join(parts).rstrip()
