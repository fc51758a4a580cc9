"""Cross-check ``--compat msprobe-1.1`` MindSpore compares against msprobe 1.1.0 itself.

Opt-in, because it runs the reference tool from bench/.venv-msprobe (bench/setup_msprobe.sh):
``MSQ_MSPROBE_ORACLE=1 pytest tests/mindspore``. MindSpore is stubbed: ``ms_compare`` only reads
files (.npy with numpy, .pt with torch). Every workbook must equal 1.1.0's cell by cell, and the
-lm data mapping file byte for byte, except the one documented difference (the broken row layout
of extra NPU rows under a user api mapping, docs/mindspore.md).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.golden_util import diff_sheets
from tests.mindspore.msdump import compare_json, cross_framework_pair, data_mapping_files, run_cli
from tests.msprobe_oracle import MINDSPORE_STUB, ORACLE_MARKS, VENV_PYTHON

pytestmark = ORACLE_MARKS

RUNNER = MINDSPORE_STUB + r'''
import sys, json, types, importlib.abc, importlib.machinery
from msprobe.mindspore.compare.ms_compare import ms_compare
args = json.loads(sys.argv[1])
ms_compare(args.pop("input"), args.pop("out"), **args)
'''


def msprobe(compare: Path, out: Path, **kwargs: Any) -> Path:
    """Run 1.1.0's ms_compare on a compare.json; return its workbook."""
    doc = json.loads(compare.read_text())
    inp = {"npu_json_path": doc["npu_path"], "bench_json_path": doc["bench_path"],
           "stack_json_path": doc["stack_path"], "is_print_compare_log": False}
    args = {"input": inp, "out": str(out), "auto_analyze": False, **kwargs}
    proc = subprocess.run([str(VENV_PYTHON), "-c", RUNNER, json.dumps(args)], check=False,
                          capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    books = sorted(out.glob("compare_result_*.xlsx"))
    assert len(books) == 1, proc.stderr[-3000:]
    return books[0]


def both(compare: Path, tmp: Path, flags: list[str], **kwargs: Any) -> tuple[Path, Path]:
    run = run_cli(compare, tmp / "msq", *flags, "-c", "--compat", "msprobe-1.1", "--workers", "1")
    assert run.exit_code == 0, run.output
    return next((tmp / "msq").glob("compare_result_*.xlsx")), msprobe(compare, tmp / "ref", **kwargs)


@pytest.fixture(scope="module")
def xfw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("oracle_xfw")
    npu, bench = cross_framework_pair(tmp)
    (tmp / "cells.yaml").write_text("fc1.Dense: fc1.Linear\n")
    return compare_json(tmp, npu, bench)


@pytest.mark.parametrize("flags, kwargs", [
    ([], {}),
    (["-am"], {"api_mapping": True}),
    (["-cm"], {"cell_mapping": True}),
    (["-cm", "CELLS"], {"cell_mapping": "CELLS"}),
    (["-am", "-cm", "CELLS", "-s"], {"api_mapping": True, "cell_mapping": "CELLS",
                                     "stack_mode": True}),
    (["-am", "-f"], {"api_mapping": True, "fuzzy_match": True}),
], ids=["none", "am", "cm", "cm_yaml", "am_cm_yaml_s", "am_fuzzy"])
def test_cross_framework_statistics(xfw: Path, tmp_path: Path, flags: list[str],
                                    kwargs: dict[str, Any]) -> None:
    cells = str(xfw.parent / "cells.yaml")
    flags = [cells if f == "CELLS" else f for f in flags]
    kwargs = {k: cells if v == "CELLS" else v for k, v in kwargs.items()}
    got, want = both(xfw, tmp_path, flags, **kwargs)
    assert diff_sheets(got, want) == []


def test_cross_framework_tensor(tmp_path: Path) -> None:
    npu, bench = cross_framework_pair(tmp_path, task="tensor")
    got, want = both(compare_json(tmp_path, npu, bench), tmp_path, ["-am", "-cm"],
                     api_mapping=True, cell_mapping=True)
    assert diff_sheets(got, want) == []


def test_cross_framework_md5(tmp_path: Path) -> None:
    npu, bench = cross_framework_pair(tmp_path, md5=True)
    got, want = both(compare_json(tmp_path, npu, bench), tmp_path, ["-am"], api_mapping=True)
    assert diff_sheets(got, want) == []


def test_version_compare_tensor(tmp_path: Path) -> None:
    from tests.mindspore.test_version_compare import version_pair

    npu, bench = version_pair(tmp_path, task="tensor", drift=1.5)
    got, want = both(compare_json(tmp_path, npu, bench), tmp_path, [])
    assert diff_sheets(got, want) == []


def test_data_mapping(xfw: Path, tmp_path: Path) -> None:
    mapping = tmp_path / "dm.yaml"
    mapping.write_text("Cell.fc1.Dense.forward.0.input.0: Module.fc1.Linear.forward.0.input.0\n"
                       "Mint.abs.0.forward.output.0: Torch.abs.0.forward.output.0\n")
    got, want = both(xfw, tmp_path, ["-dm", str(mapping)], data_mapping=str(mapping))
    assert diff_sheets(got, want) == []


def test_cell_yaml_nested_arguments(tmp_path: Path) -> None:
    from tests.mindspore.test_name_mapping import cells

    compare = cells.__wrapped__(_Factory(tmp_path))
    yaml_path = tmp_path / "cm.yaml"
    yaml_path.write_text("fc1.Dense: fc1.Linear\nblk.Block: blk.Blk\n")
    got, want = both(compare, tmp_path, ["-cm", str(yaml_path)], cell_mapping=str(yaml_path))
    assert diff_sheets(got, want) == []


def test_user_api_mapping(tmp_path: Path) -> None:
    from tests.mindspore.test_api_user import FOO_BAR, user_pair

    compare = user_pair(tmp_path)
    path = tmp_path / "api.yaml"
    path.write_text(FOO_BAR + "- {ms_api: Functional.add, pt_api: Torch.add, ms_args: [0, 1], "
                              "pt_args: [0, 1], ms_output: [0], pt_output: [0]}\n")
    got, want = both(compare, tmp_path, ["-am", str(path)], api_mapping=str(path))
    assert diff_sheets(got, want) == []


def test_user_api_mapping_extra_npu_rows(tmp_path: Path) -> None:
    """The one documented difference: 1.1.0 writes an extra NPU row of a pair matched through the
    YAML 3 cells short (every later cell shifted left); msq writes it as an unmatched row."""
    from tests.mindspore.msdump import DumpBuilder, arrays

    a = arrays(4)
    x, w = a["x"], a["w"]
    npu = DumpBuilder(tmp_path / "npu", "mindspore")
    bench = DumpBuilder(tmp_path / "bench", "pytorch")
    npu.op("Functional.foo.0.forward", [x, w, 3], {}, [x @ w.T])
    bench.op("Torch.bar.0.forward", [x, w], {}, [x @ w.T])
    npu.write()
    bench.write()
    path = tmp_path / "api.yaml"
    path.write_text("- {ms_api: Functional.foo, pt_api: Torch.bar, ms_args: [0, 1], "
                    "pt_args: [0, 1], ms_output: [0], pt_output: [0]}\n")
    got, want = both(compare_json(tmp_path, npu, bench), tmp_path, ["-am", str(path)],
                     api_mapping=str(path))
    problems = diff_sheets(got, want, limit=100)
    assert problems and all(p.startswith("row 4 ") for p in problems)  # input.2, the extra row


@pytest.mark.parametrize("case", ["network", "substring"])
def test_layer_mapping(tmp_path: Path, case: str) -> None:
    from tests.mindspore import test_layer_mapping as lm
    from tests.mindspore.msdump import DumpBuilder, arrays

    if case == "network":
        npu, bench = lm.network(tmp_path)
        text = lm.LAYER_YAML
    else:
        a = arrays(7)
        x, y, w, b = a["x"], a["y"], a["w"], a["b"]
        npu = DumpBuilder(tmp_path / "npu", "mindspore")
        bench = DumpBuilder(tmp_path / "bench", "pytorch")
        npu.op("Cell.net.Net.forward.0", [x], {}, [x], parent=None)
        npu.op("Functional.addmm.0.forward", [b, x, w.T], {}, [x @ w.T + b], parent=None)
        npu.op("Functional.add.0.forward", [x, y], {"alpha": 2.0}, [x + y], parent=None)
        bench.op("Module.net.Net.forward.0", [x], {}, [x], parent=None)
        bench.op("Torch.add.0.forward", [x, y], {"alpha": 2.0}, [x + y], parent=None)
        npu.write()
        bench.write()
        text = "Cell: {}\n"
    layer = tmp_path / "layer.yaml"
    layer.write_text(text)
    got, want = both(compare_json(tmp_path, npu, bench), tmp_path, ["-lm", str(layer)],
                     layer_mapping=str(layer))
    assert diff_sheets(got, want) == []
    mine, theirs = data_mapping_files(tmp_path / "msq"), data_mapping_files(tmp_path / "ref")
    assert mine[0].read_text() == theirs[0].read_text()


class _Factory:
    """Stands in for pytest's tmp_path_factory when a module fixture is called directly."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def mktemp(self, name: str) -> Path:
        path = self.base / name
        path.mkdir()
        return path
