"""The proof: real msprobe 1.1.0 dumps of a Llama with faults injected at known ops
(tests/data/faults/, see its README). In every mode (statistics, tensor, md5), forward and
backward, with two sources and across two ranks, blame names exactly the injected ops as local,
on the right rank, and nothing else, with the dtype floors and with the reference noise runs.
The fault-free bf16 port has no local source, and its ops that only carry their inputs' bf16
error are inherited.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from msq import history
from msq.errors import UsageError
from msq.pipeline import compare
from msq.runner import run_from_compare_json

FAULTS = Path(__file__).resolve().parents[1] / "data" / "faults"
INJECTED = ["stat_fwd", "tensor_fwd", "md5_fwd", "stat_bwd", "stat_two_sources", "dist_tp_stat"]


def case_doc(case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FAULTS / case / "case.json").read_text())
    return doc


def run(case: str, out: Path, **kw: Any) -> Path:
    """Compare a case (directory mode for the 2-rank one); return its history database."""
    db = out / "h.duckdb"
    run_from_compare_json(FAULTS / case / "compare.json", out, db=db, **kw)
    return db


def local_sources(db: Path) -> list[tuple[int | None, str]]:
    """(rank, op) of every local source of the newest run, worst first."""
    rows = history.query(db, """
        SELECT rank, op_name FROM blame
        WHERE verdict = 'local' AND label IS NOT DISTINCT FROM NULL
          AND run_id = (SELECT run_id FROM blame_rows ORDER BY compare_id DESC LIMIT 1)
        ORDER BY blame_rank""").rows
    return [(r[0], r[1]) for r in rows]


@pytest.mark.parametrize("noise", [False, True], ids=["dtype floors", "noise run"])
@pytest.mark.parametrize("case", INJECTED)
def test_blame_names_exactly_the_injected_ops(case: str, noise: bool, tmp_path: Path) -> None:
    doc = case_doc(case)
    extra = {"noise": FAULTS / case / "compare_noise.json"} if noise else {}
    db = run(case, tmp_path, **extra)
    want = sorted((e["rank"], e["op"]) for e in doc["expected_local"])
    assert sorted(local_sources(db)) == want
    # the JSON file names the first of them in execution order, with its rank
    first = json.loads(next(tmp_path.glob("blame_*.json")).read_text())["first_local_source"]
    assert (first["rank"], first["op_name"]) == (doc["expected_local"][0]["rank"],
                                                doc["expected_local"][0]["op"])
    if noise:  # the floors came from the noise run; its compares are in the same history
        used = history.query(db, "SELECT DISTINCT noise_source FROM blame_rows b JOIN compares c "
                                 "USING (compare_id) WHERE c.label IS NULL").rows
        assert used == [(str(FAULTS / case / "compare_noise.json"),)]
        assert history.query(db, "SELECT count(*) FROM compares WHERE label = 'noise'").rows[0][0]


def test_only_a_reference_noise_runs_compares_carry_their_bands(tmp_path: Path) -> None:
    """A compare's blame summary carries its rows' noise bands (fetched into Python: ~0.03 s of a
    100,000-row compare) only in a reference noise run, the one reader of them."""
    from msq.blame import noise
    from msq.config import options_from_kwargs
    from msq.pipeline import _single_card_noise

    results = run_from_compare_json(FAULTS / "stat_fwd" / "compare.json", tmp_path / "plain",
                                    db=tmp_path / "h.duckdb")
    assert results[0].blame is not None and results[0].blame.counts
    assert results[0].blame.bands == []
    opts = options_from_kwargs(False, True, False, {"db": tmp_path / "h.duckdb"})
    table = noise.run_reference(FAULTS / "stat_fwd" / "compare_noise.json", tmp_path / "ref", opts,
                                _single_card_noise)
    # the bands of the rows that add an error over their inputs, as the history keeps them
    recorded = history.query(tmp_path / "h.duckdb", "SELECT count(*) FROM noise_bands "
                                                    "WHERE label = 'noise' AND band > 0").rows[0][0]
    assert table.num_rows == recorded > 0


def test_the_two_rank_fault_is_inherited_through_the_all_reduce(tmp_path: Path) -> None:
    db = run("dist_tp_stat", tmp_path)
    rows = history.query(db, """
        SELECT rank, verdict, input_err, output_err, reason FROM blame
        WHERE npu_name = 'Distributed.all_reduce.0.forward.output.0' ORDER BY rank""").rows
    (r0, v0, in0, out0, why0), (r1, v1, in1, _, _) = rows
    assert (r0, v0, r1, v1) == (0, "inherited", 1, "inherited")
    # rank 0's own inputs are equal: the other rank's input explains its output
    assert in0 == in1 > out0 > 0 and why0.startswith("through the collective")
    own = history.query(db, "SELECT input_err, verdict, reason FROM blame_rows b JOIN compares c "
                            "USING (compare_id) WHERE c.rank = 0 AND "
                            "npu_name = 'Distributed.all_reduce.0.forward.output.0'").rows
    assert own[0][0] == 0.0 and own[0][2].startswith("through the collective")
    # rank 1's advisor names the source with its rank and why; rank 0's has none of its own
    text = next(tmp_path.glob("advisor_rank1-rank1_*.txt")).read_text()
    assert "1. rank 1: Functional.linear.6.forward.output.0 (sheet row " in text
    assert "input error 0 -> output error" in text and "its inputs are equal" in text
    assert "no local source" in next(tmp_path.glob("advisor_rank0-rank0_*.txt")).read_text()


def test_resume_weighs_the_pairs_it_skips_in_the_runs_blame(tmp_path: Path) -> None:
    """--resume compares only the pairs not yet recorded; the ones it skips still count in the
    run's blame: here rank 1 (where the fault is) is skipped and rank 0 redone, and the run's
    first local source is still rank 1's, in the console's result, the JSON and the history."""
    db = run("dist_tp_stat", tmp_path, label="r")
    first_run = history.query(db, "SELECT DISTINCT run_id FROM blame_rows").rows
    next(tmp_path.glob("compare_result_rank0-rank0_*.xlsx")).unlink()  # rank 0 must be redone
    results = run_from_compare_json(FAULTS / "dist_tp_stat" / "compare.json", tmp_path, db=db,
                                    label="r", resume=True)
    assert [r.rank for r in results] == [0]
    run_blame = results[0].run_blame
    assert run_blame.compares == 2
    assert (run_blame.first["rank"], run_blame.first["op_name"]) == (
        1, "Functional.linear.6.forward")
    doc = json.loads(results[0].blame_json.read_text())
    assert (doc["first_local_source"]["rank"], doc["first_local_source"]["op_name"]) == (
        1, "Functional.linear.6.forward")
    assert doc["compares"] == 2
    # the new pair joined the recorded run: the history's view weighs them as one run
    assert history.query(db, "SELECT DISTINCT run_id FROM blame_rows").rows == first_run
    assert history.query(db, "SELECT DISTINCT rank, op_name FROM blame "
                             "WHERE verdict = 'local' AND label = 'r'").rows == [
        (1, "Functional.linear.6.forward")]


def test_a_backward_fault_is_not_blamed_on_its_incoming_gradient(tmp_path: Path) -> None:
    db = run("stat_bwd", tmp_path)
    (input_err, output_err, role), = history.query(db, """
        SELECT input_err, output_err, role FROM blame
        WHERE npu_name = 'Tensor.__mul__.11.backward.output.0'""").rows
    assert (input_err, role) == (0.0, "output") and output_err > 0.1
    # downstream backward ops carry it: inherited, with the amplification they show
    worst = history.query(db, "SELECT max(amplification) FROM blame WHERE verdict = 'inherited' "
                              "AND isfinite(amplification)").rows[0][0]
    assert 1 < worst < 100


def test_the_second_source_downstream_of_the_first_is_local_by_its_amplification(
        tmp_path: Path) -> None:
    db = run("stat_two_sources", tmp_path)
    (input_err, output_err, amp), = history.query(db, """
        SELECT input_err, output_err, amplification FROM blame
        WHERE npu_name = 'Torch.rsqrt.3.forward.output.0'""").rows
    assert 0 < input_err < 1e-4 and output_err > 0.05 and amp > 1000


def test_the_bf16_port_has_no_local_source_and_its_carried_errors_are_inherited(
        tmp_path: Path) -> None:
    # every row paired (a data mapping of each row to itself): the default match leaves bf16
    # rows against float32 ones unmatched
    names = {row for doc in ("npu", "bench") for row in _row_names(
        FAULTS / "port_bf16" / doc / "step0" / "rank" / "dump.json")}
    mapping = tmp_path / "map.yaml"
    mapping.write_text("".join(f"{n}: {n}\n" for n in sorted(names)))
    db = run("port_bf16", tmp_path / "paired", data_mapping=mapping)
    assert history.query(db, "SELECT count(*) FROM blame WHERE verdict = 'local'").rows == [(0,)]
    # RMSNorm's float32 ops after the bf16 linears: far beyond the float32 floor, explained
    mean3 = history.query(db, """
        SELECT verdict, output_err / floor, amplification, via FROM blame
        WHERE npu_name = 'Tensor.mean.3.forward.output.0'""").rows[0]
    assert mean3[0] == "inherited" and mean3[1] > 100 and 2 < mean3[2] < 100
    # the bf16 outputs of linears with equal float32 inputs: within the bfloat16 floor
    linear = history.query(db, """
        SELECT verdict, input_err, output_err, floor_source FROM blame
        WHERE npu_name = 'Functional.linear.2.forward.output.0'""").rows[0]
    assert linear[0] == "clean" and linear[1] == 0.0 and linear[2] > 1e-3
    assert linear[3] == "dtype bfloat16"
    # and as the default match pairs it
    db = run("port_bf16", tmp_path / "default")
    assert history.query(db, "SELECT count(*) FROM blame WHERE verdict = 'local'").rows == [(0,)]


def test_the_workbook_has_a_blame_sheet_beside_the_unchanged_msprobe_sheet(
        tmp_path: Path) -> None:
    run("stat_two_sources", tmp_path / "default")
    run("stat_two_sources", tmp_path / "compat", compat="msprobe-1.1")
    book = openpyxl.load_workbook(next((tmp_path / "default").glob("compare_result_*.xlsx")),
                                  read_only=True)
    assert book.sheetnames == ["Sheet", "blame"]
    header, *rows = [list(r) for r in book["blame"].iter_rows(values_only=True)]
    col = {name: i for i, name in enumerate(header)}
    # the local sources, worst first, each with its row in the msprobe sheet
    assert [r[col["Blame rank"]] for r in rows] == list(range(1, len(rows) + 1))
    want = {e["op"] for e in case_doc("stat_two_sources")["expected_local"]}
    assert {r[col["Op"]] for r in rows} == want
    sheet = [list(r) for r in book["Sheet"].iter_rows(values_only=True)]
    for r in rows:
        assert sheet[r[col["Row"]] - 1][0] == r[col["NPU Name"]]
    # an infinite amplification (equal inputs) is written as the text "inf"
    assert all(isinstance(r[col["Amplification"]], (int, float)) or r[col["Amplification"]] == "inf"
               for r in rows)
    compat = openpyxl.load_workbook(next((tmp_path / "compat").glob("compare_result_*.xlsx")),
                                    read_only=True)
    assert compat.sheetnames == ["Sheet"]


def _row_names(dump_json: Path) -> set[str]:
    data = json.loads(dump_json.read_text())["data"]
    names: set[str] = set()

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict) and "type" in node:
            names.add(prefix)
        elif isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{prefix}.{i}")

    for op, entry in data.items():
        for key, io in (("input_args", "input"), ("input_kwargs", "input"), ("input", "input"),
                        ("output", "output")):
            if key == "input_kwargs":
                for kw, value in (entry.get(key) or {}).items():
                    walk(value, f"{op}.input.{kw}")
            elif key in entry:
                for i, value in enumerate(entry[key] or []):
                    walk(value, f"{op}.{io}.{i}")
    return names


def test_the_api_compare_refuses_a_noise_run_of_directories(tmp_path: Path) -> None:
    case = FAULTS / "stat_fwd" / "npu" / "step0" / "rank"
    bench = FAULTS / "stat_fwd" / "bench" / "step0" / "rank"
    with pytest.raises(UsageError, match="reference noise run of directories"):
        compare({"npu_json_path": str(case / "dump.json"),
                 "bench_json_path": str(bench / "dump.json"), "stack_json_path": None},
                tmp_path, noise=FAULTS / "dist_tp_stat" / "compare_noise.json", record=False)
    assert not list(tmp_path.glob("compare_result_*"))
