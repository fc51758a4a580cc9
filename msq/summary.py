"""The console summary printed at the end of ``msq compare``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from msq.errors import printable


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
