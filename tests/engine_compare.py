"""Compare two runs' outputs and history rows: what --engine ray must give as --engine local does.

Workbooks are equal when every zip member is byte-equal (the members' zip timestamps differ from
run to run); CSV, Parquet and advisor files when their bytes are equal. File names are compared
with their timestamps removed. History rows are compared keyed by (step, rank), without the
columns that hold times or the run's own output directory.
"""

from __future__ import annotations

import math
import re
import zipfile
from pathlib import Path
from typing import Any

import duckdb

_TS = re.compile(r"_\d{14}")
# compares columns that differ between two equal runs: when and how long, and where
_VOLATILE = {"compare_id", "started_at", "seconds", "output_dir", "files"}


def strip_ts(name: str) -> str:
    return _TS.sub("", name)


def outputs(folder: Path) -> dict[str, Path]:
    """The compare outputs of a folder by timestamp-free name (the history database excluded)."""
    return {strip_ts(p.name): p for p in folder.iterdir()
            if p.is_file() and p.suffix in (".xlsx", ".csv", ".parquet", ".txt")}


def file_differences(a: Path, b: Path) -> list[str]:
    """Names of the outputs that differ between two output folders (empty: identical)."""
    got, want = outputs(a), outputs(b)
    problems = [f"only in {a}: {n}" for n in sorted(set(got) - set(want))]
    problems += [f"only in {b}: {n}" for n in sorted(set(want) - set(got))]
    for name in sorted(set(got) & set(want)):
        if not same_file(got[name], want[name]):
            problems.append(f"differs: {name}")
    return problems


def same_file(a: Path, b: Path) -> bool:
    if a.suffix != ".xlsx":
        return a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as za, zipfile.ZipFile(b) as zb:
        if za.namelist() != zb.namelist():
            return False
        return all(za.read(n) == zb.read(n) for n in za.namelist())


def history_rows(db: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(compares rows, result_rows rows) in (step, rank, out_seq) order, volatile columns out;
    each compare's files as their timestamp-free names."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        cols = [r[0] for r in con.execute("DESCRIBE compares").fetchall()]
        keep = [c for c in cols if c not in _VOLATILE]
        compares = con.execute(
            f"SELECT {', '.join(keep)}, files FROM compares ORDER BY step, rank").fetchall()
        compares = [(*row[:-1], sorted(strip_ts(Path(f).name) for f in row[-1]))
                    for row in compares]
        row_cols = [r[0] for r in con.execute("DESCRIBE result_rows").fetchall()
                    if r[0] != "compare_id"]
        rows = con.execute(
            f"SELECT c.step, c.rank, {', '.join('r.' + c for c in row_cols)} FROM result_rows r "
            "JOIN compares c USING (compare_id) ORDER BY c.step, c.rank, r.out_seq").fetchall()
    finally:
        con.close()
    return [_nan_free(r) for r in compares], [_nan_free(r) for r in rows]


def _nan_free(row: tuple[Any, ...]) -> tuple[Any, ...]:
    # NaN != NaN: a NaN cell would make two equal rows differ
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)


def pair_counts(db: Path) -> list[tuple[int, int, int]]:
    """(step, rank, times recorded) of every pair in the history."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT step, rank, count(*) FROM compares GROUP BY ALL "
                           "ORDER BY step, rank").fetchall()
    finally:
        con.close()
