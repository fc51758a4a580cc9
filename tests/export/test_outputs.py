"""Exports: CSV and Parquet carry the workbook's columns, CSV guards formulas, and a workbook past
the per-sheet row limit continues on further sheets (each with its header) and says so."""

from __future__ import annotations

import csv
import json
import logging
import math
from pathlib import Path
from typing import Any

import duckdb
import openpyxl
import pyarrow.parquet as pq
import pytest
from openpyxl.utils import get_column_letter

import msq
from msq.errors import ExportError
from msq.export import xlsx
from msq.export.xlsx import SheetSpec, write_xlsx
from tests.conftest import GOLDEN
from tests.history.builders import LINEAR1_OUT, model_dump, single_card, tensor, write_json

FORMULAS = ["=HYPERLINK(\"http://x\",\"y\")", "+1+2", "-2+3", "@SUM(A1)", "＝1+1"]


def outputs(out: Path) -> dict[str, Path]:
    """The compare's output files by extension."""
    found = {p.suffix.lstrip("."): p for p in out.glob("compare_result_*")}
    assert set(found) == {"xlsx", "csv", "parquet"}, found
    return found


def xlsx_rows(path: Path) -> list[list[Any]]:
    book = openpyxl.load_workbook(path, read_only=True)
    # the msprobe-format sheets (blame's own sheet is beside them: tests/blame/test_faults.py)
    rows = [list(r) for ws in book.worksheets if ws.title != "blame"
            for r in ws.iter_rows(values_only=True)]
    book.close()
    return rows


def csv_rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def md5_dump(base: Path) -> Path:
    """md5-task dumps: the statistics model with a CRC per tensor; one NPU output differs."""
    def with_md5(doc: dict[str, Any], differ: bool) -> dict[str, Any]:
        doc["task"] = "statistics"
        for n, (op, entry) in enumerate(doc["data"].items()):
            for key in ("input_args", "output"):
                for i, arg in enumerate(entry[key]):
                    arg["md5"] = f"{n:04x}{i:04x}"
                    if differ and (op, key, i) == ("Functional.linear.1.forward", "output", 0):
                        arg["md5"] = "deadbeef"
        return doc

    npu = write_json(base / "npu" / "dump.json", with_md5(model_dump(0, 0, {}, False), True))
    bench = write_json(base / "bench" / "dump.json", with_md5(model_dump(0, 0, {}, False), False))
    return write_json(base / "compare.json", {"npu_path": str(npu), "bench_path": str(bench)})


def golden_tensor(base: Path) -> Path:
    case = GOLDEN / "mlp_tensor_L1"
    return write_json(base / "compare.json", {
        "npu_path": str(case / "npu/step0/rank/dump.json"),
        "bench_path": str(case / "bench/step0/rank/dump.json"),
        "stack_path": str(case / "npu/step0/rank/stack.json")})


def run(compare_json: Path, out: Path, **kwargs: Any) -> Any:
    from msq.config import parse_compare_json

    inp = parse_compare_json(compare_json)
    param = {"npu_json_path": str(inp.npu_json), "bench_json_path": str(inp.bench_json)}
    if getattr(inp, "stack_json", None):
        param["stack_json_path"] = str(inp.stack_json)
    return msq.compare(param, out, record=False, **kwargs)


MARKS = ["Mark", "Mark_rules"]


def fills(path: Path) -> list[str | None]:
    """The colour of each data row of the workbook: red, yellow or None."""
    book = openpyxl.load_workbook(path)
    colour = {xlsx.RED: "red", xlsx.YELLOW: "yellow"}
    return [colour.get(row[0].fill.fgColor.rgb) if row[0].fill.fill_type == "solid" else None
            for ws in book.worksheets if ws.title != "blame" for row in ws.iter_rows(min_row=2)]


@pytest.mark.parametrize("mode", ["statistics", "md5",
                                  pytest.param("tensor", marks=pytest.mark.golden)])
def test_csv_and_parquet_carry_the_workbook_columns(mode: str, tmp_path: Path) -> None:
    if mode == "statistics":
        cj = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}})
    elif mode == "md5":
        cj = md5_dump(tmp_path / "dumps")
    else:
        cj = golden_tensor(tmp_path)
    result = run(cj, tmp_path / "out", formats="xlsx,csv,parquet", stack_mode=True)
    assert result.mode == mode
    files = outputs(tmp_path / "out")
    book, table = xlsx_rows(files["xlsx"]), csv_rows(files["csv"])
    parquet = pq.read_table(files["parquet"])
    assert book[0] + MARKS == table[0] == parquet.column_names
    assert "NPU_Stack_Info" in book[0]
    assert len(book) == len(table) == parquet.num_rows + 1 == result.rows + 1
    names = parquet.column("NPU Name").to_pylist()
    assert [r[0] for r in book[1:]] == [r[0] for r in table[1:]] == names
    # the verdict column agrees in all three
    col = book[0].index("Result" if mode != "tensor" else "Accuracy Reached or Not")
    assert [r[col] or "" for r in book[1:]] == [r[col] for r in table[1:]] \
        == [v or "" for v in parquet.column(col).to_pylist()]
    # and so do the marks: the fill of each workbook row, and the rules that fired
    marks = fills(files["xlsx"])
    assert [r[-2] or None for r in table[1:]] == parquet.column("Mark").to_pylist() == marks
    assert [bool(r[-1]) for r in table[1:]] == [m is not None for m in marks]
    if mode != "md5":
        assert "red" in marks


def test_formula_like_text_is_escaped_in_csv_only(tmp_path: Path) -> None:
    extra = {"Functional.pad.0.forward": {
        "input_args": [tensor([2, 2], 0)],
        "input_kwargs": {f"k{i}": {"type": "str", "value": text}
                         for i, text in enumerate(FORMULAS)},
        "output": [tensor([2, 2], 0)]}}
    cj = single_card(tmp_path / "dumps", extra=extra)
    run(cj, tmp_path / "out", formats="xlsx,csv,parquet")
    files = outputs(tmp_path / "out")
    header = csv_rows(files["csv"])[0]
    npu_max = header.index("NPU max")
    by_name = {r[0]: r for r in csv_rows(files["csv"])[1:]}
    for i, text in enumerate(FORMULAS):
        assert by_name[f"Functional.pad.0.forward.input.k{i}.0"][npu_max] == "'" + text
    # numbers that start with '-' stay numbers
    assert by_name["Functional.linear.0.forward.input.0"][header.index("NPU min")] == "-1.0"
    # Parquet's NPU max is a number column: a str argument's text is NULL there;
    # the workbook writes it as a text cell, never a formula
    parquet = pq.read_table(files["parquet"]).to_pylist()
    assert [r["NPU max"] for r in parquet if ".input.k" in r["NPU Name"]] == [None] * 5
    book = openpyxl.load_workbook(files["xlsx"])
    cells = [row[npu_max] for row in book.active.iter_rows(min_row=2)
             if ".input.k" in str(row[0].value)]
    assert [c.value for c in cells] == FORMULAS
    assert {c.data_type for c in cells} == {"s"}


def test_parquet_columns_are_typed(tmp_path: Path) -> None:
    """Numbers as DOUBLE (NaN and infinities kept), NULL where the workbook shows N/A or None,
    the statistics relative errors as their percentage; texts stay VARCHAR."""
    extra = {"Functional.pad.0.forward": {
        "input_args": [tensor([2, 2], 0)], "input_kwargs": {},
        "output": [dict(tensor([2, 2], 0), Max=float("inf"), Min=float("nan"))]},
             "Functional.npu_only.0.forward": {"input_args": [tensor([2], 0)], "input_kwargs": {},
                                               "output": [tensor([2], 0)]}}
    cj = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}}, extra=extra)
    bench = json.loads(Path(json.loads(cj.read_text())["bench_path"]).read_text())
    del bench["data"]["Functional.npu_only.0.forward"]
    write_json(Path(json.loads(cj.read_text())["bench_path"]), bench)
    run(cj, tmp_path / "out", formats="xlsx,csv,parquet")
    files = outputs(tmp_path / "out")
    table = pq.read_table(files["parquet"])
    types = {f.name: str(f.type) for f in table.schema}
    for col in ("Max diff", "MaxRelativeErr", "NormRelativeErr", "NPU max", "Bench l2norm"):
        assert types[col] == "double", col
    for col in ("NPU Name", "NPU Tensor Shape", "Result", "Err_message", "Mark", "Mark_rules"):
        assert types[col] == "string", col
    rows = {r["NPU Name"]: r for r in table.to_pylist()}
    pad = rows["Functional.pad.0.forward.output.0"]
    assert pad["NPU max"] == math.inf and math.isnan(pad["NPU min"])
    only = rows["Functional.npu_only.0.forward.output.0"]
    assert only["Max diff"] is None and only["MaxRelativeErr"] is None and only["Result"] == "N/A"
    red = rows["Functional.linear.1.forward.output.0"]
    csv_red = next(r for r in csv_rows(files["csv"]) if r[0] == red["NPU Name"])
    header = csv_rows(files["csv"])[0]
    assert csv_red[header.index("MaxRelativeErr")] == f"{red['MaxRelativeErr']}%"
    assert (red["Mark"], red["Mark_rules"]) == ("red", "relative error")


class Warnings(logging.Handler):
    """The msq logger's warnings (the CLI's setup_logging stops propagation, so not caplog)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_xlsx_continues_on_further_sheets_with_a_header_each(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(xlsx, "EXCEL_MAX_ROWS", 6)  # 5 data rows per sheet, as if Excel's limit
    cj = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}})
    seen = Warnings()
    logging.getLogger("msq").addHandler(seen)
    try:
        result = run(cj, tmp_path / "out", formats="xlsx,csv")
    finally:
        logging.getLogger("msq").removeHandler(seen)
    files = {p.suffix: p for p in (tmp_path / "out").glob("compare_result_*")}
    book = openpyxl.load_workbook(files[".xlsx"])
    assert book.sheetnames == ["Sheet", "Sheet2", "Sheet3", "blame"]
    sheets = [[[c.value for c in row] for row in ws.iter_rows()] for ws in book.worksheets[:3]]
    header = csv_rows(files[".csv"])[0][:-len(MARKS)]
    assert [len(s) for s in sheets] == [6, 6, 4]
    assert all(s[0] == header for s in sheets)
    names = [row[0] for s in sheets for row in s[1:]]
    assert names == [r[0] for r in csv_rows(files[".csv"])[1:]] and len(names) == result.rows == 13
    # the red row (out_seq 9) is the last row of the second sheet, still painted
    red = book["Sheet2"].cell(row=6, column=1)
    assert red.value == "Functional.linear.1.forward.output.0"
    assert red.fill.fgColor.rgb == xlsx.RED
    assert any("continuing on sheet 2" in m for m in seen.messages)
    assert any("continuing on sheet 3" in m for m in seen.messages)
    assert any("holds 3 sheets" in m for m in seen.messages)


def test_write_xlsx_row_limit_parameter(tmp_path: Path) -> None:
    con = duckdb.connect()
    spec = SheetSpec("SELECT range AS out_seq, CAST(range * 10 AS DOUBLE) AS v FROM range(7)",
                     ["v"], ["V"], None)
    seen: list[int] = []
    path = tmp_path / "book.xlsx"
    assert write_xlsx(con, spec, path, on_extra_sheet=seen.append, max_rows=3) == 4
    assert seen == [2, 3, 4]
    book = openpyxl.load_workbook(path)
    assert [[c.value for c in r] for ws in book.worksheets for r in ws.iter_rows()] == [
        ["V"], [0], [10], ["V"], [20], [30], ["V"], [40], [50], ["V"], [60]]
    # the default is Excel's limit: one sheet
    assert write_xlsx(con, spec, path) == 1
    with pytest.raises(ExportError, match="max_rows"):
        write_xlsx(con, spec, path, max_rows=1)


@pytest.mark.parametrize("compat", [None, "msprobe-1.1"])
def test_default_workbook_is_for_browsing_and_compat_keeps_msprobes_layout(
        tmp_path: Path, compat: str | None) -> None:
    cj = single_card(tmp_path / "dumps", {LINEAR1_OUT: {"Max": 3.0}})
    result = run(cj, tmp_path / "out", compat=compat)
    (book,) = [f for f in result.files if f.suffix == ".xlsx"]
    ws = openpyxl.load_workbook(book).active
    browse = compat is None
    # the filter spans every column up to the last header (the default mode's is Reason)
    last = get_column_letter(ws.max_column)
    assert (ws[f"{last}1"].value == "Reason") is browse
    assert (ws.freeze_panes, ws.auto_filter.ref) == (
        ("B2", f"A1:{last}{result.rows + 1}") if browse else (None, None))
    assert ws["A1"].font.b is browse
    assert openpyxl.load_workbook(book, read_only=True).active.max_row == result.rows + 1
