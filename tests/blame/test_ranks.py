"""Blame across ranks: a collective's output is explained by the inputs of the same call on every
rank; the run's local sources are ranked worst first and the first one is named, with its rank."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from msq.blame.ranks import RankBlame, combine, write_json
from msq.blame.summary import BlameSummary, summarize
from tests.blame.test_links import s
from tests.blame.util import blame_con
from tests.dumps import fwd, write_dump


def rank_dump(a_out: float, reduced: float, b_out: float = 9) -> dict[str, Any]:
    # all_reduce is in place: msprobe records its input before and its output after the op
    return {
        "Torch.a.0.forward": fwd(s(1), out=s(a_out)),
        "Distributed.all_reduce.0.forward": fwd(s(a_out), out=s(reduced)),
        "Torch.b.0.forward": fwd(s(reduced), out=s(b_out)),
    }


def run(tmp: Path, npu: list[dict[str, Any]], bench: list[dict[str, Any]]) -> list[RankBlame]:
    parts = []
    for rank, (n, b) in enumerate(zip(npu, bench)):
        nj = write_dump(tmp / "npu" / "step0" / f"rank{rank}", n)
        bj = write_dump(tmp / "bench" / "step0" / f"rank{rank}", b)
        parts.append(RankBlame(rank, 0, summarize(blame_con(nj, bj))))
    return parts


def names(sources: list[dict[str, Any]]) -> list[tuple[int, str]]:
    return [(x["rank"], x["npu_name"]) for x in sources]


def test_an_error_that_arrives_through_a_collective_is_inherited(tmp_path: Path) -> None:
    bench = [rank_dump(2, 5), rank_dump(3, 5)]
    npu = [rank_dump(2, 5.5, 9.9), rank_dump(3.3, 5.5, 9.9)]  # rank 1's a.0 goes wrong
    parts = run(tmp_path, npu, bench)
    # on its own, rank 0's all_reduce output is not explained by rank 0's (equal) inputs
    r0 = next(c for c in parts[0].summary.collectives if c["role"] == "output")
    assert (r0["input_err"], r0["verdict"]) == (0.0, "inherited")
    assert r0["reason"].startswith("through the collective")
    result = combine(parts)
    assert names(result.sources) == [(1, "Torch.a.0.forward.output.0")]
    assert result.first is not None and result.first["rank"] == 1
    assert result.counts["local"] == 1


def test_a_collective_that_itself_goes_wrong_is_local_on_every_rank(tmp_path: Path) -> None:
    bench = [rank_dump(2, 5), rank_dump(3, 5)]
    npu = [rank_dump(2, 5.5, 9.9), rank_dump(3, 5.5, 9.9)]  # equal inputs everywhere
    result = combine(run(tmp_path, npu, bench))
    assert sorted(names(result.sources)) == [(0, "Distributed.all_reduce.0.forward.output.0"),
                                             (1, "Distributed.all_reduce.0.forward.output.0")]
    assert all(x["reason"].startswith("error enters in the collective") for x in result.sources)
    assert [x["blame_rank"] for x in result.sources] == [1, 2]
    assert result.first is not None and result.first["rank"] == 0


def test_one_rank_alone_cannot_blame_its_collective(tmp_path: Path) -> None:
    parts = run(tmp_path, [rank_dump(2, 5.5, 9.9)], [rank_dump(2, 5)])
    assert combine(parts).sources == []


def test_the_json_file_names_the_first_local_source(tmp_path: Path) -> None:
    bench = [rank_dump(2, 5), rank_dump(3, 5)]
    npu = [rank_dump(2, 5.5, 9.9), rank_dump(3.3, 5.5, 9.9)]
    path = write_json(combine(run(tmp_path / "d", npu, bench)), tmp_path / "blame.json")
    doc = json.loads(path.read_text())
    first = doc["first_local_source"]
    assert (first["rank"], first["step"], first["npu_name"]) == (1, 0, "Torch.a.0.forward.output.0")
    assert first["input_err"] == 0.0 and first["amplification"] is None  # inf is not JSON
    assert first["amplification_infinite"] is True
    assert math.isclose(first["output_err"], 0.3 / 3.3)  # the Max moved by 0.3 of 3.3
    assert doc["n_local_sources"] == 1 and doc["worst_local_source"] == first


def test_a_single_compare_is_ranked_as_the_history_view_ranks_it(tmp_path: Path) -> None:
    # one compare skips the DuckDB pass (nothing to weigh): the same rows, columns and order as
    # the view gives when it does run (here beside a second compare that adds nothing)
    bench = [{"Torch.a.0.forward": fwd(s(1), out=s(2)), "Torch.b.0.forward": fwd(s(2), out=s(4)),
              "Torch.c.0.forward": fwd(s(7), out=s(2)), "Torch.e.0.forward": fwd(s(5), out=s(2))}]
    # a.0 goes slightly wrong, b.0 amplifies it; c.0 and e.0 go equally wrong from equal inputs
    npu = [{"Torch.a.0.forward": fwd(s(1), out=s(2.001)),
            "Torch.b.0.forward": fwd(s(2.001), out=s(400)),
            "Torch.c.0.forward": fwd(s(7), out=s(2.5)), "Torch.e.0.forward": fwd(s(5), out=s(2.5))}]
    parts = run(tmp_path, npu, bench)
    one = combine(parts, "r")
    assert [x["npu_name"] for x in one.sources] == [
        "Torch.b.0.forward.output.0", "Torch.c.0.forward.output.0", "Torch.e.0.forward.output.0",
        "Torch.a.0.forward.output.0"]
    assert [x["blame_rank"] for x in one.sources] == [1, 2, 3, 4]
    assert one.sources[1]["amplification"] == math.inf
    weighed = combine([*parts, RankBlame(None, None, BlameSummary())], "r")
    assert one.sources == weighed.sources
    assert [list(x) for x in one.sources] == [list(x) for x in weighed.sources]


def test_the_rows_table_is_the_one_a_dict_a_row_gives(tmp_path: Path) -> None:
    """ranks._rows_table builds its columns directly: the same table (names, types, NULLs,
    each row once) as pa.Table.from_pylist of one dict a row."""
    import pyarrow as pa

    from msq.blame.ranks import _rows_table
    from msq.blame.summary import ROW_FIELDS

    bench = [rank_dump(2, 5), rank_dump(3, 5)]
    parts = run(tmp_path, [rank_dump(2, 5.5, 9.9), rank_dump(3, 5.5, 9.9)], bench)
    rows = []
    for compare_id, part in enumerate(parts, start=1):
        seen: set[int] = set()
        for row in part.summary.sources + part.summary.collectives:
            if row["out_seq"] not in seen:
                seen.add(row["out_seq"])
                rows.append({**{k: row.get(k) for k in ROW_FIELDS}, "compare_id": compare_id,
                             "run_id": "r", "floor_factor": part.summary.floor_factor,
                             "amp_limit": part.summary.amp_limit})
    assert _rows_table(parts, "r").equals(pa.Table.from_pylist(rows), check_metadata=True)
    assert _rows_table([], "r").num_rows == 0


def test_a_runs_first_worst_and_count_are_those_of_its_whole_list(tmp_path: Path) -> None:
    """combine answers first, worst, the top rows and the count from DuckDB and leaves the rows an
    Arrow table until ``sources`` is read: the same answers as the whole list gives (first: the
    earliest step, then op order, then rank; equal keys: the better ranked)."""
    from msq.blame.ranks import _first

    bench = [rank_dump(2, 5), rank_dump(3, 5)]
    parts: list[RankBlame] = []
    for step, npu in enumerate([[rank_dump(2, 5.5, 9.9), rank_dump(3, 5.5, 9.9)],
                                [rank_dump(2.2, 5.5, 9.9), rank_dump(3.3, 5.5, 9.9)]]):
        for part in run(tmp_path / str(step), npu, bench):
            parts.append(RankBlame(part.rank, step, part.summary))
    parts.reverse()  # not in step order: the first is found, not taken from the list's order
    result = combine(parts)
    assert result._rows is not None and not isinstance(result._rows, list)  # not built yet
    n, top, worst, first = result.n_sources, result.top(3), result.worst, result.first
    whole = result.sources
    assert n == len(whole) >= 4
    assert top == whole[:3] and worst == whole[0]
    assert first is not None and first == _first(whole)
    assert (first["step"], first["rank"]) == (0, 0)
    assert [x["blame_rank"] for x in whole] == list(range(1, n + 1))


def _row(out_seq: int, op_seq: int, output_err: float, input_err: float | None, *,
         collective: str = "", verdict: str = "local",
         reason: str = "error enters here: its inputs are equal") -> dict[str, Any]:
    op = f"Distributed.{collective}.0.forward" if collective else f"Torch.op{op_seq}.0.forward"
    return {"out_seq": out_seq, "op_seq": op_seq, "op_name": op,
            "npu_name": f"{op}.output.0", "io": "output", "role": "output",
            "direction": "forward", "is_module": False, "collective": bool(collective),
            "err_kind": "statistics", "input_err": input_err, "output_err": output_err,
            "floor": 1e-6, "floor_source": "dtype float32",
            "amplification": None if input_err is None else
            (output_err / input_err if input_err > 0 else math.inf if output_err > 0 else None),
            "verdict": verdict, "reason": reason, "link": "hash", "candidates": 1,
            "via": f"Torch.op{op_seq - 1}.0.forward.output.0", "band": 0.0}


def _synthetic_parts(seed: int) -> list[RankBlame]:
    """Compares of 3 ranks x 2 steps (and two of no step, one of no rank) whose local rows tie on
    their errors, ops and rows across compares, with infinite errors and amplifications, and
    an all_reduce whose outputs the other ranks' inputs explain on some ranks and not others."""
    import random

    rng = random.Random(seed)
    parts = []
    places: list[tuple[int | None, int | None]] = [(r, s) for s in (1, 0) for r in (2, 0, 1)]
    for rank, step in [*places, (3, None), (None, None)]:
        errs = [0.5, 0.25, math.inf, 1e-3, 0.5]
        rows = [_row(seq, rng.choice([1, 2, 3]), rng.choice(errs),
                     rng.choice([None, 0.0, 1e-4, math.inf, 0.1])) for seq in range(8)]
        through = "through the collective: the error comes from another rank"
        p2p = "recv" if (rank or 0) % 2 else "send"
        coll = [_row(20, 5, rng.choice([0.9, 2.0]), rng.choice([0.0, 0.01, 0.5, None]),
                     collective="all_reduce", verdict="inherited", reason=through),
                _row(21, 5, 0.3, 0.3, collective="all_reduce", verdict="clean",
                     reason="within the floor"),
                _row(22, 6, rng.choice([0.9, 2.0, math.inf]), rng.choice([0.0, 0.01, None]),
                     collective=p2p, verdict="inherited", reason=through),
                {**_row(23, 6, 0.5, None, collective=p2p, verdict="inherited", reason=through),
                 "role": "external input", "io": "input"}]
        rows.sort(key=lambda x: (-x["output_err"], x["op_seq"], x["out_seq"]))
        parts.append(RankBlame(rank, step, BlameSummary(
            counts={"local": len(rows), "inherited": 1, "clean": 1}, sources=rows,
            collectives=coll, floor_factor=10.0, amp_limit=2.0)))
    return parts


def test_the_run_pass_gives_the_views_local_rows_over_every_row() -> None:
    """combine weighs the collective ops' rows alone, as the view weighs them, and ranks the
    local rows itself: the same rows (values and types), ranks, first and counts as the
    history's view run over every row of the run (ties on error, step, op and rank; no rank or
    step; inf errors and amplifications; NULL input errors; all_reduce, recv and send calls made
    local or left)."""
    import pyarrow as pa

    from msq.blame.ranks import _part_of, _rows_table, _weigh, _weigh_collectives, _weigh_view

    for seed in range(6):
        parts = _synthetic_parts(seed)
        result = combine(parts, "r")
        table = _rows_table(parts, "r")
        assert not any(pa.types.is_null(f.type) for f in table.schema)  # not read stored
        assert _weigh(parts, "r") is not None  # the collectives alone through the view
        view, first_rank, moved = _weigh_view(parts, table)
        assert isinstance(result._rows, pa.Table)  # the Arrow table until sources is read
        assert [(f.name, f.type) for f in result._rows.schema] == \
            [(f.name, f.type) for f in view.schema]
        whole = result.sources
        want = view.sort_by("blame_rank")
        assert [list(x) for x in whole] == [list(x) for x in want.to_pylist()]
        assert repr(whole) == repr(want.to_pylist())
        assert result.first is not None and result.first["blame_rank"] == first_rank
        assert result.counts["local"] == sum(len(p.summary.sources) for p in parts) + moved
        assert 0 < moved < 2 * len(parts)  # some collectives' outputs moved, not all
        # weighed without DuckDB, but where a NaN needs DuckDB's order
        collectives = _rows_table([_part_of(p, collectives=True) for p in parts], "r")
        assert _weigh_collectives(parts, collectives) is not None
        nan = collectives.set_column(collectives.schema.get_field_index("input_err"),
                                     "input_err", pa.array([math.nan] * collectives.num_rows))
        assert _weigh_collectives(parts, nan) is None
