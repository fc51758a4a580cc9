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
from tests.conftest import GOLDEN
from tests.golden_util import outputs_by_name

EXTENSIONS = ("msq._flatten", "msq.export._sheetxml", "msq.tensors._fused")


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


#: (case, mode flags): tensor, statistics and md5 cases, each in the default mode (its browse
#: layout, Reason column, CSV/Parquet with Mark and Mark_rules) and in msprobe 1.1.0's
MODES = {"default": ["--format", "xlsx,csv,parquet"], "compat": ["-s", "--compat", "msprobe-1.1"]}
CASES = [(case, mode) for case in ("mlp_tensor_L1", "tfm_stat_L1", "mlp_md5_L1") for mode in MODES]


@pytest.mark.golden
@pytest.mark.parametrize(("case", "mode"), CASES, ids=[f"{c}-{m}" for c, m in CASES])
def test_without_c_parts_same_outputs(case: str, mode: str, tmp_path: Path) -> None:
    """The dump reader and the row renderer run in every mode, the tensor kernel in tensor
    mode: all C parts, or all fallbacks, write the same bytes."""
    outputs = {}
    for name, without_c in (("with", None), ("without", tmp_path / "site")):
        out = tmp_path / name
        args = ["compare", "-i", "expected/default/compare.json", "-o", str(out), "--no-history",
                "-v", *MODES[mode]]
        done = run_msq(args, GOLDEN / case, without_c)
        assert done.returncode == 0, done.stderr
        outputs[name] = out
        if without_c is None:
            assert "dump reader: C (yyjson); workbook rows: C; deflate: ISA-L" in done.stderr
            if "tensor" in case:
                assert any(f"tensor kernel: {isa}" in done.stderr
                           for isa in ("avx512", "avx2", "generic"))
        else:
            assert "dump reader: Python (msq._flatten was not built" in done.stderr
            assert "workbook rows: SQL (msq.export._sheetxml was not built" in done.stderr
            if "tensor" in case:
                assert "tensor kernel: numpy" in done.stderr
    suffixes = [".xlsx", ".txt"] + ([".csv", ".parquet"] if mode == "default" else [])
    for suffix in suffixes:
        with_c, without = (outputs_by_name(outputs[k], suffix) for k in ("with", "without"))
        assert sorted(with_c) == sorted(without) and with_c, suffix
        for name, path in with_c.items():
            if suffix == ".xlsx":
                assert members(path) == members(without[name]), name
            else:
                assert path.read_bytes() == without[name].read_bytes(), name
    if mode == "default":  # the layout and columns this test is meant to cover are there
        book = next(iter(outputs_by_name(outputs["with"], ".xlsx").values()))
        sheet = members(book)["xl/worksheets/sheet1.xml"]
        assert b"<autoFilter" in sheet and b'state="frozen"' in sheet and b"<cols>" in sheet
        # the compare's CSV (blame's blame_*.csv is beside it)
        csv = next(p for p in outputs_by_name(outputs["with"], ".csv").values()
                   if p.name.startswith("compare_result"))
        assert csv.read_text().splitlines()[0].endswith('"Reason","Mark","Mark_rules"')
