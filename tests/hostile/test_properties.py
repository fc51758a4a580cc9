"""Property tests: random dump pairs never crash msq, and no row is lost or doubled.

hypothesis builds an NPU dump (random op list, nesting, dtypes, non-tensor args, nulls, dict
arguments; statistics or md5) and a bench dump derived from it (ops kept, changed in statistics,
dtype or shape, dropped, and bench-only ops inserted). Both are compared in default mode and in
``--compat msprobe-1.1``:

* default: every NPU row appears exactly once and every bench row exactly once;
* compat: 1.1.0's streaming matcher may stop early (docs/compat.md #1, spec 3.1), so the NPU rows
  shown are exactly the rows of a prefix of the NPU ops (each op whole, in dump order), and no
  bench row appears twice or without an NPU row.

Each example is two real compares on disk, so CI runs a handful; ``MSQ_PROPERTY_EXAMPLES=200``
runs a longer search.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import msq
from msq.errors import DumpError, NothingComparedError
from msq.loader import read_side
from tests.dumps import write_dump

EXAMPLES = int(os.environ.get("MSQ_PROPERTY_EXAMPLES", "10"))

DTYPES = ["torch.float32", "torch.float16", "torch.bfloat16", "torch.int64", "torch.bool"]
stat_values = st.one_of(st.floats(-4, 4, allow_nan=False), st.none(),
                        st.sampled_from([float("nan"), float("inf"), 0.0, 1e308]))


@st.composite
def tensors(draw: st.DrawFn, md5: bool) -> dict[str, Any]:
    entry = {"type": "torch.Tensor", "dtype": draw(st.sampled_from(DTYPES)),
             "shape": draw(st.lists(st.integers(0, 4), max_size=3)),
             "Max": draw(stat_values), "Min": draw(stat_values), "Mean": draw(stat_values),
             "Norm": draw(stat_values), "requires_grad": draw(st.booleans())}
    if md5:
        entry["md5"] = draw(st.sampled_from(["0a0b0c0d", "deadbeef", "00000000"]))
    return entry


def others() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(), st.just({}),
        st.builds(lambda v: {"type": "int", "value": v}, st.integers(-3, 3)),
        st.builds(lambda v: {"type": "float", "value": v}, st.floats(-2, 2, allow_nan=False)),
        st.builds(lambda v: {"type": "bool", "value": v}, st.booleans()),
        st.builds(lambda v: {"type": "str", "value": v}, st.sampled_from(["mean", "=1+1", "-1"])),
        st.builds(lambda v: {"type": "slice", "value": v}, st.just([0, None, 1])),
        st.builds(lambda v: {"type": "torch.Size", "value": v}, st.lists(st.integers(1, 3),
                                                                        max_size=2)))


def args(md5: bool) -> st.SearchStrategy[Any]:
    leaf = st.one_of(tensors(md5), tensors(md5), others())
    return st.recursive(leaf, lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c"]), kids,
                                                    max_size=2)), max_leaves=5)


@st.composite
def entries(draw: st.DrawFn, name: str, md5: bool) -> dict[str, Any]:
    a = args(md5)
    entry: dict[str, Any] = {}
    if name.endswith("backward"):
        keys = {"input": st.lists(a, max_size=3), "output": st.lists(a, max_size=2)}
    else:
        keys = {"input_args": st.lists(a, max_size=3),
                "input_kwargs": st.dictionaries(st.sampled_from(["dim", "weight", "bias"]), a,
                                                max_size=2),
                "output": st.lists(a, max_size=2)}
    for key, strategy in keys.items():
        if draw(st.integers(0, 9)) > 0:  # now and then a key is absent (data_mode filtering)
            entry[key] = draw(strategy)
    return entry


op_names = st.one_of(
    st.builds(lambda p, a, n, d: f"{p}.{a}.{n}.{d}",
              st.sampled_from(["Functional", "Tensor", "Torch"]),
              st.sampled_from(["add", "relu", "linear"]), st.integers(0, 2),
              st.sampled_from(["forward", "forward", "backward"])),
    st.builds(lambda k, n: f"Module.layer{k}.Linear.forward.{n}", st.integers(0, 2),
              st.integers(0, 1)))


def change(entry: Any, how: str) -> Any:
    """The bench's version of an NPU op: other statistics, another dtype, another shape."""
    if isinstance(entry, list):
        return [change(e, how) for e in entry]
    if not isinstance(entry, dict):
        return entry
    if entry.get("type") == "torch.Tensor":
        new = dict(entry)
        if how == "stats" and isinstance(new["Max"], float):
            new["Max"] = new["Max"] * 3 + 1
        elif how == "dtype":
            new["dtype"] = {"torch.float32": "torch.float16"}.get(new["dtype"], "torch.int8")
        elif how == "shape":
            new["shape"] = new["shape"] + [7]
        if "md5" in new and how != "same":
            new["md5"] = "ffffffff"
        return new
    return {k: change(v, how) for k, v in entry.items()}


@st.composite
def dump_pairs(draw: st.DrawFn) -> tuple[dict[str, Any], dict[str, Any]]:
    md5 = draw(st.booleans())
    names = draw(st.lists(op_names, min_size=1, max_size=14, unique=True))
    npu = {name: draw(entries(name, md5)) for name in names}
    bench: dict[str, Any] = {}
    # half the time the bench run stopped early: 1.1.0's matcher then truncates (compat #1)
    last = len(names) - draw(st.integers(1, len(names))) if draw(st.booleans()) else len(names)
    for name, entry in list(npu.items())[:last]:
        how = draw(st.sampled_from(["same", "same", "stats", "dtype", "shape", "drop"]))
        if how != "drop":
            bench[name] = change(entry, how)
        if draw(st.integers(0, 5)) == 0:  # a bench-only op here
            extra = draw(op_names)
            if extra not in npu and extra not in bench:
                bench[extra] = draw(entries(extra, md5))
    return npu, bench


# ------------------------------------------------------------------------------ the properties


def result_rows(res: Any) -> list[tuple[str, str]]:
    """The (NPU Name, Bench Name) of every output row, in order, from the Parquet output."""
    # the compare's Parquet (blame's blame_*.parquet sits beside it)
    (parquet,) = [f for f in res.files if f.suffix == ".parquet"
                  and Path(f).name.startswith("compare_result")] or [None]
    if parquet is None:  # nothing matched: no output written
        return []
    return duckdb.sql(f"SELECT \"NPU Name\", \"Bench Name\" FROM '{parquet}'").fetchall()


def side_rows(path: Path, compat: bool) -> tuple[list[str], list[list[str]]]:
    """(op names, rows of each op) as msq's reader flattens them."""
    side = read_side("npu", path, compat)
    ops = side.ops.column("op_name").to_pylist()
    per_op: list[list[str]] = [[] for _ in ops]
    for seq, name in zip(side.rows.column("op_seq").to_pylist(),
                         side.rows.column("disp_name").to_pylist()):
        per_op[seq].append(name)
    return ops, per_op


def check_default(got: list[tuple[str, str]], npu: list[list[str]], bench: list[list[str]]) -> None:
    npu_rows = Counter(r for rows in npu for r in rows)
    bench_rows = Counter(r for rows in bench for r in rows)
    assert Counter(n for n, _ in got if n != "N/A") == npu_rows
    assert Counter(b for _, b in got if b != "N/A") == bench_rows
    assert all(n == b for n, b in got if "N/A" not in (n, b))  # exact matching: same names


def check_compat(got: list[tuple[str, str]], ops: list[str], npu: list[list[str]],
                 bench: list[list[str]]) -> None:
    assert all(n != "N/A" for n, _ in got), "1.1.0 never lists bench-only ops"
    shown = Counter(n for n, _ in got)
    nonempty = [i for i, rows in enumerate(npu) if rows]
    prefixes = [Counter(r for i in nonempty[:m] for r in npu[i]) for m in range(len(nonempty) + 1)]
    assert shown in prefixes, "compat rows must be whole NPU ops, a prefix of the dump"
    # ...in dump order
    order = [max((i for i, op in enumerate(ops) if n.startswith(op + ".")), key=lambda i: len(ops[i]))
             for n, _ in got]
    assert order == sorted(order)
    bench_rows = Counter(r for rows in bench for r in rows)
    used = Counter(b for _, b in got if b != "N/A")
    assert not used - bench_rows, "a bench row shown twice, or one the bench dump does not have"


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(dump_pairs())
def test_no_row_is_lost_or_doubled(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    npu_data, bench_data = pair
    with tempfile.TemporaryDirectory(prefix="msq-prop-") as tmp:
        root = Path(tmp)
        npu = write_dump(root / "npu", npu_data)
        bench = write_dump(root / "bench", bench_data)
        param = {"npu_json_path": str(npu), "bench_json_path": str(bench),
                 "stack_json_path": str(npu.parent / "stack.json")}
        modes = set()
        for compat in (None, "msprobe-1.1"):
            try:
                res = msq.compare(param, root / f"out-{compat}", stack_mode=True,
                                  auto_analyze=False, record=False, formats="parquet",
                                  compat=compat)
            except NothingComparedError as err:  # the default mode: no row matched (written)
                res = err.results[0]
            except DumpError as err:  # the default mode refuses an empty side, md5 vs statistics
                assert compat is None, err
                assert "holds no ops" in str(err) or "summary modes differ" in str(err), err
                event("default mode refused the pair")
                continue
            modes.add(res.mode)
            ops, npu_rows = side_rows(npu, compat is not None)
            _, bench_rows = side_rows(bench, compat is not None)
            got = result_rows(res)
            assert len(got) == res.rows
            if compat is None:
                check_default(got, npu_rows, bench_rows)
                event(f"bench-only rows: {any(n == 'N/A' for n, _ in got)}")
            else:
                check_compat(got, ops, npu_rows, bench_rows)
                event(f"compat truncated: {len(got) < sum(map(len, npu_rows))}")
            event(f"mode: {res.mode}")
        assert len(modes) == 1 and modes <= {"statistics", "md5"}
