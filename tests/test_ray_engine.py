"""--engine ray on a real local Ray cluster (tests/raycluster.py): a head and a second node on
loopback, each with its own msq-node label, in their own network and PID namespaces.

Outside CI these tests skip, saying why, where Ray is not installed (pip install -e '.[ray]') or
the namespaces cannot be made (root needed); under CI=true that is a failure. All of them run in
one pytest worker (xdist_group), which starts one cluster for the module.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.engine_compare import file_differences, history_rows, outputs, pair_counts
from tests.golden_util import GOLDEN, all_flag_sets, diff_sheets, outputs_by_name
from tests.raycluster import ADDRESS, LABEL, running, why_unavailable

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster():
    why = why_unavailable()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Ray engine's tests: {why}")
        pytest.skip(why)
    with running() as started:
        yield started


def test_cluster_places_tasks_on_labelled_nodes(cluster, tmp_path):
    """The fixture's cluster is what the engine relies on: two live nodes told apart by label,
    Arrow tables as task results."""
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(f"""
        import pyarrow as pa, ray
        ray.init(address="{ADDRESS}", log_to_driver=False)
        @ray.remote(num_cpus=1, memory=64 << 20)
        def where():
            return pa.table({{"node": [ray.get_runtime_context().get_node_id()]}})
        for name in ("head", "n1"):
            got = ray.get([where.options(label_selector={{"{LABEL}": name}}).remote()
                           for _ in range(3)])
            nodes = set(pa.concat_tables(got).column("node").to_pylist())
            label = {{n["NodeID"]: n["Labels"]["{LABEL}"] for n in ray.nodes() if n["Alive"]}}
            print(name, sorted(label[n] for n in nodes))
    """))
    done = cluster.run([sys.executable, str(script)], cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["head ['head']", "n1 ['n1']"]


# --------------------------------------------------------------------------------------------
# msq compare --engine ray against --engine local

MSQ = [sys.executable, "-m", "msq.cli"]


def local(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MSQ, *args], cwd=cwd, capture_output=True, text=True, timeout=900,
                          check=False, stdin=subprocess.DEVNULL)


def on_ray(cluster, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return cluster.run([*MSQ, *args, "--engine", "ray", "--ray-address", ADDRESS], cwd=cwd,
                       timeout=900)


def root(base: Path, ranks: int, steps: int, ops: int = 12) -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from gen_root import generate_root

    generate_root(base, ranks, steps, ops)
    return base


@pytest.fixture(scope="module")
def root64(tmp_path_factory) -> Path:
    return root(tmp_path_factory.mktemp("root64"), 64, 4)


@pytest.fixture(scope="module")
def local64(root64) -> Path:
    out = root64 / "local-out"
    done = local(["compare", "compare.json", "-o", str(out), "--format", "xlsx,csv", "-q"], root64)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_64_ranks_x_4_steps_equal_local(cluster, root64, local64, tmp_path):
    out = tmp_path / "ray-out"
    done = on_ray(cluster, ["compare", "compare.json", "-o", str(out), "--format", "xlsx,csv",
                            "-q"], root64)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(outputs(out)) == 64 * 4 * 4  # workbook, CSV, advisor and blame's CSV of each pair
    assert file_differences(out, local64) == []
    assert pair_counts(out / "msq.duckdb") == [(s, r, 1) for s in range(4) for r in range(64)]
    assert history_rows(out / "msq.duckdb") == history_rows(local64 / "msq.duckdb")


DIST_SETS = [fs for fs in (all_flag_sets() if GOLDEN.is_dir() else [])
             if fs.name.startswith("dist_") and fs.name != "dist_api"]


@pytest.mark.parametrize("fs", DIST_SETS, ids=str)
def test_golden_directory_cases_on_ray(cluster, fs, tmp_path):
    """msprobe's own outputs, cell for cell in --compat msprobe-1.1; in the default mode the
    same files and history rows as the local engine."""
    out = tmp_path / "compat"
    done = on_ray(cluster, fs.argv(out), fs.case_dir)
    assert done.returncode == 0, done.stderr[-3000:]
    want = outputs_by_name(fs.expected, ".xlsx")
    got = outputs_by_name(out, ".xlsx")
    assert sorted(got) == sorted(want)
    for name, path in want.items():
        assert diff_sheets(got[name], path) == [], name
    default = [a for a in fs.argv(tmp_path / "x") if a not in ("--compat", "msprobe-1.1",
                                                                 "--no-history")]
    out_dir = default.index("-o") + 1
    default[out_dir] = str(tmp_path / "ray")
    ray_done = on_ray(cluster, [*default, "--format", "xlsx,csv,parquet"], fs.case_dir)
    default[out_dir] = str(tmp_path / "local")
    local_done = local([*default, "--format", "xlsx,csv,parquet"], fs.case_dir)
    assert ray_done.returncode == 0 and local_done.returncode == 0, ray_done.stderr[-2000:]
    assert file_differences(tmp_path / "ray", tmp_path / "local") == []
    assert history_rows(tmp_path / "ray" / "msq.duckdb") == \
        history_rows(tmp_path / "local" / "msq.duckdb")


@pytest.mark.skipif(DIST_SETS or not os.environ.get("CI"), reason="golden cases present, or "
                    "not CI")
def test_golden_directory_cases_present_in_ci():
    pytest.fail(f"CI must run the golden directory cases on Ray: none found at {GOLDEN}")


# --------------------------------------------------------------------------------------------
# faults, resume, locality

def _wait_for(check, proc: subprocess.Popen[str], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _advisors(out: Path) -> int:
    return len(list(out.glob("advisor_*.txt"))) if out.is_dir() else 0


@pytest.fixture(scope="module")
def root8(tmp_path_factory) -> tuple[Path, Path]:
    """8 ranks x 4 steps, and the local engine's outputs of it."""
    base = root(tmp_path_factory.mktemp("root8"), 8, 4)
    out = base / "local-out"
    done = local(["compare", "compare.json", "-o", str(out), "--format", "xlsx,csv", "-q"], base)
    assert done.returncode == 0, done.stderr[-3000:]
    return base, out


def test_a_killed_worker_is_retried_and_each_pair_recorded_once(cluster, root8, tmp_path):
    base, want = root8
    out = tmp_path / "out"
    proc = cluster.popen([*MSQ, "compare", "compare.json", "-o", str(out), "--format",
                          "xlsx,csv", "-q", "--engine", "ray", "--ray-address", ADDRESS], cwd=base)
    _wait_for(lambda: _advisors(out) >= 2 and cluster.pids("ray::compute_pair"), proc)
    victim = cluster.pids("ray::compute_pair")[0]
    os.kill(victim, signal.SIGKILL)
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    assert pair_counts(out / "msq.duckdb") == [(s, r, 1) for s in range(4) for r in range(8)]
    assert file_differences(out, want) == []
    assert history_rows(out / "msq.duckdb") == history_rows(want / "msq.duckdb")


def test_a_stopped_run_resumes_to_the_uninterrupted_result(cluster, root8, tmp_path):
    base, want = root8
    out = tmp_path / "out"
    args = [*MSQ, "compare", "compare.json", "-o", str(out), "--format", "xlsx,csv", "-q",
            "--engine", "ray", "--ray-address", ADDRESS]
    proc = cluster.popen(args, cwd=base)
    _wait_for(lambda: _advisors(out) >= 4, proc)
    driver = cluster.pids(f"{sys.executable} -m msq.cli")
    assert len(driver) == 1
    os.kill(driver[0], signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-3000:]
    recorded = pair_counts(out / "msq.duckdb")
    assert 0 < len(recorded) < 32 and all(n == 1 for _, _, n in recorded)
    done = cluster.run([*args, "--resume"], cwd=base)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"resuming: {len(recorded)} of 32 pairs already recorded" in done.stderr
    assert pair_counts(out / "msq.duckdb") == [(s, r, 1) for s in range(4) for r in range(8)]
    assert file_differences(out, want) == []
    assert history_rows(out / "msq.duckdb") == history_rows(want / "msq.duckdb")


def test_pairs_run_where_their_dumps_are_and_a_broken_pair_stops_no_other(cluster, tmp_path):
    base = root(tmp_path / "root", 3, 2)
    (base / "bench" / "step1" / "rank2" / "dump.json").write_text("{broken")
    args = ["compare", "compare.json", "--format", "xlsx,csv"]
    place = ["--ray-place", f"{base}/npu/step0=head", "--ray-place", f"{base}/npu/step1=n1"]
    done = on_ray(cluster, [*args, "-o", str(tmp_path / "ray"), "-v", *place], base)
    assert done.returncode == 1, done.stderr[-3000:]  # a failed pair: not a pass
    assert "step1 rank2-rank2" in done.stderr and "malformed JSON" in done.stderr
    assert "msq: error: 1 of 6 pairs failed (not written or recorded; the other 5 " \
           "were); first: step1 rank2-rank2: " in done.stderr
    assert done.stdout.splitlines()[-1].startswith(
        "msq compare total: 5 compares, 1 failed (step1 rank2-rank2: ")
    ran = sorted(re.findall(r"pair (step\d rank\d-rank\d) ran on node (\S+)", done.stderr))
    assert ran == [(f"step{s} rank{r}-rank{r}", "head" if s == 0 else "n1")
                   for s in range(2) for r in range(3) if (s, r) != (1, 2)]
    want = local([*args, "-o", str(tmp_path / "local")], base)
    assert want.returncode == 1, want.stderr[-3000:]
    assert file_differences(tmp_path / "ray", tmp_path / "local") == []
    assert history_rows(tmp_path / "ray" / "msq.duckdb") == \
        history_rows(tmp_path / "local" / "msq.duckdb")


def _console(text: str, out: Path) -> str:
    """A run's console with what differs between two equal runs taken out: times, file
    timestamps, the output folder."""
    text = text.replace(str(out), "OUT")
    return re.sub(r"\d+\.\ds\b", "Ts", re.sub(r"_\d{14}", "", text))


def test_the_console_of_a_directory_run_on_ray_is_the_local_ones(cluster, tmp_path):
    """A line per pair in step and rank order with its sheet row and files, the total line, and
    the gate's line on stderr: the same on both engines."""
    base = root(tmp_path / "root", 2, 2)
    args = ["compare", "compare.json", "--format", "xlsx,csv", "--fail-on", "red"]
    done = on_ray(cluster, [*args, "-o", str(tmp_path / "ray")], base)
    want = local([*args, "-o", str(tmp_path / "local")], base)
    assert (done.returncode, want.returncode) == (3, 3), done.stderr[-3000:]
    got = _console(done.stdout, tmp_path / "ray")
    assert got == _console(want.stdout, tmp_path / "local")
    heads = [line for line in got.splitlines() if line.startswith("msq compare")]
    assert [head.split(":")[0] for head in heads[:-1]] == \
        [f"msq compare step{s} rank{r}-rank{r}" for s in range(2) for r in range(2)]
    assert heads[-1].startswith("msq compare total: 4 compares, ")
    assert re.findall(r"recorded as compare (\d+) in OUT/msq.duckdb", got) == ["1", "2", "3", "4"]
    gate = [line for line in done.stderr.splitlines() if "accuracy gate" in line]
    assert gate == [line for line in want.stderr.splitlines() if "accuracy gate" in line]
    assert re.fullmatch(r"msq: accuracy gate tripped \(--fail-on red\): \d+ red rows? in \d of 4 "
                        r"compares; first: step\d rank\d-rank\d row \d+: \S+ \(.+\)", gate[0])


def test_a_place_naming_no_live_node_is_refused(cluster, tmp_path):
    base = root(tmp_path / "root", 1, 1)
    done = on_ray(cluster, ["compare", "compare.json", "-o", str(tmp_path / "o"),
                            "--ray-place", f"{base}=nowhere"], base)
    assert done.returncode == 2
    assert "nowhere" in done.stderr and "msq-node" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.skipif(not (GOLDEN / "mlp_tensor_L1").is_dir(), reason="golden cases not found")
def test_a_real_data_pair_is_split_into_tensor_tasks(cluster, tmp_path):
    """The golden real-data dump as a directory compare: its tensors go out as Ray tasks (batches
    of pairs; a large tensor would go as element ranges) and the cells are the local engine's."""
    case = GOLDEN / "mlp_tensor_L1"
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(case / "npu" / "step0"),
                               "bench_path": str(case / "bench" / "step0")}))
    args = ["compare", str(cfg), "--format", "xlsx,csv"]
    done = on_ray(cluster, [*args, "-o", str(tmp_path / "ray"), "-vv"], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(re.findall(r"tensor task \d+: _run_batch", done.stderr)) >= 2
    want = local([*args, "-o", str(tmp_path / "local")], tmp_path)
    assert want.returncode == 0, want.stderr[-3000:]
    assert file_differences(tmp_path / "ray", tmp_path / "local") == []
    assert history_rows(tmp_path / "ray" / "msq.duckdb") == \
        history_rows(tmp_path / "local" / "msq.duckdb")


@pytest.mark.skipif(not (GOLDEN / "mlp_tensor_L1").is_dir(), reason="golden cases not found")
def test_a_single_card_compare_runs_on_ray_too(cluster, tmp_path):
    """compare.json naming two dump.json files: one pair, on the cluster, as the local engine
    writes it (outputs, history rows)."""
    case = GOLDEN / "mlp_tensor_L1"
    cfg = case / "expected" / "default" / "compare.json"
    args = ["compare", str(cfg), "--format", "xlsx,csv", "-s"]
    done = on_ray(cluster, [*args, "-o", str(tmp_path / "ray"), "-v"], case)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"pair \S+dump.json ran on node (head|n1)", done.stderr)
    want = local([*args, "-o", str(tmp_path / "local")], case)
    assert want.returncode == 0, want.stderr[-3000:]
    assert file_differences(tmp_path / "ray", tmp_path / "local") == []
    assert history_rows(tmp_path / "ray" / "msq.duckdb") == \
        history_rows(tmp_path / "local" / "msq.duckdb")


def test_an_address_where_no_cluster_listens_fails_in_seconds(tmp_path):
    """Ray would keep retrying for minutes; msq says at once that nothing answers there."""
    why = why_unavailable()
    if why and "Ray is not installed" in why:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the Ray engine's tests: {why}")
        pytest.skip(why)
    base = root(tmp_path / "root", 1, 1)
    started = time.monotonic()
    done = local(["compare", "compare.json", "-o", str(tmp_path / "o"), "--engine", "ray",
                  "--ray-address", "127.0.0.1:1"], base)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "cannot join the Ray cluster at 127.0.0.1:1" in done.stderr
    assert time.monotonic() - started < 120  # not the minutes Ray would keep retrying


# --------------------------------------------------------------------------------------------
# blame across ranks (tests/data/faults/dist_tp_stat: the fault on rank 1 before an all_reduce)

FAULTS = Path(__file__).resolve().parent / "data" / "faults"


def _blame(out: Path) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, Any]]:
    """(the run's blame rows, its edges, the JSON's first local source), run ids left out."""
    con = duckdb.connect(str(out / "msq.duckdb"), read_only=True)
    try:
        rows = con.execute("""
            SELECT rank, step, out_seq, npu_name, verdict, input_err, output_err, reason,
                   blame_rank
            FROM blame ORDER BY step, rank, out_seq""").fetchall()
        edges = con.execute("""
            SELECT c.rank, e.side, e.consumer_seq, e.producer_seq, e.how
            FROM blame_edges e JOIN compares c USING (compare_id)
            ORDER BY c.rank, e.side, e.consumer_seq""").fetchall()
    finally:
        con.close()
    first = json.loads(next(out.glob("blame_*.json")).read_text())["first_local_source"]
    return rows, edges, first


def test_blame_across_ranks_on_ray_equals_local(cluster, tmp_path):
    case = FAULTS / "dist_tp_stat"
    args = ["compare", "compare.json", "--format", "xlsx,csv", "-q"]
    ray_done = on_ray(cluster, [*args, "-o", str(tmp_path / "ray")], case)
    local_done = local([*args, "-o", str(tmp_path / "local")], case)
    assert ray_done.returncode == 0 and local_done.returncode == 0, ray_done.stderr[-2000:]
    assert file_differences(tmp_path / "ray", tmp_path / "local") == []
    rows, edges, first = _blame(tmp_path / "ray")
    assert (rows, edges, first) == _blame(tmp_path / "local")
    # the injected op, on its rank, is the run's only local source; the all_reduce inherits
    assert [(r[0], r[3]) for r in rows if r[4] == "local"] == \
        [(1, "Functional.linear.6.forward.output.0")]
    assert (first["rank"], first["op_name"]) == (1, "Functional.linear.6.forward")
    assert {r[4] for r in rows if r[3].startswith("Distributed.all_reduce.0.forward.output")} \
        == {"inherited"}
