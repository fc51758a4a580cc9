"""Multi-card and multi-step compares (spec §7): pairing, parallel pairs, failures, API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import msq
from msq.cli import main
from tests.dumps import fwd, t, write_dump
from tests.xlsx_read import rows


def ranks(root: Path, n: int, *, bad_rank: int | None = None, step: str = "step0") -> None:
    for side in ("npu", "bench"):
        for rank in range(n):
            mx = 9.0 if (side == "npu" and rank == bad_rank) else 1.0
            data = {"Functional.linear.0.forward": fwd(t(), out=t(mx=mx)),
                    "Functional.relu.0.forward": fwd(t(), out=t())}
            write_dump(root / side / step / f"rank{rank}", data)


def cfg(root: Path, npu: Path, bench: Path) -> Path:
    path = root / "compare.json"
    path.write_text(json.dumps({"npu_path": str(npu), "bench_path": str(bench)}))
    return path


def test_twelve_ranks_all_compared(tmp_path):
    ranks(tmp_path, 12, bad_rank=11)
    out = tmp_path / "out"
    results = msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0", out,
                                      record=False)
    pairs = sorted(r.title for r in results)
    assert pairs == sorted(f"rank{i}-rank{i}" for i in range(12))
    files = sorted(p.name.rsplit("_", 1)[0] for p in out.glob("compare_result_*.xlsx"))
    assert files == sorted(f"compare_result_rank{i}-rank{i}" for i in range(12))
    assert len(list(out.glob("advisor_rank*_*.txt"))) == 12
    by_title = {r.title: r for r in results}
    assert by_title["rank11-rank11"].suspect == "Functional.linear.0.forward.output.0"
    assert all(by_title[f"rank{i}-rank{i}"].suspect == "NA" for i in range(11))


def test_rank_count_differs_warns_and_compares_the_common_ranks(tmp_path, caplog):
    ranks(tmp_path, 3)
    import shutil

    shutil.rmtree(tmp_path / "bench" / "step0" / "rank2")
    (tmp_path / "npu" / "step0" / "notes.txt").write_text("stray file")
    out = tmp_path / "out"
    with caplog.at_level("WARNING", logger="msq"):
        results = msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0",
                                          out, record=False)
    assert sorted(r.title for r in results) == ["rank0-rank0", "rank1-rank1"]
    text = caplog.text
    assert "rank2" in text and "one side only" in text
    assert "notes.txt" in text and "not a rank directory" in text


def test_rank_count_differs_in_compat_mode_is_an_error(tmp_path):
    ranks(tmp_path, 3)
    import shutil

    shutil.rmtree(tmp_path / "bench" / "step0" / "rank2")
    result = CliRunner().invoke(main, ["compare", str(cfg(tmp_path, tmp_path / "npu" / "step0",
                                                          tmp_path / "bench" / "step0")),
                                       "-o", str(tmp_path / "out"), "--compat", "msprobe-1.1"])
    assert result.exit_code == 1
    assert "has 3 ranks" in result.output and "has 2" in result.output


def test_one_failing_pair_does_not_lose_the_others(tmp_path, caplog):
    ranks(tmp_path, 3)
    (tmp_path / "bench" / "step0" / "rank1" / "dump.json").write_text("{broken")
    out = tmp_path / "out"
    with caplog.at_level("ERROR", logger="msq"), \
            pytest.raises(msq.errors.PairsFailedError, match="1 of 3 pairs failed") as caught:
        msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0",
                                out, record=False)
    results = caught.value.results  # not a pass, but every pair compared is there
    assert sorted(r.title for r in results) == ["rank0-rank0", "rank2-rank2"]
    assert [f.title for f in caught.value.failed] == ["rank1-rank1"]
    assert "rank1-rank1" in caplog.text and "malformed JSON" in caplog.text
    assert len(list(out.glob("compare_result_*.xlsx"))) == 2


def test_many_steps_in_one_run(tmp_path):
    for step in ("step0", "step1", "step2"):
        ranks(tmp_path, 2, step=step, bad_rank=1 if step == "step2" else None)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["compare", str(cfg(tmp_path, tmp_path / "npu",
                                                          tmp_path / "bench")),
                                       "-o", str(out), "--no-history"])
    assert result.exit_code == 0, result.output
    names = sorted(p.name.rsplit("_", 1)[0] for p in out.glob("compare_result_*.xlsx"))
    assert names == [f"compare_result_step{s}_rank{r}-rank{r}" for s in range(3) for r in range(2)]
    bad = next(out.glob("compare_result_step2_rank1-rank1_*.xlsx"))
    assert any(r["Result"] == "Warning" for r in rows(bad))


def test_rank_dir_given_directly(tmp_path):
    ranks(tmp_path, 1)
    out = tmp_path / "out"
    results = msq.compare_distributed(tmp_path / "npu" / "step0" / "rank0",
                                      tmp_path / "bench" / "step0" / "rank0", out, record=False)
    assert len(results) == 1 and results[0].rows == 4


def test_suffix_argument_refused(tmp_path):
    with pytest.raises(msq.errors.UsageError, match="suffix"):
        msq.compare_distributed(tmp_path, tmp_path, tmp_path / "o", suffix="_x")


@pytest.mark.parametrize("content, expect", [
    ("- a\n- b\n", "must be a YAML mapping"),
    ("a: [1, 2]\n", "both names must be strings"),
    ("a: b: c\n", "not valid YAML at line 1"),
])
def test_bad_data_mapping_file(tmp_path, content, expect):
    from tests.dumps import write_pair

    data = {"Functional.a.0.forward": fwd(t(), out=t())}
    compare_json = write_pair(tmp_path, data, data)
    mapping = tmp_path / "map.yaml"
    mapping.write_text(content)
    result = CliRunner().invoke(main, ["compare", str(compare_json), "-o", str(tmp_path / "o"),
                                       "-dm", str(mapping), "--no-history"])
    assert result.exit_code == 1
    assert str(mapping) in result.output and expect in result.output
    assert not list((tmp_path / "o").glob("*.xlsx"))


def test_resume_skips_the_pairs_already_recorded(tmp_path, caplog):
    """The driver records each pair in one transaction; --resume finds them by output folder,
    label and flags (and files still present), and compares only the rest."""
    import duckdb

    ranks(tmp_path, 3)
    npu, bench, out = tmp_path / "npu" / "step0", tmp_path / "bench" / "step0", tmp_path / "out"
    first = msq.compare_distributed(npu, bench, out, label="v1")
    assert [r.history_id for r in first] == [1, 2, 3]
    next(out.glob("compare_result_rank1-rank1_*.xlsx")).unlink()   # rank1 must be redone
    with caplog.at_level("WARNING", logger="msq"):
        again = msq.compare_distributed(npu, bench, out, label="v1", resume=True)
    assert "resuming: 2 of 3 pairs already recorded" in caplog.text
    assert [(r.title, r.history_id) for r in again] == [("rank1-rank1", 4)]
    other = msq.compare_distributed(npu, bench, out, label="v2", resume=True)  # another run
    assert len(other) == 3
    with duckdb.connect(str(out / "msq.duckdb"), read_only=True) as con:
        assert con.execute("SELECT label, rank FROM compares ORDER BY compare_id").fetchall() == [
            ("v1", 0), ("v1", 1), ("v1", 2), ("v1", 1), ("v2", 0), ("v2", 1), ("v2", 2)]


def test_resume_needs_the_history(tmp_path):
    ranks(tmp_path, 1)
    with pytest.raises(msq.errors.UsageError, match="--no-history"):
        msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0",
                                tmp_path / "o", record=False, resume=True)


def test_private_pair_folders_of_dead_workers_are_removed(tmp_path, monkeypatch):
    """A pair renders its files in <tmp>/msq-pair-<pid namespace>-<worker pid>-*; a run removes
    the folders of workers that no longer run (a killed msq's), never a live worker's, a
    symlink, a file, or a folder of another pid namespace (a Ray node in a container: its pids
    are not ours to judge)."""
    import os
    import subprocess
    import sys
    import tempfile

    from msq.pair_tables import PAIR_FOLDER, pid_space, remove_pair_folders

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(gone.stdout)  # reaped: no such process now (unless the pid is reused at once)
    ours = f"{PAIR_FOLDER}{pid_space()}-"
    stale = tmp_path / f"{ours}{dead}-abc"
    (stale / "x").mkdir(parents=True)
    live = tmp_path / f"{ours}{os.getpid()}-abc"
    elsewhere = tmp_path / f"{PAIR_FOLDER}1{pid_space()}-{dead}-abc"
    elsewhere.mkdir()
    live.mkdir()
    target = tmp_path / "kept"
    target.mkdir()
    link = tmp_path / f"{ours}{dead}-link"
    link.symlink_to(target)
    plain = tmp_path / f"{ours}{dead}-file"
    plain.write_text("")
    remove_pair_folders()
    assert not stale.exists()
    assert live.is_dir() and link.is_symlink() and target.is_dir() and plain.is_file()
    assert elsewhere.is_dir()
    remove_pair_folders(dead=[os.getpid()])  # a worker msq has just killed
    assert not live.exists()


def test_shared_pair_folders_of_dead_workers_are_removed(tmp_path, monkeypatch):
    """A pool worker leaves its pair's files and rows for the driver in
    /dev/shm/msq-pair-<pid namespace>-<worker pid>-* (msq.pair_tables.compute_pair_shared);
    those of dead workers go as the rendering folders do, a live worker's stay."""
    import os
    import subprocess
    import sys

    from msq import pair_tables

    rendering, shared = tmp_path / "tmp", tmp_path / "shm"
    rendering.mkdir()
    shared.mkdir()
    monkeypatch.setattr(pair_tables.tempfile, "tempdir", str(rendering))
    monkeypatch.setattr(pair_tables, "shared_root", lambda: str(shared))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    ours = f"{pair_tables.PAIR_FOLDER}{pair_tables.pid_space()}-"
    stale = shared / f"{ours}{int(gone.stdout)}-abc"
    (stale / "x").mkdir(parents=True)
    live = shared / f"{ours}{os.getpid()}-abc"
    live.mkdir()
    pair_tables.remove_pair_folders()
    assert not stale.exists() and live.is_dir()


def test_pool_pairs_leave_no_shared_folder(tmp_path, monkeypatch):
    """A pool run hands every pair's files and rows over and removes their folders."""
    import tempfile

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setenv("TMPDIR", str(private))  # the shared folders go there (pair_tables)
    monkeypatch.setattr(tempfile, "tempdir", None)
    ranks(tmp_path, 3, bad_rank=1)
    results = msq.compare_distributed(tmp_path / "npu" / "step0", tmp_path / "bench" / "step0",
                                      tmp_path / "out", workers=2)
    assert len(results) == 3 and all(Path(f).is_file() for r in results for f in r.files)
    assert all(r.history_id for r in results)
    assert [p.name for p in private.iterdir() if p.name.startswith("msq-pair-")] == []


def test_a_second_run_never_removes_a_running_runs_folders(tmp_path, monkeypatch, request):
    """A run starts by removing the pair folders of dead workers (a killed msq's): another run
    going on meanwhile, on the same machine and TMPDIR, keeps every folder (its workers are
    alive) and ends with all its pairs. Here the second run's sweep runs again and again while
    the first computes its pairs."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    from msq import pair_tables

    # a short private TMPDIR: the process pool's AF_UNIX socket lives there, and a path past
    # 107 bytes is refused ("AF_UNIX path too long": pytest's tmp_path grows with its run count)
    private = Path(tempfile.mkdtemp(prefix="msq-t-"))
    request.addfinalizer(lambda: shutil.rmtree(private, ignore_errors=True))
    data = {f"Functional.op{i}.0.forward": fwd(t(), out=t()) for i in range(1500)}
    for side in ("npu", "bench"):
        for rank in range(4):
            write_dump(tmp_path / side / "step0" / f"rank{rank}", data)
    conf = cfg(tmp_path, tmp_path / "npu" / "step0", tmp_path / "bench" / "step0")
    env = dict(os.environ, TMPDIR=str(private))
    first = subprocess.Popen([sys.executable, "-m", "msq", "compare", str(conf), "-o",
                              str(tmp_path / "out"), "--workers", "2"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    monkeypatch.setenv("TMPDIR", str(private))
    monkeypatch.setattr(tempfile, "tempdir", None)
    seen = 0
    while first.poll() is None:
        seen = max(seen, sum(1 for p in private.iterdir() if p.name.startswith("msq-pair-")))
        pair_tables.remove_pair_folders()  # what a second msq does as it starts
        time.sleep(0.005)
    err = first.communicate()[1]
    assert first.returncode == 0, err
    assert seen, "no pair folder was ever there: the sweep was not put to the test"
    assert len(list((tmp_path / "out").glob("compare_result_*.xlsx"))) == 4
    assert [p.name for p in private.iterdir() if p.name.startswith("msq-pair-")] == []


def test_a_real_data_rank_is_one_with_its_tensor_folder_beside_its_dump(tmp_path):
    """One rule (msq.config) for the driver's choice of pool, Ray's tensor tasks and msq.runner's
    early pool server: a rank folder holding dump_tensor_data (a folder, not a file)."""
    from msq.config import holds_real_data, is_real_data

    ranks(tmp_path, 2, step="step0")
    root, step = tmp_path / "npu", tmp_path / "npu" / "step0"
    dump = step / "rank1" / "dump.json"
    (step / "rank1" / "dump_tensor_data").write_text("a file of that name")
    assert not is_real_data(dump) and not holds_real_data(step) and not holds_real_data(root)
    (step / "rank1" / "dump_tensor_data").unlink()
    (step / "rank1" / "dump_tensor_data").mkdir()
    assert is_real_data(dump) and not is_real_data(step / "rank0" / "dump.json")
    assert holds_real_data(step) and holds_real_data(root)
    assert not holds_real_data(tmp_path / "bench")
