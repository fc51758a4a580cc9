"""The report's data: one compressed binary blob that the page decodes in the browser.

Layout (little-endian), then base64 inside the HTML:

    b"MSQR" | u32 number of parts N | N x u32 part lengths | N parts

Each part is a gzip stream: part 0 the JSON header, part k the buffer of row column k (one
stream per part: the parts are compressed on every core, and browsers' DecompressionStream
reads one gzip member only). The JSON header holds the compares, the table columns per mode,
the findings and, per row column, its encoding: ``f64`` (a Float64Array, NULL as NaN),
``u8``/``u16``/``u32`` codes into a ``dict`` of texts (code 0 is NULL; without a dict, the
numbers themselves), a plain JSON ``list``, or ``same`` (the ``ref`` columns joined by '.',
except at the listed rows). Numbers stay exact (float64); a number cell that the workbook shows
as text ("N/A", "None", "nan") has that text in the ``<column>__show`` codes, '' for an empty
cell.

Base64 holds no ``<``, so no op name can close the script element that carries the data.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from msq import db
from msq.errors import SqlFileError
from msq.export.outputs import columns_for
from msq.report.source import ReportSource
from msq.version import VERSION as __version__

MAGIC = b"MSQR"
GZIP_LEVEL = 1  # the float columns hardly compress; level 1 keeps 100k rows well under a second

_NAMES = {"NPU Name": "npu_name", "Bench Name": "bench_name", "NPU Dtype": "npu_dtype",
          "Bench Dtype": "bench_dtype", "NPU Tensor Shape": "npu_shape",
          "Bench Tensor Shape": "bench_shape"}
_SIDES = {"NPU max": "npu_max", "NPU min": "npu_min", "NPU mean": "npu_mean",
          "NPU l2norm": "npu_norm", "Bench max": "bench_max", "Bench min": "bench_min",
          "Bench mean": "bench_mean", "Bench l2norm": "bench_norm"}
_TAIL = {"Err_message": "err_message", "NPU_Stack_Info": "npu_stack", "Data_name": "data_name"}
# workbook header -> (result_rows column, how the page shows it)
CELLS: dict[str, dict[str, tuple[str, str]]] = {
    "statistics": {
        **{k: (v, "text") for k, v in _NAMES.items()},
        "Max diff": ("max_diff", "num"), "Min diff": ("min_diff", "num"),
        "Mean diff": ("mean_diff", "num"), "L2norm diff": ("norm_diff", "num"),
        "MaxRelativeErr": ("max_rel_pct", "pct"), "MinRelativeErr": ("min_rel_pct", "pct"),
        "MeanRelativeErr": ("mean_rel_pct", "pct"), "NormRelativeErr": ("norm_rel_pct", "pct"),
        **{k: (v, "num") for k, v in _SIDES.items()},
        "Result": ("result", "text"), **{k: (v, "text") for k, v in _TAIL.items()},
    },
    "tensor": {
        **{k: (v, "text") for k, v in _NAMES.items()},
        "Cosine": ("cosine", "num"), "MaxAbsErr": ("max_abs_err", "num"),
        "MaxRelativeErr": ("max_rel_err", "num"),
        "One Thousandth Err Ratio": ("one_thousandth_err_ratio", "num"),
        "Five Thousandths Err Ratio": ("five_thousandths_err_ratio", "num"),
        **{k: (v, "num") for k, v in _SIDES.items()},
        "Accuracy Reached or Not": ("result", "text"), **{k: (v, "text") for k, v in _TAIL.items()},
    },
    "md5": {
        **{k: (v, "text") for k, v in _NAMES.items()},
        "NPU MD5": ("npu_md5", "text"), "BENCH MD5": ("bench_md5", "text"),
        "Result": ("result", "text"), "NPU_Stack_Info": ("npu_stack", "text"),
    },
}
# what every row carries besides its workbook cells
_ROW_EXTRAS = ("out_seq", "op_name", "arg", "kind", "mark", "mark_rules", "failing", "err",
               "err_kind", "direction", "io", "blame_verdict", "blame_input_err",
               "blame_amplification", "blame_rank", "blame_reason")


@dataclass
class Payload:
    """The encoded report data and what the page header needs before decoding it."""

    blob: bytes          # the parts, each gzip-compressed
    title: str
    rows: int


def table_columns(mode: str, stack: bool) -> list[dict[str, str]]:
    """The workbook's columns of a mode (``msq.export.outputs.columns_for``), as the page
    shows them: label, row column and kind (num, pct or text)."""
    cells = CELLS[mode]
    return [{"label": label, "key": cells[label][0], "kind": cells[label][1]}
            for label in columns_for(mode, stack) if label in cells]


def build(source: ReportSource, title: str | None = None) -> Payload:
    """Query the source's rows through ``sql/report/`` and encode them.

    Args:
        source: the connection with ``rep_compares``, ``rep_rows`` and ``rep_blame``.
        title: the page title (default: made from the compares).

    Returns:
        The compressed payload.
    """
    con = source.con
    _create_report_relations(con)
    extras = [c for c in _ROW_EXTRAS if source.blame or not c.startswith("blame_")]
    columns = {m: table_columns(m, _stack_shown(source, m)) for m in _modes(source)}
    num_keys = sorted({c["key"] for cols in columns.values() for c in cols if c["kind"] != "text"})
    text_keys = sorted({c["key"] for cols in columns.values() for c in cols if c["kind"] == "text"})
    table = _fetch_rows(con, extras, num_keys, text_keys)
    # computed once: the findings and divergence views read the fetched rows from here on
    con.register("_report_rows_fetched", table)
    con.execute("CREATE OR REPLACE TEMP VIEW report_rows AS SELECT *, "
                "coalesce(npu_name, bench_name) AS row_name FROM _report_rows_fetched")
    encoder = _Encoder(table.num_rows)
    for name in table.column_names:
        if name not in ("compare_id", "ord", "npu_name", "bench_name"):
            encoder.add(name, table.column(name), num=name in num_keys or name in _NUMERIC_EXTRAS)
    # a row's name is mostly its op's name and its argument: only the others travel as text
    op_arg = pc.binary_join_element_wise(table.column("op_name"), table.column("arg"), ".")
    encoder.same_as("npu_name", table.column("npu_name"), op_arg, ["op_name", "arg"])
    encoder.same_as("bench_name", table.column("bench_name"), table.column("npu_name"),
                    ["npu_name"])
    compares = _compares_with_ranges(source, table)
    meta = {
        "format": 1, "title": title or default_title(source), "msq_version": __version__,
        "generated_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "origin": source.origin, "blame": source.blame,
        "compares": compares, "columns": columns,
        "findings": _records(con, "SELECT * FROM report_findings"),
        "divergence": _records(con, "SELECT * FROM report_divergence"),
        "local_sources": _local_sources(con) if source.blame else [],
        "rows": table.num_rows, "row_columns": encoder.specs,
    }
    return Payload(encoder.pack(meta), meta["title"], table.num_rows)


_NUMERIC_EXTRAS = {"err", "blame_input_err", "blame_amplification", "blame_rank"}


def _modes(source: ReportSource) -> list[str]:
    return sorted({str(h["mode"]) for h in source.compares if h["mode"] in CELLS})


def _stack_shown(source: ReportSource, mode: str) -> bool:
    return any(bool(h.get("stack")) for h in source.compares if h["mode"] == mode)


def _create_report_relations(con: duckdb.DuckDBPyConnection) -> None:
    """The report's views, temporary: private to the source's connection. (Each query reads
    only the columns it needs, which costs less than materialising every column once.)"""
    for stem in ("report_rows", "report_findings", "report_divergence"):  # dependencies first
        file = db.sql_file(f"report/{stem}.sql")
        try:
            con.execute(f'CREATE OR REPLACE TEMP VIEW "{file.name}" AS\n{file.body}')
        except duckdb.Error as err:
            raise SqlFileError(f"{file.origin}: {err}") from err


def _fetch_rows(con: duckdb.DuckDBPyConnection, extras: list[str], num_keys: list[str],
                text_keys: list[str]) -> pa.Table:
    have = {d[0] for d in con.execute("SELECT * FROM report_rows LIMIT 0").description}
    texts = [k for k in num_keys if f"{k}_text" in have]
    select = ([f'"{c}"' for c in extras] + ["err IS NULL AS err_none", "ord"]
              + [f'"{k}"' for k in num_keys] + [f'"{k}_text"' for k in texts]
              + [f'"{k}"' for k in text_keys if k not in extras] + ["compare_id"])
    table = con.sql(f"SELECT {', '.join(select)} FROM report_rows").to_arrow_table()
    table = _in_order(table)
    for key in num_keys:
        # the workbook's text in place of a number ("N/A", "None", "nan"), '' for an empty cell
        text = (table.column(f"{key}_text") if key in texts
                else pa.nulls(table.num_rows, pa.string()))
        empty = pc.and_(pc.is_null(table.column(key)), pc.is_null(text))
        table = table.append_column(f"{key}__show", pc.if_else(empty, "", text))
    return table.drop_columns([f"{k}_text" for k in texts])


def _in_order(table: pa.Table) -> pa.Table:
    """Rows by compare (``ord``), then line: a scan mostly returns them so; sort only if not."""
    ords = table.column("ord").to_numpy(zero_copy_only=False).astype(np.int64)
    seqs = table.column("out_seq").to_numpy(zero_copy_only=False).astype(np.int64)
    key = ords * (int(seqs.max(initial=0)) + 1) + seqs
    if key.size < 2 or bool(np.all(key[1:] > key[:-1])):
        return table
    return table.take(pa.array(np.argsort(key, kind="stable")))


def _compares_with_ranges(source: ReportSource, table: pa.Table) -> list[dict[str, Any]]:
    """Each compare's header with the range of its rows (``start``, ``end``)."""
    ids = table.column("compare_id").to_numpy(zero_copy_only=False)
    out = []
    for header in source.compares:
        hits = np.flatnonzero(ids == header["compare_id"])
        start, end = (int(hits[0]), int(hits[-1]) + 1) if hits.size else (0, 0)
        out.append({**_jsonable(header), "start": start, "end": end})
    return out


def _records(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    rel = con.execute(sql)
    names = [d[0] for d in rel.description]
    return [_jsonable(dict(zip(names, row))) for row in rel.fetchall()]


def _local_sources(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    return _records(con, "SELECT compare_id, out_seq, row_name, blame_input_err AS input_err, "
                         "err AS output_err, blame_amplification AS amplification, blame_rank, "
                         "blame_reason AS reason "
                         "FROM report_rows WHERE blame_verdict = 'local' "
                         "ORDER BY blame_rank NULLS LAST, ord, out_seq LIMIT 20")


def default_title(source: ReportSource) -> str:
    """"statistics compare" for one compare, "statistics run 'v2': 2 steps x 4 ranks" for more."""
    heads = source.compares
    modes = "/".join(sorted({str(h["mode"]) for h in heads}))
    if len(heads) == 1:
        head = heads[0]
        where = "".join(f" {k} {head[k]}" for k in ("step", "rank") if head.get(k) is not None)
        label = f" '{head['label']}'" if head.get("label") else ""
        return f"{modes} compare{label}{where}"
    steps = len({h.get("step") for h in heads})
    ranks = len({h.get("rank") for h in heads})
    label = f" '{heads[0]['label']}'" if heads[0].get("label") else ""
    return f"{modes} run{label}: {steps} step{'s' * (steps > 1)} x {ranks} rank{'s' * (ranks > 1)}"


def _jsonable(record: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in record.items():
        if isinstance(value, float) and not math.isfinite(value):
            value = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        elif isinstance(value, (dt.datetime, dt.date)):
            value = value.isoformat()
        elif isinstance(value, (list, tuple)):
            value = [str(v) for v in value]
        out[key] = value
    return out


# --------------------------------------------------------------------------------------------
# column encoding


class _Encoder:
    """Collects column buffers and their specs; packs them behind the JSON header."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self.specs: dict[str, dict[str, Any]] = {}
        self._buffers: list[bytes] = []

    def add(self, name: str, column: pa.ChunkedArray, *, num: bool) -> None:
        if num or pa.types.is_floating(column.type):
            values = column.cast(pa.float64()).to_numpy(zero_copy_only=False)
            self._buffer(name, "f64", np.ascontiguousarray(values, dtype="<f8"))
        elif pa.types.is_integer(column.type):
            self._buffer(name, "u32", np.ascontiguousarray(
                column.cast(pa.int64()).fill_null(0).to_numpy(), dtype="<u4"))
        elif pa.types.is_boolean(column.type):
            self._buffer(name, "u8", np.ascontiguousarray(
                column.fill_null(False).to_numpy(zero_copy_only=False), dtype="u1"))
        else:
            self._text(name, column.cast(pa.string()))

    def _text(self, name: str, column: pa.ChunkedArray) -> None:
        encoded = pc.dictionary_encode(column.combine_chunks())
        words = encoded.dictionary.to_pylist()
        if len(words) > max(256, self.rows // 2):  # mostly unique: a plain list
            self.specs[name] = {"enc": "list", "values": column.to_pylist()}
            return
        codes = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        width = "u8" if len(words) < 255 else ("u16" if len(words) < 65535 else "u32")
        self._buffer(name, width, codes.astype({"u8": "u1", "u16": "<u2", "u32": "<u4"}[width]),
                     dict=[None, *words])

    def same_as(self, name: str, column: pa.ChunkedArray, ref: pa.ChunkedArray,
                ref_names: list[str]) -> None:
        """A text column mostly equal to others joined by '.' (``ref``): only the rows that
        differ travel (Bench Name is NPU Name, NPU Name is the op's name and the argument)."""
        same = pc.fill_null(pc.equal(column, ref), False)
        rows = np.flatnonzero(~same.to_numpy(zero_copy_only=False))
        values = column.take(pa.array(rows, pa.int64())).to_pylist()
        self.specs[name] = {"enc": "same", "ref": ref_names,
                            "except": [[int(i), v] for i, v in zip(rows, values)]}

    def _buffer(self, name: str, enc: str, array: np.ndarray, **extra: Any) -> None:
        self.specs[name] = {"enc": enc, "part": len(self._buffers) + 1, **extra}
        self._buffers.append(array.tobytes())

    def pack(self, meta: dict[str, Any]) -> bytes:
        """The parts (header, then buffers), each gzip-compressed, behind their lengths."""
        # ASCII JSON: any text (lone surrogates included) survives, the page decodes \\u escapes
        head = json.dumps(meta, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")
        parts = [head, *self._buffers]
        # zlib releases the GIL: the parts compress on every core
        with ThreadPoolExecutor(max_workers=min(len(parts), os.cpu_count() or 1)) as pool:
            packed = list(pool.map(_gzip, parts))
        lengths = b"".join(len(p).to_bytes(4, "little") for p in packed)
        return b"".join([MAGIC, len(packed).to_bytes(4, "little"), lengths, *packed])


def _gzip(data: bytes) -> bytes:
    packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # wbits 31: a gzip stream
    return packer.compress(data) + packer.flush()
