"""Waiting for a locked history database (msq/history/store.py)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from msq import history
from msq.errors import HistoryError
from tests.history.builders import LockHolder, count, run_api


def test_a_locked_database_is_waited_for(made: tuple[Path, Path], tmp_path: Path) -> None:
    cj, db = made
    with LockHolder(db) as holder:
        logging.getLogger("msq").setLevel(logging.INFO)
        run_api(cj, tmp_path / "out", db=db)
    assert holder.waiting == [(f"{db}: another process is using the history database; "
                               "waiting up to 60 s")]
    assert count(db) == 2


def test_a_lock_held_too_long_is_one_clear_error(made: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cj, db = made
    monkeypatch.setenv("MSQ_DB_TIMEOUT", "0.5")
    with LockHolder(db) as holder:
        holder.waiting.append("do not release")
        with pytest.raises(HistoryError, match=re.escape(f"{db}: the history database is still "
                                                         "locked by another process after 0.5 s")):
            run_api(cj, tmp_path / "out", db=db)
    assert count(db) == 1


def test_readers_wait_for_a_writer_too(made: tuple[Path, Path], tmp_path: Path) -> None:
    _, db = made
    with LockHolder(db) as holder:
        logging.getLogger("msq").setLevel(logging.INFO)
        table = history.query(db, "SELECT count(*) AS n FROM compares")
    assert holder.waiting and table.rows == [(1,)]
