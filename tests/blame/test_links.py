"""Blame's linking rules on hand-made dumps: which earlier output produced each op input.

Ambiguous producers (the nearest preceding one wins), views and reshapes that keep the
statistics, in-place ops (msprobe records their input after the op ran), module records that only
repeat an op's output, backward ops (their forward record counts as input), md5 identity, and
inputs that can never be linked (parameters, constants, empty tensors).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.blame.util import blame_con, edges, local_names, verdicts
from tests.dumps import bwd, fwd, t, write_dump


def s(k: float, shape: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    """A tensor whose statistics are set by ``k`` (so equal k = equal statistics)."""
    return t(shape if shape is not None else [2, 3], mx=k, mn=-k, mean=k / 10, norm=2 * k, **extra)


def pair(tmp: Path, npu: dict[str, Any], bench: dict[str, Any] | None = None,
         **kw: Any) -> tuple[Path, Path]:
    n = write_dump(tmp / "npu", npu, **kw)
    b = write_dump(tmp / "bench", bench if bench is not None else npu, **kw)
    return n, b


def test_ambiguous_producers_take_the_nearest_preceding_one(tmp_path: Path) -> None:
    dump = {
        "Torch.a.0.forward": fwd(s(1), out=s(2)),
        "Torch.b.0.forward": fwd(s(3), out=s(2)),  # the same statistics again
        "Torch.c.0.forward": fwd(s(2), out=s(4)),
        "Torch.d.0.forward": fwd(s(4), out=s(2)),  # later: never a producer of c's input
    }
    e = edges(blame_con(*pair(tmp_path, dump)))
    got = e["Torch.c.0.forward.input.0"]
    assert (got["producer"], got["how"], got["candidates"]) == (
        "Torch.b.0.forward.output.0", "statistics", 2)
    assert e["Torch.b.0.forward.input.0"]["how"] == "external"  # s(3): nobody made it


def test_views_and_reshapes_that_keep_the_statistics(tmp_path: Path) -> None:
    dump = {
        "Torch.a.0.forward": fwd(s(1), out=s(2, [2, 3])),
        "Tensor.view.0.forward": fwd(s(2, [2, 3]), {"type": "int", "value": 6},
                                     out=s(2, [6])),
        "Torch.c.0.forward": fwd(s(2, [6]), out=s(5)),
        # a [3, 2] tensor with those statistics was made by no recorded op (e.g. an unhooked
        # reshape): the nearest output with the same content and element count
        "Torch.d.0.forward": fwd(s(2, [3, 2]), out=s(6)),
        # same statistics, other element count: not the same tensor
        "Torch.e.0.forward": fwd(s(2, [4, 3]), out=s(7)),
    }
    e = edges(blame_con(*pair(tmp_path, dump)))
    assert e["Tensor.view.0.forward.input.0"]["producer"] == "Torch.a.0.forward.output.0"
    assert e["Torch.c.0.forward.input.0"]["producer"] == "Tensor.view.0.forward.output.0"
    assert e["Torch.c.0.forward.input.0"]["how"] == "statistics"
    assert (e["Torch.d.0.forward.input.0"]["producer"], e["Torch.d.0.forward.input.0"]["how"]) == (
        "Tensor.view.0.forward.output.0", "reshape")
    assert e["Torch.e.0.forward.input.0"]["how"] == "external"


def test_inputs_that_can_never_be_linked(tmp_path: Path) -> None:
    dump = {
        "Functional.linear.0.forward": fwd(s(1), s(9), {"type": "int", "value": 3},
                                           s(1, [0]), out=s(2)),
    }
    con = blame_con(*pair(tmp_path, dump))
    e = edges(con)
    assert e["Functional.linear.0.forward.input.0"]["how"] == "external"  # data
    assert e["Functional.linear.0.forward.input.1"]["how"] == "external"  # a parameter
    # a constant is an input but not dataflow; an empty tensor has no content to link by
    assert "Functional.linear.0.forward.input.2" not in e
    assert "Functional.linear.0.forward.input.3" not in e
    v = verdicts(con)
    assert v["Functional.linear.0.forward.input.2"]["role"] == "constant input"
    assert v["Functional.linear.0.forward.input.1"]["role"] == "external input"


def test_a_module_record_does_not_hide_the_op_that_made_the_tensor(tmp_path: Path) -> None:
    dump = {
        "Functional.linear.0.forward": fwd(s(1), out=s(2)),
        "Module.fc.Linear.forward.0": fwd(s(1), out=s(2)),  # repeats the op's output, later
        "Torch.relu.0.forward": fwd(s(2), out=s(3)),
    }
    e = edges(blame_con(*pair(tmp_path, dump, level="mix")))
    assert e["Torch.relu.0.forward.input.0"]["producer"] == "Functional.linear.0.forward.output.0"
    assert e["Torch.relu.0.forward.input.0"]["candidates"] == 1  # among the ops' outputs


def test_md5_links_by_content_not_by_statistics(tmp_path: Path) -> None:
    dump = {
        "Torch.a.0.forward": fwd(s(1, md5="11"), out=s(2, md5="aa")),
        "Torch.b.0.forward": fwd(s(2, md5="aa"), out=s(3, md5="cc")),
        "Torch.c.0.forward": fwd(s(2, md5="bb"), out=s(4, md5="dd")),  # same statistics, not bytes
    }
    e = edges(blame_con(*pair(tmp_path, dump)))
    assert (e["Torch.b.0.forward.input.0"]["producer"], e["Torch.b.0.forward.input.0"]["how"]) == (
        "Torch.a.0.forward.output.0", "md5")
    assert e["Torch.c.0.forward.input.0"]["how"] == "external"


def _inplace(first_out: float, add_out: float, other: float = 0) -> dict[str, Any]:
    # msprobe records an in-place op's input after the op: add_'s input.0 equals its output
    return {
        "Torch.a.0.forward": fwd(s(1), out=s(first_out)),
        "Torch.other.0.forward": fwd(s(1), out=s(10 + other)),
        "Tensor.add_.0.forward": fwd(s(add_out), s(first_out), out=s(add_out)),
        "Torch.c.0.forward": fwd(s(add_out), out=s(add_out + 1)),
    }


def test_an_in_place_input_is_recognised_and_not_blamed(tmp_path: Path) -> None:
    con = blame_con(*pair(tmp_path / "ok", _inplace(2, 5)))
    e, v = edges(con), verdicts(con)
    assert e["Tensor.add_.0.forward.input.0"]["how"] == "external"
    assert v["Tensor.add_.0.forward.input.0"]["role"] == "in-place input"
    assert e["Torch.c.0.forward.input.0"]["producer"] == "Tensor.add_.0.forward.output.0"
    # the in-place op goes wrong: its output is where the error enters, not its input row
    con = blame_con(*pair(tmp_path / "bad", _inplace(2, 5.5), _inplace(2, 5)))
    assert local_names(con) == ["Tensor.add_.0.forward.output.0"]
    assert verdicts(con)["Tensor.add_.0.forward.input.0"]["verdict"] == "inherited"


def test_an_in_place_op_after_an_error_is_not_called_local(tmp_path: Path) -> None:
    """Its input before the op was not recorded: an error before it may have reached it."""
    npu, bench = _inplace(2, 5.5, other=0.5), _inplace(2, 5, other=0)
    con = blame_con(*pair(tmp_path, npu, bench))
    assert local_names(con) == ["Torch.other.0.forward.output.0"]
    assert verdicts(con)["Tensor.add_.0.forward.output.0"]["verdict"] == "inherited"


def test_a_backward_op_counts_its_forward_record_as_input(tmp_path: Path) -> None:
    def dump(w: float, grad_out: float) -> dict[str, Any]:
        return {
            "Functional.linear.0.forward": fwd(s(1), s(w), out=s(2 * w)),
            "Functional.linear.0.backward": bwd([s(7)], [s(grad_out), s(8)]),
        }
    # the weight differs: the forward output inherits it, the backward output too (its incoming
    # gradient is equal, but autograd saved the weight)
    con = blame_con(*pair(tmp_path / "w", dump(3.3, 9.9), dump(3, 9)))
    v = verdicts(con)
    assert local_names(con) == ["Functional.linear.0.forward.input.1"]
    assert v["Functional.linear.0.forward.input.1"]["role"] == "external input"
    assert v["Functional.linear.0.backward.output.0"]["verdict"] == "inherited"
    # only the backward output differs: it is the source
    con = blame_con(*pair(tmp_path / "b", dump(3, 9.9), dump(3, 9)))
    assert local_names(con) == ["Functional.linear.0.backward.output.0"]


def test_construct_json_nesting_explains_a_module_by_its_ops(tmp_path: Path) -> None:
    def dump(k: float) -> dict[str, Any]:
        return {
            "Functional.linear.0.forward": fwd(s(1), out=s(k)),
            "Module.fc.Linear.forward.0": fwd(s(1), out=s(k)),
        }
    construct = {"Functional.linear.0.forward": "Module.fc.Linear.forward.0",
                 "Module.fc.Linear.forward.0": None}
    n, b = pair(tmp_path, dump(2.5), dump(2), level="mix")
    # without the nesting the module's record is a second op whose inputs are equal
    assert local_names(blame_con(n, b)) == ["Functional.linear.0.forward.output.0",
                                            "Module.fc.Linear.forward.0.output.0"]
    (n.parent / "construct.json").write_text(json.dumps(construct))
    con = blame_con(n, b)
    assert local_names(con) == ["Functional.linear.0.forward.output.0"]
    assert verdicts(con)["Module.fc.Linear.forward.0.output.0"]["verdict"] == "inherited"


def test_blame_rows_give_each_input_its_edge(tmp_path: Path) -> None:
    """blame_tensors joins only the edges that say more than an external input's: each input
    row of blame_rows still has its edge's link and candidates (none without an edge)."""
    dump = {
        "Torch.a.0.forward": fwd(s(1), out=s(2)),
        "Functional.linear.0.forward": fwd(s(2), s(9), {"type": "int", "value": 3},
                                           s(1, [0]), out=s(3)),
        "Tensor.add_.0.forward": fwd(s(5), s(3), out=s(5)),  # in place: input.0 is its output
    }
    con = blame_con(*pair(tmp_path, dump))
    e, v = edges(con), verdicts(con)
    inputs = {name: row for name, row in v.items() if row["io"] == "input"}
    assert len(inputs) == 7
    for name, row in inputs.items():
        edge = e.get(name)
        assert (row["link"], row["candidates"]) == (
            (edge["how"], edge["candidates"]) if edge else ("constant" if row["role"] ==
                                                            "constant input" else "external", None)
        ), name
    assert [inputs[f"Functional.linear.0.forward.input.{i}"]["candidates"] for i in range(4)] == [
        1, 0, None, None]  # linked, external (a parameter), a constant, an empty tensor
    assert inputs["Functional.linear.0.forward.input.0"]["via"] == "Torch.a.0.forward.output.0"
    assert inputs["Tensor.add_.0.forward.input.0"]["role"] == "in-place input"
    assert inputs["Tensor.add_.0.forward.input.1"]["via"] == "Functional.linear.0.forward.output.0"
