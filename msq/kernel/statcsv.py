"""Read a MindSpore ``statistic.csv`` (spec §8.1) into rows for DuckDB.

Columns by position: 1 Op Name, 2 Task ID, 3 Stream ID, 4 Timestamp, 5 IO; by header name:
``Data Type``, ``Shape``, ``Max Value``, ``Min Value``, ``Avg Value``, ``L2Norm Value``.
The compare key is ``op_name.task_id.stream_id.io`` (no slot) and the displayed name is
``"<compare key> <absolute csv path>"``. Any malformed line stops the compare with a
:class:`DumpError` that names the file and the line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from msq.errors import DumpError

STAT_COLUMNS = ("Max Value", "Min Value", "Avg Value", "L2Norm Value")
REQUIRED_COLUMNS = ("Data Type", "Shape", *STAT_COLUMNS)
POSITIONAL = 6  # Op Type, Op Name, Task ID, Stream ID, Timestamp, IO come first

# Not numbers, but MindSpore writes them for bool tensors and for statistics it could not take.
_SPECIAL = {"True": 1.0, "False": 0.0, "null": math.nan}


@dataclass
class StatRows:
    """Column-wise rows of one side (the Arrow table is built from these lists)."""

    name: list[str] = field(default_factory=list)
    compare_key: list[str] = field(default_factory=list)
    ts: list[int] = field(default_factory=list)
    dtype: list[str] = field(default_factory=list)
    shape: list[str] = field(default_factory=list)
    stats: tuple[list[float], ...] = field(default_factory=lambda: ([], [], [], []))

    def __len__(self) -> int:
        return len(self.name)


def _header_index(path: Path, header: list[str]) -> dict[str, int]:
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
    return index


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


def _add_row(rows: StatRows, path: Path, line: int, row: list[str], index: dict[str, int]) -> None:
    key = f"{row[1]}.{row[2]}.{row[3]}.{row[5]}"
    rows.compare_key.append(key)
    rows.name.append(f"{key} {path}")
    rows.ts.append(_timestamp(path, line, row[4]))
    rows.dtype.append(row[index["Data Type"]])
    rows.shape.append(row[index["Shape"]])
    for values, column in zip(rows.stats, STAT_COLUMNS):
        values.append(_number(path, line, column, row[index[column]]))  # float32 when loaded


def read_statistic_csv(path: Path, rows: StatRows) -> None:
    """Append the rows of one ``statistic.csv`` to ``rows``."""
    line = 0
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise DumpError(f"{path}: line 1: the file is empty; a statistic.csv starts with "
                                "a header line. Re-dump or delete it.")
            index = _header_index(path, header)
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise DumpError(f"{path}: line {line}: {len(row)} columns, the header has "
                                    f"{len(header)}; fix or delete the line.")
                _add_row(rows, path, line, row, index)
    except UnicodeDecodeError as err:
        raise DumpError(f"{path}: not UTF-8 text ({err.reason}); re-dump the file.") from err
    except csv.Error as err:
        raise DumpError(f"{path}: line {line + 1}: malformed CSV ({err}); fix the line or "
                        "re-dump.") from err
