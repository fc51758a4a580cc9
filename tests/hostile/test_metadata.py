"""Malformed dump metadata: every case is a real file on disk, run through ``msq compare``.

The outcome is exact: one ``msq: error:`` line that names the file (and the entry or line) and
says what to do, exit status 1 and nothing written; or a warning and a correct workbook. Cases
already in ``tests/test_bad_input.py`` (empty file, ``[1, 2]``, ``data: []``, a numeric entry,
``shape: 5``, non-UTF-8 garbage, unknown tasks) are not repeated here.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from msq import jsonio
from msq.errors import DumpError
from msq.loader import read_side
from tests.conftest import GOLDEN
from tests.dumps import fwd, t, write_pair
from tests.hostile.helpers import OP, compare, error_line, good_pair, outputs, sides
from tests.xlsx_read import only_xlsx, rows

GOLDEN_DUMP = GOLDEN / "mlp_stat_L1/npu/step0/rank/dump.json"  # MSQ_GOLDEN, as the golden suite


def refused(tmp_path: Path, content: str | bytes, side: str = "npu") -> str:
    """Write ``content`` as one side's dump.json, compare, and return the error line."""
    cfg = good_pair(tmp_path)
    target = sides(cfg)[0 if side == "npu" else 1]
    target.write_bytes(content if isinstance(content, bytes) else content.encode())
    out = tmp_path / "out"
    code, text = compare(cfg, out)
    line = error_line(text)
    assert code == 1, text
    assert str(target) in line, line
    assert outputs(out) == [], outputs(out)
    return line


def dump_text(data: Any, task: str = "statistics") -> str:
    return json.dumps({"task": task, "level": "L1", "dump_data_dir": None, "data": data}, indent=1)


def nest(levels: int, inner: Any) -> Any:
    for _ in range(levels):
        inner = [inner]
    return inner


# ------------------------------------------------------------------------------ truncated JSON


@pytest.mark.golden
@pytest.mark.parametrize("fraction", [0.001, 0.25, 0.5, 0.999])
def test_truncated_msprobe_dump_names_the_last_line(tmp_path: Path, fraction: float) -> None:
    """A dump cut short (disk full, copy interrupted) is reported at the line where it stops."""
    text = GOLDEN_DUMP.read_text()
    cut = text[: max(1, int(len(text) * fraction))]
    line = refused(tmp_path, cut)
    assert f"malformed JSON at line {cut.count(chr(10)) + 1}," in line
    assert "the file may be truncated or hand-edited" in line


@pytest.mark.parametrize("side", ["npu", "bench"])
def test_the_damaged_side_is_named(tmp_path: Path, side: str) -> None:
    line = refused(tmp_path, '{"task": "statistics", "data": {', side)
    assert "malformed JSON at line 1, column 33: Expecting property name" in line


# ------------------------------------------------------------------------------ wrong shapes


@pytest.mark.parametrize("content, expect", [
    ('"a dump"', "expected a JSON object with 'task' and 'data', found a str"),
    ("3", "found a int"),
    ("null", "found a NoneType"),
    ('{"task": "statistics"}', "no 'data' key; is this a msprobe dump.json?"),
    ('{"task": "statistics", "data": null}', ("'data' must be an object of op name -> entry, "
                                             "found a NoneType")),
    ('{"task": "statistics", "data": "ops"}', "found a str"),
    ('{"data": {}}', "unknown task None; expected one of: statistics, tensor"),
])
def test_wrong_top_level_shape(tmp_path: Path, content: str, expect: str) -> None:
    assert expect in refused(tmp_path, content)


@pytest.mark.parametrize("entry, expect", [
    ([1, 2], ("entry 'Functional.relu.0.forward': expected an object with input/output lists, "
             "found a list")),
    ("relu", "found a str"),
    (None, "found a NoneType"),
    (True, "found a bool"),
    ({"input_args": "x"}, ("argument 'Functional.relu.0.forward.input.0' is a bare str, "
                          "expected an object or a list")),
    ({"input_args": [7]}, "argument 'Functional.relu.0.forward.input.0' is a bare int"),
    ({"input_args": [], "input_kwargs": "x"}, "input_kwargs must be an object, found a str"),
    ({"output": 1.5}, "argument 'Functional.relu.0.forward.output.0' is a bare float"),
    ({"output": [[True]]}, "argument 'Functional.relu.0.forward.output.0.0' is a bare bool"),
])
def test_op_entry_of_the_wrong_type(tmp_path: Path, entry: Any, expect: str) -> None:
    assert expect in refused(tmp_path, dump_text({OP: entry}))


@pytest.mark.parametrize("shape", ["[2, 3]", None, {"0": 2}, 2.0, True])
def test_shape_that_is_not_a_list(tmp_path: Path, shape: Any) -> None:
    arg = t()
    arg["shape"] = shape
    line = refused(tmp_path, dump_text({OP: fwd(arg, out=t())}))
    assert f"entry '{OP}': shape of '{OP}.input.0' is not a list ({shape!r}); the dump is damaged" \
        in line


def test_tensor_without_shape(tmp_path: Path) -> None:
    arg = t()
    del arg["shape"]
    line = refused(tmp_path, dump_text({OP: fwd(arg, out=t())}))
    assert f"shape of '{OP}.input.0' is not a list (None)" in line


def test_requires_grad_that_is_not_a_boolean(tmp_path: Path) -> None:
    line = refused(tmp_path, dump_text({OP: fwd(t(requires_grad="yes"), out=t())}))
    assert f"requires_grad of '{OP}.input.0' is not a boolean ('yes')" in line


# ------------------------------------------------------------------------------ nesting depth


def test_ten_levels_deep_is_compared(tmp_path: Path) -> None:
    """msprobe's recursion limit is 10: a tensor 10 lists down is a row with its full name."""
    data = {OP: {"input_args": nest(10, t()), "output": [t()]}}
    cfg = write_pair(tmp_path, data, data)
    code, text = compare(cfg, tmp_path / "out")
    assert code == 0, text
    names = [r["NPU Name"] for r in rows(only_xlsx(tmp_path / "out"))]
    assert names == [f"{OP}.input" + ".0" * 10, f"{OP}.output.0"]


@pytest.mark.parametrize("where", ["input_args", "input_kwargs", "output", "dict"])
def test_eleven_levels_deep_is_refused(tmp_path: Path, where: str) -> None:
    if where == "input_args":
        entry = {"input_args": nest(11, t())}
    elif where == "input_kwargs":
        entry = {"input_args": [], "input_kwargs": {"x": nest(11, t())}}
    elif where == "output":
        entry = {"output": nest(11, t())}
    else:
        arg: Any = t()
        for level in range(11):
            arg = {f"k{level}": arg}
        entry = {"input_args": [arg]}
    line = refused(tmp_path, dump_text({OP: entry}))
    assert f"entry '{OP}': arguments nested deeper than 10 levels" in line


@pytest.mark.parametrize("levels", [2_000, 200_000])
def test_nesting_beyond_the_parser_is_refused(tmp_path: Path, levels: int) -> None:
    content = (f'{{"task": "statistics", "data": {{"{OP}": {{"input_args": '
               f'{"[" * levels}{"]" * levels}}}}}}}')
    assert "JSON nested too deeply to be a dump file" in refused(tmp_path, content)


# ------------------------------------------------------------------------------ numbers


def test_huge_and_non_finite_statistics_are_compared(tmp_path: Path) -> None:
    """1e308, ints beyond 2**64 and msprobe's NaN/Infinity tokens are values, not errors; the
    non-finite ones are written as msprobe writes them (``nan``/``inf`` with a trailing TAB)."""
    npu = {OP: fwd(t(mx=2**64 + 1, mn=-1e308, mean=float("nan"), norm=float("inf")),
                   out=t(mx=1e308, mn=float("-inf")))}
    bench = {OP: fwd(t(), out=t())}
    cfg = write_pair(tmp_path, npu, bench)
    assert "NaN" in sides(cfg)[0].read_text() and "-Infinity" in sides(cfg)[0].read_text()
    code, text = compare(cfg, tmp_path / "out")
    assert code == 0, text
    first, second = rows(only_xlsx(tmp_path / "out"))
    assert (first["NPU max"], first["NPU min"], first["NPU mean"], first["NPU l2norm"]) == \
        (float("%.16g" % (2**64 + 1)), -1e308, "nan\t", "inf\t")  # written as %.16g, as msprobe
    assert (second["NPU max"], second["NPU min"]) == (1e308, "-inf\t")


def test_number_overflowing_a_double_reads_as_infinity(tmp_path: Path) -> None:
    text = dump_text({OP: fwd(t(), out=t())}).replace('"Max": 1.0', '"Max": 1e999', 1)
    cfg = good_pair(tmp_path)
    sides(cfg)[0].write_text(text)
    code, out = compare(cfg, tmp_path / "out")
    assert code == 0, out
    assert rows(only_xlsx(tmp_path / "out"))[0]["NPU max"] == "inf\t"


def test_shape_beyond_int64_is_shown_not_counted(tmp_path: Path) -> None:
    """Arrow's int64 cannot hold the element count of [2**70, 2**70]: it crashed the loader."""
    data = {OP: fwd(t(shape=[2**70, 2**70]), out=t())}
    cfg = write_pair(tmp_path, data, data)
    code, text = compare(cfg, tmp_path / "out")
    assert code == 0, text
    assert rows(only_xlsx(tmp_path / "out"))[0]["NPU Tensor Shape"] == f"[{2**70}, {2**70}]"


def test_integer_longer_than_python_reads_is_refused(tmp_path: Path) -> None:
    text = dump_text({OP: fwd(t(), out=t())})
    line_no = text[: text.index('"Max": 1.0')].count("\n") + 1
    line = refused(tmp_path, text.replace('"Max": 1.0', '"Max": ' + "9" * 5000, 1))
    assert f"holds an integer of more than 4300 digits at line {line_no}" in line
    assert "the file is damaged or not a dump" in line


# ------------------------------------------------------------------------------ text


def test_unpaired_surrogate_escape_is_refused_by_line(tmp_path: Path) -> None:
    """``\\ud800`` decodes to a string that no UTF-8 writer can store (it crashed in Arrow)."""
    text = dump_text({"Functional.relu@.0.forward": fwd(t(), out=t())}).replace("@", "\\ud800")
    line = refused(tmp_path, text)
    assert "unpaired UTF-16 surrogate escape" in line and "at line 6," in line


def test_paired_surrogate_escape_is_text(tmp_path: Path) -> None:
    name = "Functional.relu\U0001F600.0.forward"
    data = {name: fwd(t(), out=t())}
    cfg = write_pair(tmp_path, data, data)
    assert "\\ud83d\\ude00" in sides(cfg)[0].read_text()  # json.dumps escapes it as a pair
    code, text = compare(cfg, tmp_path / "out")
    assert code == 0, text
    assert rows(only_xlsx(tmp_path / "out"))[0]["NPU Name"] == f"{name}.input.0"


def test_latin1_byte_inside_a_dump_names_its_line(tmp_path: Path) -> None:
    text = dump_text({OP: fwd(t(), out=t())}).encode()
    at = text.index(b"torch.float32")
    line_no = text[:at].count(b"\n") + 1
    line = refused(tmp_path, text[:at] + b"\xe9" + text[at:])
    assert f"not UTF-8 text (bad byte at line {line_no})" in line


def test_utf8_byte_order_mark_is_refused(tmp_path: Path) -> None:
    line = refused(tmp_path, b"\xef\xbb\xbf" + dump_text({}).encode())
    assert "malformed JSON at line 1, column 1: Unexpected UTF-8 BOM" in line


def test_whitespace_only_file(tmp_path: Path) -> None:
    assert "malformed JSON at line 3, column 1: Expecting value" in refused(tmp_path, " \n\n")


# ------------------------------------------------------------------------------ duplicates


def _duplicated(layout: str) -> str:
    first = json.dumps(fwd(t(), out=t()), indent=1 if layout == "msprobe" else None)
    last = json.dumps(fwd(t(), t(shape=[4]), out=t()), indent=1 if layout == "msprobe" else None)
    if layout == "msprobe":  # json.dump(indent=1), as msprobe writes: the cheap check's case
        body = (f'{{\n "task": "statistics",\n "data": {{\n  "{OP}": {first},\n  "Functional.b.0.'
                f'forward": {first},\n  "{OP}": {last}\n }}\n}}')
    else:
        body = (f'{{"task": "statistics", "data": {{"{OP}": {first}, "Functional.b.0.forward": '
                f'{first}, "{OP}": {last}}}}}')
    json.loads(body)
    return body


@pytest.mark.parametrize("layout", ["msprobe", "compact"])
def test_duplicate_op_name_warns_and_compares_the_last_entry(
        tmp_path: Path, layout: str, caplog: pytest.LogCaptureFixture) -> None:
    """Python's json (msprobe's reader too) keeps the last entry of a repeated key, at the first
    one's position: msq does the same and says so."""
    cfg = good_pair(tmp_path)
    npu, bench = sides(cfg)
    npu.write_text(_duplicated(layout))
    bench.write_text(_duplicated(layout))
    with caplog.at_level(logging.WARNING, logger="msq"):
        side = read_side("npu", npu, compat=False)
    assert side.ops.column("op_name").to_pylist() == [OP, "Functional.b.0.forward"]
    assert side.rows.column("name").to_pylist()[:3] == [f"{OP}.input.0", f"{OP}.input.1",
                                                        f"{OP}.output.0"]
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [(f"{npu}: op '{OP}' appears 2 times in 'data'; msq (like msprobe) compares "
                      "only its last entry; re-dump, or remove the stale entries")]
    code, text = compare(cfg, tmp_path / "out")
    assert code == 0 and f"op '{OP}' appears 2 times" in text
    assert [r["NPU Name"] for r in rows(only_xlsx(tmp_path / "out"))][:3] == \
        [f"{OP}.input.0", f"{OP}.input.1", f"{OP}.output.0"]


@pytest.mark.golden
def test_msprobe_layout_without_duplicates_is_not_parsed_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = json.loads
    monkeypatch.setattr(jsonio.json, "loads", lambda *a, **k: calls.append(k) or real(*a, **k))
    doc = jsonio.read_dump(GOLDEN_DUMP)
    assert len(doc["data"]) > 10 and calls == [{}]


# ------------------------------------------------------------------------------ size limit


def test_dump_above_the_size_limit_is_refused(tmp_path: Path) -> None:
    cfg = good_pair(tmp_path)
    npu = sides(cfg)[0]
    limit = npu.stat().st_size - 1
    code, text = compare(cfg, tmp_path / "out", env={"MSQ_MAX_JSON_BYTES": str(limit)})
    line = error_line(text)
    assert code == 1 and outputs(tmp_path / "out") == []
    assert line == (f"msq: error: {npu}: dump.json is {limit + 1:,} bytes, above msq's {limit:,} "
                    "bytes limit; dump fewer steps/ranks per file, or raise MSQ_MAX_JSON_BYTES if "
                    "memory allows")


def test_large_dump_is_refused_before_it_is_read(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3 GiB dump.json (sparse: it costs no disk) is refused on its size, never opened."""
    cfg = good_pair(tmp_path)
    npu = sides(cfg)[0]
    with open(npu, "r+b") as handle:
        handle.truncate(3 << 30)

    def no_open(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(f"opened {args[0]}")

    monkeypatch.setattr(jsonio, "open", no_open, raising=False)
    monkeypatch.delenv("MSQ_MAX_JSON_BYTES", raising=False)
    with pytest.raises(DumpError) as err:
        jsonio.read_dump(npu)
    assert str(err.value) == (f"{npu}: dump.json is 3.0 GiB, above msq's 1.0 GiB limit; dump fewer "
                              "steps/ranks per file, or raise MSQ_MAX_JSON_BYTES if memory allows")
    monkeypatch.undo()
    code, text = compare(cfg, tmp_path / "out", env={"MSQ_MAX_JSON_BYTES": ""})
    assert code == 1 and "3.0 GiB, above msq's 1.0 GiB limit" in error_line(text)


@pytest.mark.parametrize("value", ["1GB", "-5", "0"])
def test_bad_size_limit_setting_is_a_usage_error(tmp_path: Path, value: str) -> None:
    code, text = compare(good_pair(tmp_path), tmp_path / "out", env={"MSQ_MAX_JSON_BYTES": value})
    assert code == 2
    assert error_line(text) == ("msq: error: MSQ_MAX_JSON_BYTES must be a positive number of "
                                f"bytes, got {value!r}")


# ------------------------------------------------------------------------------ stack.json


@pytest.mark.parametrize("content, expect", [
    ('["File a.py, line 1"]', "expected an object of op name -> list of frames, found a list"),
    (f'{{"{OP}": "File a.py, line 1"}}', f"entry '{OP}': expected a list of frames, found a str"),
    (f'{{"{OP}": {{"0": "File a.py"}}}}', "expected a list of frames, found a dict"),
    (f'{{"{OP}": ["File a.py"', "malformed JSON at line 1, column"),
    ("", "stack.json is empty"),
])
def test_stack_json_of_the_wrong_shape(tmp_path: Path, content: str, expect: str) -> None:
    cfg = good_pair(tmp_path)
    stack = sides(cfg)[0].parent / "stack.json"
    stack.write_text(content)
    code, text = compare(cfg, tmp_path / "out", "-s")
    line = error_line(text)
    assert code == 1 and str(stack) in line and expect in line
    assert outputs(tmp_path / "out") == []


def test_stack_json_without_the_op_leaves_the_cell_empty(tmp_path: Path) -> None:
    cfg = good_pair(tmp_path)
    (sides(cfg)[0].parent / "stack.json").write_text('{"Functional.other.0.forward": ["x"]}')
    code, text = compare(cfg, tmp_path / "out", "-s")
    assert code == 0, text
    assert {r["NPU_Stack_Info"] for r in rows(only_xlsx(tmp_path / "out"))} <= {"None", None}


# ------------------------------------------------------------------------------ mapping files


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_mapping_path_that_is_not_a_file(tmp_path: Path, kind: str) -> None:
    """A directory crashed with IsADirectoryError; a FIFO hung the compare."""
    cfg = good_pair(tmp_path)
    mapping = tmp_path / "map.yaml"
    mapping.mkdir() if kind == "directory" else os.mkfifo(mapping)
    code, text = compare(cfg, tmp_path / "out", "-dm", str(mapping), "-q")
    assert (code, error_line(text)) == (1, (f"msq: error: {mapping}: data mapping YAML is not a "
                                           "regular file; give the path of a YAML file"))


def test_mapping_with_a_billion_laughs_is_refused(tmp_path: Path) -> None:
    """Aliases of lists nest 9**9 strings into 2 KB; printing one in an error ate all memory."""
    lines = ["x:", '  - &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"  - &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    mapping = tmp_path / "map.yaml"
    mapping.write_text("\n".join(lines) + "\n")
    code, text = compare(good_pair(tmp_path), tmp_path / "out", "-dm", str(mapping), "-q")
    assert (code, error_line(text)) == (
        1, (f"msq: error: {mapping}: data mapping YAML is not valid YAML at line 3, column 9: an "
           "alias (*a) of a list or mapping, which msq does not expand in mapping files"))


def test_mapping_with_a_scalar_alias_still_works(tmp_path: Path) -> None:
    mapping = tmp_path / "map.yaml"
    mapping.write_text(f"{OP}.input.0: &x {OP}.input.0\n{OP}.output.0: *x\n")
    code, text = compare(good_pair(tmp_path), tmp_path / "out", "-dm", str(mapping), "-q")
    assert code == 0, text
    got = [(r["NPU Name"], r["Bench Name"]) for r in rows(only_xlsx(tmp_path / "out"))]
    assert got == [(f"{OP}.input.0", f"{OP}.input.0"), (f"{OP}.output.0", f"{OP}.input.0")]


# ------------------------------------------------------------------------------ compare.json paths


@pytest.mark.parametrize("value, expect", [
    ("x" * 300, ": File name too long; check the path"),
    ("a\u0000b", "does not exist, nor does "),
    (5, "'npu_path' must be a non-empty path string, got 5"),
    ("/dev/zero", "npu_path and bench_path must both be dump.json files or both directories"),
])
def test_compare_json_path_values(tmp_path: Path, value: Any, expect: str) -> None:
    """A name too long for the file system crashed with OSError from Path.exists()."""
    cfg = good_pair(tmp_path)
    doc = json.loads(cfg.read_text())
    doc["npu_path"] = value
    cfg.write_text(json.dumps(doc))
    code, text = compare(cfg, tmp_path / "out")
    line = error_line(text)
    assert code == 1 and line.startswith(f"msq: error: {cfg}: ") and expect in line
