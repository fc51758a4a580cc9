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

import dataclasses
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from msq.errors import HistoryError

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("msq")

def schema() -> pa.Schema:
    """The bands table's columns."""
    import pyarrow as pa  # lazy: only a run with noise bands needs it

    return pa.schema([("rank", pa.int32()), ("step", pa.int32()), ("npu_name", pa.string()),
                      ("band", pa.float64())])


def bands_table(rows: Iterable[tuple[int | None, int | None, str, float]]) -> pa.Table:
    """``rank, step, npu_name, band`` rows as the table blame reads."""
    import pyarrow as pa

    data = list(rows)
    cols: list[list[Any]] = [list(c) for c in zip(*data)] if data else [[], [], [], []]
    return pa.table(cols, schema=schema())


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


def bands_of(results: list[Any]) -> pa.Table:
    """The noise bands the compares of a reference noise run give (by rank, step, row name)."""
    from msq.history.recorder import parse_rank_step  # lazy: the history package is heavy

    rows = []
    for result in results:
        if result.blame is None:
            continue
        rank, step = parse_rank_step(Path(result.npu_path))
        rows += [(rank, step, name, band) for name, band in result.blame.bands]
    return bands_table(rows)


#: Compares one compare.json's input into a folder with the given options (the caller's
#: dispatch: a single card, or directories where the caller can run them).
Dispatch = Callable[[Any, Path, Any], list[Any]]


def run_reference(compare_json: Path, output_dir: Path, opts: Any, dispatch: Dispatch) -> pa.Table:
    """Compare the reference noise run ``compare_json`` with ``dispatch`` (outputs in
    ``output_dir/noise``, recorded in the compare's history with the label ``<label>-noise`` or
    ``noise``); return its bands."""
    from msq.blame.ranks import new_run_id
    from msq.blame.run import BlameRun
    from msq.config import parse_compare_json
    from msq.history.store import resolve_db_path

    # a run of its own, whose compares keep their bands; recorded beside the compare it serves
    # (its bands can be named by label later)
    noise_opts = dataclasses.replace(
        opts, noise=None, noise_label=None, blame_run=BlameRun(new_run_id(), bands_wanted=True),
        resume=False,
        label=f"{opts.label}-noise" if opts.label else "noise",
        db=str(resolve_db_path(opts.db, output_dir)) if opts.record else opts.db)
    out = output_dir / "noise"
    results = dispatch(parse_compare_json(compare_json), out, noise_opts)
    table = bands_of(results)
    log.info("blame: reference noise run %s: %d compares, %d rows with a noise band (outputs "
             "in %s)", compare_json, len(results), table.num_rows, out)
    return table


def from_history(db_opt: str | Path | None, output_dir: Path, label: str) -> pa.Table:
    """The bands of the noise run recorded with ``label`` (its newest compare per rank, step)."""
    from msq import db
    from msq.history.query import query
    from msq.history.store import resolve_db_path

    path = resolve_db_path(db_opt, output_dir)
    quoted = db.quote_str(label)
    found = query(path, f"SELECT count(*) FROM compares WHERE label = {quoted}").rows[0][0]
    if not found:
        raise HistoryError(f"{path}: no compare recorded with the label {label!r}; record the "
                           "reference noise run first (msq compare NOISE.json --label "
                           f"{label}) or give it with --noise NOISE.json")
    table = query(path, "SELECT rank, step, npu_name, band FROM noise_bands "
                        f"WHERE label = {quoted} AND band > 0")
    return bands_table(table.rows)
