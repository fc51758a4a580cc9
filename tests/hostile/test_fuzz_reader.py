"""Fuzz the dump reader: ``read_side`` (``jsonio.read_dump`` + ``Flattener`` + Arrow tables) and
``jsonio.read_stack`` on arbitrary bytes, mutated msprobe dumps and arbitrary JSON in dump shape.

The only acceptable outcomes are a result or an :class:`MsqError`; any other exception (a crash
that would print a traceback) fails. CI runs 100 inputs per target (a few seconds); for a longer hunt (or the coverage-guided
``fuzz_atheris.py``)::

    MSQ_FUZZ_EXAMPLES=20000 python -m pytest tests/hostile/test_fuzz_reader.py
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from msq.errors import MsqError
from msq.jsonio import read_stack
from msq.loader import read_side
from tests.conftest import GOLDEN

EXAMPLES = int(os.environ.get("MSQ_FUZZ_EXAMPLES", "100"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SEED_DUMP = GOLDEN / "tfm_md5_L1/npu/step0/rank/dump.json"


def _seed() -> bytes:
    """A complete, small msprobe dump (the first ops of a golden one) in msprobe's layout."""
    if SEED_DUMP.is_file():
        doc = json.loads(SEED_DUMP.read_text())
        doc["data"] = dict(list(doc["data"].items())[:4])
    else:
        from tests.dumps import fwd, t

        doc = {"task": "statistics", "level": "L1", "dump_data_dir": None, "data": {
            "Functional.linear.0.forward": fwd(t(md5="0a"), {"type": "int", "value": 1},
                                               out=t(md5="0b"))}}
    return json.dumps(doc, indent=1).encode()


SEED = _seed()


def read_everything(raw: bytes) -> None:
    """Feed ``raw`` as dump.json and as stack.json; only success or MsqError may come out."""
    with tempfile.TemporaryDirectory(prefix="msq-fuzz-") as tmp:
        path = Path(tmp) / "dump.json"
        path.write_bytes(raw)
        for compat in (False, True):
            try:
                side = read_side("npu", path, compat)
            except MsqError:
                continue
            assert side.rows.num_rows == sum(side.ops.column("n_rows").to_pylist())
        try:
            read_stack(path)
        except MsqError:
            pass


# ------------------------------------------------------------------------------ strategies

def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` about 7 times in 8: one damaged value is enough to refuse a whole dump, and the
    flattener is only reached past all of them."""
    return st.integers(0, 7).flatmap(lambda i: bad if i == 5 else good)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(), st.integers(min_value=2**63 - 2, max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    texts, st.sampled_from(["=1+1", "a\x00b", "\x1b[31m", "..", "-1", "../x.pt"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(texts, children, max_size=4)),
    max_leaves=25,
)
DTYPES = ["torch.float32", "torch.float16", "torch.bfloat16", "torch.int64", "torch.bool",
          "Float32", "BFloat16", None, 3]
shapes = mostly(st.lists(st.integers(min_value=0, max_value=5), max_size=3),
                st.one_of(st.lists(st.integers(min_value=-2, max_value=2**70), max_size=4),
                          json_values))
tensors = st.fixed_dictionaries(
    {"type": st.sampled_from(["torch.Tensor", "mindspore.Tensor"]),
     "dtype": st.sampled_from(DTYPES), "shape": shapes},
    optional={"Max": scalars, "Min": scalars, "Mean": scalars, "Norm": scalars, "md5": scalars,
              "data_name": scalars, "requires_grad": mostly(st.booleans(), scalars)})
typed = st.fixed_dictionaries(
    {"type": st.sampled_from(["int", "float", "str", "slice", "torch.Size", "ellipsis", "bool"]),
     "value": json_values})
args = st.recursive(
    st.one_of(st.none(), st.just({}), tensors, typed, tensors),
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(texts, children, max_size=3)),
    max_leaves=15,
)
op_names = mostly(
    st.builds(lambda p, a, n, d: f"{p}.{a}.{n}.{d}",
              st.sampled_from(["Functional", "Tensor", "Module.layer.Linear", "Cell.fc.Dense",
                               "Mint", "Torch", ""]),
              st.sampled_from(["add", "feedforward", "input", "output", "forward"]),
              st.integers(0, 3), st.sampled_from(["forward", "backward", "forward.0", "x"])),
    texts)
entries = mostly(
    st.fixed_dictionaries({"output": st.lists(args, min_size=1, max_size=3)},
                          optional={"input_args": st.lists(args, max_size=3),
                                    "input_kwargs": st.dictionaries(texts, args, max_size=3),
                                    "input": st.lists(args, max_size=3)}),
    st.one_of(json_values, st.fixed_dictionaries({}, optional={
        "input_args": args, "input_kwargs": args, "output": args, "input": args})))
dumps = st.fixed_dictionaries(
    {"task": mostly(st.sampled_from(["statistics", "tensor"]),
                    st.one_of(st.just("overflow_check"), scalars)),
     "data": mostly(st.dictionaries(op_names, entries, min_size=1, max_size=6), json_values)},
    optional={"level": scalars, "dump_data_dir": scalars})
# bytes a JSON edit is made of, so that most mutations stay UTF-8 and many stay JSON
json_bytes = mostly(st.lists(
    st.sampled_from([b"{", b"}", b"[", b"]", b",", b":", b'"', b"0", b"-", b"1e999", b"NaN",
                     b"null", b"true", b'"x"', b"Infinity", b"\\", b"\\u", b" ", b"\\ud800",
                     b"\\udc00", b"99999999999999999999999"]),
    max_size=4).map(b"".join), st.binary(max_size=4))


def to_bytes(doc: Any, indent: int | None) -> bytes:
    return json.dumps(doc, indent=indent, allow_nan=True).encode()


# ------------------------------------------------------------------------------ targets


@FUZZ
@given(st.binary(max_size=3000))
def test_arbitrary_bytes(raw: bytes) -> None:
    read_everything(raw)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(SEED)), st.integers(0, 40), json_bytes),
                min_size=1, max_size=6))
def test_mutated_msprobe_dump(edits: list[tuple[int, int, bytes]]) -> None:
    """A real dump with a few bytes replaced, cut out or inserted: mostly still JSON, often
    still dump-shaped, which reaches the flattener with damaged entries."""
    raw = SEED
    for at, cut, insert in edits:
        raw = raw[:at] + insert + raw[at + cut:]
    read_everything(raw)


@FUZZ
@given(dumps, st.sampled_from([None, 1]))
def test_dump_shaped_json(doc: dict[str, Any], indent: int | None) -> None:
    read_everything(to_bytes(doc, indent))


@FUZZ
@given(st.dictionaries(op_names, json_values, max_size=5))
def test_stack_shaped_json(doc: dict[str, Any]) -> None:
    read_everything(to_bytes(doc, 1))


def test_duplicate_keys_and_tokens_survive() -> None:
    """Hand-made corner cases the generators rarely hit."""
    for raw in (b'{"task":"statistics","data":{"a":{},"a":{"output":[null]}}}',
                b'{"task":"statistics","data":{"x.forward":{"output":[{"type":"torch.Tensor",'
                b'"dtype":"torch.float32","shape":[2],"Max":NaN,"Min":-Infinity,"Mean":1e999,'
                b'"Norm":' + str(2**200).encode() + b"}]}}}",
                b'{"task":"statistics","data":{"x.forward":{"input_args":[' + b"[" * 9 +
                b"null" + b"]" * 9 + b"]}}}"):
        read_everything(raw)
