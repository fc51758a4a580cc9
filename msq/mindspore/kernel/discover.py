"""Find the dump directories of a MindSpore kernel (static graph) dump (spec §8.1).

Two layouts are recognised from the last four components of each *lowest-level* directory
(a directory without sub-directories):

* KBK / O0-O1: ``.../rank_{r}/{net}/{graph_id}/{iteration}``
* O2 / GE:     ``.../{device_id}/{model}/{model_id}/{iteration}``

A directory holds either ``*.npy`` tensors (NPY mode) or a ``statistic.csv`` (STATISTIC mode).
Every path msq opens must resolve inside its root: a symlink that leads out is refused.
"""

from __future__ import annotations

import csv
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from msq.errors import DumpError, InputError, MsqError, TensorFileError

log = logging.getLogger("msq.kernel")

MAX_DEPTH = 10
"""Directory levels below a root that discovery descends (1.1.0's limit)."""

_DIGITS = re.compile(r"[0-9]+")
STATISTIC_FILE = "statistic.csv"
MAPPING_FILE = "mapping.csv"
NPY_SUFFIX = ".npy"
MIN_NAME_FIELDS = 7


class Mode(str, Enum):
    """What one dump directory contains."""

    NPY = "NPY_MODE"
    STATISTIC = "STATISTIC_MODE"
    EMPTY = "ERROR_MODE"


@dataclass(frozen=True)
class DumpDir:
    """One lowest-level directory with the rank and step read from its path."""

    path: Path
    rank: int
    step: int
    mode: Mode


@dataclass(frozen=True)
class Root:
    """A dump root as the user gave it (absolute, unresolved) and as it resolves on disk."""

    path: Path
    real: Path

    @classmethod
    def of(cls, path: str | os.PathLike[str], side: str) -> Root:
        """Check that ``path`` is an existing directory and return it as a root."""
        given = Path(os.path.abspath(os.fspath(path)))
        if not given.exists():
            raise InputError(f"{side} path {given} does not exist; point {side}_path at the "
                             "directory that holds the rank_* (or device id) directories.")
        if not given.is_dir():
            raise InputError(f"{side} path {given} is not a directory; a kernel compare takes the "
                             "dump root directory, not a file.")
        return cls(given, Path(os.path.realpath(given)))

    def contains(self, path: Path) -> bool:
        """True when ``path`` resolves to the root or below it."""
        real = os.path.realpath(path)
        return real == str(self.real) or real.startswith(str(self.real) + os.sep)

    def check_inside(self, path: Path, error: type[MsqError] = InputError) -> None:
        """Raise ``error`` when ``path`` (a symlink, or below one) resolves outside the root."""
        if not self.contains(path):
            raise error(f"{path} resolves to {os.path.realpath(path)}, outside the dump root "
                        f"{self.path}; msq does not follow links out of a dump. Copy the data "
                        "into the dump directory or replace the link.")


def to_int(text: str) -> int:
    """A path component as a non-negative integer, or -1 (the directory is then skipped)."""
    return int(text) if _DIGITS.fullmatch(text) else -1


def rank_step_of(path: Path) -> tuple[int, int]:
    """Rank and step of a lowest-level directory; -1 where the path does not say."""
    parts = path.parts
    if len(parts) < 2:
        return -1, -1
    step = to_int(parts[-1])
    rank = -1
    if any(part.startswith("rank_") for part in parts):
        if len(parts) > 4:
            rank = to_int(parts[-4].rsplit("_", 1)[-1])
    else:
        if len(parts) > 4:
            rank = to_int(parts[-4])
        if rank == -1 and len(parts) > 3:
            rank = to_int(parts[-3])
    return rank, step


def _subdirs(root: Root, folder: Path) -> list[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as err:
        raise InputError(f"cannot list {folder}: {err.strerror}; check its permissions.") from err
    dirs = []
    for entry in entries:
        if entry.is_dir():
            path = Path(entry.path)
            if entry.is_symlink():
                root.check_inside(path)
            dirs.append(path)
    return dirs


def lowest_level_dirs(root: Root) -> list[Path]:
    """Directories under ``root`` that have no sub-directory, in sorted path order."""
    found: list[Path] = []

    def walk(folder: Path, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InputError(f"{folder} is more than {MAX_DEPTH} directory levels below "
                             f"{root.path}; point the compare at a directory closer to the "
                             "rank_* (or device id) directories.")
        for sub in _subdirs(root, folder):
            if _subdirs(root, sub):
                walk(sub, depth + 1)
            else:
                found.append(sub)

    walk(root.path, 0)
    return found


def mode_of(folder: Path) -> Mode:
    """NPY if any ``*.npy`` exists, else STATISTIC if ``statistic.csv`` exists, else EMPTY."""
    names = os.listdir(folder)
    if any(name.endswith(NPY_SUFFIX) for name in names):
        return Mode.NPY
    if STATISTIC_FILE in names:
        return Mode.STATISTIC
    return Mode.EMPTY


def discover(root: Root, rank_ids: Iterable[int] | None,
             step_ids: Iterable[int] | None) -> dict[tuple[int, int], list[DumpDir]]:
    """Group the dump directories of one root by (rank, step), filtered, sorted by key."""
    ranks, steps = set(rank_ids or ()), set(step_ids or ())
    groups: dict[tuple[int, int], list[DumpDir]] = {}
    for folder in lowest_level_dirs(root):
        rank, step = rank_step_of(folder)
        mode = mode_of(folder)
        if rank < 0 or step < 0:
            if mode is not Mode.EMPTY:
                log.warning("skipped %s: its path does not end in rank_{r}/{net}/{graph}/{step} "
                            "or {device}/{model}/{model_id}/{step}", folder)
            continue
        if (ranks and rank not in ranks) or (steps and step not in steps):
            continue
        groups.setdefault((rank, step), []).append(DumpDir(folder, rank, step, mode))
    return dict(sorted(groups.items()))


@dataclass(frozen=True)
class NpyName:
    """The fields of one tensor file name that pairing uses."""

    compare_key: str
    timestamp: int


def parse_npy_name(name: str) -> NpyName | None:
    """``{op_type}.{op_name}.{task}.{stream}.{timestamp}.{io}.{slot}.{format}.npy`` -> key.

    Returns None for names with fewer than 7 dot-separated fields (1.1.0 ignores them).
    """
    fields = name.split(".")
    if len(fields) < MIN_NAME_FIELDS:
        return None
    key = ".".join((fields[1], fields[2], fields[3], fields[5], fields[6]))
    return NpyName(key, to_int(fields[4]))


def read_mapping(root: Root, folder: Path) -> dict[str, str]:
    """``mapping.csv`` of a directory: dumped file name -> original file name (header skipped)."""
    path = folder / MAPPING_FILE
    if not path.is_file():
        return {}
    root.check_inside(path, DumpError)
    mapping: dict[str, str] = {}
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            next(reader, None)
            for row in reader:
                if not row:
                    continue
                if len(row) < 2:
                    raise DumpError(f"{path}: line {reader.line_num}: expected 2 columns (file "
                                    f"name, original name), found {len(row)}; fix or delete "
                                    "the line.")
                mapping[row[0]] = row[1]
    except UnicodeDecodeError as err:
        raise DumpError(f"{path}: not UTF-8 text ({err.reason}); re-dump or delete the "
                        "file.") from err
    return mapping


def npy_files(root: Root, folder: Path) -> list[tuple[str, NpyName]]:
    """The tensor files of one directory as (full path, parsed name), in file-name order."""
    mapping = read_mapping(root, folder)
    out: list[tuple[str, NpyName]] = []
    ignored = 0
    with os.scandir(folder) as entries:
        files = sorted((e for e in entries if e.name.endswith(NPY_SUFFIX)), key=lambda e: e.name)
    for entry in files:
        path = folder / entry.name
        if entry.is_symlink():  # the directories above were checked during discovery
            root.check_inside(path, TensorFileError)
        parsed = parse_npy_name(mapping.get(entry.name, entry.name))
        if parsed is None:
            ignored += 1
            continue
        out.append((str(path), parsed))
    if ignored:
        log.warning("ignored %d .npy file(s) in %s whose names have fewer than %d dot-separated "
                    "fields", ignored, folder, MIN_NAME_FIELDS)
    return out
