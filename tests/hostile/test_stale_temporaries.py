"""Temporaries left by a killed msq are removed by the next compare into the folder, safely
(issue 17, item 7).

msq writes each output as ``.<name>.<pid>.tmp`` and renames it when complete; ``kill -9`` in
between leaves the temporary behind, and nothing used to remove it (a workbook's can be GBs).
The next compare into that folder removes it, and only what is certainly a dead msq's:
* the name is one msq gives its temporaries (``.compare_result…``, ``.advisor…``,
  ``.data_mapping…`` with a pid; ``.msq-write-test-…``);
* a regular file (never through a symlink, never a directory), owned by this user;
* its process is gone, and it has not been written for 10 minutes (a writer on another machine
  sharing the folder keeps its temporary fresh).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import compare, good_pair, outputs

MSQ = [sys.executable, "-m", "msq.cli"]
OLD = time.time() - 3600


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def leftover(folder: Path, name: str, age: float = OLD) -> Path:
    path = folder / name
    path.write_bytes(b"PK\x03\x04 half a workbook")
    os.utime(path, (age, age))
    return path


def test_only_a_dead_msqs_old_temporaries_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    pid = dead_pid()
    removed = [leftover(out, f".compare_result_20260101000000.xlsx.{pid}.tmp"),
               leftover(out, f".advisor_20260101000000.txt.{pid}.tmp"),
               leftover(out, f".compare_result_rank0-rank0_20260101000000.csv.{pid}.tmp"),
               leftover(out, f"..compare_result_20260101000000.xlsx.{pid}.tmp.{pid}.tmp"),
               leftover(out, f".data_mapping_20260101000000.yaml.{pid}.tmp"),
               leftover(out, ".msq-write-test-k2j4h_x1")]
    outside = tmp_path / "precious.xlsx"
    outside.write_text("not msq's")
    kept = [leftover(out, f".compare_result_20260101000000.xlsx.{os.getpid()}.tmp"),  # alive
            leftover(out, ".compare_result_20260101000000.xlsx.1.tmp"),               # alive
            leftover(out, f".advisor_20260101000001.txt.{pid}.tmp", age=time.time()),  # fresh
            leftover(out, ".msq-write-test-fresh", age=time.time()),
            leftover(out, f".notes.{pid}.tmp"),                                        # not msq's
            leftover(out, f"compare_result_20260101000000.xlsx.{pid}.tmp"),            # not hidden
            leftover(out, f".compare_result_x.xlsx.{pid}.tmp.bak")]
    link = out / f".compare_result_link.xlsx.{pid}.tmp"
    link.symlink_to(outside)
    os.utime(link, (OLD, OLD), follow_symlinks=False)
    folder = out / f".compare_result_dir.xlsx.{pid}.tmp"
    folder.mkdir()
    os.utime(folder, (OLD, OLD))
    code, text = compare(good_pair(tmp_path / "dumps"), out, "-v")  # the line is logged
    assert code == 0, text
    assert [p.name for p in removed if p.exists()] == []
    assert [p.name for p in kept if not p.exists()] == []
    assert link.is_symlink() and outside.read_text() == "not msq's" and folder.is_dir()
    assert "removed 6 temporary files left by an interrupted msq" in text


@pytest.mark.slow
def test_the_temporary_of_a_killed_compare_is_removed_by_the_next(tmp_path: Path) -> None:
    """The real thing: kill -9 while the workbook is written, then compare again."""
    data = {f"Functional.op{i}.0.forward": fwd(t(), t(), out=[t(), t()]) for i in range(6000)}
    cfg = write_pair(tmp_path / "dumps", data, data)
    out = tmp_path / "out"
    proc = subprocess.Popen([*MSQ, "compare", str(cfg), "-o", str(out), "--no-history", "-q"],
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if any(n.endswith(".tmp") for n in outputs(out)):
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    temps = [out / n for n in outputs(out) if n.endswith(".tmp")]
    if proc.returncode != -signal.SIGKILL or not temps:
        pytest.skip("the compare finished before it could be killed while writing")
    for path in temps:
        os.utime(path, (OLD, OLD))  # ten minutes have passed
    code, text = compare(cfg, out)
    assert code == 0, text
    assert [n for n in outputs(out) if n.endswith(".tmp")] == []
    assert len([n for n in outputs(out) if n.startswith("compare_result_")]) == 1


def test_the_temporaries_of_workers_msq_killed_go_at_once(tmp_path: Path) -> None:
    """A directory compare stopped by Ctrl-C kills its pair workers (msq/distributed.py); what
    they were writing goes then, fresh as it is, and only theirs."""
    from msq.db import remove_stale_temporaries
    from msq.export.outputs import OUTPUT_NAMES

    killed, other = dead_pid(), dead_pid()
    now = time.time()
    theirs = leftover(tmp_path, f".data_mapping_rank1-rank1_20260101000000.yaml.{killed}.tmp",
                      age=now)
    fresh = leftover(tmp_path, f".data_mapping_rank2-rank2_20260101000000.yaml.{other}.tmp",
                     age=now)  # a dead process, but not one msq killed: 10 minutes still apply
    link = tmp_path / f".compare_result_link.xlsx.{killed}.tmp"
    link.symlink_to(theirs)
    assert remove_stale_temporaries(tmp_path, OUTPUT_NAMES, dead={killed}) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([fresh.name, link.name])
