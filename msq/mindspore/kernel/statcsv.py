"""Read a MindSpore ``statistic.csv`` (spec §8.1) into an Arrow table for DuckDB.

Columns by position: 1 Op Name, 2 Task ID, 3 Stream ID, 4 Timestamp, 5 IO; by header name:
``Data Type``, ``Shape``, ``Max Value``, ``Min Value``, ``Avg Value``, ``L2Norm Value``.
The compare key is ``op_name.task_id.stream_id.io`` (no slot) and the displayed name is
``"<compare key> <absolute csv path>"``. Any malformed line stops the compare with a
:class:`DumpError` that names the file and the line.

A file is read in bulk with pyarrow; if anything in it does not convert, it is read again line by
line with the csv module, which either finds the bad line or accepts what Python accepts.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyarrow import csv as pa_csv

from msq.errors import DumpError

STAT_COLUMNS = ("Max Value", "Min Value", "Avg Value", "L2Norm Value")
STAT_NAMES = ("max", "min", "mean", "norm")
REQUIRED_COLUMNS = ("Data Type", "Shape", *STAT_COLUMNS)
POSITIONAL = 6  # Op Type, Op Name, Task ID, Stream ID, Timestamp, IO come first
SCHEMA = pa.schema([
    ("name", pa.string()), ("compare_key", pa.string()), ("ts", pa.int64()),
    ("dtype", pa.string()), ("shape", pa.string()),
    *[(name, pa.float32()) for name in STAT_NAMES],
])

# Not numbers, but MindSpore writes them for bool tensors and for statistics it could not take.
_SPECIAL = {"True": 1.0, "False": 0.0, "null": math.nan}


def _header(path: Path) -> tuple[list[str], dict[str, int]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), None)
    except (UnicodeDecodeError, csv.Error) as err:
        raise DumpError(f"{path}: line 1: unreadable header ({err}); re-dump the file.") from err
    if header is None:
        raise DumpError(f"{path}: line 1: the file is empty; a statistic.csv starts with a header "
                        "line. Re-dump or delete it.")
    index = {}
    for column in REQUIRED_COLUMNS:
        if column not in header:
            raise DumpError(f"{path}: line 1: the header has no '{column}' column; a MindSpore "
                            f"statistic.csv needs {', '.join(REQUIRED_COLUMNS)}. Re-dump with "
                            "statistics enabled or fix the header.")
        index[column] = header.index(column)
    if len(header) < POSITIONAL:
        raise DumpError(f"{path}: line 1: the header has {len(header)} columns, fewer than the "
                        f"{POSITIONAL} leading ones (Op Type, Op Name, Task ID, Stream ID, "
                        "Timestamp, IO); fix the header.")
    return header, index


def _table(path: Path, key: list[str], ts: pa.Array, dtype: pa.Array, shape: pa.Array,
           stats: list[pa.Array]) -> pa.Table:
    keys = pa.array(key, pa.string()) if isinstance(key, list) else key
    names = pc.binary_join_element_wise(keys, f" {path}", "")
    with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, as in 1.1.0
        floats = [pa.array(np.asarray(values, dtype=np.float64).astype(np.float32))
                  for values in stats]
    return pa.Table.from_arrays([names, keys, ts, dtype, shape, *floats], schema=SCHEMA)


def _fast(path: Path, header: list[str], index: dict[str, int]) -> pa.Table | None:
    """Bulk read; None when any value needs the line-by-line reader."""
    names = [f"c{i}" for i in range(len(header))]
    try:
        table = pa_csv.read_csv(
            path,
            read_options=pa_csv.ReadOptions(skip_rows=1, column_names=names),
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={name: pa.string() for name in names},
                strings_can_be_null=False, quoted_strings_can_be_null=False))
        col = [table.column(name) for name in names]
        key = pc.binary_join_element_wise(col[1], col[2], col[3], col[5], ".")
        ts = pc.cast(col[4], pa.int64())
        stats = []
        for column in STAT_COLUMNS:
            text = pc.utf8_trim_whitespace(col[index[column]])
            for word, value in _SPECIAL.items():
                text = pc.if_else(pc.equal(text, word), str(value), text)
            stats.append(pc.cast(text, pa.float64()).to_numpy(zero_copy_only=False))
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    return _table(path, key.combine_chunks(), ts.combine_chunks(),
                  col[index["Data Type"]].combine_chunks(), col[index["Shape"]].combine_chunks(),
                  stats)


def _number(path: Path, line: int, column: str, text: str) -> float:
    value = _SPECIAL.get(text.strip())
    if value is not None:
        return value
    try:
        return float(text)
    except ValueError:
        raise DumpError(f"{path}: line {line}: column '{column}' holds {text!r}, not a number; "
                        "fix the value or re-dump.") from None


def _timestamp(path: Path, line: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise DumpError(f"{path}: line {line}: the Timestamp column (5th) holds {text!r}, not an "
                        "integer; fix the value or re-dump.") from None


def _slow(path: Path, header: list[str], index: dict[str, int]) -> pa.Table:
    """Line by line: Python's int()/float() semantics and the exact line of any error."""
    key: list[str] = []
    ts: list[int] = []
    dtype: list[str] = []
    shape: list[str] = []
    stats: list[list[float]] = [[] for _ in STAT_COLUMNS]
    line = 1
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            next(reader)
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise DumpError(f"{path}: line {line}: {len(row)} columns, the header has "
                                    f"{len(header)}; fix or delete the line.")
                key.append(f"{row[1]}.{row[2]}.{row[3]}.{row[5]}")
                ts.append(_timestamp(path, line, row[4]))
                dtype.append(row[index["Data Type"]])
                shape.append(row[index["Shape"]])
                for values, column in zip(stats, STAT_COLUMNS):
                    values.append(_number(path, line, column, row[index[column]]))
    except UnicodeDecodeError as err:
        raise DumpError(f"{path}: line {line + 1}: not UTF-8 text ({err.reason}); re-dump the "
                        "file.") from err
    except csv.Error as err:
        raise DumpError(f"{path}: line {line + 1}: malformed CSV ({err}); fix the line or "
                        "re-dump.") from err
    return _table(path, key, pa.array(ts, pa.int64()), pa.array(dtype, pa.string()),
                  pa.array(shape, pa.string()), stats)


def read_statistic_csv(path: Path) -> pa.Table:
    """The rows of one ``statistic.csv`` in file order, with the columns of :data:`SCHEMA`."""
    header, index = _header(path)
    table = _fast(path, header, index)
    return table if table is not None else _slow(path, header, index)
