"""``msq show`` from an output folder without a history database: its CSV or Parquet outputs.

They carry the workbook's columns and each row's mark and rules (outputs.MARK_COLUMNS), so the
counts and the marked rows are read back from them; the advisor file beside them names the
suspect. The latest output of each compare (its file name without the time stamp) is read:
a directory run wrote one per rank and step pair.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from msq.errors import InputError
from msq.export.outputs import MARK_COLUMNS, REASON
from msq.result import MarkedRow, ShownCompare, ShownRun

_OUTPUT = re.compile(r"^compare_result(?P<suffix>.*)_(?P<stamp>\d{14})\.(?P<fmt>csv|parquet)$")
_PAIR = re.compile(r"^_(?:step(?P<step>\d+)_)?rank(?P<rank>\d*)-rank\d*$")
_NAMES = ("NPU Name", "Bench Name")


def show_folder(folder: Path, limit: int | None) -> ShownRun:
    """The latest CSV/Parquet output of each compare in ``folder``, in step and rank order."""
    found: dict[str, list[tuple[str, bool, Path]]] = {}
    for path in folder.iterdir():
        name = _OUTPUT.match(path.name)
        if name is not None:
            found.setdefault(name["suffix"], []).append(
                (name["stamp"], name["fmt"] == "parquet", path))
    if not found:
        raise InputError(f"{folder}: no history database (msq.duckdb) and no CSV or Parquet "
                         "output to read; compare with the history on, or with --format csv "
                         "or parquet, or give the history with --db")
    # each compare's newest output, Parquet before CSV of the same run
    shown = [_read(suffix, max(outs)[2], folder, limit) for suffix, outs in found.items()]
    shown.sort(key=lambda c: (c.step if c.step is not None else -1,
                              c.rank if c.rank is not None else -1))
    return ShownRun(str(folder), shown)


def _read(suffix: str, path: Path, folder: Path, limit: int | None) -> ShownCompare:
    table = _table(path)
    missing = [name for name, _ in MARK_COLUMNS if name not in table.column_names]
    if missing:
        raise InputError(f"{path}: has no {', '.join(missing)} column; it was written by an "
                         "older msq: compare again, or read the history with --db")
    columns = table.column_names
    mode = "tensor" if "Cosine" in columns else "md5" if "NPU MD5" in columns else "statistics"
    npu, bench = (table.column(n).to_pylist() for n in _NAMES)
    marks = table.column(MARK_COLUMNS[0][0]).to_pylist()
    rules = table.column(MARK_COLUMNS[1][0]).to_pylist()
    # The default mode's Reason says which rule fired with what numbers; compat has only the rules
    said = table.column(REASON).to_pylist() if REASON in columns else [None] * len(rules)
    marked = [MarkedRow(i, m, npu[i] if npu[i] != "N/A" else bench[i], said[i] or rules[i] or "")
              for i, m in enumerate(marks) if m]
    pair = _PAIR.match(suffix)
    step = int(pair["step"]) if pair and pair["step"] else None
    rank = int(pair["rank"]) if pair and pair["rank"] else None
    suspect = _advisor_suspect(folder, suffix)
    return ShownCompare(
        mode=mode, rows=table.num_rows,
        matched=sum(1 for n, b in zip(npu, bench) if n != "N/A" and b != "N/A"),
        npu_only=sum(1 for b in bench if b == "N/A"), bench_only=sum(1 for n in npu if n == "N/A"),
        red=marks.count("red"), yellow=marks.count("yellow"),
        suspect_seq=npu.index(suspect) if suspect in npu else None, suspect=suspect,
        rank=rank, step=step, title=suffix.lstrip("_").replace("_", " "), files=[str(path)],
        marked=marked if limit is None else marked[:limit], marked_total=len(marked))


def _table(path: Path) -> pa.Table:
    try:
        if path.suffix == ".parquet":
            return pq.read_table(path)
        # every cell is text; an empty mark cell is an unmarked row
        return pa_csv.read_csv(path, convert_options=pa_csv.ConvertOptions(
            strings_can_be_null=True, quoted_strings_can_be_null=True,
            column_types={name: pa.string() for name in (*_NAMES, *(n for n, _ in MARK_COLUMNS))}))
    except (OSError, pa.ArrowInvalid) as err:
        raise InputError(f"{path}: cannot read it ({err}); is it an msq output?") from None


def _advisor_suspect(folder: Path, suffix: str) -> str | None:
    """The suspect the newest advisor file of this compare names (None: none, or no file)."""
    advisors = sorted(folder.glob(f"advisor{suffix}_" + "[0-9]" * 14 + ".txt"))
    if not advisors:
        return None
    for line in advisors[-1].read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("Suspect Nodes: "):
            name = line[len("Suspect Nodes: "):]
            return None if name == "NA" else name
    return None
