"""What one compare produced: counts, the advisor's suspect, the files written; and a recorded
compare as ``msq show`` presents it.

Plain records with no live connection, so that they cross process boundaries (a directory
compare's workers return them) and any layer can read them without importing the pipeline.
``msq show`` fills :class:`ShownRun` from the history database (msq/history/show.py) or from a
folder's CSV/Parquet outputs (msq/export/readback.py); the CLI prints it (msq/console.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Data rows below the header on one sheet (Excel's 1,048,576 rows, less the header); the
#: workbook writer (msq/export/xlsx.py) continues on Sheet2, Sheet3, ... after that many.
SHEET_DATA_ROWS = 1_048_575


def sheet_row(out_seq: int, per_sheet: int = SHEET_DATA_ROWS) -> tuple[int, int]:
    """Where output line ``out_seq`` (0-based, the advisor's msprobe ``Line``) sits in the
    workbook: (sheet number from 1, row number as Excel shows it). Row 1 is the header."""
    sheet, index = divmod(out_seq, per_sheet)
    return sheet + 1, index + 2


def row_label(out_seq: int) -> str:
    """``row 91``, or ``row 5 of Sheet2`` past the first sheet's rows."""
    sheet, row = sheet_row(out_seq)
    return f"row {row}" if sheet == 1 else f"row {row} of Sheet{sheet}"


@dataclass
class RowRef:
    """One output row: its line (0-based ``out_seq``), its sheet row, NPU name and why it is
    marked (the rules that fired; empty for the advisor's suspect)."""

    out_seq: int
    name: str
    rules: str = ""

    @property
    def row(self) -> int:
        """The row number Excel shows (on the row's sheet)."""
        return sheet_row(self.out_seq)[1]

    @property
    def label(self) -> str:
        return row_label(self.out_seq)


@dataclass
class CompareResult:
    """What one compare produced (the CLI prints it as the console summary).

    Paths are absolute. ``suspect_line`` is msprobe's advisor ``Line`` (the 0-based line as
    text, ``NA`` when every row passes); ``suspect_row`` is the sheet row holding the suspect, as
    Excel numbers it, the number the console prints.
    """

    mode: str
    rows: int = 0
    matched: int = 0
    unmatched_npu: int = 0
    unmatched_bench: int = 0
    red: int = 0
    yellow: int = 0
    suspect_line: str = "NA"
    suspect: str = "NA"
    advice: str = ""
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    npu_path: str = ""
    bench_path: str = ""
    title: str = ""
    #: the time stamp in the names of this compare's files (YYYYmmddHHMMSS, its start)
    stamp: str = ""
    history_db: Path | None = None
    history_id: int | None = None
    rank: int | None = None          # from .../rank<R>/dump.json; None when the path has none
    step: int | None = None          # from .../step<S>/rank<R>/dump.json
    suspect_row: int | None = None   # the sheet row of the suspect; None when there is none
    failing: int = 0                 # rows the advisor counts as failing (its suspect is the first)
    first_red: RowRef | None = None  # the first red row, with the rules that made it red
    compat: bool = False
    #: the default mode's verdict on the suspect row: its rule and numbers (docs/rules.md)
    suspect_reason: str = ""
    #: unmatched rows per (kind, reason code) of the default mode, e.g. ("npu_only", "call") -> 3
    unmatched_reasons: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the default mode compared nothing (no matched row): why, and a hint; "" otherwise
    nothing_compared: str = ""
    #: blame of this compare (msq.blame.summary.BlameSummary); None with --compat or --no-blame
    blame: Any = None
    #: blame of the whole run, every rank and step weighed together (msq.blame.ranks.RunBlame),
    #: and the JSON file naming its first local source; the same for every compare of the run
    run_blame: Any = None
    blame_json: Path | None = None

    @property
    def suspect_ref(self) -> RowRef | None:
        """The advisor's suspect as a row reference (None when every row passes)."""
        if self.suspect_line == "NA":
            return None
        return RowRef(int(self.suspect_line), self.suspect)


@dataclass(frozen=True)
class FailedPair:
    """A rank (and step) pair of a directory run that could not be compared (a truncated or
    malformed dump.json, an unsafe tensor file, a Ray task that died): nothing of it is written
    or recorded, so ``--resume`` compares it again."""

    title: str       # ``step3 rank5-rank5`` (empty: the run's one pair)
    npu_path: str    # the NPU side's dump.json, absolute
    bench_path: str
    reason: str      # why, without the title

    @property
    def message(self) -> str:
        """``<title>: <reason>``, as the pair's error line says it."""
        return f"{self.title}: {self.reason}" if self.title else self.reason


class CompareResults(list[CompareResult]):
    """The compares of a run, one :class:`CompareResult` each (a list, as msq always returned),
    and ``failed``: the pairs of a directory run that could not be compared, in step and rank
    order (empty when every pair was). A run with a failed pair is not a pass: ``msq compare``
    exits 1, :func:`msq.compare_distributed` raises :class:`msq.errors.PairsFailedError`."""

    failed: list[FailedPair]

    def __init__(self, results: Iterable[CompareResult] = (),
                 failed: Iterable[FailedPair] = ()) -> None:
        super().__init__(results)
        self.failed = list(failed)


def failed_pairs(results: Sequence[CompareResult]) -> list[FailedPair]:
    """The failed pairs of a run's results (none for a plain list: a single compare)."""
    return list(getattr(results, "failed", ()))


def failed_message(failed: Sequence[FailedPair], compared: int) -> str:
    """What a run with failed pairs says once (the CLI's error line, the API's exception):
    how many of the pairs tried failed, that the others are kept, and the first failure."""
    tried = len(failed) + compared
    kept = f"the other {compared} {'was' if compared == 1 else 'were'}" if compared else "none was"
    return (f"{len(failed)} of {tried} pairs failed (not written or recorded; {kept}); "
            f"first: {failed[0].message}")


# ------------------------------------------------------------------------------- msq show


@dataclass
class MarkedRow:
    """A red or yellow row: where it sits, its NPU name and why it is marked."""

    out_seq: int
    mark: str
    name: str
    reason: str

    @property
    def label(self) -> str:
        return row_label(self.out_seq)


@dataclass
class ShownCompare:
    """One compare (one rank and step pair of a directory run)."""

    mode: str
    rows: int = 0
    matched: int = 0
    npu_only: int = 0
    bench_only: int = 0
    red: int = 0
    yellow: int = 0
    suspect_seq: int | None = None    # the advisor's first failing row (0-based line)
    suspect: str | None = None
    compare_id: int | None = None     # None when read from output files
    rank: int | None = None
    step: int | None = None
    title: str = ""                   # "step0 rank1": where it sits in a directory run
    compat: str | None = None
    label: str | None = None
    started_at: dt.datetime | None = None
    seconds: float | None = None
    npu_path: str = ""
    bench_path: str = ""
    files: list[str] = field(default_factory=list)
    marked: list[MarkedRow] = field(default_factory=list)  # the first ones, in sheet order
    marked_total: int = 0                                  # every red and yellow row
    blame: Any = None          # its msq.blame.summary.BlameSummary from the history (None: no blame)

    @property
    def suspect_label(self) -> str | None:
        return None if self.suspect_seq is None else row_label(self.suspect_seq)


@dataclass
class ShownRun:
    """What ``msq show`` shows: one compare, or every pair of a directory run, in step and rank
    order; ``source`` says where it was read."""

    source: str
    compares: list[ShownCompare]
    blame: Any = None  # a run of several: its msq.blame.ranks.RunBlame (None: no blame recorded)


def pair_title(step: int | None, rank: int | None) -> str:
    """``step0 rank1``, ``rank1``, or empty (a single card)."""
    parts = ([f"step{step}"] if step is not None else []) + \
        ([f"rank{rank}"] if rank is not None else [])
    return " ".join(parts)
