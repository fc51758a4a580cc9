"""The C dump reader (msq/_flatten.c) against the Python reader (jsonio + flatten.Flattener).

The Python reader is the reference. The C reader must give the same tables, bit for bit (NaN
included), on every dump it accepts, and must give up -- leaving the file to the Python reader,
with its warnings and error messages -- on everything the Python reader treats specially.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msq import flatten as flatten_mod
from msq import loader
from msq.errors import DumpError
from msq.flatten import C_PADDING, Columns, check_stack_c, concat_columns, flatten_c
from msq.jsonio import check_stack, read_padded
from tests.dumps import bwd, fwd, t, write_dump
from tests.golden_util import GOLDEN
from tests.hostile.test_properties import dump_pairs

pytestmark = pytest.mark.skipif(C_PADDING is None, reason="msq._flatten is not built")


def same_table(a: Any, b: Any) -> None:
    """Equal columns; doubles compared by their bits (NaN == NaN, -0.0 != 0.0). ``a`` and ``b``:
    pyarrow tables, or the C reader's columns (msq.flatten.Columns) as pyarrow reads them."""
    a, b = pa.table(a), pa.table(b)
    assert a.schema == b.schema
    for name in a.column_names:
        x, y = a[name].combine_chunks(), b[name].combine_chunks()
        if pa.types.is_floating(x.type):
            x, y = x.view(pa.int64()), y.view(pa.int64())
            assert x.is_valid().equals(y.is_valid()), name
            x, y = x.fill_null(0), y.fill_null(0)
        assert x.equals(y), f"column {name} differs"


def c_side(path: Path, compat: bool) -> loader.SideData | None:
    return loader._read_side_c("npu", path, compat)


def py_side(path: Path, compat: bool) -> loader.SideData:
    with loader.gc_paused():
        return loader._read_side("npu", path, compat)


def check_same(path: Path, compat: bool, *, must_accept: bool = True) -> None:
    fast = c_side(path, compat)
    if fast is None:
        assert not must_accept, f"the C reader gave up on {path}"
        return
    slow = py_side(path, compat)
    assert (fast.task, fast.has_md5, fast.looks_mindspore) == \
        (slow.task, slow.has_md5, slow.looks_mindspore)
    same_table(fast.ops, slow.ops)
    same_table(fast.rows, slow.rows)


def golden_dumps() -> list[Path]:
    return sorted(GOLDEN.glob("*/**/dump.json")) if GOLDEN.is_dir() else []


@pytest.mark.skipif(not golden_dumps(), reason=f"golden cases not found at {GOLDEN}")
@pytest.mark.parametrize("compat", [False, True])
def test_golden_dumps_read_the_same(compat: bool) -> None:
    """Every dump.json msprobe 1.1.0 wrote for the golden cases (statistics, md5, tensor,
    MindSpore), read by both readers."""
    for path in golden_dumps():
        check_same(path, compat)
    for path in sorted(GOLDEN.glob("*/**/stack.json")):
        buf = read_padded(path, "stack.json", C_PADDING or 0)
        assert buf is not None and check_stack_c(buf) is None, path


def test_every_argument_shape(tmp_path: Path) -> None:
    """Tensors, typed values of every kind, nesting, kwargs, nulls and empty dicts, non-finite and
    integer statistics, md5 and real-data names, in both modes."""
    data = {
        "Functional.linear.0.forward": fwd(
            t([2, 3], mx=float("nan"), mn=float("-inf"), mean=float("inf"), norm=-0.0),
            [t([1], mx=3, mn=-4, mean=True, norm=None), None, {}],
            {"type": "torch.Size", "value": [2, 3]}, {"type": "torch.Size", "value": None},
            {"type": "slice", "value": [0, None, 2]}, {"type": "slice", "value": 5},
            {"type": "int", "value": -7}, {"type": "float", "value": 1e-300},
            {"type": "bool", "value": False}, {"type": "str", "value": "=cmd|' /C calc'!A0"},
            {"type": "NoneType", "value": None}, {"type": "weird"},
            {"a": t([0]), "b": [t([]), {"c": None}]},
            weight=t([3, 3], mx="text", mn=10**17, mean=1e308, norm=5e-324),
            dim={"type": "int", "value": 1}, bias=None, nested=[[t([4, 0])], {}],
            out=[t([2, 2]), [t([1, 1], dtype=None), None], {"x": t([9])}]),
        "Tensor.add.0.backward": bwd([t([2]), None], [t([2], md5="abc"), {}]),
        # compat: "feedforward" holds "forward"; both directions when a name has both words
        "Module.feedforward.Linear.backward.0": {"input": [t([1])], "output": [t([2])],
                                                  "input_args": [t([3])]},
        "Module.block.forward.0": {"input_args": [t([5], data_name="Module.a.forward.0.pt")],
                                   "input_kwargs": [t([6])], "output": None},
        "Functional.relu.1.forward": {"input_args": {"type": "torch.Tensor", "dtype": "x",
                                                     "shape": [True, 2]},
                                      "input_kwargs": {"type": "int", "value": 3}},
        "Functional.drop.2.forward": {},
        "Distributed.all_reduce.0.forward": {"input_args": [t([1, 2], requires_grad=True)],
                                             "output": [None]},
    }
    for task in ("statistics", "tensor"):
        path = write_dump(tmp_path / task, data, task=task)
        for compat in (False, True):
            check_same(path, compat)


def test_compact_and_unicode_layouts(tmp_path: Path) -> None:
    """Not msprobe's indent=1 layout, escapes, non-ASCII names: still the same rows."""
    data = {"Functional.\u00e9t\u00e9.0.forward": fwd(t([1], mx=0.5), x=t([2]), out=[t([3])]),
            "Tensor.\\\"q\\\".0.forward": fwd({"type": "str", "value": "a\u0000b\u2028"})}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "data": data}, separators=(",", ":"),
                               ensure_ascii=True))
    check_same(path, False)
    data["Tensor.x.0.forward"] = fwd({"type": "str", "value": "\U0001f600"})
    path.write_text(json.dumps({"data": data, "task": "statistics"}, ensure_ascii=False, indent=4))
    check_same(path, True)


def test_columns_grow_past_the_readers_first_room(tmp_path: Path) -> None:
    """The C reader makes room for the rows it guesses from the document's JSON values (a
    statistics tensor's ~15), and for names of ~48 bytes: a dump of far more rows a value (null
    arguments, one value a row) and of longer names and data_names grows every column past it,
    and still reads the Python reader's rows."""
    long = "Functional." + "x" * 300
    data = {f"{long}.{i}.forward": {"input_args": [None] * 40 + [{}] * 10 + [
                t([i, 2], data_name=f"{long}.{i}.forward.input.0.pt")],
                "output": [{"type": "int", "value": i}] * 5}
            for i in range(120)}
    for task in ("statistics", "tensor"):
        path = write_dump(tmp_path / task, data, task=task)
        fast = c_side(path, False)
        assert fast is not None and fast.rows.num_rows == 120 * 56
        for compat in (False, True):
            check_same(path, compat)


@st.composite
def real_ints(draw: st.DrawFn) -> Any:
    return draw(st.one_of(st.integers(-(10**18) + 1, 10**18 - 1), st.floats(allow_nan=True)))


@settings(max_examples=int(os.environ.get("MSQ_PROPERTY_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pair=dump_pairs(), task=st.sampled_from(["statistics", "tensor"]), compat=st.booleans(),
       numbers=st.lists(real_ints(), min_size=4, max_size=4))
def test_random_dumps_read_the_same(tmp_path: Path, pair: tuple[dict[str, Any], dict[str, Any]],
                                    task: str, compat: bool, numbers: list[Any]) -> None:
    npu, _ = pair
    npu["Functional.extra.0.forward"] = fwd(t([2], mx=numbers[0], mn=numbers[1], mean=numbers[2],
                                              norm=numbers[3]))
    path = write_dump(tmp_path / f"{task}-{compat}", npu, task=task)
    check_same(path, compat)


# -- where the C reader gives up, and the Python reader decides --------------------------------

GIVE_UP = {
    "nan spelled otherwise": '{"task": "statistics", "data": {"A.forward": {"output": [nan]}}}',
    "inf elsewhere": '{"task": "statistics", "level": inf, "data": {}}',
    "a trailing comma": '{"task": "statistics", "data": {},}',
    "a lone surrogate": '{"task": "statistics", "data": {"A.\\ud800.forward": {}}}',
    "a control character": '{"task": "statistics", "data": {"A\t.forward": {}}}',
    "an op twice": '{"task": "statistics", "data": {"A.forward": {}, "A.forward": {}}}',
    "a key twice in an argument": '{"task": "statistics", "data": {"A.forward": '
                                  '{"input_args": [{"a": null, "a": {}}]}}}',
    "a huge integer": '{"task": "statistics", "data": {"A.forward": {"output": [{"type": "int", '
                      '"value": 1234567890123456789012}]}}}',
    "a long integer elsewhere": '{"task": "statistics", "x": ' + "9" * 5000 + ', "data": {}}',
    "deep nesting": '{"task": "statistics", "x": ' + "[" * 3000 + "]" * 3000 + ', "data": {}}',
    "a bare number argument": '{"task": "statistics", "data": {"A.forward": {"output": [1]}}}',
    "a dtype that is a number": '{"task": "statistics", "data": {"A.forward": {"output": '
                                '[{"type": "torch.Tensor", "dtype": 5, "shape": []}]}}}',
    "a float in a shape": '{"task": "statistics", "data": {"A.forward": {"output": '
                          '[{"type": "torch.Tensor", "dtype": "f", "shape": [1.5]}]}}}',
    "no shape": '{"task": "statistics", "data": {"A.forward": {"output": '
                '[{"type": "torch.Tensor", "dtype": "f"}]}}}',
    "a list statistic": '{"task": "statistics", "data": {"A.forward": {"output": '
                        '[{"type": "torch.Tensor", "dtype": "f", "shape": [], "Max": [1]}]}}}',
    "an overflow task": '{"task": "overflow_check", "data": {}}',
    "no data": '{"task": "statistics"}',
    "not an object": '[1, 2]',
    "deep arguments": '{"task": "statistics", "data": {"A.forward": {"output": '
                      + "[" * 12 + "null" + "]" * 12 + "}}}",
    "a UTF-8 BOM": '\ufeff{"task": "statistics", "data": {}}',
    "truncated": '{"task": "statistics", "data": {"A.forward": {"output": [',
    "mindspore.Tensor in a longer text": '{"task": "statistics", "data": {"A.forward": '
                                         '{"output": [{"type": "x\'mindspore.Tensor\'"}]}}}',
    # yyjson reads case-insensitive nan/inf/infinity, signed or not: msq's build of it only
    # Python's NaN, Infinity and -Infinity (MSQ_PYTHON_LITERALS)
    **{f"a statistic {word}": '{"task": "statistics", "data": {"A.forward": {"output": '
                              '[{"type": "torch.Tensor", "dtype": "f", "shape": [], "Max": '
                              + word + '}]}}}'
       for word in ("-NaN", "nan", "NAN", "inf", "-inf", "Inf", "infinity", "INFINITY",
                    "+Infinity", "-infinity", "Infinit", "NaNa")},
    "a 19-digit integer statistic": '{"task": "statistics", "data": {"A.forward": {"output": '
                                    '[{"type": "int", "value": 1000000000000000000}]}}}',
    "a negative 19-digit integer": '{"task": "statistics", "data": {"A.forward": {"output": '
                                   '[{"type": "int", "value": -1000000000000000000}]}}}',
    "a 20-digit integer in a shape": '{"task": "statistics", "data": {"A.forward": {"output": '
                                     '[{"type": "torch.Tensor", "dtype": "f", '
                                     '"shape": [18446744073709551615]}]}}}',
}


def test_op_names_one_byte_apart_are_told_apart(tmp_path: Path) -> None:
    """msq/_flatten.c has_dup_ops (a hash of eight bytes a step, then the bytes compared): op
    names that differ in one byte anywhere (in a whole word of eight or in the tail), or in
    length alone, are all read; the same name twice, however far apart, gives up."""
    import json

    base = "Module.layers.0.self_attn.q_proj.Linear.forward.0"
    names = [base[:k] + chr(ord(base[k]) ^ 1) + base[k + 1:] for k in range(len(base))]
    names += [base[:n] for n in range(1, len(base) + 1)]
    data = {name: {"output": [None]} for name in names}
    path = tmp_path / "dump.json"
    path.write_text(json.dumps({"task": "statistics", "data": data}))
    check_same(path, False)
    text = path.read_text()
    for dup in (names[0], names[len(base) + 7], base):
        path.write_text(text[:-2] + f', "{dup}": {{}}}}}}')
        buf = read_padded(path, "dump.json", C_PADDING or 0)
        assert buf is not None
        assert flatten_c(buf, False) == "an op name twice in data", dup


@pytest.mark.parametrize("case", sorted(GIVE_UP))
def test_gives_up_where_python_decides(tmp_path: Path, case: str) -> None:
    path = tmp_path / "dump.json"
    path.write_bytes(GIVE_UP[case].encode("utf-8", "surrogatepass"))
    buf = read_padded(path, "dump.json", C_PADDING or 0)
    assert buf is not None
    assert isinstance(flatten_c(buf, False), str)
    # and read_side says what the Python reader says
    try:
        expected: Any = py_side(path, False)
    except DumpError as err:
        expected = str(err)
    try:
        got: Any = loader.read_side("npu", path, False)
    except DumpError as err:
        got = str(err)
    if isinstance(expected, str):
        assert got == expected
    else:
        same_table(got.rows, expected.rows)


def test_nan_and_infinity_tokens_are_read(tmp_path: Path) -> None:
    path = write_dump(tmp_path, {"A.0.forward": fwd(t([1], mx=float("nan"), mn=float("-inf"),
                                                       mean=float("inf")))})
    assert "NaN" in path.read_text()
    side = c_side(path, False)
    assert side is not None
    row = side.rows.to_pylist()[0]
    assert math.isnan(row["max_num"]) and row["min_num"] == -math.inf
    assert row["mean_num"] == math.inf


#: number texts at the edges of what yyjson reads as an int64, a uint64 or a finite double, and
#: floats longer than any fixed buffer: the C reader's numbers must be Python's float() and int()
EDGE_NUMBERS = [
    "0", "-0", "0.0", "-0.0", "1", "-1", "999999999999999999", "-999999999999999999",
    "123456789012345678", "1E5", "1e-5", "2.5E+3", "-2.5e-3", "1e308", "-1e308", "1.7976931348623157e308",
    "1.7976931348623159e308", "1e309", "-1e309", "1e400", "5e-324", "2.4703282292062327e-324",
    "2.4703282292062328e-324", "1e-400", "-1e-400", "2.2250738585072011e-308",
    "2.2250738585072012e-308", "9007199254740993", "9007199254740993.0", "0.1", "0.30000000000000004",
    "299.80682373046875", "0." + "0" * 300 + "1", "1" + "0" * 300 + ".5",
    "3." + "14159265358979323846" * 30, "9007199254740992.999999999999999999999999999999999",
    "1" * 17 + "e-10", "-" + "7" * 70 + "e-60",
]


@pytest.mark.parametrize("compat", [False, True])
def test_edge_numbers_read_as_python_reads_them(tmp_path: Path, compat: bool) -> None:
    """Each text as a statistic, a typed value and (ints) a shape element: the same rows as the
    Python reader's (doubles by their bits), none left to it."""
    args = []
    for i, text in enumerate(EDGE_NUMBERS):
        is_int = not any(c in text for c in ".eE")
        shape = f"[{text}, 2]" if is_int and not text.startswith("-") else "[3]"
        args.append(f'{{"type": "torch.Tensor", "dtype": "torch.float32", "shape": {shape}, '
                    f'"Max": {text}, "Min": -{text.lstrip("-")}, "Mean": {i}, "Norm": {text}}}')
        args.append(f'{{"type": "{"int" if is_int else "float"}", "value": {text}}}')
    path = tmp_path / "dump.json"
    path.write_text('{"task": "statistics", "data": {"Functional.edge.0.forward": '
                    f'{{"input_args": [{", ".join(args)}], "output": []}}, '
                    '"Functional.lit.0.forward": {"input_args": [{"type": "torch.Tensor", '
                    '"dtype": "f", "shape": [], "Max": NaN, "Min": -Infinity, "Mean": Infinity, '
                    '"Norm": -0.0}]}}}')
    json.loads(path.read_text())  # Python reads every one of them
    check_same(path, compat)
    rows = c_side(path, compat).rows.to_pylist()  # type: ignore[union-attr]
    assert rows[-1]["max_kind"] == "f" and math.isnan(rows[-1]["max_num"])
    assert rows[-1]["min_num"] == -math.inf and rows[-1]["mean_num"] == math.inf


def test_stack_check(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"A.forward": ["File a.py, line 1"], "B": []}, indent=1))
    bad.write_text(json.dumps({"A.forward": "not a list"}))
    for path, fast in ((good, None), (bad, str)):
        buf = read_padded(path, "stack.json", C_PADDING or 0)
        assert buf is not None
        result = check_stack_c(buf)
        assert result is None if fast is None else isinstance(result, str)
    check_stack(good)
    with pytest.raises(DumpError, match="expected a list of frames"):
        check_stack(bad)


def _object_of_lists(text: bytes) -> bool:
    """What jsonio.check_stack accepts: JSON (Python's) of an object of lists."""
    try:
        doc = json.loads(text.decode("utf-8"))
    except ValueError:
        return False
    return isinstance(doc, dict) and all(isinstance(v, list) for v in doc.values())


#: texts of a stack.json's shape, and near it
STACK_TEXTS = [
    b'{}', b' \n{ }\t', b'{"a":[]}', b'{"a":["x"],"b":[]}', b'{"a" : [ "x" , "y" ] }\r\n',
    b'{"A.forward": ["File a.py, line 1, in f, \\n return g(*a)", "\\"\\\\\\/\\b\\f\\r\\t"]}',
    b'{"a":["\\u0041"]}', b'{"a":[1]}', b'{"a":[["x"]]}', b'{"a":["\xc3\xa9"]}', b'{"a":["\x7f"]}',
    b'{"a":["x",]}', b'{"a":["x"],}', b'{"a":"x"}', b'[]', b'{"a":["\\x"]}', b'{"a":["x"]}x',
    b'{"a":["x"]', b'{"a":["x"}', b'{"a":["x\ty"]}', b'{"a":["x\x00"]}', b'{"a":["\xff"]}',
    b'\xef\xbb\xbf{}', b'{"a":["' + b"x" * 40 + b'\\n' + b"y" * 70 + b'"]}', b'{"a":["x"]} {}', b'']


def test_a_plain_stack_is_told_without_a_document() -> None:
    """check_stack's pass without yyjson's document (msq/_flatten.c stack_of_plain_lists): an
    object of lists of plain strings (printable ASCII, one-letter escapes) is told at once;
    what it tells, Python's json reads as an object of lists; anything else is parsed as before
    (check_stack_c's answer the same)."""
    c = flatten_mod._c
    assert c is not None
    told = {text: c.plain_stack(text) for text in STACK_TEXTS}
    assert told[b'{}'] and told[STACK_TEXTS[5]] and told[STACK_TEXTS[-3]]
    assert not told[b'{"a":["\\u0041"]}'] and not told[b'{"a":[1]}'] and not told[b'{"a":["\xc3\xa9"]}']
    for text, yes in told.items():
        assert not yes or _object_of_lists(text), text
        buf = bytearray(text + bytes(C_PADDING or 0))
        if len(text):
            assert (check_stack_c(buf) is None) == _object_of_lists(text), text
    for path in sorted(GOLDEN.glob("*/**/stack.json")):  # as msprobe writes them
        text = path.read_bytes()
        assert c.plain_stack(text) or not text.isascii(), path


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.sampled_from(STACK_TEXTS[:6]), st.lists(st.tuples(
    st.integers(0, 400), st.sampled_from(list(b' \t\n\r{}[]":,\\/ubfnrtx0\x00\x1f\x7f\xc3\xa9')),
    st.sampled_from(["put", "insert", "delete"])), max_size=4))
def test_what_the_stack_pass_tells_python_reads(text: bytes, edits: list[tuple[int, int, str]]) -> None:
    """Texts near a stack.json's shape: what stack_of_plain_lists tells is an object of lists
    to Python's json, and check_stack_c tells an object of lists from anything else."""
    b = bytearray(text)
    for at, byte, how in edits:
        at = at % (len(b) + 1)
        if how == "insert":
            b[at:at] = bytes([byte])
        elif b:
            at = min(at, len(b) - 1)
            if how == "put":
                b[at] = byte
            else:
                del b[at]
    c = flatten_mod._c
    assert c is not None
    expected = _object_of_lists(bytes(b))
    assert not c.plain_stack(bytes(b)) or expected
    if b:
        assert (check_stack_c(bytearray(bytes(b) + bytes(C_PADDING or 0))) is None) == expected


def test_both_sides_reach_duckdb_as_one_arrow_stream(tmp_path: Path) -> None:
    """The C reader's columns go to DuckDB through the Arrow C stream interface (no pyarrow):
    both sides, one stream of two batches, read as pyarrow's concatenation of the same tables."""
    npu = write_dump(tmp_path / "n", {f"A.{i}.forward": fwd(t([i + 1], mx=i * 0.5)) for i in range(7)})
    bench = write_dump(tmp_path / "b", {"B.0.forward": fwd(t([2], mx=float("nan"))),
                                        "B.1.forward": fwd(None)})
    sides = [loader._read_side_c(side, path, False) for side, path in (("npu", npu), ("bench", bench))]
    assert sides[0] is not None and sides[1] is not None
    assert isinstance(sides[0].rows, Columns)
    both = concat_columns([sides[0].rows, sides[1].rows])
    con = duckdb.connect()
    con.register("both_sides", both)
    got = con.sql("SELECT * FROM both_sides").to_arrow_table()
    expected = pa.concat_tables([pa.table(sides[0].rows), pa.table(sides[1].rows)])
    same_table(got, expected)
    assert got.column("side").to_pylist()[:1] + got.column("side").to_pylist()[-1:] == ["npu", "bench"]
    assert got.column("row_seq").to_pylist() == [*range(sides[0].rows.num_rows),
                                                 *range(sides[1].rows.num_rows)]
    # a stream is made anew each time it is asked for: the same rows a second time
    assert con.sql("SELECT count(*) FROM both_sides").fetchall() == [(got.num_rows,)]


@pytest.mark.parametrize("bad", [
    [],                                                              # no batch
    [[("a", "i32", 3, 0, None, bytes(8), None)]],                    # 2 values for 3
    [[("a", "str", 2, 0, None, b"ab", b"\0\0\0\0\1\0\0\0\5\0\0\0")]],  # an offset past the data
    [[("a", "i64", 1, 0, None, bytes(8), None)], [("b", "i64", 1, 0, None, bytes(8), None)]],
    [[("a", "i64", 1, 1, None, bytes(8), None)]],                    # a null without validity
    [[("a", "i64", 1, 0, None, bytes(8), None), ("b", "i64", 2, 0, None, bytes(16), None)]],
    [[("a", "u16", 1, 0, None, bytes(8), None)]],                    # an unknown kind
    [[("a", "u8", 9, 0, None, bytes(8), None)]],                     # 8 codes for 9
])
def test_arrow_stream_refuses_malformed_columns(bad: list[Any]) -> None:
    """The C stream checks every buffer against its length: DuckDB never reads past one."""
    with pytest.raises(ValueError, match="arrow_stream"):
        flatten_mod._c.arrow_stream(bad)


def _buffer(data: bytes) -> Any:
    """The C reader's own buffer holding ``data`` (msq._flatten.Buffer, writable)."""
    buf = flatten_mod.input_buffer(len(data), 0)
    memoryview(buf)[:] = data
    return buf


def test_arrow_stream_checks_the_readers_buffers_too() -> None:
    """Columns held in the C reader's buffers (not bytes) are read, and checked, as bytes are."""
    short = [[("a", "i32", 3, 0, None, _buffer(bytes(8)), None)]]
    with pytest.raises(ValueError, match="shorter than its length"):
        flatten_mod._c.arrow_stream(short)
    wild = [[("a", "str", 2, 0, None, _buffer(b"ab"), _buffer(b"\0\0\0\0\1\0\0\0\5\0\0\0"))]]
    with pytest.raises(ValueError, match="out of range"):
        flatten_mod._c.arrow_stream(wild)
    with pytest.raises(ValueError, match="malformed"):
        flatten_mod._c.arrow_stream([[("a", "i64", 1, 0, None, bytearray(8), None)]])
    good = Columns([[("a", "i64", 2, 0, None, _buffer((7).to_bytes(8, "little") * 2), None),
                     ("s", "str", 2, 0, None, _buffer(b"xyz"), _buffer(b"\0\0\0\0\1\0\0\0\3\0\0\0"))]])
    con = duckdb.connect()
    con.register("good", good)
    assert con.sql("SELECT * FROM good").fetchall() == [(7, "x"), (7, "yz")]


def test_large_columns_are_the_readers_buffers(tmp_path: Path) -> None:
    """A dump's large columns come in the C reader's read-only buffers (not copied into bytes),
    which read, measure and pickle as the same bytes; the input buffer's padding is zero."""
    import pickle

    path = write_dump(tmp_path, {f"Functional.op_{i}.0.forward": fwd(t(mx=float(i)))
                                 for i in range(600)})
    buf = read_padded(path, "dump.json", C_PADDING or 0, flatten_mod.input_buffer)
    size = path.stat().st_size
    assert len(buf) == size + (C_PADDING or 0) and bytes(memoryview(buf)[size:]) == bytes(C_PADDING or 0)
    assert bytes(memoryview(buf)[:size]) == path.read_bytes()
    out = flatten_c(buf, False)
    assert not isinstance(out, str), out
    cols = {c[0]: c for c in out.rows._batches[0]}
    data = cols["name"][5]
    assert type(data).__name__ == "Buffer" and len(data) >= 4096
    with pytest.raises(TypeError):
        memoryview(data)[0] = 0  # read-only
    assert pickle.loads(pickle.dumps(data)) == bytes(memoryview(data))
    assert isinstance(cols["is_tensor"][5], bytes)  # 1,200 bits: small columns are bytes
    assert bytes(memoryview(cols["io"][5])).startswith(b"inputoutput")  # 1,200 rows: a Buffer
    assert pa.table(out.rows)["name"].to_pylist() == [r["name"] for r in out.rows.to_pylist()]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 8192, 100_003])
@pytest.mark.parametrize("step", [0, 1, 3, 17])
def test_arithmetic_columns_are_arrays_bytes(n: int, step: int) -> None:
    """The loader's row numbers and constant columns' offsets, made in C, are the bytes array's
    conversion of the same range gave (native int32 and int64); a value that does not fit
    raises as array does."""
    from array import array

    for width, code in ((4, "i"), (8, "q")):
        want = array(code, range(0, n * step, step)).tobytes() if step else bytes(width * n)
        assert flatten_mod._arithmetic(n, width, step) == want
    text, count = "bench", n
    column = flatten_mod.constant_column("side", text, count)
    assert column[5] == text.encode() * count
    assert column[6] == array("i", range(0, (count + 1) * len(text), len(text))).tobytes()
    assert flatten_mod.sequence_column("row_seq", n)[5] == array("q", range(n)).tobytes()
    assert flatten_mod.sequence_column("op_seq", n, "i32")[5] == array("i", range(n)).tobytes()


def test_arithmetic_overflow_raises() -> None:
    with pytest.raises(OverflowError):
        flatten_mod._arithmetic(2**31 // 5 + 2, 4, 5)


def test_stable_order_every_path() -> None:
    """flatten.stable_order gives the indices that sort int64 values stably (Python's sorted,
    which is stable, is the reference) on each of its C paths: values in order, a permutation
    or a narrow range (placed by counting, ties among them), and a wide range with the extremes
    of int64 (qsort); also an empty, a one-value and a misaligned buffer."""
    import random
    from array import array

    rng = random.Random(15)

    def check(values: list[int]) -> None:
        want = array("q", sorted(range(len(values)), key=values.__getitem__)).tobytes()
        assert flatten_mod.stable_order(array("q", values).tobytes()) == want

    shuffled = list(range(24_524))
    rng.shuffle(shuffled)
    cases = [[], [5], list(range(1000)), list(range(1000))[::-1], shuffled,
             [x * 3 + 10**12 for x in shuffled[:5000]], [x * 5 for x in shuffled[:5000]],
             [rng.randint(-5, 5) for _ in range(5000)], [7] * 100 + [3] * 50 + [7] * 10,
             [2**63 - 1, -(2**63), 0, 5, -(2**63), 2**63 - 1],
             [rng.randint(-(2**62), 2**62) for _ in range(5000)]]
    for values in cases:
        check(values)
    misaligned = memoryview(b"x" + array("q", [3, 1, 2]).tobytes())[1:]
    assert flatten_mod.stable_order(misaligned) == array("q", [1, 2, 0]).tobytes()  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=dump_pairs(), task=st.sampled_from(["statistics", "tensor"]), compat=st.booleans(),
       python_reader=st.booleans())
def test_reader_keys_give_the_views_rows(tmp_path: Path, pair: tuple[dict[str, Any], dict[str, Any]],
                                         task: str, compat: bool, python_reader: bool) -> None:
    """op_keys from the readers' ops columns (pipeline.READER_OP_KEYS) holds the op_keys view's
    rows and types, op_pairs_default over the readers' struct_keys (pipeline.op_pairs_select)
    its pairs, and row_pairs reading tensors.io_k (pipeline.row_pairs_select) the row_pairs
    view's, on random dump pairs read by either reader, both modes."""
    from msq import db, pipeline
    from msq.config import Options, SingleInput
    from msq.errors import MsqError

    npu, bench = pair
    npu["Functional.mixed.0.forward"] = {"input_args": [t([2])], "output": [t([3])],
                                         "input_kwargs": {"k": t([4])}}
    bench["Functional.mixed.0.forward"] = npu["Functional.mixed.0.forward"]
    # real data: rows displayed by their data_name, whose input/output need not be the row's
    # (io_k counts by disp_io, as row_pairs' window partitions)
    swapped = {"input_args": [t([2], data_name="Functional.swap.0.forward.output.0.pt"),
                              t([2], data_name="Functional.swap.0.forward.input.1.pt")],
               "output": [t([3], data_name="Functional.swap.0.forward.input.0.pt"),
                          t([3], data_name="Functional.swap.0.forward.output.1.pt")]}
    npu["Functional.swap.0.forward"] = bench["Functional.swap.0.forward"] = swapped
    folder = tmp_path / f"{task}-{compat}-{python_reader}"
    inp = SingleInput(write_dump(folder / "npu", npu, task=task),
                      write_dump(folder / "bench", bench, task=task), None)
    opts = Options(workers=1, record=False, **({"compat": "msprobe-1.1"} if compat else {}))
    saved = loader.C_PADDING
    if python_reader:  # the C reader is not tried (loader._read_side_c)
        loader.C_PADDING = None
    try:
        con, _, _, npu_side, bench_side = pipeline.prepare(inp, opts)
    except MsqError:  # a pair this mode refuses (an empty side): nothing to compare
        return
    finally:
        loader.C_PADDING = saved
    try:
        assert all("row_key" in side.ops.column_names and "io_k" in side.rows.column_names
                   for side in (npu_side, bench_side))
        view = "SELECT * FROM op_keys ORDER BY side, op_seq"
        assert con.execute(f"{pipeline.READER_OP_KEYS} ORDER BY side, op_seq").fetchall() == \
            con.execute(view).fetchall()
        assert con.execute(f"DESCRIBE {pipeline.READER_OP_KEYS}").fetchall() == \
            con.execute("DESCRIBE SELECT * FROM op_keys").fetchall()
        db.materialize(con, "op_keys")
        if compat:
            pipeline.write_compat_pairs(con)
        else:
            # and op_candidates' exact test from the readers' struct_keys: the same pairs
            assert con.execute(f"SELECT * FROM ({pipeline.op_pairs_select()}) ORDER BY ord"
                               ).fetchall() == \
                con.execute("SELECT * FROM op_pairs_default ORDER BY ord").fetchall()
            con.execute("INSERT INTO op_pairs SELECT * FROM op_pairs_default")
        assert con.execute(f"SELECT * FROM ({pipeline.row_pairs_select()}) ORDER BY out_seq"
                           ).fetchall() == \
            con.execute("SELECT * FROM row_pairs ORDER BY out_seq").fetchall()
    finally:
        con.close()


def test_shapes_seen_before_read_as_the_first_time(tmp_path: Path) -> None:
    """The C reader keeps the shapes it has read (msq/_flatten.c shape_key: a table of the last
    shape of each hash): a shape read again, one of a shape's dimensions changed, in another
    order, one dimension more or fewer, more dimensions than it keeps, a negative, a bool, a
    huge or a zero dimension, an empty shape, and more distinct shapes than its slots (each
    slot taken over), each read as the Python reader reads it (a dimension of 10^18 or more:
    the Python reader's, test_gives_up_where_python_decides)."""
    shapes: list[list[Any]] = [[2, 3], [2, 3], [3, 2], [2, 3, 1], [2], [], [], [0, 4], [0, 4],
                               [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7],
                               [1, 2, 3, 4, 5, 6, 7], [-1, 3], [-1, 3], [True, 3], [True, 3],
                               [10 ** 17 + 3, 1], [10 ** 17 + 3, 1], [10 ** 17, 10], [10 ** 17, 10]]
    shapes += [[k % 97, k // 97 + 1] for k in range(9000)] + [[2, 3], [5, 1]]
    shapes += [[k % 97, k // 97 + 1] for k in range(0, 9000, 7)]
    data = {f"Functional.op_{i}.0.forward": fwd(t(shape), out=t([s + 1 for s in shape[:1]]))
            for i, shape in enumerate(shapes)}
    check_same(write_dump(tmp_path, data), False)
