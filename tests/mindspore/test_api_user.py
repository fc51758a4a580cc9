"""The MindSpore user api mapping (-am FILE.yaml, spec §3.8.3): validation, pairing, compat."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from msq.errors import DumpError
from msq.mindspore.api_user import read_user_api_mapping
from tests.mindspore.msdump import DumpBuilder, arrays, compare_json, run_cli

FOO_BAR = """
- ms_api: Functional.foo
  pt_api: Torch.bar
  ms_args: [1, 0]
  pt_args: [0, 1]
  ms_output: [0]
  pt_output: [0]
"""


ENTRY = ("- {{ms_api: Functional.foo, pt_api: Torch.bar, ms_args: {args}, pt_args: [0], "
         "ms_output: [], pt_output: []}}\n")


def user_pair(tmp: Path, task: str = "statistics") -> Path:
    """Functional.foo(w, x, 3) -> (x@w.T, x) on MindSpore; Torch.bar(x, w) -> x@w.T on PyTorch;
    add with swapped arguments; an op no entry names."""
    a = arrays(2)
    x, w, y = a["x"], a["w"], a["y"]
    npu = DumpBuilder(tmp / "npu", "mindspore", task)
    bench = DumpBuilder(tmp / "bench", "pytorch", task)
    npu.op("Functional.foo.0.forward", [w, x, 3], {}, [x @ w.T, x])
    bench.op("Torch.bar.0.forward", [x, w], {}, [x @ w.T])
    npu.op("Functional.add.0.forward", [y, x], {}, [x + y])
    bench.op("Torch.add.0.forward", [x, y], {}, [x + y])
    npu.op("Mint.abs.0.forward", [x], {}, [np.abs(x)])
    bench.op("Torch.abs.0.forward", [x], {}, [np.abs(x)])
    npu.write()
    bench.write()
    return compare_json(tmp, npu, bench)


@pytest.fixture(scope="module")
def stat_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return user_pair(tmp_path_factory.mktemp("user_api"))


def write(tmp: Path, text: str) -> Path:
    path = tmp / "api.yaml"
    path.write_text(text)
    return path


# -- validation ---------------------------------------------------------------------------------
@pytest.mark.parametrize("text, message", [
    ("ms_api: Functional.foo\n", "must be a YAML list of entries, found a dict"),
    ("- [Functional.foo, Torch.bar]\n", "entry 1: expected a mapping"),
    ("- {ms_api: Functional.foo, pt_api: Torch.bar, ms_args: [0]}\n",
     "entry 1: missing pt_args, ms_output, pt_output"),
    ("- {ms_api: foo, pt_api: Torch.bar, ms_args: [0], pt_args: [0], ms_output: [], pt_output: []}\n",
     "entry 1: 'ms_api' must be an API name"),
    (ENTRY.format(args="0"), "entry 1: 'ms_args' must be a list of argument positions"),
    (ENTRY.format(args="[-1]"), "entry 1: 'ms_args' must be a list of argument positions"),
    ("- [\n", "not valid YAML at line"),
])
def test_malformed_file_is_an_error_naming_file_and_entry(tmp_path: Path, text: str,
                                                          message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(DumpError) as err:
        read_user_api_mapping(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_malformed_file_through_the_cli(stat_case: Path, tmp_path: Path) -> None:
    path = write(tmp_path, "ms_api: Functional.foo\n")
    run = run_cli(stat_case, tmp_path / "out", "-am", str(path))
    assert run.exit_code == 1
    assert f"{path}: a user api mapping must be a YAML list" in run.output


def test_unusable_entries_are_warned_and_skipped(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path, FOO_BAR + """
- {ms_api: Functional.a, pt_api: Torch.a, ms_args: [0, 1], pt_args: [0], ms_output: [0], pt_output: [0]}
- {ms_api: Functional.b, pt_api: Torch.b, ms_args: [0, 0], pt_args: [0, 1], ms_output: [], pt_output: []}
- {ms_api: Functional.c, pt_api: Torch.c, ms_args: [], pt_args: [], ms_output: [], pt_output: []}
- {ms_api: Functional.foo, pt_api: Torch.bar, ms_args: [0], pt_args: [0], ms_output: [], pt_output: []}
""")
    with caplog.at_level(logging.WARNING, logger="msq"):
        entries = read_user_api_mapping(path)
    assert [e.number for e in entries] == [1]
    assert entries[0].rows() == [("Functional.foo.input.1", "Torch.bar.input.0"),
                                 ("Functional.foo.input.0", "Torch.bar.input.1"),
                                 ("Functional.foo.output.0", "Torch.bar.output.0")]
    text = caplog.text
    assert "entry 2 (Functional.a -> Torch.a): ms_args/pt_args or ms_output/pt_output have " \
           "different lengths" in text
    assert "entry 3 (Functional.b -> Torch.b): 'ms_args' repeats a position" in text
    assert "entry 4 (Functional.c -> Torch.c): lists no argument" in text
    assert "entry 5 repeats Functional.foo -> Torch.bar of entry 1" in text


def test_empty_file_leaves_the_builtin_table(stat_case: Path, tmp_path: Path) -> None:
    run = run_cli(stat_case, tmp_path / "out", "-am", str(write(tmp_path, "")))
    assert run.exit_code == 0, run.output
    assert "the api mapping YAML is empty" in run.output
    assert ("Mint.abs.0.forward.input.0", "Torch.abs.0.forward.input.0") in run.pairs()


# -- the default mode ---------------------------------------------------------------------------
def test_listed_positions_pair_and_the_rest_stay(stat_case: Path, tmp_path: Path) -> None:
    run = run_cli(stat_case, tmp_path / "out", "-am", str(write(tmp_path, FOO_BAR)))
    assert run.exit_code == 0, run.output
    assert run.pairs()[:5] == [
        ("Functional.foo.0.forward.input.0", "Torch.bar.0.forward.input.1"),
        ("Functional.foo.0.forward.input.1", "Torch.bar.0.forward.input.0"),
        ("Functional.foo.0.forward.input.2", "N/A"),
        ("Functional.foo.0.forward.output.0", "Torch.bar.0.forward.output.0"),
        ("Functional.foo.0.forward.output.1", "N/A")]
    rows = run.by_npu()
    for name in ("Functional.foo.0.forward.input.0", "Functional.foo.0.forward.input.1",
                 "Functional.foo.0.forward.output.0"):
        assert rows[name]["Max diff"] == 0 and rows[name]["L2norm diff"] == 0
    assert rows["Functional.foo.0.forward.input.2"]["Err_message"] == (
        "No bench data matched: its op is paired with the bench op Torch.bar.0.forward, "
        "which has no argument at this place.")
    # APIs the YAML does not name still go through the built-in table
    assert rows["Mint.abs.0.forward.input.0"]["Bench Name"] == "Torch.abs.0.forward.input.0"
    assert rows["Functional.add.0.forward.input.0"]["Bench Name"] == "Torch.add.0.forward.input.0"


def test_yaml_overrides_the_builtin_table(stat_case: Path, tmp_path: Path) -> None:
    """add(y, x) on MindSpore vs add(x, y) on PyTorch: the YAML swaps the arguments."""
    path = write(tmp_path, FOO_BAR + "- {ms_api: Functional.add, pt_api: Torch.add, "
                                     "ms_args: [0, 1], pt_args: [1, 0], ms_output: [0], "
                                     "pt_output: [0]}\n")
    run = run_cli(stat_case, tmp_path / "out", "-am", str(path))
    rows = run.by_npu()
    assert rows["Functional.add.0.forward.input.0"]["Bench Name"] == "Torch.add.0.forward.input.1"
    assert rows["Functional.add.0.forward.input.0"]["Max diff"] == 0
    assert rows["Functional.add.0.forward.input.1"]["Bench Name"] == "Torch.add.0.forward.input.0"


def test_names_that_do_not_exist_are_warned_nothing_lost(stat_case: Path, tmp_path: Path) -> None:
    path = write(tmp_path, FOO_BAR + """
- {ms_api: Functional.nothere, pt_api: Torch.bar, ms_args: [0], pt_args: [0], ms_output: [], pt_output: []}
- {ms_api: Mint.abs, pt_api: Torch.absent, ms_args: [0], pt_args: [0], ms_output: [], pt_output: []}
- {ms_api: Functional.add, pt_api: Torch.add, ms_args: [5], pt_args: [0], ms_output: [], pt_output: []}
""")
    run = run_cli(stat_case, tmp_path / "out", "-am", str(path))
    assert run.exit_code == 0, run.output
    out = " ".join(run.output.split())
    assert "entry 2 (Functional.nothere -> Torch.bar): the NPU (MindSpore) dump has no " \
           "Functional.nothere op" in out
    assert "entry 3 (Mint.abs -> Torch.absent): the bench (PyTorch) dump has no Torch.absent op" \
        in out
    assert "api mapping entry 4 (Functional.add -> Torch.add): no Functional.add op paired" in out
    npu_rows = [r for r in run.rows if r["NPU Name"] != "N/A"]
    assert len(npu_rows) == 10  # every NPU row is still in the workbook
    # an entry whose PyTorch API is absent hides nothing: the built-in table still pairs abs
    assert run.by_npu()["Mint.abs.0.forward.input.0"]["Bench Name"] == "Torch.abs.0.forward.input.0"
    # an entry that pairs nothing (position 5) leaves add unmatched: the YAML owns that API
    assert run.by_npu()["Functional.add.0.forward.input.0"]["Bench Name"] == "N/A"


def test_fuzzy_pairs_by_order(tmp_path: Path) -> None:
    a = arrays(3)
    x, w = a["x"], a["w"]
    npu = DumpBuilder(tmp_path / "npu", "mindspore")
    bench = DumpBuilder(tmp_path / "bench", "pytorch")
    for i in range(2):
        npu.op(f"Functional.foo.{i}.forward", [w, x * (i + 1), 3], {}, [x @ w.T, x])
        bench.op(f"Torch.bar.{i + 4}.forward", [x * (i + 1), w], {}, [x @ w.T])
    npu.write()
    bench.write()
    path = write(tmp_path, FOO_BAR)
    compare = compare_json(tmp_path, npu, bench)
    exact = run_cli(compare, tmp_path / "exact", "-am", str(path))
    assert all(b == "N/A" for n, b in exact.pairs() if n != "N/A")  # call counts differ
    fuzzy = run_cli(compare, tmp_path / "fuzzy", "-am", str(path), "-f")
    rows = fuzzy.by_npu()
    assert rows["Functional.foo.1.forward.input.1"]["Bench Name"] == "Torch.bar.5.forward.input.0"
    assert rows["Functional.foo.1.forward.input.1"]["Max diff"] == 0


def test_tensor_mode_reads_the_mapped_files(tmp_path: Path) -> None:
    compare = user_pair(tmp_path, task="tensor")
    run = run_cli(compare, tmp_path / "out", "-am", str(write(tmp_path, FOO_BAR)),
                  "--workers", "1")
    assert run.exit_code == 0, run.output
    rows = run.by_npu()
    for name in ("Functional.foo.0.forward.input.0", "Functional.foo.0.forward.input.1",
                 "Functional.foo.0.forward.output.0"):
        assert (rows[name]["Cosine"], rows[name]["MaxAbsErr"]) == (1, 0)
        assert rows[name]["Err_message"].endswith("the comparison accuracy may be affected.")
    assert rows["Functional.foo.0.forward.input.2"]["Err_message"] == (
        "No bench data matched: its op is paired with the bench op Torch.bar.0.forward, "
        "which has no argument at this place.")


# -- compat -------------------------------------------------------------------------------------
def test_compat_ignores_the_order_of_positions(stat_case: Path, tmp_path: Path) -> None:
    """1.1.0 keeps the listed positions in the op's own order: [1, 0] acts as [0, 1], so w meets x,
    the shapes differ and foo stays unmatched."""
    run = run_cli(stat_case, tmp_path / "out", "-am", str(write(tmp_path, FOO_BAR)),
                  "--compat", "msprobe-1.1")
    assert run.exit_code == 0, run.output
    assert run.by_npu()["Functional.foo.0.forward.input.0"]["Bench Name"] == "N/A"
    assert run.by_npu()["Mint.abs.0.forward.input.0"]["Bench Name"] == "Torch.abs.0.forward.input.0"


def test_compat_pairs_rows_positionally(stat_case: Path, tmp_path: Path) -> None:
    """Same order on both sides: 1.1.0 matches the ops, then pairs all rows by position."""
    path = write(tmp_path, FOO_BAR.replace("[1, 0]", "[0, 1]").replace("pt_args: [0, 1]",
                                                                       "pt_args: [0, 1]"))
    npu = DumpBuilder(tmp_path / "npu", "mindspore")
    bench = DumpBuilder(tmp_path / "bench", "pytorch")
    a = arrays(4)
    x, w = a["x"], a["w"]
    npu.op("Functional.foo.0.forward", [x, w, 3], {}, [x @ w.T])
    bench.op("Torch.bar.0.forward", [x, w], {}, [x @ w.T])
    npu.write()
    bench.write()
    compare = compare_json(tmp_path, npu, bench)
    run = run_cli(compare, tmp_path / "out", "-am", str(path), "--compat", "msprobe-1.1")
    assert run.pairs()[:2] == [("Functional.foo.0.forward.input.0", "Torch.bar.0.forward.input.0"),
                               ("Functional.foo.0.forward.input.1", "Torch.bar.0.forward.input.1")]
    assert run.pairs()[3] == ("Functional.foo.0.forward.output.0", "Torch.bar.0.forward.output.0")


def test_version_compare_with_a_renamed_api(tmp_path: Path) -> None:
    """MindSpore against MindSpore where an API was renamed: the YAML pairs it (both sides' dtype
    names read alike), and each side's tensor file is found by its own extension (.npy both)."""
    a = arrays(5)
    x, y = a["x"], a["y"]
    npu = DumpBuilder(tmp_path / "npu", "mindspore", "tensor")
    bench = DumpBuilder(tmp_path / "bench", "mindspore", "tensor")
    npu.op("Functional.foo.0.forward", [x, y], {}, [x + y])
    bench.op("Functional.foo_v2.0.forward", [y, x], {}, [x + y])
    npu.write()
    bench.write()
    path = write(tmp_path, "- {ms_api: Functional.foo, pt_api: Functional.foo_v2, "
                           "ms_args: [0, 1], pt_args: [1, 0], ms_output: [0], pt_output: [0]}\n")
    compare = compare_json(tmp_path, npu, bench)
    run = run_cli(compare, tmp_path / "out", "-am", str(path), "--workers", "1")
    assert run.exit_code == 0, run.output
    rows = run.by_npu()
    assert rows["Functional.foo.0.forward.input.0"]["Bench Name"] == \
        "Functional.foo_v2.0.forward.input.1"
    assert (rows["Functional.foo.0.forward.input.0"]["Cosine"],
            rows["Functional.foo.0.forward.output.0"]["MaxAbsErr"]) == (1, 0)
    compat = run_cli(compare, tmp_path / "compat", "-am", str(path), "--compat", "msprobe-1.1",
                     "--workers", "1")
    assert compat.by_npu()["Functional.foo.0.forward.input.0"]["Bench Name"] == "N/A"
