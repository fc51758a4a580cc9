"""The MindSpore cell mapping (-cm, -cm FILE.yaml; spec §3.7 step 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mindspore.msdump import DumpBuilder, arrays, compare_json, run_cli


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fc1: Dense vs Linear (needs the YAML); relu: same class on both sides; blk: a nested input."""
    tmp = tmp_path_factory.mktemp("cells")
    a = arrays(5)
    x, w, b = a["x"], a["w"], a["b"]
    npu = DumpBuilder(tmp / "npu", "mindspore")
    bench = DumpBuilder(tmp / "bench", "pytorch")
    for d, fc1, prefix in ((npu, "Dense", "Cell"), (bench, "Linear", "Module")):
        d.op(f"{prefix}.fc1.{fc1}.forward.0", [x], {}, [x @ w.T + b])
        d.op(f"{prefix}.relu.ReLU.forward.0", [x], {}, [abs(x)])
        d.op(f"{prefix}.blk.{'Block' if prefix == 'Cell' else 'Blk'}.forward.0", [[x, x]], {}, [x])
        d.write()
    return compare_json(tmp, npu, bench)


def matched(run) -> set[str]:
    return {n.split(".forward")[0] for n, b in run.pairs() if n != "N/A" and b != "N/A"}


def cm(tmp: Path, text: str) -> str:
    path = tmp / "cells.yaml"
    path.write_text(text)
    return str(path)


def test_default_rule_and_yaml(cells: Path, tmp_path: Path) -> None:
    plain = run_cli(cells, tmp_path / "plain", "-cm")
    assert plain.exit_code == 0, plain.output
    assert matched(plain) == {"Cell.relu.ReLU"}
    mapped = run_cli(cells, tmp_path / "yaml", "-cm", cm(tmp_path, "fc1.Dense: fc1.Linear\n"
                                                                   "blk.Block: blk.Blk\n"))
    assert matched(mapped) == {"Cell.relu.ReLU", "Cell.fc1.Dense", "Cell.blk.Block"}
    rows = mapped.by_npu()
    # displayed names stay MindSpore's; the nested input .0.0/.0.1 is mapped too (1.1.0 misses it)
    assert rows["Cell.blk.Block.forward.0.input.0.1"]["Bench Name"] == \
        "Module.blk.Blk.forward.0.input.0.1"
    assert rows["Cell.fc1.Dense.forward.0.output.0"]["Max diff"] == 0


def test_compat_misses_nested_arguments(cells: Path, tmp_path: Path) -> None:
    """1.1.0 cuts the cell key out of each row name, so rows ``input.0.1`` get a wrong key."""
    run = run_cli(cells, tmp_path / "out", "-cm", cm(tmp_path, "fc1.Dense: fc1.Linear\n"
                                                               "blk.Block: blk.Blk\n"),
                  "--compat", "msprobe-1.1")
    assert matched(run) == {"Cell.relu.ReLU", "Cell.fc1.Dense"}


@pytest.mark.parametrize("text, warning", [
    ("- fc1.Dense\n- fc1.Linear\n", ("a cell mapping must be a YAML mapping such as 'fc1.Dense: "
                                     "fc1.Linear', found a list; only the Cell -> Module rule "
                                     "applies")),
    ("", "the cell mapping YAML is empty"),
    ("fc1.Dense: [fc1.Linear]\n", "entry 'fc1.Dense': ['fc1.Linear']: both sides must be names"),
    ("fc9.Dense: fc9.Linear\n", ("entry 'fc9.Dense: fc9.Linear': the NPU dump has no cell "
                                 "Cell.fc9.Dense.forward.<n>")),
    ("relu.ReLU: relu.Relu\n", ("entry 'relu.ReLU: relu.Relu': the bench dump has no module "
                                "Module.relu.Relu.forward.<n>")),
], ids=["list", "empty", "bad_value", "no_cell", "no_module"])
def test_bad_yaml_is_warned_nothing_lost(cells: Path, tmp_path: Path, text: str,
                                         warning: str) -> None:
    path = cm(tmp_path, text)
    run = run_cli(cells, tmp_path / "out", "-cm", path)
    # a mapping that pairs nothing: the default mode writes the rows, then exits 1 (not a pass)
    assert run.exit_code == (1 if "relu.Relu" in text else 0), run.output
    assert warning in " ".join(run.output.split())
    assert path in run.output
    assert len([r for r in run.rows if r["NPU Name"] != "N/A"]) == 7  # every NPU row is there
    if "relu.Relu" not in text:
        assert "Cell.relu.ReLU" in matched(run)  # the default Cell -> Module rule still applies
