"""The default mode's verdicts on real msprobe dumps (issue 12, items 1-4): a sweep.

* Every golden dump and every tests/data/faults dump compared with itself is clean: no red, no
  yellow, no suspect, and ``--fail-on red`` passes (a shared inf/NaN is not an error).
* Every golden case whose case.json names an injected op, and every fault case: the default
  advisor names that op (statistics and tensor modes), or an op upstream of it (md5 mode, which
  cannot weigh a difference: the first op whose bytes differ), never a near-zero artefact.
* A fault-free bf16 port is compared (bf16 against fp32 rows match) and nothing in it is red.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from msq.cli import main
from msq.runner import run_from_compare_json
from tests.golden_util import GOLDEN

FAULTS = Path(__file__).parent / "data" / "faults"


def _dumps() -> list[Path]:
    """Every dump.json of both trees, one per distinct content."""
    found = sorted(GOLDEN.glob("*/*/step*/rank*/dump.json")) if GOLDEN.is_dir() else []
    found += sorted(FAULTS.glob("*/*/step*/rank*/dump.json"))
    seen: set[str] = set()
    unique = []
    for path in found:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            unique.append(path)
    return unique


def _short(path: Path) -> str:
    for root in (GOLDEN, FAULTS):
        if path.is_relative_to(root):
            return str(path.parent.relative_to(root))
    return str(path)


@pytest.mark.slow
@pytest.mark.parametrize("dump", _dumps(), ids=_short)
def test_a_dump_compared_with_itself_is_clean(dump: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(dump), "bench_path": str(dump)}))
    result = CliRunner().invoke(main, ["compare", str(cfg), "-o", str(tmp_path / "out"),
                                       "--no-history", "-c", "--format", "csv",
                                       "--fail-on", "red"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    summary = re.search(r"(\d+) rows \((\d+) matched.*?\), (\d+) red, (\d+) yellow", result.output)
    assert summary, result.output
    rows, matched, red, yellow = map(int, summary.groups())
    assert rows == matched > 0 and (red, yellow) == (0, 0), result.output
    assert "no suspect: every row meets the accuracy rules" in result.output


def _op_of(row_name: str) -> str:
    return re.sub(r"\.(input|output)(\..*)?$", "", row_name)


def _dump_order(dump_json: Path) -> list[str]:
    return list(json.loads(dump_json.read_text())["data"])


# golden case.json "inject" -> the op msprobe names for it, and its rank (None: single card)
GOLDEN_INJECTED = {"tanh_bwd": ("Torch.tanh.0.backward", None),
                   "blocks.1.gelu_fwd": ("Functional.gelu.1.forward", None),
                   "rank1_fc2_fwd": ("Functional.linear.1.forward", 1)}


def _injected_cases() -> list[tuple[str, Path, Path, str, int | None]]:
    """(id, case folder, compare.json, injected op, rank) of every case with a known fault."""
    cases = []
    for case_json in sorted(GOLDEN.glob("*/case.json")) if GOLDEN.is_dir() else []:
        spec = json.loads(case_json.read_text())["spec"]
        inject = (spec.get("npu") or {}).get("inject")
        if not inject:
            continue
        if spec["level"] == "L0":  # modules only: the injected API is not in the dump
            continue
        folder = case_json.parent
        cfg = next(p for p in (folder / "expected" / "default" / "compare.json",
                               folder / "expected" / "dist_default" / "compare.json") if p.is_file())
        op, rank = GOLDEN_INJECTED[inject]
        cases.append((folder.name, folder, cfg, op, rank))
    for case_json in sorted(FAULTS.glob("*/case.json")):
        injected = json.loads(case_json.read_text())["injected"]
        if injected:  # the first fault in the run's order: the one a first suspect can name
            cases.append((f"faults/{case_json.parent.name}", case_json.parent,
                          case_json.parent / "compare.json", injected[0]["op"], injected[0]["rank"]))
    return cases


@pytest.mark.slow
@pytest.mark.parametrize("case_id, folder, cfg, op, rank", _injected_cases(),
                         ids=[c[0] for c in _injected_cases()])
def test_the_advisor_names_the_injected_op(case_id: str, folder: Path, cfg: Path, op: str,
                                           rank: int | None, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(folder)
    results = run_from_compare_json(cfg, tmp_path, record=False, formats="csv",
                                    auto_analyze=True)
    if rank is not None:
        results = [r for r in results if r.title.endswith(f"rank{rank}-rank{rank}")]
    assert len(results) == 1
    res = results[0]
    assert res.suspect != "NA", f"{case_id}: no suspect"
    suspect = _op_of(res.suspect)
    if res.mode == "md5":  # bytes differ or not: the first op whose bytes differ, at or before it
        order = _dump_order(Path(res.npu_path))
        assert order.index(suspect) <= order.index(op), f"{case_id}: {suspect} after {op}"
    else:
        assert suspect == op, f"{case_id}: the advisor names {res.suspect} ({res.suspect_reason})"
        assert " >= " in res.suspect_reason  # the rule, with its numbers


@pytest.mark.parametrize("folder, cfg", [
    (GOLDEN / "tfm_amp_bf16_stat_L1", "expected/default/compare.json"),
    (FAULTS / "port_bf16", "compare.json")], ids=["tfm_amp_bf16_stat_L1", "faults/port_bf16"])
def test_a_fault_free_bf16_port_is_compared_and_not_red(folder: Path, cfg: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    if not folder.is_dir():
        pytest.skip(f"{folder} not found")
    monkeypatch.chdir(folder)
    (res,) = run_from_compare_json(Path(cfg), tmp_path, record=False, formats="csv")
    assert res.matched == res.rows, "bf16 against fp32 rows match in the default mode"
    assert res.red == 0
    # msprobe 1.1.0 leaves most of them unmatched
    (old,) = run_from_compare_json(Path(cfg), tmp_path / "compat", record=False, formats="csv",
                                   compat="msprobe-1.1")
    assert old.rows - old.matched > res.rows // 3
