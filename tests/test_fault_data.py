"""Sanity of the committed fault cases under tests/data/faults (made by bench/dumpers/make_faults.py).

No msprobe, no torch: only checks that each case folder is complete and that its case.json names
ops and rows that exist in the dumps, so a broken data tree fails CI before anything uses it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

FAULTS = Path(__file__).parent / "data" / "faults"
CASES = ["stat_fwd", "tensor_fwd", "md5_fwd", "stat_bwd", "stat_two_sources", "dist_tp_stat",
         "port_bf16"]
SIDES = ["npu", "bench", "bench_noise"]
STAT_KEYS = ("dtype", "shape", "Max", "Min", "Mean", "Norm", "md5")
TREE_LIMIT = 7_000_000  # the tree is kept near 6 MB; see tests/data/faults/README.md


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def case_doc(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = load(FAULTS / name / "case.json")
    return doc


def rank_dir(case: str, side: str, rank: int | None) -> Path:
    return FAULTS / case / side / "step0" / ("rank" if rank is None else f"rank{rank}")


def leaves(node: Any) -> list[dict[str, Any]]:
    if isinstance(node, dict) and "type" in node:
        return [node]
    if isinstance(node, dict):
        return [x for v in node.values() for x in leaves(v)]
    if isinstance(node, list):
        return [x for v in node for x in leaves(v)]
    return []


def signature(leaf: dict[str, Any]) -> str:
    return json.dumps({k: leaf.get(k) for k in STAT_KEYS}, sort_keys=True)


def test_every_case_is_present() -> None:
    present = sorted(p.parent.name for p in FAULTS.glob("*/case.json"))
    assert present == sorted(CASES)
    assert (FAULTS / "README.md").is_file()


def test_tree_stays_small() -> None:
    size = sum(f.stat().st_size for f in FAULTS.rglob("*") if f.is_file())
    assert size < TREE_LIMIT, f"tests/data/faults is {size:,} bytes"


@pytest.mark.parametrize("case", CASES)
def test_case_folder_is_complete(case: str) -> None:
    doc = case_doc(case)
    assert doc["case"] == case
    world = doc["world"]
    ranks: list[int | None] = [None] if world == 1 else list(range(world))
    task = doc["msprobe_config"]["task"]
    for side in SIDES:
        got = sorted(p.name for p in (FAULTS / case / side / "step0").iterdir())
        assert got == sorted(rank_dir(case, side, r).name for r in ranks), (case, side)
        for r in ranks:
            d = rank_dir(case, side, r)
            for name in ("dump.json", "stack.json", "construct.json"):
                assert (d / name).is_file(), d / name
            dump = load(d / "dump.json")
            assert dump["task"] == task and dump["level"] == "L1"
            data_names = [x["data_name"] for e in dump["data"].values() for x in leaves(e)
                          if "data_name" in x]
            if task == "tensor":
                assert data_names
                missing = [n for n in data_names if not (d / "dump_tensor_data" / n).is_file()]
                assert not missing, (d, missing[:3])
            else:
                assert not data_names
            assert set(load(d / "stack.json")) <= set(dump["data"])


@pytest.mark.parametrize("case", CASES)
def test_compare_files_point_into_the_case(case: str) -> None:
    root = FAULTS / case
    for name, (npu, bench) in (("compare.json", ("npu", "bench")),
                               ("compare_noise.json", ("bench", "bench_noise"))):
        cfg = load(root / name)
        assert cfg["npu_path"].startswith(f"{npu}/") and cfg["bench_path"].startswith(f"{bench}/")
        for key in ("npu_path", "bench_path", "stack_path"):
            if key in cfg:
                assert (root / cfg[key]).exists(), (case, name, key)


@pytest.mark.parametrize("case", CASES)
def test_sides_run_the_same_api_sequence(case: str) -> None:
    doc = case_doc(case)
    ranks: list[int | None] = [None] if doc["world"] == 1 else list(range(doc["world"]))
    for r in ranks:
        keys = [list(load(rank_dir(case, s, r) / "dump.json")["data"]) for s in SIDES]
        assert keys[0] == keys[1] == keys[2], (case, r)


@pytest.mark.parametrize("case", [c for c in CASES if c != "port_bf16"])
def test_injected_ops_exist_and_are_where_the_fault_enters(case: str) -> None:
    """Each injected op is in the npu dump; its rows differ from bench, and for the first fault
    of the run its inputs (and, for a backward fault, its forward record) are equal to bench."""
    doc = case_doc(case)
    injected = doc["injected"]
    assert injected and [i["op"] for i in injected] == [e["op"] for e in doc["expected_local"]]
    for k, inj in enumerate(injected):
        op, rank = inj["op"], inj["rank"]
        assert op.count(".") == 3 and op.endswith("." + inj["direction"])
        npu = load(rank_dir(case, "npu", rank) / "dump.json")["data"]
        bench = load(rank_dir(case, "bench", rank) / "dump.json")["data"]
        assert op in npu, f"{case}: {op} is not in the npu dump of rank {rank}"
        for row in inj["rows"]:
            assert row.startswith(op + ".output.")
            index = int(row.rsplit(".", 1)[1])
            n_leaf, b_leaf = npu[op]["output"][index], bench[op]["output"][index]
            assert n_leaf["type"] == "torch.Tensor"
            assert signature(n_leaf) != signature(b_leaf), f"{case}: {row} equals bench"
        if k == 0:  # later sources sit downstream of the first one: their inputs differ
            keys = ["input_args", "input_kwargs", "input"]
            n_in = [signature(x) for key in keys for x in leaves(npu[op].get(key))]
            b_in = [signature(x) for key in keys for x in leaves(bench[op].get(key))]
            assert n_in == b_in, f"{case}: the inputs of {op} already differ"
            if op.endswith(".backward"):
                fwd = op[: -len("backward")] + "forward"
                assert json.dumps(npu[fwd]) == json.dumps(bench[fwd])


def test_the_collective_carries_the_rank1_fault_to_rank0() -> None:
    """dist_tp_stat: on rank 0 the first all_reduce has equal inputs but different outputs."""
    npu = load(rank_dir("dist_tp_stat", "npu", 0) / "dump.json")["data"]
    bench = load(rank_dir("dist_tp_stat", "bench", 0) / "dump.json")["data"]
    ar = next(op for op in npu if op.startswith("Distributed.all_reduce."))
    assert [signature(x) for x in leaves(npu[ar]["input_args"])] == \
        [signature(x) for x in leaves(bench[ar]["input_args"])]
    assert [signature(x) for x in leaves(npu[ar]["output"])] != \
        [signature(x) for x in leaves(bench[ar]["output"])]
    before = list(npu)[: list(npu).index(ar)]
    assert all(json.dumps(npu[op]) == json.dumps(bench[op]) for op in before)
    injected = case_doc("dist_tp_stat")["injected"]
    assert [(i["op"], i["rank"]) for i in injected] == [(before[-1], 1)]  # just before it
