"""msq's C parts are optional: built by ``pip install`` where a compiler exists, else left out.

Where they are built (CI installs with a compiler) they must be: a missing one silently costs
several times the time. Where they are absent msq must still run, say at ``-v`` which reader and
renderer it uses instead, and write the same outputs. The absent case is real: a
``sitecustomize`` on PYTHONPATH makes importing the extensions fail in msq's process and in every
worker it starts, exactly as on a machine where they were never compiled.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from msq.export.xlsx import renderer
from msq.flatten import reader
from msq.tensors import fused
from tests.golden_util import GOLDEN, outputs_by_name

EXTENSIONS = ("msq._flatten", "msq.export._sheetxml", "msq.tensors._fused")
CASE = GOLDEN / "mlp_tensor_L1"


def test_c_parts_are_built() -> None:
    assert reader() == "C (yyjson)", "msq._flatten was not built (pip install -e . compiles it)"
    assert renderer() == "C", "msq.export._sheetxml was not built (pip install -e . compiles it)"
    assert fused.available(), "msq.tensors._fused was not built (pip install -e . compiles it)"


def run_msq(args: list[str], cwd: Path, without_c: Path | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MSQ_NO_")}
    if without_c is not None:
        without_c.mkdir(exist_ok=True)
        (without_c / "sitecustomize.py").write_text(
            "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in EXTENSIONS))
        env["PYTHONPATH"] = os.pathsep.join([str(without_c), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "msq", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def members(xlsx: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(xlsx) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


@pytest.mark.skipif(not CASE.is_dir(), reason=f"golden cases not found at {GOLDEN}")
@pytest.mark.parametrize("flags", [[], ["-s", "--compat", "msprobe-1.1"]], ids=["default", "s"])
def test_without_c_parts_same_outputs(flags: list[str], tmp_path: Path) -> None:
    """Tensor mode reads dump.json, renders workbook rows and computes tensor metrics: all three
    C parts run, or all three fallbacks."""
    outputs = {}
    for name, without_c in (("with", None), ("without", tmp_path / "site")):
        out = tmp_path / name
        args = ["compare", "-i", "expected/default/compare.json", "-o", str(out), "--no-history",
                "-v", *flags]
        done = run_msq(args, CASE, without_c)
        assert done.returncode == 0, done.stderr
        outputs[name] = out
        if without_c is None:
            assert "dump reader: C (yyjson); workbook rows: C" in done.stderr
            assert "tensor kernel: avx2" in done.stderr or "tensor kernel: generic" in done.stderr
        else:
            assert "dump reader: Python (msq._flatten was not built" in done.stderr
            assert "workbook rows: SQL (msq.export._sheetxml was not built" in done.stderr
            assert "tensor kernel: numpy" in done.stderr
    with_c, without = (outputs_by_name(outputs[k], ".xlsx") for k in ("with", "without"))
    assert sorted(with_c) == sorted(without) and with_c
    for name, path in with_c.items():
        assert members(path) == members(without[name]), name
    with_adv, without_adv = (outputs_by_name(outputs[k], ".txt") for k in ("with", "without"))
    assert sorted(with_adv) == sorted(without_adv) and with_adv
    for name, path in with_adv.items():
        assert path.read_bytes() == without_adv[name].read_bytes(), name
