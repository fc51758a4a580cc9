"""What one compare produced: counts, the advisor's suspect, the files written.

A plain record with no live connection, so that it crosses process boundaries (a directory
compare's workers return it) and any layer can read it without importing the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class CompareResult:
    """What one compare produced (the CLI prints it as the console summary)."""

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
    history_db: Path | None = None
    history_id: int | None = None
