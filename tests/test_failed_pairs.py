"""A directory compare where a pair fails is not a pass: the other pairs are written and
recorded, the total line and one error line say which pair failed, the exit status is 1, the
Python API raises with what was compared, and ``--resume`` compares the failed pair again.

The dumps are the real 2-rank dumps of fixtures/ranks (msprobe 1.1.0's own dumper), copied into
a root of two steps whose step1/rank1 NPU dump.json is cut in half (a truncated dump).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import msq
from msq.errors import InputError, PairsFailedError
from msq.result import CompareResults

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ranks"
BROKEN = ("step1", "rank1")  # the pair whose NPU dump.json is truncated


def build_root(base: Path) -> Path:
    """npu/ and bench/ roots of step0 and step1 (each the fixture's rank0, rank1) and a
    compare.json naming them; step1/rank1's NPU dump.json truncated. Returns compare.json."""
    for side in ("npu", "bench"):
        for step in ("step0", "step1"):
            shutil.copytree(FIXTURE / side / "step0", base / side / step)
    truncate(base / "npu" / BROKEN[0] / BROKEN[1] / "dump.json")
    cfg = base / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(base / "npu"), "bench_path": str(base / "bench")}))
    return cfg


def truncate(dump: Path) -> None:
    text = dump.read_text()
    dump.write_text(text[:len(text) // 2])


def restore(base: Path) -> None:
    step, rank = BROKEN
    shutil.copy(FIXTURE / "npu" / "step0" / rank / "dump.json", base / "npu" / step / rank)


def run_cli(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "msq.cli", "compare", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=600, check=False,
                          stdin=subprocess.DEVNULL)


def recorded(db: Path) -> list[tuple[int, int, int]]:
    """(step, rank, times recorded) of every pair in the history."""
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute("SELECT step, rank, count(*) FROM compares GROUP BY ALL "
                           "ORDER BY step, rank").fetchall()


def workbooks(out: Path) -> list[str]:
    return sorted(p.name.rsplit("_", 1)[0] for p in out.glob("compare_result_*.xlsx"))


GOOD = [f"compare_result_{s}_{r}-{r}" for s in ("step0", "step1") for r in ("rank0", "rank1")
        if (s, r) != BROKEN]
FIRST = "step1 rank1-rank1: "


@pytest.mark.parametrize("workers", ["1", "2"])  # in this process, and the pool of two
def test_a_failed_pair_exits_1_and_the_others_are_written_and_recorded(tmp_path, workers):
    cfg = build_root(tmp_path)
    out = tmp_path / "out"
    done = run_cli([str(cfg), "-o", str(out), "--workers", workers], tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    # the pair's own error as it happened, then the run's one error line
    assert f"[ERROR] pair failed: {FIRST}" in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("msq: error: ")]
    assert len(errors) == 1
    assert errors[0].startswith("msq: error: 1 of 4 pairs failed (not written or "
                                f"recorded; the other 3 were); first: {FIRST}")
    assert "npu/step1/rank1/dump.json: malformed JSON" in errors[0]
    total = done.stdout.splitlines()[-1]
    assert total.startswith(f"msq compare total: 3 compares, 1 failed ({FIRST}"), total
    assert "malformed JSON" in total and "; first suspect in step0 rank0-rank0" in total
    assert workbooks(out) == GOOD
    assert len(list(out.glob("advisor_step*_*.txt"))) == 3
    assert len(list(out.glob("blame_*.json"))) == 1  # the run's blame, over the pairs compared
    assert recorded(out / "msq.duckdb") == [(0, 0, 1), (0, 1, 1), (1, 0, 1)]


def test_an_error_outranks_the_gate_whose_line_is_still_printed(tmp_path):
    cfg = build_root(tmp_path)
    done = run_cli([str(cfg), "-o", str(tmp_path / "out"), "--fail-on", "red", "-q"], tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stdout == ""  # -q: no summary, but the error and the gate's line on stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("msq: error: 1 of 4 pairs failed") for line in lines)
    assert any(line.startswith("msq: accuracy gate tripped (--fail-on red): ") for line in lines)


def test_resume_compares_the_failed_pair_again(tmp_path):
    cfg = build_root(tmp_path)
    out = tmp_path / "out"
    assert run_cli([str(cfg), "-o", str(out)], tmp_path).returncode == 1
    again = run_cli([str(cfg), "-o", str(out), "--resume"], tmp_path)  # still broken
    assert again.returncode == 1
    assert "resuming: 3 of 4 pairs already recorded" in again.stderr
    assert ("msq: error: every rank pair not recorded before (--resume) failed; first: "
            f"{FIRST}") in again.stderr
    assert recorded(out / "msq.duckdb") == [(0, 0, 1), (0, 1, 1), (1, 0, 1)]
    restore(tmp_path)
    fixed = run_cli([str(cfg), "-o", str(out), "--resume"], tmp_path)
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "resuming: 3 of 4 pairs already recorded" in fixed.stderr
    assert "msq: error" not in fixed.stderr and "failed" not in fixed.stdout
    assert fixed.stdout.splitlines()[-1].startswith("msq compare total: 1 compare, ")
    assert workbooks(out) == sorted([*GOOD, "compare_result_step1_rank1-rank1"])
    assert recorded(out / "msq.duckdb") == [(0, 0, 1), (0, 1, 1), (1, 0, 1), (1, 1, 1)]


def test_compare_distributed_raises_with_the_pairs_compared(tmp_path):
    build_root(tmp_path)
    out = tmp_path / "out"
    with pytest.raises(PairsFailedError) as caught:
        msq.compare_distributed(tmp_path / "npu", tmp_path / "bench", out, label="v1")
    err = caught.value
    assert isinstance(err, InputError)  # what a caller catching msq's input errors catches
    assert str(err).startswith(f"1 of 4 pairs failed (not written or recorded; "
                               f"the other 3 were); first: {FIRST}")
    assert isinstance(err.results, CompareResults)
    assert [r.title for r in err.results] == ["step0 rank0-rank0", "step0 rank1-rank1",
                                              "step1 rank0-rank0"]
    assert [r.history_id for r in err.results] == [1, 2, 3]
    assert all(r.files and all(Path(f).is_file() for f in r.files) for r in err.results)
    assert err.results.failed == err.failed
    [failed] = err.failed
    assert failed.title == "step1 rank1-rank1"
    assert failed.npu_path == str(tmp_path / "npu" / "step1" / "rank1" / "dump.json")
    assert failed.bench_path == str(tmp_path / "bench" / "step1" / "rank1" / "dump.json")
    assert failed.reason.startswith(f"{failed.npu_path}: malformed JSON")
    assert failed.message == f"{failed.title}: {failed.reason}"
    assert recorded(out / "msq.duckdb") == [(0, 0, 1), (0, 1, 1), (1, 0, 1)]
    restore(tmp_path)
    rest = msq.compare_distributed(tmp_path / "npu", tmp_path / "bench", out, label="v1",
                                   resume=True)
    assert [r.title for r in rest] == ["step1 rank1-rank1"] and rest.failed == []


def test_compare_json_returns_the_failed_pairs_beside_the_results(tmp_path):
    """msq.compare_json returns what ``msq compare`` prints: a run's results, and its
    ``failed`` (the CLI exits 1 on them)."""
    cfg = build_root(tmp_path)
    results = msq.compare_json(cfg, tmp_path / "out", record=False)
    assert isinstance(results, list) and len(results) == 3
    assert [f.title for f in results.failed] == ["step1 rank1-rank1"]


def test_every_pair_failed_raises_with_every_failure(tmp_path):
    build_root(tmp_path)
    for step, rank in [("step0", "rank0"), ("step0", "rank1"), ("step1", "rank0")]:
        truncate(tmp_path / "bench" / step / rank / "dump.json")
    with pytest.raises(PairsFailedError,
                       match="^every rank pair failed; first: step0 rank0-rank0: ") as caught:
        msq.compare_distributed(tmp_path / "npu", tmp_path / "bench", tmp_path / "out",
                                record=False)
    assert caught.value.results == []
    assert [f.title for f in caught.value.failed] == [
        "step0 rank0-rank0", "step0 rank1-rank1", "step1 rank0-rank0", "step1 rank1-rank1"]


def test_compat_stops_at_the_first_failing_pair_as_1_1_0(tmp_path):
    """--compat msprobe-1.1: 1.1.0 stops at the first failing pair (the pairs before it are
    written) and exits 1 (with a traceback); msq too, with one error line."""
    build_root(tmp_path)
    cfg = tmp_path / "step1.json"  # 1.1.0 compares a step directory (no dump roots)
    cfg.write_text(json.dumps({"npu_path": str(tmp_path / "npu" / "step1"),
                               "bench_path": str(tmp_path / "bench" / "step1")}))
    out = tmp_path / "out"
    done = run_cli([str(cfg), "-o", str(out), "--compat", "msprobe-1.1"], tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1].startswith("msq: error: rank1-rank1: ")
    assert workbooks(out) == ["compare_result_rank0-rank0"]
