"""msq's C parts are optional: built by ``pip install`` where a compiler exists, else left out.

Where they are built (CI installs with a compiler) they must be: a missing one silently costs
several times the time. Where they are absent msq must still run, say at ``-v`` which reader and
renderer it uses instead, and write the same outputs. The absent case is real: a
``sitecustomize`` on PYTHONPATH makes importing the extensions fail in msq's process and in every
worker it starts, exactly as on a machine where they were never compiled.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from msq import cext
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


# -- an editable install after a git pull: the .c files moved on, the compiled modules did not ---


def _package() -> Path:
    return Path(cext.__file__).parent


@pytest.mark.parametrize("name", sorted(cext.SOURCES))
def test_each_extension_carries_the_crc_of_its_source(name: str) -> None:
    """setup.py compiles the CRC-32 of each extension's own .c file into it, and msq.cext uses
    the module because it matches the file beside the package (an editable install here)."""
    source = _package() / cext.SOURCES[name]
    if not source.is_file():
        pytest.skip(f"{source} is not installed (a wheel ships no C sources: nothing to check)")
    module = importlib.import_module(name)
    assert module.SOURCE_CRC == zlib.crc32(source.read_bytes())
    assert cext.load(name) is module
    assert not cext.stale(module, str(source))


def test_a_module_of_another_text_is_stale(tmp_path: Path) -> None:
    """The real module against a real file: its own text, a changed one, and no file at all."""
    module = importlib.import_module("msq.export._sheetxml")
    source = _package() / cext.SOURCES["msq.export._sheetxml"]
    if not source.is_file():
        pytest.skip(f"{source} is not installed (a wheel ships no C sources)")
    copy = tmp_path / "_sheetxml.c"
    copy.write_bytes(source.read_bytes())
    assert not cext.stale(module, str(copy))
    copy.write_bytes(source.read_bytes() + b"\n/* one more line */\n")
    assert cext.stale(module, str(copy))
    assert not cext.stale(module, str(tmp_path / "absent.c"))  # a wheel: the module is used


#: The extensions a single compare does not load (msq.history._names: a directory compare's
#: driver's names)
DRIVER_ONLY = ("msq.history._names",)


def test_stale_extensions_are_not_used(tmp_path: Path) -> None:
    """A copy of the installed package whose .c files are each one line longer than those its
    compiled modules were built from: msq says so once per module on stderr, runs its Python
    code (compare -v names why) and writes the same workbook as with the C parts. Before the
    check, a stale msq._flatten whose columns had changed failed with a traceback."""
    if not all((_package() / s).is_file() for s in cext.SOURCES.values()):
        pytest.skip("the C sources are not installed (a wheel): nothing can be stale")
    copy = tmp_path / "site"
    shutil.copytree(_package(), copy / "msq", ignore=shutil.ignore_patterns("__pycache__"))
    for source in cext.SOURCES.values():
        with open(copy / "msq" / source, "a", encoding="utf-8") as file:
            file.write("\n/* a later text of this file */\n")
    fixture = Path(__file__).parents[1] / "fixtures" / "tensor"
    outs = {}
    for label, site in (("current", None), ("stale", copy)):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MSQ_NO_")}
        if site is not None:
            env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")])
        outs[label] = out = tmp_path / label
        done = subprocess.run([sys.executable, "-m", "msq", "compare", "compare.json", "-o",
                               str(out), "--no-history", "-v"], cwd=fixture, env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        if site is None:
            assert "is out of date" not in done.stderr and "older msq/" not in done.stderr
            continue
        for name, source in cext.SOURCES.items():
            if name in DRIVER_ONLY:  # a single compare does not load it: checked below
                continue
            warning = f"{name} was compiled from an older msq/{source} and is not used"
            assert done.stderr.count(warning) == 1, done.stderr
        for name in DRIVER_ONLY:  # loaded by a directory compare's driver: asked for directly
            code = f"import logging; logging.basicConfig(); from msq import cext; print(cext.load({name!r}))"
            asked = subprocess.run(
                [sys.executable, "-c", code],
                cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True)
            assert asked.stdout.strip() == "None", asked.stdout
            warning = f"{name} was compiled from an older msq/{cext.SOURCES[name]} and is not used"
            assert asked.stderr.count(warning) == 1, asked.stderr
        assert "dump reader: Python (msq._flatten is out of date" in done.stderr
        assert "workbook rows: SQL (msq.export._sheetxml is out of date" in done.stderr
        assert "tensor kernel: numpy" in done.stderr
    with_c, stale = (outputs_by_name(outs[k], ".xlsx") for k in ("current", "stale"))
    assert sorted(with_c) == sorted(stale) and with_c
    for name, path in with_c.items():
        assert members(path) == members(stale[name]), name
