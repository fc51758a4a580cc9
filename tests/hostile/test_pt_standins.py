"""A ``.pt`` pickle must not change how msq reads any other file (issue 17, item 1).

The restricted unpickler hands a pickle inert stand-ins for the torch names it may use
(``torch.FloatStorage``, ``torch.float32``, ``_rebuild_tensor_v2``...). A pickle can aim BUILD,
SETITEM(S) or APPEND at whatever is on its stack, stand-ins included: once, a BUILD on
``torch.FloatStorage`` retyped it for every later load in the process (129 rows of the golden
mlp_tensor_L1 compare changed, exit 0), and an ``object`` dtype turned file bytes into pointers
(SIGSEGV). Decision: such a file is refused like any other hostile pickle (exit 1, one line), the
stand-ins cannot be changed, and only the numeric dtypes torch writes come out of a pickle.

Each test loads a few reference files afterwards and checks them against ``torch.load``: the
attack must not have changed anything that outlives its own file.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msq.errors import TensorFileError
from msq.tensors import ptfile
from msq.tensors.meta import to_array
from msq.tensors.reader import inspect_tensor, load_tensor
from tests.golden_util import GOLDEN
from tests.hostile import ptcraft as pc
from tests.hostile.helpers import error_line

EXAMPLES = int(os.environ.get("MSQ_FUZZ_EXAMPLES", "100"))
MSQ = [sys.executable, "-m", "msq.cli"]
NUMERIC_KINDS = "biufc"


def torch_array(path: Path | bytes) -> np.ndarray:
    import torch

    t = torch.load(io.BytesIO(path) if isinstance(path, bytes) else path, weights_only=True)
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def reference_files() -> dict[str, bytes]:
    """One file per pickle shape torch writes: v2 typed storages and v3 (untyped + dtype)."""
    import torch

    made = {}
    for name, t in [("f32", torch.linspace(-3, 5, 12).reshape(3, 4)),
                    ("bf16", torch.linspace(-1, 1, 6).bfloat16()),
                    ("f16", torch.arange(5, dtype=torch.float16) / 3),
                    ("i64", torch.arange(7) * -5),
                    ("u16", torch.arange(9).to(torch.uint16))]:  # _rebuild_tensor_v3
        buf = io.BytesIO()
        torch.save(t, buf)
        made[name] = buf.getvalue()
    return made


REFERENCE = reference_files()
EXPECTED = {name: torch_array(data) for name, data in REFERENCE.items()}


def assert_references_intact() -> None:
    """Every reference file still reads exactly as torch reads it (parsed afresh)."""
    ptfile._STUB_CACHE.clear()  # a cached layout would hide a changed stand-in
    for name, data in REFERENCE.items():
        got = to_array(inspect_tensor(f"{name}.pt", data))
        want = EXPECTED[name]
        assert got.dtype == want.dtype and got.shape == want.shape, name
        assert np.array_equal(got, want), name


def load_or_refuse(path: str, data: bytes) -> None:
    """Only two outcomes are allowed: a numeric array, or TensorFileError."""
    try:
        meta = inspect_tensor(path, data)
    except TensorFileError:
        return
    assert meta.dtype.kind in NUMERIC_KINDS, meta.dtype
    to_array(meta)


def need_golden() -> Path:
    case = GOLDEN / "mlp_tensor_L1"
    if not case.is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"golden case not found at {case}")
        pytest.skip(f"golden case not found at {case} (optional outside CI)")
    return case


# ------------------------------------------------------------------------------ the reported attack


def test_poisoned_file_in_the_golden_case_is_refused(tmp_path: Path) -> None:
    """The report: one NPU file of mlp_tensor_L1 rewritten with a BUILD on torch.FloatStorage.
    One worker, so every later file is read in the process that read the poisoned one."""
    case = tmp_path / "case"
    shutil.copytree(need_golden(), case)
    bad = case / "npu/step0/rank/dump_tensor_data/Functional.linear.0.forward.input.0.pt"
    pc.rewrite_pickle(bad, pc.poison_storage_type)
    out = tmp_path / "out"
    proc = subprocess.run([*MSQ, "compare", "-i", "expected/default/compare.json", "-o", str(out),
                           "--no-history", "--workers", "1", "-q"],
                          cwd=case, capture_output=True, text=True, timeout=300, check=False)
    line = error_line(proc.stdout + proc.stderr)
    assert proc.returncode == 1, proc.stderr
    assert line.startswith("msq: error: ") and str(bad.relative_to(case)) in line, line
    assert (f"{bad.name}: refused to load: its pickle uses a BUILD instruction on "
            "torch.FloatStorage; only plain tensors are accepted") in line, line
    assert not out.exists() or not any(out.iterdir())


def test_poisoned_file_changes_no_other_golden_file(tmp_path: Path) -> None:
    case = need_golden()
    tdir = case / "npu/step0/rank/dump_tensor_data"
    files = sorted(tdir.glob("*.pt"))
    bad = tmp_path / files[0].name
    pc.rewrite_pickle(files[0], pc.poison_storage_type, dst=bad)
    with pytest.raises(TensorFileError, match="a BUILD instruction on torch.FloatStorage"):
        load_tensor(str(bad))
    ptfile._STUB_CACHE.clear()
    for path in files:
        want = torch_array(path)
        got = load_tensor(str(path))
        assert got.dtype == want.dtype and np.array_equal(got, want, equal_nan=True), path.name


def test_object_dtype_over_1_mib_is_refused_not_a_crash(tmp_path: Path) -> None:
    """Above 1 MiB the storage is memory-mapped: an object dtype read pointers from the file and
    the process died of SIGSEGV. Run in a child process, so that a crash fails only this test."""
    import torch

    path = tmp_path / "big.pt"
    torch.save(torch.randn(300_000), path)
    items = [(n, d + bytes(len(d)) if "/data/" in n else d) for n, d in pc.members(path)]
    pc.write_members(path, items)  # an object is 8 bytes: give the layout the bytes it needs
    pc.rewrite_pickle(path, lambda p: pc.poison_storage_type(p, "object"))
    code = ("import sys\nfrom msq.errors import TensorFileError\n"
            "from msq.tensors.reader import load_tensor\n"
            f"try:\n    print(load_tensor({str(path)!r}).sum())\n"
            "except TensorFileError as exc:\n    print(exc); sys.exit(1)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "refused to load: its pickle uses a BUILD instruction on torch.FloatStorage" in \
        proc.stdout


# ------------------------------------------------------------------------------ each stand-in

def _payload(name: str) -> bytes:
    from zipfile import ZipFile

    with ZipFile(io.BytesIO(REFERENCE[name])) as z:
        return z.read(next(n for n in z.namelist() if n.endswith("/data.pkl")))


def _archive_bytes(name: str, payload: bytes) -> bytes:
    """The reference file ``name`` with its data.pkl replaced."""
    from zipfile import ZIP_STORED, ZipFile

    out = io.BytesIO()
    with ZipFile(io.BytesIO(REFERENCE[name])) as zin, ZipFile(out, "w", ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info.filename, payload if info.filename.endswith("/data.pkl") else data)
    return out.getvalue()


STANDINS = [("torch", "FloatStorage"), ("torch", "BFloat16Storage"),
            ("torch.storage", "UntypedStorage"), ("torch", "float32"), ("torch", "uint16"),
            ("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor_v3"),
            ("torch._utils", "_rebuild_parameter"), ("torch._tensor", "_rebuild_from_type_v2"),
            ("torch", "Tensor"), ("torch", "Size"), ("collections", "OrderedDict")]
ATTACKS = {
    "build": pc.state_dict([("dtype", "int32"), ("name", "float64"), ("bf16", True)]) + pc.BUILD,
    "build-slots": (pc.NONE + pc.state_dict([("dtype", "object"), ("name", "int8")]) + pc.TUPLE2
                    + pc.BUILD),
    "setitem": pc.const("dtype") + pc.const("int32") + pc.SETITEM,
    "setitems": pc.MARK + pc.const("name") + pc.const("float64") + pc.SETITEMS,
    "append": pc.const("int32") + pc.APPEND,
}
REFUSED = {"build": "a BUILD instruction on", "build-slots": "a BUILD instruction on",
           "setitem": "an item assignment on", "setitems": "an item assignment on",
           "append": "the tensor pickle (data.pkl) is corrupt"}


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("target", STANDINS, ids=lambda t: ".".join(t))
def test_every_standin_refuses_to_change(attack: str, target: tuple[str, str]) -> None:
    """GLOBAL <stand-in>, then an instruction that would change it, then a real tensor pickle."""
    prefix = pc.glob(*target) + ATTACKS[attack] + pc.POP
    for ref in ("f32", "u16"):
        payload = _payload(ref)
        data = _archive_bytes(ref, payload[:2] + prefix + payload[2:])
        with pytest.raises(TensorFileError) as caught:
            inspect_tensor("evil.pt", data)
        message = str(caught.value)
        assert REFUSED[attack] in message, message
        if attack.startswith(("build", "set")):
            assert f"{target[0]}.{target[1]}" in message, message
        assert_references_intact()


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_objects_a_pickle_builds_refuse_to_change(attack: str) -> None:
    """The same instructions aimed, with DUP, at each object on the stack of a real pickle: the
    persistent storage, the size and stride tuples, the hooks dict, the rebuilt tensor."""
    payload = _payload("f32")
    for at in pc.opcode_ends(payload):
        evil = payload[:at] + pc.DUP + ATTACKS[attack] + pc.POP + payload[at:]
        load_or_refuse("evil.pt", _archive_bytes("f32", evil))
        assert_references_intact()


# ------------------------------------------------------------------------------ fuzz

KEYS = st.sampled_from(["dtype", "name", "bf16", "key", "stype", "numel", "fn", "shape", "stride",
                        "offset", "derived", "storage", "__dict__", "__class__", "qualname"])
VALUES = st.one_of(st.sampled_from(["int32", "object", "O", "float64", "V8", "U4", "S2", "<f8",
                                    "bfloat16", "float32"]),
                   st.none(), st.booleans(), st.integers(-3, 2**70))
ACTIONS = st.one_of(
    st.builds(lambda items: pc.state_dict(items) + pc.BUILD, st.lists(st.tuples(KEYS, VALUES),
                                                                      max_size=3)),
    st.builds(lambda items: pc.NONE + pc.state_dict(items) + pc.TUPLE2 + pc.BUILD,
              st.lists(st.tuples(KEYS, VALUES), max_size=3)),
    st.builds(lambda k, v: pc.const(k) + pc.const(v) + pc.SETITEM, KEYS, VALUES),
    st.builds(lambda items: pc.MARK + b"".join(pc.const(k) + pc.const(v) for k, v in items)
              + pc.SETITEMS, st.lists(st.tuples(KEYS, VALUES), max_size=3)),
    st.builds(lambda v: pc.const(v) + pc.APPEND, VALUES),
)
# an instruction on a fresh GLOBAL (a stand-in, or a name msq refuses) or on the stack's top
INJECTIONS = st.one_of(
    st.builds(lambda target, action: pc.glob(*target) + action + pc.POP,
              st.sampled_from([*STANDINS, ("builtins", "eval"), ("torch", "no_such_name")]),
              ACTIONS),
    st.builds(lambda action: pc.DUP + action + pc.POP, ACTIONS),
)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.sampled_from(["f32", "bf16", "u16"]), st.data())
def test_fuzz_instructions_aimed_at_the_standins(ref: str, data: st.DataObject) -> None:
    """Any mix of GLOBAL, BUILD, SETITEM(S) and APPEND spliced into a real tensor pickle: the
    file is refused or reads as a numeric array, and no other file reads differently after."""
    payload = _payload(ref)
    points = [2, *pc.opcode_ends(payload)]
    edits = data.draw(st.lists(st.tuples(st.sampled_from(points), INJECTIONS), min_size=1,
                               max_size=3))
    for at, inject in sorted(edits, reverse=True):  # from the end: earlier positions stay valid
        payload = payload[:at] + inject + payload[at:]
    load_or_refuse("evil.pt", _archive_bytes(ref, payload))
    assert_references_intact()


# ------------------------------------------------------------------------------ a whole run


def test_poisoned_rank_fails_alone_and_the_other_ranks_read_as_without_it(tmp_path: Path) -> None:
    """A directory compare of three real-data ranks, run in one process (real-data pairs run one
    after another in the driver, with one tensor worker). rank0, compared first, has one NPU file
    rewritten with the reported BUILD on torch.FloatStorage: that pair fails in one line naming
    the file, and the two other ranks' workbooks equal those of the same run without the attack,
    cell for cell (before the fix every later float32 file read as int32)."""
    from tests.hostile.helpers import OP, tensor_side
    from tests.xlsx_read import rows

    rng = np.random.default_rng(17)
    for rank in range(3):
        ops = {OP: ([rng.standard_normal((4, 8))], [rng.standard_normal((4, 8))]),
               "Functional.linear.0.forward": ([rng.standard_normal(16)], [rng.standard_normal(3)])}
        noisy = {op: ([a * 1.001 for a in ins], [a + 1e-3 for a in outs])
                 for op, (ins, outs) in ops.items()}
        tensor_side(tmp_path / "npu" / f"rank{rank}", noisy)
        tensor_side(tmp_path / "bench" / f"rank{rank}", ops)

    cfg = tmp_path / "compare.json"
    cfg.write_text(json.dumps({"npu_path": str(tmp_path / "npu"),
                               "bench_path": str(tmp_path / "bench")}))

    def run(out: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, list[dict]]]:
        proc = subprocess.run([*MSQ, "compare", str(cfg), "-o", str(out), "--no-history",
                               "--workers", "1"],
                              capture_output=True, text=True, timeout=300, check=False)
        books = {p.name.split("_")[2]: rows(p) for p in out.glob("compare_result_*.xlsx")}
        return proc, books

    clean, want = run(tmp_path / "clean")
    assert clean.returncode == 0, clean.stderr
    assert sorted(want) == ["rank0-rank0", "rank1-rank1", "rank2-rank2"], clean.stderr
    bad = tmp_path / "npu/rank0/dump_tensor_data" / f"{OP}.input.0.pt"
    pc.rewrite_pickle(bad, pc.poison_storage_type)
    poisoned, got = run(tmp_path / "poisoned")
    text = poisoned.stdout + poisoned.stderr
    assert "Traceback" not in text, text
    # the pair's error as it happened, the run's error line and its total line, each one line
    # naming the file and why
    failed = [line for line in text.splitlines() if "rank0" in line]
    assert len(failed) == 3, text
    assert [line.startswith(("msq: error: 1 of 3 pairs failed", "msq compare total: ")) or
            "[ERROR] pair failed: rank0-rank0: " in line for line in failed] == [True] * 3, text
    for line in failed:
        assert str(bad) in line and ("refused to load: its pickle uses a BUILD instruction on "
                                     "torch.FloatStorage") in line, line
    # the other pairs were compared, but a run with a failed pair is not a pass (docs/errors.md)
    assert poisoned.returncode == 1, text
    assert sorted(got) == ["rank1-rank1", "rank2-rank2"], text
    for pair in ("rank1-rank1", "rank2-rank2"):
        assert got[pair] == want[pair], pair
        assert any(isinstance(r["MaxAbsErr"], float) and r["MaxAbsErr"] > 0 for r in got[pair])
