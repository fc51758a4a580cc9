"""A full disk under the history database (issue 17, item 6).

* Creating a new ``--db`` on a full disk used to leave a 0-byte file, and every later run failed
  with "exists but is not a DuckDB database". msq now removes what it created: no file is left,
  and the next run, once there is space, records normally. A 0-byte file that an older msq left
  is taken over.
* A record that fails for lack of space used to leave the file grown to fill the disk (DuckDB
  keeps the freed blocks in the file). The file now goes back to its size before the record, so
  the disk has its space back; a record that cannot fit even at DuckDB's best compression is
  refused before it writes.

The disk is a real tmpfs of a few MB mounted for the test (root only), filled with a real file.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from msq.history import recorder
from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import cli, error_line, outputs

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
OPS = 10_000  # 4 rows each: more rows than a DuckDB row group, so rows go to the file early


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    """A 12 MB file system of its own."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mount)],
                          check=False, capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def free(mount: Path) -> int:
    st = os.statvfs(mount)
    return st.f_bavail * st.f_frsize


def fill(mount: Path, leave: int) -> Path:
    """Fill the disk until ``leave`` bytes are free."""
    filler = mount / "filler"
    with open(filler, "ab") as handle:
        while free(mount) > leave:
            try:
                handle.write(b"\0" * min(1 << 16, max(4096, free(mount) - leave)))
                handle.flush()
            except OSError:
                break
    return filler


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dumps")
    small = {"Functional.relu.0.forward": fwd(t(), out=t())}
    big = {f"Functional.op{i}.0.forward": fwd(t(mx=1 + i % 7), t(), out=[t(), t(mean=i / 3)])
           for i in range(OPS)}
    return {"small": write_pair(root / "small", small, small),
            "big": write_pair(root / "big", big, big)}


@pytest.fixture(scope="module")
def big_growth(dumps: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> int:
    """How much the big compare adds to a history that holds the small one (on a roomy disk)."""
    root = tmp_path_factory.mktemp("roomy")
    db = root / "h.duckdb"
    assert record(dumps["small"], root / "out", db)[0] == 0
    before = db.stat().st_size
    assert record(dumps["big"], root / "out", db)[0] == 0
    return db.stat().st_size - before


def record(cfg: Path, out: Path, db: Path) -> tuple[int, str]:
    return cli("compare", str(cfg), "-o", str(out), "--db", str(db), "-q", "-c")


def estimate() -> int:
    """What msq's check before a record asks for the big compare."""
    return OPS * 4 * recorder.MIN_BYTES_PER_ROW + recorder.SPARE_BYTES


def compares(db: Path) -> list[int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [r[0] for r in con.execute("SELECT n_rows FROM compares ORDER BY 1").fetchall()]
    finally:
        con.close()


def assert_nothing_left(mount: Path, out: Path, text: str) -> None:
    line = error_line(text)
    assert "h.duckdb" in line and "the outputs were written" in line or "space" in line, line
    assert sorted(p.name for p in mount.iterdir()) == ["filler"]
    assert [n for n in outputs(out) if n.startswith("compare_result_")]  # outputs are complete


@pytest.mark.parametrize("room", ["none", "too little", "not enough"])
def test_a_new_db_that_cannot_be_written_leaves_no_file(disk: Path, dumps: dict[str, Path],
                                                       big_growth: int, tmp_path: Path,
                                                       room: str) -> None:
    """none: the database header cannot be written; too little: refused before writing (below
    the estimate); not enough: above the estimate, below what DuckDB really writes."""
    assert estimate() < big_growth, "the estimate must stay below a real record for this test"
    leave = {"none": 0, "too little": estimate() // 2,
             "not enough": (estimate() + big_growth) // 2}[room]
    filler = fill(disk, leave)
    db, out = disk / "h.duckdb", tmp_path / "out"
    code, text = record(dumps["big" if room != "none" else "small"], out, db)
    assert code == 1, text
    assert_nothing_left(disk, out, text)
    if room == "too little":
        assert "not enough free space" in text
    filler.unlink()
    code, text = record(dumps["small"], out, db)
    assert code == 0, text
    assert compares(db) == [2]


def test_a_failed_record_gives_the_space_back(disk: Path, dumps: dict[str, Path],
                                              big_growth: int, tmp_path: Path) -> None:
    db, out = disk / "h.duckdb", tmp_path / "out"
    assert record(dumps["small"], out, db)[0] == 0
    size = db.stat().st_size
    fill(disk, (estimate() + big_growth) // 2)
    room = free(disk)
    code, text = record(dumps["big"], out, db)
    assert code == 1, text
    assert "could not record the compare" in error_line(text)
    assert db.stat().st_size == size            # not grown to fill the disk
    assert free(disk) >= room - (64 << 10)      # the disk has its space back
    assert compares(db) == [2]                  # and the history is intact
    code, text = record(dumps["small"], out, db)
    assert code == 0, text
    assert compares(db) == [2, 2]


def test_a_record_that_cannot_fit_is_refused_before_writing(disk: Path, dumps: dict[str, Path],
                                                             tmp_path: Path) -> None:
    db, out = disk / "h.duckdb", tmp_path / "out"
    assert record(dumps["small"], out, db)[0] == 0
    size = db.stat().st_size
    fill(disk, estimate() // 2)
    code, text = record(dumps["big"], out, db)
    assert code == 1, text
    line = error_line(text)
    assert "not enough free space to record this compare" in line and "40000 rows" in line
    assert db.stat().st_size == size and compares(db) == [2]


def test_an_empty_file_left_by_an_older_msq_is_taken_over(tmp_path: Path,
                                                          dumps: dict[str, Path]) -> None:
    db = tmp_path / "h.duckdb"
    db.touch()
    code, text = record(dumps["small"], tmp_path / "out", db)
    assert code == 0, text
    assert compares(db) == [2]
