"""Noise bands: what each row's error is in a reference noise run, to set blame's floors.

A reference noise run is two bench-side runs of the same model compared with each other (e.g.
the same step with another thread count or another seed for nondeterministic kernels). Blame of
that compare gives every row a *band*: the error the row adds over what its inputs bring
(``max(output_err - input_err, 0)``, what the op itself contributes run to run). In the real
compare a row's floor is the larger of its dtype floor and its band, matched by NPU row name (and
rank and step in a directory compare). Bands are recorded in the history with every compare
(``blame_rows.band``; the view ``noise_bands``), so a later compare can name a recorded noise run
by its label.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

log = logging.getLogger("msq")

SCHEMA = pa.schema([("rank", pa.int32()), ("step", pa.int32()), ("npu_name", pa.string()),
                    ("band", pa.float64())])


def bands_table(rows: Iterable[tuple[int | None, int | None, str, float]]) -> pa.Table:
    """``rank, step, npu_name, band`` rows as the table blame reads."""
    data = list(rows)
    cols: list[list[Any]] = [list(c) for c in zip(*data)] if data else [[], [], [], []]
    return pa.table(cols, schema=SCHEMA)


def bands_for(table: pa.Table | None, rank: int | None, step: int | None) -> pa.Table | None:
    """The bands that apply to one compare (rank, step) of the real run.

    The same rank and step if the noise run has them; else the same rank (a noise run of one
    step serves every step); else, when the noise run is a single compare, that one.
    """
    if table is None or table.num_rows == 0:
        return None
    keys = {(r, s) for r, s in zip(table.column("rank").to_pylist(),
                                    table.column("step").to_pylist())}
    for wanted in ((rank, step), *(k for k in sorted(keys, key=str) if k[0] == rank)):
        if wanted in keys:
            return _select(table, *wanted)
    if len(keys) == 1:
        return _select(table, *next(iter(keys)))
    log.warning("blame: the noise run has no rank %s (step %s); dtype floors are used for it",
                rank, step)
    return None


def _select(table: pa.Table, rank: int | None, step: int | None) -> pa.Table:
    import pyarrow.compute as pc

    def match(col: str, value: int | None) -> Any:
        column = table.column(col)
        return pc.is_null(column) if value is None else pc.equal(column, value)

    return table.filter(pc.and_(match("rank", rank), match("step", step)))
