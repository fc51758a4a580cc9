"""A batch's ``tensors`` rows without the columns the readers give as copies of others
(msq.pipeline.load_batch, DERIVED_ROWS): its view of a table of the other columns
(TENSOR_ROWS, no generated column) holds exactly the rows and types the full load holds, and a
batch whose dumps break the equalities stores them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from msq import db, pipeline
from msq.config import Options, SingleInput
from msq.flatten import C_PADDING, Columns, all_text, same_column
from tests.dumps import fwd, t, write_dump
from tests.test_batch import model, noisy

pytestmark = pytest.mark.skipif(C_PADDING is None, reason="the C reader is not built")


def inputs(tmp_path: Path, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[SingleInput]:
    out = []
    for k, (npu, bench) in enumerate(pairs):
        n = write_dump(tmp_path / f"p{k}" / "npu", npu)
        b = write_dump(tmp_path / f"p{k}" / "bench", bench)
        out.append(SingleInput(n, b, None))
    return out


def loaded(inps: list[SingleInput], monkeypatch: pytest.MonkeyPatch, derive: bool | None,
           ) -> tuple[list[Any], list[Any], list[str]]:
    """The batch's ``tensors`` (its columns' names and types, its rows by side and row_seq)
    loaded by load_batch in a new compare database; ``derive``: forced off, every text stored
    as a text (False), or as load_batch decides (None). Also which columns the view makes (not
    stored)."""
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    if derive is False:
        monkeypatch.setattr(pipeline, "derived_columns", lambda pairs: [])
        monkeypatch.setattr(pipeline, "CODED_ROWS", {})
        monkeypatch.setattr(pipeline, "CODED_DTYPE", {})
    con = db.connect()
    db.run_schema(con)
    pipeline.load_batch(con, pairs)
    monkeypatch.undo()
    shown = con.execute("SELECT column_name, data_type FROM duckdb_columns() "
                        "WHERE table_name = 'tensors' ORDER BY column_index").fetchall()
    # the columns the view shows as their ENUMs (pipeline.ENUM_SHOWN) where they are stored so:
    # their values the texts, their type the schema's otherwise
    enums = {name: ty for name, ty in shown if ty.startswith("ENUM(")}
    assert set(enums) == (set() if derive is False else set(pipeline.ENUM_SHOWN))
    types = [(name, "VARCHAR" if name in enums else ty) for name, ty in shown]
    rows = con.execute("SELECT * FROM tensors ORDER BY side::VARCHAR, row_seq").fetchall()
    made = [name for (name,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'tensors' AND column_name "
        f"NOT IN (SELECT column_name FROM duckdb_columns() WHERE table_name = "
        f"'{pipeline.TENSOR_ROWS}') ORDER BY column_index").fetchall()]
    # a view of a table of stored columns alone: DuckDB checks a table's generated columns
    # again for every chunk it inserts
    assert con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name IN "
                       f"('tensors', '{pipeline.TENSOR_ROWS}')").fetchall() == \
        [(pipeline.TENSOR_ROWS,)]
    assert con.execute("SELECT count(*) FILTER (is_generated) FROM duckdb_columns()").fetchone() \
        == (0,)
    con.close()
    return types, rows, made


def test_a_batch_stores_its_few_valued_texts_as_enums(tmp_path):
    """side, io and the statistics' kinds are stored as the schema's ENUMs (CODED_ROWS: a byte
    appended, not a text), shown by ``tensors`` as the texts they were."""
    base = model(1, ops=6)
    inps = inputs(tmp_path, [(base, noisy(base, 2, 0.1))])
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    con = db.connect()
    db.run_schema(con)
    pipeline.load_batch(con, pairs)
    stored = dict(con.execute("SELECT column_name, data_type FROM duckdb_columns() "
                              f"WHERE table_name = '{pipeline.TENSOR_ROWS}'").fetchall())
    assert {name: stored[name] for name in ("side", "io", "max_kind", "mean_kind")} == {
        "side": "ENUM('npu', 'bench')", "io": "ENUM('input', 'output')",
        "max_kind": "ENUM('n', 'b', 'i', 'f', 's')", "mean_kind": "ENUM('n', 'b', 'i', 'f', 's')"}
    assert sorted(con.execute("SELECT DISTINCT side, io, disp_io, max_kind, min_kind "
                              "FROM tensors").fetchall()) == [
        ("bench", "input", "input", "f", "f"), ("bench", "output", "output", "f", "f"),
        ("npu", "input", "input", "f", "f"), ("npu", "output", "output", "f", "f")]
    con.close()


@pytest.mark.parametrize("column, value, other", [("side", "npu", "bench"),
                                                   ("io", "input", "output")])
def test_a_batchs_tensors_view_compares_side_and_io_as_their_enums(tmp_path, column, value,
                                                                   other):
    """``tensors`` shows side and io as their ENUMs (pipeline.ENUM_SHOWN), so that a reader's
    filter of a side (``side = 'npu'``) or of an io (blame's ``io = 'input'``) compares the ENUM
    with the constant cast once, pushed into the scan of the stored rows, not each row's ENUM
    cast to a text; its rows are each value's."""
    base = model(1, ops=6)
    inps = inputs(tmp_path, [(base, noisy(base, 2, 0.1))])
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    con = db.connect()
    db.run_schema(con)
    pipeline.load_batch(con, pairs)
    plan = "\n".join(row[1] for row in con.execute(
        f"EXPLAIN SELECT row_seq FROM tensors WHERE {column} = '{value}'").fetchall())
    assert "CAST" not in plan and f"{column}='{value}'" in plan.replace(" ", "")
    counts = dict(con.execute(f"SELECT {column}::VARCHAR, count(*) FROM tensors "
                              "GROUP BY ALL").fetchall())
    assert counts[value] + counts[other] == con.execute(
        f"SELECT count(*) FROM {pipeline.TENSOR_ROWS}").fetchone()[0]
    assert con.execute(f"SELECT count(*) FROM tensors WHERE {column} = '{value}'"
                       ).fetchone()[0] == counts[value] > 0
    con.close()


@pytest.mark.parametrize("dtype", ["torch.float16", "torch.float8_e4m3fn"])
def test_a_batch_stores_its_dtypes_as_an_enum_where_it_holds_them(tmp_path, monkeypatch, dtype):
    """dtype is stored as the schema's ENUM row_dtype (CODED_DTYPE) where it holds every dtype
    of the batch, else as a text (the INSERT refused, made again): the rows and types of a load
    of every column as texts either way."""
    base = model(1, ops=6)
    other = copy.deepcopy(base)
    other["Functional.relu.0.forward"]["output"][0]["dtype"] = dtype
    inps = inputs(tmp_path, [(with_kwargs(base), with_kwargs(noisy(base, 2, 0.1))),
                             (with_kwargs(other), with_kwargs(base))])
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    con = db.connect()
    db.run_schema(con)
    pipeline.load_batch(con, pairs)
    (stored,) = con.execute("SELECT data_type FROM duckdb_columns() WHERE table_name = "
                            f"'{pipeline.TENSOR_ROWS}' AND column_name = 'dtype'").fetchone()
    assert con.execute("SELECT count(*) FROM tensors WHERE dtype = ?", [dtype]).fetchone() == (1,)
    con.close()
    assert stored.startswith("ENUM('torch.float32'") if dtype == "torch.float16" \
        else stored == "VARCHAR"
    assert loaded(inps, monkeypatch, None)[:2] == loaded(inps, monkeypatch, False)[:2]


def with_kwargs(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with an op of keyword arguments (a tensor and a number) last."""
    return {**data, "Functional.linear.9.forward": fwd(t(), out=t(), weight=t(), alpha={"type": "int", "value": 2})}


def test_a_statistics_batch_generates_its_copies_as_the_same_rows(tmp_path, monkeypatch):
    base = model(1, ops=12)
    inps = inputs(tmp_path, [(with_kwargs(base), with_kwargs(noisy(base, 2, 0.1))),
                             (with_kwargs(model(3, ops=12)), base)])
    types, rows, made = loaded(inps, monkeypatch, None)
    assert sorted(made) == sorted(["disp_name", "match_name", "disp_io", "md5", "data_name",
                                   "min_kind", "norm_kind", "min_str", "mean_str", "norm_str"])
    want_types, want_rows, want_made = loaded(inps, monkeypatch, False)
    assert want_made == []
    assert types == want_types
    assert {ty for name, ty in types if name in pipeline.CODED_ROWS} == {"VARCHAR"}
    assert len(rows) == len(want_rows) > 100
    assert rows == want_rows
    names = [name for name, _ in types]
    # the keyword arguments' rows are there, named as the readers name them, the int argument's
    # statistics texts its value in all four
    alpha = [row for row in rows if ".forward.input.alpha" in row[names.index("match_name")]]
    assert alpha and all([row[names.index(f"{s}_str")] for s in ("max", "min", "mean", "norm")]
                         == ["2"] * 4 for row in alpha)


#: what each change of test_a_batch_whose_rows_differ_from_their_copies_stores them leaves stored
STORED = {"data_name": ["data_name"], "null_data_name": [],
          "int_statistics": ["min_str", "mean_str", "norm_str"], "no_norm": ["norm_kind"],
          "text_min": ["min_kind", "min_str"]}


@pytest.mark.parametrize("change", list(STORED))
def test_a_batch_whose_rows_differ_from_their_copies_stores_them(tmp_path, monkeypatch, change):
    """A column of DERIVED_ROWS that one row of one side has other than its source is stored
    (the others still generated): the rows and types of the full load."""
    base = model(1, ops=12)
    other = copy.deepcopy(base)
    entry = other["Functional.relu.0.forward"]["output"][0]
    if change == "data_name":
        entry["data_name"] = "Functional.relu.0.forward.output.0.pt"
    elif change == "null_data_name":
        entry["data_name"] = None  # a null data_name reads as "-1"
    elif change == "int_statistics":  # an int tensor's: Max 5, Min 0 as ints (texts), Mean 2.5
        entry.update({"dtype": "torch.int64", "Max": 5, "Min": 0, "Mean": 2.5, "Norm": 9.0})
    elif change == "no_norm":
        entry["Norm"] = None
    else:  # a Min that is a text where Max is a number
        entry["Min"] = "-inf"
    inps = inputs(tmp_path, [(base, base), (other, base)])
    types, rows, made = loaded(inps, monkeypatch, None)
    want = loaded(inps, monkeypatch, False)
    assert sorted(made) == sorted(c for c in pipeline.DERIVED_ROWS if c not in STORED[change])
    assert (types, rows) == want[:2]


def text_column(values: list[str]) -> Any:
    """A text column as the C reader gives it (a Columns' record batch column)."""
    import pyarrow as pa

    from msq.flatten import _c

    assert _c is not None
    arr = pa.array(values, pa.string())
    _, offsets, data = arr.buffers()
    return ("x", "str", len(values), 0, None, data.to_pybytes() if data else b"",
            offsets.to_pybytes()[: 4 * (len(values) + 1)])


def test_same_column_and_all_text_read_every_byte():
    a = text_column(["ab", "c", "-1"])
    assert same_column(a, text_column(["ab", "c", "-1"]))
    assert not same_column(a, text_column(["ab", "c", "-2"]))
    assert not same_column(a, text_column(["a", "bc", "-1"]))  # same bytes, other offsets
    assert all_text(text_column(["-1"] * 5), "-1")
    assert not all_text(text_column(["-1-1", "", "-1", "-1", "-1"]), "-1")
    assert not all_text(text_column(["-1", "-1", "-1", "-1", "-2"]), "-1")
    assert not all_text(text_column(["-1", "-1"]), "-")
    assert isinstance(Columns([[a]]).batches[0][0], tuple)


def test_rows_and_windows_give_write_windows_rows(tmp_path):
    """A batch's compare_rows and hl_windows made at once (msq.pipeline.rows_and_windows): the
    rows of row_pairs and of msq.highlight.write_windows' joins, row for row, and compare_rows
    left with the schema's columns."""
    from msq.highlight import write_windows
    from msq.opening import rules_variant, unused_views

    base = model(1, ops=12)
    inps = inputs(tmp_path, [(with_kwargs(base), with_kwargs(noisy(base, 2, 0.1))),
                             (with_kwargs(model(3, ops=12)), base)])
    opts = Options(workers=1)
    mode, pairs = pipeline.read_batch(inps, opts)
    got = []
    for together in (True, False):
        con = db.connect()
        db.run_schema(con)
        columns = con.execute("DESCRIBE compare_rows").fetchall()
        con.execute("INSERT INTO settings VALUES (?, false, false, false, false, false, false)",
                    [mode])
        pipeline.load_batch(con, pairs)
        db.load_views(con, variants=[mode, rules_variant(opts)], skip=unused_views(opts))
        con.execute(f"CREATE OR REPLACE VIEW op_keys AS {pipeline.READER_OP_KEYS}")
        pipeline.batch_op_pairs(con, False)
        if together:
            pipeline.rows_and_windows(con)
        else:
            con.execute("INSERT INTO compare_rows " + pipeline.row_pairs_select())
            write_windows(con, False)
        assert con.execute("DESCRIBE compare_rows").fetchall() == columns
        got.append([con.execute(f"SELECT * FROM {t} ORDER BY out_seq").fetchall()
                    for t in ("compare_rows", "hl_windows")])
        con.close()
    assert got[0] == got[1]
    rows, windows = got[0]
    assert len(rows) == len(windows) > 100
    assert {w[2] for w in windows} == {True, False}  # inputs and outputs
    assert {r[4] for r in rows} >= {"matched", "npu_only"}


def test_distinct_texts_tells_keys_apart():
    """msq/_flatten.c distinct_texts (msq.pipeline.unique_op_keys): False exactly when two rows
    counted above 0 hold one text (or one holds NULL), whatever rows not counted hold; texts
    that differ in one byte anywhere, in length alone or by a trailing zero byte are apart."""
    import random

    import pyarrow as pa

    from msq.flatten import distinct_texts

    rng = random.Random(7)
    base = "Functional.linear.3.forward.input.0\x1fFunctional.linear.3.forward.output.0"
    texts = ["", "\x00", "\x00\x00", "a", "a\x00", "-"]
    texts += [base[:n] for n in range(0, len(base), 3)]
    texts += [base[:k] + chr(ord(base[k]) ^ 1) + base[k + 1:] for k in range(len(base))]
    seen_both = set()
    for trial in range(300):
        values = rng.sample(texts, rng.randrange(1, 40))
        if trial % 3 == 0:  # a text twice
            values.append(rng.choice(values))
        if trial % 7 == 0:
            values.append(None)
        rng.shuffle(values)
        counts = [rng.choice([0, 1, 2, 5]) if trial % 2 else 1 for _ in values]
        counted = [v for v, c in zip(values, counts, strict=True) if c > 0]
        want = None not in counted and len(set(counted)) == len(counted)
        arr = pa.array(values, pa.string())
        valid, offsets, data = arr.buffers()
        col = ("row_key", "str", len(arr), arr.null_count,
               valid.to_pybytes() if valid is not None else None,
               data.to_pybytes() if data else b"", offsets.to_pybytes()[: 4 * (len(arr) + 1)])
        n = pa.array(counts, pa.int32())
        count_col = ("n_rows", "i32", len(n), 0, None, n.buffers()[1].to_pybytes(), None)
        assert distinct_texts(col, count_col) is want, (values, counts)
        seen_both.add(want)
    assert seen_both == {True, False}


@pytest.mark.parametrize("bad", ["kind", "count_kind", "decreasing", "past_the_data",
                                 "short_offsets", "short_validity", "rows"])
def test_distinct_texts_refuses_columns_that_do_not_agree(bad):
    from msq.flatten import _c

    assert _c is not None
    ok = text_column(["ab", "c", "-1"])
    counts = ("n", "i32", 3, 0, None, b"\1\0\0\0" * 3, None)
    col: Any = {
        "kind": ok[:1] + ("i32",) + ok[2:],
        "count_kind": ok,
        "decreasing": ok[:6] + (b"\0\0\0\0\3\0\0\0\2\0\0\0\5\0\0\0",),
        "past_the_data": ok[:6] + (b"\0\0\0\0\2\0\0\0\3\0\0\0\6\0\0\0",),
        "short_offsets": ok[:6] + (ok[6][:12],),
        "short_validity": ok[:3] + (1, b"", ok[5], ok[6]),
        "rows": ok[:2] + (4,) + ok[3:],
    }[bad]
    with pytest.raises((ValueError, TypeError)):
        if bad == "count_kind":
            _c.distinct_texts(ok, col)
        else:
            _c.distinct_texts(col, counts)
    assert _c.distinct_texts(ok, counts) is True


def test_a_batch_pairs_ops_of_one_key_on_a_side_by_their_order(tmp_path):
    """Two ops of one side with one key (their rows' names alike: "A.forward.input"
    positional, "A.forward" keyword "input") make op_pairs' keyed count them (unique_op_keys
    False): the batch pairs each with its bench op of the same place, as each pair alone does;
    were they taken as unique, both would pair with both."""
    from msq.opening import rules_variant, unused_views

    dup = {"A.forward.input": fwd(t(), out=[]), "A.forward": fwd(out=[], input=t()),
           **model(1, ops=4)}
    inps = inputs(tmp_path, [(dup, dup), (model(2, ops=4), model(2, ops=4))])
    opts = Options(workers=1)
    mode, pairs = pipeline.read_batch(inps, opts)
    assert not pipeline.unique_op_keys(pairs)
    assert pipeline.unique_op_keys(pairs[1:])
    got = {}
    for unique in (False, True):
        con = db.connect()
        db.run_schema(con)
        con.execute("INSERT INTO settings VALUES (?, false, false, false, false, false, false)",
                    [mode])
        pipeline.load_batch(con, pairs)
        db.load_views(con, variants=[mode, rules_variant(opts)], skip=unused_views(opts))
        con.execute(f"CREATE OR REPLACE VIEW op_keys AS {pipeline.READER_OP_KEYS}")
        assert con.execute("SELECT count(*) - count(DISTINCT (side, pair, match_key)) "
                           "FROM op_keys").fetchone() == (2,)
        pipeline.batch_op_pairs(con, unique)
        got[unique] = con.execute("SELECT npu_op, bench_op, how FROM op_pairs "
                                  "ORDER BY ord").fetchall()
        con.close()
    # as counted: op 0 with op 0, op 1 with op 1 (each pair its own order)
    assert (0, 0, "matched") in got[False] and (1, 1, "matched") in got[False]
    assert (0, 1, "matched") not in got[False]
    assert got[True] != got[False]  # taken as unique: wrong


def test_coded_text_is_the_cast():
    """coded_text: each ENUM's values (those given as constants and the others), NULL and a
    text the ENUM does not hold come out as the cast alone gives them (the last refused)."""
    import duckdb

    con = db.connect()
    db.run_schema(con)
    for enum in sorted(set(pipeline.CODED_ROWS.values()) | set(pipeline.CODED_DTYPE.values())):
        values = [v for (v,) in con.execute(f"SELECT unnest(enum_range(NULL::{enum}))").fetchall()]
        assert set(pipeline.ENUM_VALUES[enum]) <= set(values)
        texts = [*values, None]
        got = con.execute(f"SELECT list({pipeline.coded_text('x', enum)} ORDER BY k), "
                          f"list(x::{enum} ORDER BY k), any_value(typeof({pipeline.coded_text('x', enum)})) "
                          "FROM (SELECT unnest(?::VARCHAR[]) AS x, generate_subscripts(?::VARCHAR[], 1) AS k)",
                          [texts, texts]).fetchone()
        assert got[0] == got[1] == texts
        assert got[2] == f"ENUM({', '.join(db.quote_str(v) for v in values)})"
        with pytest.raises(duckdb.ConversionException):
            con.execute(f"SELECT {pipeline.coded_text('x', enum)} FROM (SELECT 'torch.none' AS x)")
    con.close()


def test_coded_column_numbers_each_text_by_its_place():
    """msq.flatten.coded_column (msq/_flatten.c text_codes): a row's code is its text's place
    among the values, a NULL row stays NULL, the mask holds the places found; None where a text
    is none of the values (one a byte off, a prefix, a longer one, an empty one)."""
    import pyarrow as pa

    from msq.flatten import coded_column

    values = ["torch.float32", "<class 'int'>", "input", "b", "torch.bfloat16"]
    texts = ["input", "input", None, "torch.float32", "b", "torch.bfloat16", "<class 'int'>",
             None, "input"]
    arr = pa.array(texts, pa.string())
    valid, offsets, data = arr.buffers()
    assert valid is not None
    col = ("dtype", "str", len(arr), arr.null_count, valid.to_pybytes(), data.to_pybytes(),
           offsets.to_pybytes()[: 4 * (len(arr) + 1)])
    got = coded_column(col, values)
    assert got is not None
    codes, seen = got
    assert codes[:5] == ("dtype", "u8", len(texts), 2, col[4])
    assert [c if t is not None else None for c, t in zip(codes[5], texts, strict=True)] == \
        [values.index(t) if t is not None else None for t in texts]
    assert seen == 0b11111
    assert coded_column(text_column(["input", "input"]), values) == \
        (("x", "u8", 2, 0, None, b"\2\2", None), 0b100)
    for odd in ["torch.float31", "torch.float3", "torch.float322", "", "inpuT", "c"]:
        assert coded_column(text_column(["input", odd, "b"]), values) is None, odd
    assert coded_column(("x", "i32", 1, 0, None, b"\0\0\0\0", None), values) is None


def test_a_batch_hands_its_enum_columns_over_as_codes(tmp_path, monkeypatch):
    """load_batch hands DuckDB the ENUM columns of a batch of C-read statistics dumps as a byte
    a row (batch_codes), made ENUMs by code_case: the same rows and types as the texts cast
    (a batch with NULL dtypes, several dtypes and every statistics kind but a text); a dtype the
    ENUM does not hold leaves dtype a text column, the others still codes."""
    plain = model(1, ops=8)
    base = with_kwargs(plain)
    other = copy.deepcopy(base)
    other["Functional.relu.0.forward"]["output"][0].update(
        {"dtype": "torch.int64", "Max": 5, "Min": 0, "Mean": 2.5, "Norm": None})
    other["Functional.none.9.forward"] = fwd(None, {"type": "bool", "value": True},
                                             out=t(dtype="torch.float16"))
    inps = inputs(tmp_path, [(base, with_kwargs(noisy(plain, 2, 0.1))), (other, base)])
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    con = db.connect()
    db.run_schema(con)
    coded = {c: e for c, e in {**pipeline.CODED_ROWS, **pipeline.CODED_DTYPE}.items()
             if c not in pipeline.derived_columns(pairs)}
    _, by_code = pipeline.batch_codes(con, pairs, coded)
    con.close()
    assert sorted(by_code) == ["dtype", "io", "max_kind", "mean_kind", "norm_kind", "side"]
    assert "WHEN" in by_code["dtype"] and "ELSE" not in by_code["dtype"]  # NULL dtypes
    got = loaded(inps, monkeypatch, None)
    monkeypatch.setattr(pipeline, "batch_codes", lambda con, pairs, coded: (
        [pipeline.concat_columns([p.npu.rows, p.bench.rows]) for p in pairs], {}))
    assert got[:2] == loaded(inps, monkeypatch, None)[:2]
    assert got[:2] == loaded(inps, monkeypatch, False)[:2]
    nulls = [row for row in got[1] if row[[n for n, _ in got[0]].index("dtype")] is None]
    assert nulls

    odd = copy.deepcopy(other)
    odd["Functional.relu.0.forward"]["output"][0]["dtype"] = "torch.float8_e4m3fn"
    inps = inputs(tmp_path / "odd", [(base, base), (odd, base)])
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    con = db.connect()
    db.run_schema(con)
    _, by_code = pipeline.batch_codes(con, pairs, coded)
    con.close()
    assert "dtype" not in by_code and "io" in by_code
    assert loaded(inps, monkeypatch, None)[:2] == loaded(inps, monkeypatch, False)[:2]


def test_code_case_gives_each_code_its_value():
    """code_case: every code held its ENUM's value, NULL as NULL; one code without NULLs a
    constant, the last code without NULLs the ELSE."""
    con = db.connect()
    db.run_schema(con)
    values = pipeline.code_values(con, "row_dtype")
    assert values[:4] == pipeline.ENUM_VALUES["row_dtype"] and len(set(values)) == len(values)
    for seen, codes in [(0b1, [0]), (0b101, [0, 2, 2, 0]), (0b1 << 18 | 0b10, [1, 18]),
                        ((1 << len(values)) - 1, list(range(len(values))))]:
        for nulls in (False, True):
            expr = pipeline.code_case("c", "row_dtype", values, seen, nulls)
            rows = [*codes, None] if nulls else codes
            got = con.execute(f"SELECT list({expr} ORDER BY k) FROM (SELECT unnest(?::UTINYINT[]) "
                              "AS c, generate_subscripts(?::UTINYINT[], 1) AS k)",
                              [rows, rows]).fetchone()[0]
            assert got == [values[c] if c is not None else None for c in rows], (seen, nulls)
    assert pipeline.code_case("c", "row_side", ("npu", "bench"), 0b1, False) == "'npu'::row_side"
    assert pipeline.code_case("c", "row_side", ("npu", "bench"), 0, True) == "NULL::row_side"
    con.close()


def test_coded_column_tells_texts_apart_by_every_byte():
    """text_codes' compare (loads from both ends of a text, by its length): a text of 1 to 20
    bytes with any one byte changed, or one byte longer or shorter, is not the value."""
    from msq.flatten import coded_column

    for n in range(1, 21):
        value = "".join(chr(ord("a") + k % 26) for k in range(n))
        assert coded_column(text_column([value] * 3), [value]) == \
            (("x", "u8", 3, 0, None, b"\0\0\0", None), 1)
        others = [value[:k] + "#" + value[k + 1:] for k in range(n)] + [value + "a", value[:-1]]
        for other in others:
            assert coded_column(text_column([value, other]), [value]) is None, (value, other)


@pytest.mark.parametrize("bad", ["decreasing", "past_the_data", "negative", "short_offsets",
                                 "short_validity", "kind"])
def test_coded_column_refuses_columns_that_do_not_agree(bad):
    """text_codes reads a column's offsets unchecked only after checking them all: a column
    whose offsets go down, past its data or below 0, or whose buffers are short, is refused
    (ValueError), not read out of its bounds."""
    from msq.flatten import _c

    assert _c is not None
    ok = text_column(["ab", "c", "ab"])
    col: Any = {
        "decreasing": ok[:6] + (b"\0\0\0\0\3\0\0\0\2\0\0\0\5\0\0\0",),
        "past_the_data": ok[:6] + (b"\0\0\0\0\2\0\0\0\3\0\0\0\6\0\0\0",),
        "negative": ok[:6] + (b"\xff\xff\xff\xff\2\0\0\0\3\0\0\0\5\0\0\0",),
        "short_offsets": ok[:6] + (ok[6][:12],),
        "short_validity": ok[:3] + (1, b"", ok[5], ok[6]),
        "kind": ok[:1] + ("i32",) + ok[2:6] + (None,),
    }[bad]
    with pytest.raises(ValueError):
        _c.text_codes(col, (b"ab", b"c"))
    assert _c.text_codes(ok, (b"ab", b"c")) == (b"\0\1\0", 0b11)


def _reader_and_text_codes(side: Any, con: Any) -> list[tuple[str, Any, Any]]:
    """Each coded column of a C-read side: (name, reader_codes' column and places, coded_column's)."""
    from msq.flatten import coded_column

    enums = {**pipeline.CODED_ROWS, **pipeline.CODED_DTYPE}
    out = []
    for batch, written in zip(side.rows.batches, side.rows.codes, strict=True):
        by_name = {c[0]: c for c in batch}
        for name, coded in written.items():
            values = pipeline.code_values(con, enums[name])
            out.append((name, pipeline.reader_codes(coded, by_name[name], values),
                        coded_column(by_name[name], values)))
    return out


def _valid_codes(col: Any) -> list[int | None]:
    codes = bytes(memoryview(col[5]))
    valid = bytes(memoryview(col[4])) if col[4] is not None else None
    return [codes[r] if valid is None or valid[r >> 3] >> (r & 7) & 1 else None
            for r in range(col[2])]


@pytest.mark.parametrize("compat", [False, True])
def test_the_reader_writes_the_codes_text_codes_finds(tmp_path, compat):
    """The C reader gives io, disp_io, Max's and Mean's kinds and dtype as codes too, made from its own
    columns as it returns them (msq/_flatten.c codes_dict), and the side as one code
    (msq.loader): mapped to the
    ENUMs' places (pipeline.reader_codes), the codes and places text_codes finds in the texts
    after the read, row for row (NULL rows apart), in dumps of every kind of row, NULL dtypes,
    more dtypes than the ENUM's common ones and backward ops; a dtype the ENUM does not hold
    refuses the column, as text_codes does."""
    from msq.loader import read_side

    data = with_kwargs(model(2, ops=10))
    data["Functional.none.9.forward"] = fwd(None, {"type": "bool", "value": True},
                                            {"type": "torch.Size", "value": [2, 3]},
                                            {"type": "slice", "value": [1, 2, None]},
                                            out=t(dtype="torch.int64"))
    data["Functional.s.0.forward"] = fwd({"type": "str", "value": "x"}, out=t(dtype="torch.bool"))
    data["Module.a.0.backward"] = {"input": [t(dtype="torch.bfloat16")], "output": [t()]}
    odd = copy.deepcopy(data)
    odd["Functional.none.9.forward"]["output"][0]["dtype"] = "torch.float8_e4m3fn"
    con = db.connect()
    db.run_schema(con)
    for k, dump in enumerate([data, odd]):
        side = read_side("npu", write_dump(tmp_path / f"d{k}", dump), compat)
        found = _reader_and_text_codes(side, con)
        names = {name for name, _, _ in found}
        assert {"io", "max_kind", "mean_kind", "dtype", "side"} <= names
        for name, mine, theirs in found:
            assert (mine is None) == (theirs is None), name
            if mine is not None:
                assert mine[1] == theirs[1] and mine[0][:5] == theirs[0][:5], name
                assert _valid_codes(mine[0]) == _valid_codes(theirs[0]), name
        assert [m is None for n, m, _ in found if n == "dtype"] == [k == 1]
    con.close()


def test_a_dump_of_more_dtypes_than_the_reader_codes_has_none(tmp_path):
    """Past 64 distinct dtypes the C reader gives no dtype codes (text_codes then decides);
    the other columns' codes stay."""
    from msq.loader import read_side

    data = {f"Functional.f{i}.0.forward": fwd(t(dtype=f"torch.x{i}")) for i in range(70)}
    side = read_side("npu", write_dump(tmp_path, data), False)
    (written,) = side.rows.codes
    assert "dtype" not in written and "io" in written and "max_kind" in written


class _Statements:
    """A compare database's connection that keeps the text of every statement it runs."""

    def __init__(self, con: Any) -> None:
        self.con, self.texts = con, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)

    def execute(self, sql: str, *args: Any) -> Any:
        self.texts.append(sql)
        return self.con.execute(sql, *args)


def test_a_batch_binds_its_tensors_codes_once_for_every_pair(tmp_path):
    """load_batch's INSERT of the tensors rows makes each coded column's ENUM (CODED_ROWS) once
    over the pairs' UNION ALL, not in each pair's SELECT (DuckDB binds each branch's CASEs anew:
    ~9 M instructions a pair), and gives the rows each pair's load gives alone."""
    base = model(1, ops=6)
    inps = inputs(tmp_path, [(base, noisy(base, k, 0.1)) for k in (2, 3, 4)])
    _, pairs = pipeline.read_batch(inps, Options(workers=1))
    con = _Statements(db.connect())
    db.run_schema(con.con)
    pipeline.load_batch(con, pairs)  # type: ignore[arg-type]
    (insert,) = [sql for sql in con.texts
                 if sql.startswith(f"INSERT INTO {pipeline.TENSOR_ROWS}")]
    head, union = insert.split(" FROM (", 1)
    assert union.count(" UNION ALL ") == 2
    for enum in ("row_side", "row_io", "stat_kind"):
        assert f"::{enum}" in head and f"::{enum}" not in union
    batch = con.execute(f"SELECT * EXCLUDE (pair, op_seq, row_seq) FROM {pipeline.TENSOR_ROWS} "
                        "ORDER BY pair, row_seq").fetchall()
    con.close()
    alone = []
    for inp in inps:  # each pair loaded alone (place 0), in order
        _, (part,) = pipeline.read_batch([inp], Options(workers=1))
        single = db.connect()
        db.run_schema(single)
        pipeline.load_batch(single, [part])
        alone += single.execute(f"SELECT * EXCLUDE (pair, op_seq, row_seq) FROM "
                                f"{pipeline.TENSOR_ROWS} ORDER BY row_seq").fetchall()
        single.close()
    assert batch == alone and len(batch) > 0


@pytest.mark.parametrize("names", [
    ["Functional.conv2d.0.forward.input.0", None, "Tensor.add.1.backward.output.0"],
    ["Torch.matmul.2.forward.output.0", "Functional.relu.0.forward.output.0",
     "Functional.layer_norm.1.backward.input.0"]])
def test_a_batchs_findings_are_the_advisor_files_of_each_pair(names):
    """batch_findings gives each pair of a batch (one statement for all) the row
    sql/compare/reports/advisor_finding.sql gives over that pair's own first failing row (its
    line, name and advice; a NULL name too), and the file's 'NA' row to a pair of none."""
    con = db.connect()
    body = db.sql_file("compare/reports/advisor_finding.sql").body
    first = {k: (10 * k + 3, name) for k, name in enumerate(names)}
    expected = {}
    for k in [*first, len(names)]:  # the last pair: no failing row
        seq, name = first.get(k, (0, None))
        expected[k] = con.execute(
            "WITH failing_rows AS (SELECT ?::BIGINT AS out_seq, ?::VARCHAR AS name WHERE ?) "
            f"SELECT * FROM (\n{body}\n)", [seq, name, k in first]).fetchall()[0]
    assert pipeline.batch_findings(con, list(expected), first) == expected
    assert expected[len(names)][0] == "NA"
    con.close()


#: each pair's ord and out_seq ranges by joins: each op pair with the pair whose op range holds
#: its op (``b``: (pair, first op, last op)), each compare row with its op pair
_PLACED_BY_JOIN = (
    "WITH b(k, lo, hi) AS (VALUES {values}), "
    "o AS (SELECT b.k, p.ord FROM op_pairs p JOIN b "
    "      ON coalesce(p.npu_op, p.bench_op) BETWEEN b.lo AND b.hi) "
    "SELECT o.k, min(o.ord), max(o.ord), min(r.out_seq), max(r.out_seq), "
    "  count(r.out_seq) FILTER (r.kind <> 'matched') "
    "FROM o LEFT JOIN compare_rows r USING (ord) GROUP BY o.k ORDER BY o.k")


@pytest.mark.parametrize("rowless", [False, True])
def test_a_batchs_pairs_are_placed_by_their_op_pairs_pair_as_by_the_joins(tmp_path, rowless):
    """place_pairs finds each pair's ord range by the pair column a batch's op_pairs holds
    (pipeline.BATCH_PAIR_COLUMNS) and its out_seq range by its first and last ords' compare
    rows (or, where one has none, ``rowless``, by a CASE of the ord ranges), no join, and gives
    each pair its compare rows of another kind than matched (pipeline.unmatched_rows): the
    ranges and rows the joins of every op pair with the range of its pair's ops and every
    compare row with its op pair give; each pair's view of op_pairs has no pair column, as a
    single compare's table."""
    base = model(1, ops=8)
    short = dict(list(base.items())[:-3])  # a pair whose sides differ in length
    inps = inputs(tmp_path, [(base, noisy(base, 2, 0.1)), (short, base), (base, short)])
    from msq.opening import rules_variant, unused_views

    opts = Options(workers=1)
    mode, pairs = pipeline.read_batch(inps, opts)
    con = _Statements(db.connect())
    db.run_schema(con.con)
    con.execute("INSERT INTO settings VALUES (?, false, false, false, false, false, false)",
                [mode])
    pipeline.load_batch(con, pairs)  # type: ignore[arg-type]
    db.load_views(con.con, variants=[mode, rules_variant(opts)], skip=unused_views(opts))
    con.execute(f"CREATE OR REPLACE VIEW op_keys AS {pipeline.READER_OP_KEYS}")
    pipeline.batch_op_pairs(con, False)  # type: ignore[arg-type]
    pipeline.rows_and_windows(con)  # type: ignore[arg-type]
    if rowless:  # the second pair's first op pair without compare rows
        con.execute("DELETE FROM compare_rows WHERE ord = (SELECT min(ord) FROM op_pairs "
                    "WHERE pair = 1)")
    con.texts.clear()
    others = pipeline.unmatched_rows(con)  # type: ignore[arg-type]
    placed = pipeline.place_pairs(con, pairs, others)  # type: ignore[arg-type]
    assert not any(" JOIN " in sql for sql in con.texts)
    assert len(con.texts) == 3 + rowless and not any("CASE" in sql for sql in con.texts[:3])
    values = ", ".join(f"({p.place.pair}, {p.place.op_base}, "
                       f"{(pairs[i + 1].place.op_base if i + 1 < len(pairs) else 2**31) - 1})"
                       for i, p in enumerate(pairs))
    joined = con.con.execute(_PLACED_BY_JOIN.format(values=values)).fetchall()
    assert [(p.place.pair, *p.place.ord_range, *p.place.out_range, len(p.place.others))
            for p in placed] == joined
    assert [p.place.out_range[1] - p.place.out_range[0] for p in placed] != [-1] * 3
    assert sum(len(p.place.others) for p in placed) == len(others) > 0
    # (the rows lacking an NPU or a bench row: those of a kind other than matched)
    assert others == con.con.execute("SELECT out_seq, kind FROM compare_rows "
                                     "WHERE kind IS DISTINCT FROM 'matched' "
                                     "ORDER BY out_seq").fetchall()
    assert {kind for _, kind in others} == {"npu_only", "bench_only"}
    types = pipeline.split_batch(con.con, mode)
    pipeline.pair_views(con.con, mode, placed[1].place, types)
    for table in pipeline.BATCH_PAIR_COLUMNS:
        assert ("batch_" + table, "pair") in types
        columns = [c for (c,) in con.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE table_name = ?", [table]).fetchall()]
        assert "pair" not in columns and "ord" in columns
    con.close()
