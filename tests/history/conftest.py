"""Fixtures of the history tests: real compares recorded into real DuckDB files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.history.builders import build_roots, run_api, single_card


@pytest.fixture(scope="package")
def hist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two labelled runs (v1, v2) of 3 steps x 2 ranks each, recorded into one database by two
    msq processes at once. The second run makes two rows worse, so the history answers: one op's
    trend across steps, the first divergent row per rank, and the rows that regressed."""
    base = tmp_path_factory.mktemp("history")
    jsons = build_roots(base)
    db = base / "hist.duckdb"
    # both runs at once: two msq processes (each with a pool of workers) share one database;
    # one waits for the other's lock, for longer than the default 60 s on a loaded machine (a
    # suite run niced beside others timed out here: the waiting is what is tested, not its limit)
    env = {**os.environ, "MSQ_DB_TIMEOUT": "600"}
    procs = [subprocess.Popen(
        [sys.executable, "-m", "msq.cli", "compare", str(compare_json), "-o",
         str(base / f"out_{label}"), "--db", str(db), "--label", label, "--format", "csv", "-c"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for label, compare_json in jsons.items()]
    for proc in procs:
        _, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
    return db


@pytest.fixture(scope="package")
def one_compare(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A single-card compare.json and a history file holding one compare of it."""
    base = tmp_path_factory.mktemp("one")
    cj = single_card(base / "dumps")
    run_api(cj, base / "out", db=base / "h.duckdb")
    return cj, base / "h.duckdb"


@pytest.fixture
def made(one_compare: tuple[Path, Path], tmp_path: Path) -> tuple[Path, Path]:
    """This test's own copy of the one-compare history file (DuckDB files copy when closed)."""
    cj, template = one_compare
    db = tmp_path / "h.duckdb"
    shutil.copyfile(template, db)
    return cj, db
