"""Flatten dump.json op entries into rows named as msprobe names them (spec §2).

Each row is one argument of one op: a tensor, a Python scalar, a slice, a ``torch.Size`` or a
placeholder for ``null``. Statistics keep their raw JSON type through three columns per statistic
(``<s>_num`` DOUBLE, ``<s>_kind`` one of i/f/b/s/n/o, ``<s>_str`` text for strings and other values)
because the workbook must show ints, floats, booleans and strings exactly as the dump had them.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from msq import cext
from msq.errors import DumpError

if TYPE_CHECKING:
    import pyarrow as pa

# the C reader (msq/_flatten.c): optional, as the C tensor kernel is (msq.cext: imported by name,
# and only when it was built from the msq/_flatten.c beside it)
_c: Any = cext.load("msq._flatten")
if os.environ.get("MSQ_NO_C_READER"):  # troubleshooting: read every dump.json with Python's json
    _c = None

MAX_DEPTH = 10
STATS = ("max", "min", "mean", "norm")
_STAT_KEYS = ("Max", "Min", "Mean", "Norm")


_COLUMNS = ("op_seq", "row_in_op", "name", "disp_name", "io", "disp_io", "dtype", "shape", "md5",
            "data_name", "is_tensor", "numel") + tuple(
    f"{stat}_{part}" for stat in STATS for part in ("num", "kind", "str")) + ("io_k",)
_TYPES = {"op_seq": "int32", "row_in_op": "int32", "is_tensor": "bool_", "numel": "int64",
          "io_k": "int32"}


@dataclass
class RowBuffer:
    """Rows of the ``tensors`` table of one side, one tuple per row (columns in ``_COLUMNS``).

    A tuple per row and one transpose at the end cost far less than a list append per column.
    """

    side: str
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.rows)

    def to_arrow(self) -> pa.Table:
        import pyarrow as pa  # the Python reader's path (no C reader) only

        n = len(self.rows)
        columns = list(zip(*self.rows)) if self.rows else [() for _ in _COLUMNS]
        arrays = {"side": pa.array([self.side] * n, pa.string()),
                  "row_seq": pa.array(range(n), pa.int64())}
        for name, values in zip(_COLUMNS, columns):
            kind = "float64" if name.endswith("_num") else _TYPES.get(name, "string")
            arrays[name] = pa.array(values, getattr(pa, kind)())
        return pa.table(arrays)


def _kind(value: Any) -> tuple[float | None, str, str | None]:
    """(numeric value, kind, text) of a raw JSON statistic."""
    if type(value) is float:  # the common case first
        return value, "f", None
    if value is None:
        return None, "n", None
    if isinstance(value, bool):
        return float(value), "b", None
    if isinstance(value, int):
        try:
            return float(value), "i", str(value)
        except OverflowError:
            return None, "s", str(value)
    if isinstance(value, float):
        return value, "f", None
    if isinstance(value, str):
        return None, "s", value
    return None, "o", str(value)


_NO_STATS = (None, None, None, None)


class Flattener:
    """Turns op entries into rows; one instance per side of a compare."""

    def __init__(self, side: str, path: str, *, real_data: bool, fix_direction: bool) -> None:
        self.buf = RowBuffer(side)
        self.path = path
        self.real_data = real_data
        # msprobe decides forward/backward by substring, so a module path such as "feedforward"
        # triggers both branches; the default mode reads the direction field instead.
        self.fix_direction = fix_direction
        self._op = ""
        self._op_seq = 0
        self._row_in_op = 0
        self._io = "input"
        self._k = {"input": 0, "output": 0}  # the op's rows so far by disp_io (io_k)

    # -- public -------------------------------------------------------------------------------
    def add_op(self, op_seq: int, op_name: str, entry: Any) -> int:
        """Flatten one op; return the number of rows it produced."""
        if not isinstance(entry, dict):
            raise DumpError(f"{self.path}: entry '{op_name}': expected an object with "
                            f"input/output lists, found a {type(entry).__name__}")
        self._op, self._op_seq, self._row_in_op = op_name, op_seq, 0
        self._k = {"input": 0, "output": 0}
        start = len(self.buf)
        forward, backward = self._directions(op_name)
        if forward:
            self._io = "input"
            if "input_args" in entry:
                self._parse(entry["input_args"], f"{op_name}.input", None, True, 0)
            if "input_kwargs" in entry:
                self._kwargs(entry["input_kwargs"], op_name)
            if "output" in entry:
                self._io = "output"
                self._parse(entry["output"], f"{op_name}.output", None, True, 0)
        if backward:
            if "input" in entry:
                self._truncate(start)
                self._io = "input"
                self._parse(entry["input"], f"{op_name}.input", None, True, 0)
            if "output" in entry:
                self._io = "output"
                self._parse(entry["output"], f"{op_name}.output", None, True, 0)
        return len(self.buf) - start

    # -- helpers ------------------------------------------------------------------------------
    def _directions(self, op_name: str) -> tuple[bool, bool]:
        if not self.fix_direction:
            return "forward" in op_name, "backward" in op_name
        fields = op_name.split(".")
        tail = fields[-1] if fields[-1] in ("forward", "backward") else (
            fields[-2] if len(fields) > 1 else "")
        if tail in ("forward", "backward"):
            return tail == "forward", tail == "backward"
        return "forward" in op_name, "backward" in op_name

    def _truncate(self, start: int) -> None:
        del self.buf.rows[start:]
        self._row_in_op = 0
        self._k = {"input": 0, "output": 0}

    def _kwargs(self, kwargs: Any, op_name: str) -> None:
        if isinstance(kwargs, list) or (isinstance(kwargs, dict) and "type" in kwargs):
            self._parse(kwargs, f"{op_name}.input", None, True, 0)
        elif isinstance(kwargs, dict):
            for key, value in kwargs.items():
                self._parse(value, f"{op_name}.input.{key}", None, True, 0)
        elif kwargs is not None:
            raise DumpError(f"{self.path}: entry '{op_name}': input_kwargs must be an object, "
                            f"found a {type(kwargs).__name__}")

    def _parse(self, item: Any, prefix: str, index: int | None, top: bool, depth: int) -> None:
        if depth > MAX_DEPTH:
            raise DumpError(f"{self.path}: entry '{self._op}': arguments nested deeper than "
                            f"{MAX_DEPTH} levels; msprobe cannot dump such data either")
        name = f"{prefix}.{index}" if index is not None else f"{prefix}.0"
        if item is None or (isinstance(item, dict) and not item):
            self._row(name, None, None, None, _NO_STATS, None, "-1", False)
        elif isinstance(item, (list, tuple)):
            base = f"{prefix}.{index}" if index is not None else prefix
            for j, elem in enumerate(item):
                self._parse(elem, base, j, False, depth + 1)
        elif isinstance(item, dict) and "type" not in item:
            for key, value in item.items():
                self._parse(value, f"{prefix}.{key}", None, True, depth + 1)
        elif isinstance(item, dict) and "dtype" in item:
            self._tensor(name, item)
        elif isinstance(item, dict):
            self._typed(name, item)
        else:
            raise DumpError(f"{self.path}: entry '{self._op}': argument '{name}' is a bare "
                            f"{type(item).__name__}, expected an object or a list")

    def _tensor(self, name: str, item: dict[str, Any]) -> None:
        shape = item.get("shape")
        if type(shape) is not list:
            raise DumpError(f"{self.path}: entry '{self._op}': shape of '{name}' is not a list "
                            f"({shape!r}); the dump is damaged")
        grad = item.get("requires_grad", False)
        if grad is not True and grad is not False:
            raise DumpError(f"{self.path}: entry '{self._op}': requires_grad of '{name}' is not "
                            f"a boolean ({grad!r})")
        dtype = item.get("dtype")
        data_name = item.get("data_name", "-1")
        data_name = "-1" if data_name is None else str(data_name)
        numel = math.prod(shape) if all(type(x) is int for x in shape) else None
        if numel is not None and not -(1 << 63) <= numel < 1 << 63:
            numel = None  # a damaged shape (Arrow's int64 cannot hold it); still shown as written
        md5 = item.get("md5")
        self._row(name, None if dtype is None else str(dtype), str(shape),
                  None if md5 is None else str(md5),
                  (item.get("Max"), item.get("Min"), item.get("Mean"), item.get("Norm")),
                  numel, data_name, True)

    def _typed(self, name: str, item: dict[str, Any]) -> None:
        kind = item.get("type")
        value = item.get("value")
        if kind == "torch.Size":
            self._row(name, "torch.Size", str(value), None, _NO_STATS, None, "-1", False)
        elif kind == "slice":
            length = len(value) if isinstance(value, list) else 0
            self._row(name, "slice", f"({length},)", None, _NO_STATS, None, "-1", False)
        else:
            dtype = f"<class '{_py_type_name(value)}'>"
            self._row(name, dtype, "[]", None, (value, value, value, value), None, "-1", False)

    def _row(self, name: str, dtype: str | None, shape: str | None, md5: str | None,
             stats: tuple[Any, Any, Any, Any], numel: int | None, data_name: str,
             is_tensor: bool) -> None:
        disp = name
        if self.real_data and data_name != "-1":
            disp = data_name.rsplit(".", 1)[0] if "." in data_name else data_name
        if self.fix_direction:
            io = disp_io = self._io
        else:
            # msprobe classifies by a dot-separated element named input (or kwargs)
            io = "input" if ".input." in f".{name}." else "output"
            dotted = f".{disp}."
            disp_io = "input" if (".input." in dotted or ".kwargs." in dotted) else "output"
        row_in_op = self._row_in_op
        self._row_in_op += 1
        self._k[disp_io] += 1
        mx, mn, mean, norm = stats
        if type(mx) is float and type(mn) is float and type(mean) is float and type(norm) is float:
            kinds: tuple[Any, ...] = (mx, "f", None, mn, "f", None, mean, "f", None, norm, "f", None)
        else:
            kinds = (*_kind(mx), *_kind(mn), *_kind(mean), *_kind(norm))
        self.buf.rows.append((self._op_seq, row_in_op, name, disp, io, disp_io, dtype, shape, md5,
                              data_name, is_tensor, numel, *kinds, self._k[disp_io]))


def _py_type_name(value: Any) -> str:
    if value is None:
        return "NoneType"
    return type(value).__name__



# -- the C reader -------------------------------------------------------------------------------

def reader() -> str:
    """Which dump.json reader runs here, as ``compare -v`` says it."""
    if _c is not None:
        return "C (yyjson)"
    why = "MSQ_NO_C_READER is set" if os.environ.get("MSQ_NO_C_READER") else (
        cext.why_not("msq._flatten"))
    return f"Python ({why}; the same rows, ~9x the CPU time)"


#: Spare bytes the C reader needs after the file's bytes (it parses in place); None without it.
C_PADDING: int | None = _c.PADDING if _c is not None else None


def input_buffer(size: int, padding: int) -> Any:
    """A writable buffer for a dump's ``size`` bytes and ``padding`` zero bytes more, for
    :func:`flatten_c` (msq.jsonio.read_padded's ``make``): the C reader's own memory, not
    zeroed first as a bytearray is; a bytearray without the C reader."""
    if _c is None:
        return bytearray(size + padding)
    return _c.input_buffer(size, padding)

#: One column as the C reader returns it: (name, kind, n, null_count, validity bytes or None,
#: data bytes, offsets bytes or None); kind is str, i32, i64, f64 or bool.
CColumn = tuple[str, str, int, int, "bytes | None", bytes, "bytes | None"]


#: A text column of few values as the C reader also writes it (msq/_flatten.c codes_dict):
#: (codes, values, seen): one byte a row, the place of its text in ``values`` (0 on a NULL row),
#: and a bit mask of the places some row holds (its NULL rows' left out). ``codes`` None: every
#: row holds ``values[0]`` (a constant column).
Coded = tuple["bytes | None", tuple[str, ...], int]


class Columns:
    """Record batches of columns held as the C reader's buffers, read by DuckDB through the Arrow
    C stream interface (``__arrow_c_stream__``, msq/_flatten.c ``arrow_stream``), so that neither
    pyarrow nor numpy is imported to load a dump (~0.25 s of a small compare's start-up).

    ``column`` and ``to_pylist`` are answered by the equal pyarrow table, built on
    first use (tests, and the rare reader that wants one).

    ``codes``: for each batch, its text columns of few values as the C reader also wrote them
    (:data:`Coded`, by column name; msq.pipeline.batch_codes reads them), or none.
    """

    def __init__(self, batches: Sequence[Sequence[CColumn]],
                 codes: Sequence[dict[str, Coded]] | None = None) -> None:
        self._batches = [list(b) for b in batches]
        self._codes = [dict(c) for c in codes] if codes is not None else [{} for _ in batches]
        assert len(self._codes) == len(self._batches)
        self._table: pa.Table | None = None

    @property
    def num_rows(self) -> int:
        return sum(b[0][2] if b else 0 for b in self._batches)

    @property
    def nbytes(self) -> int:
        """The bytes of the column buffers."""
        return sum(len(buf) for b in self._batches for c in b for buf in c[4:] if buf is not None)

    @property
    def batches(self) -> list[list[CColumn]]:
        """The record batches, each a list of the C reader's columns."""
        return self._batches

    @property
    def column_names(self) -> list[str]:
        return [c[0] for c in self._batches[0]]

    def __arrow_c_stream__(self, requested_schema: object = None) -> object:
        assert _c is not None
        return _c.arrow_stream(self._batches)

    @property
    def codes(self) -> list[dict[str, Coded]]:
        """Each batch's coded text columns (see the class)."""
        return self._codes

    def with_columns(self, first: Sequence[CColumn], codes: dict[str, Coded] | None = None,
                     ) -> Columns:
        """These columns after ``first`` (one batch only), the codes of those of ``first`` that
        ``codes`` gives kept with this batch's."""
        assert len(self._batches) == 1
        return Columns([[*first, *self._batches[0]]], [{**self._codes[0], **(codes or {})}])

    def select(self, names: Sequence[str]) -> Columns:
        """The named columns, in that order."""
        return Columns([[next(c for c in b if c[0] == name) for name in names]
                        for b in self._batches])

    def to_arrow(self) -> pa.Table:
        if self._table is None:
            import pyarrow as pa

            self._table = pa.table(self)
        return self._table

    # what tests and the odd reader ask of a table, answered by the equal pyarrow table (no
    # schema nor __getattr__: DuckDB probes its inputs' attributes, and would import pyarrow)
    def column(self, name: str) -> pa.ChunkedArray:
        return self.to_arrow().column(name)

    def __getitem__(self, name: str) -> pa.ChunkedArray:
        return self.column(name)

    def to_pylist(self) -> list[dict[str, Any]]:
        return self.to_arrow().to_pylist()


def concat_columns(parts: Sequence[Columns | pa.Table]) -> Columns | pa.Table:
    """The parts one after the other, without a copy: batches of one stream when all are
    :class:`Columns` (both sides read in C), else a pyarrow table."""
    if all(isinstance(p, Columns) for p in parts):
        return Columns([b for p in parts for b in p._batches],  # type: ignore[union-attr]
                       [c for p in parts for c in p._codes])  # type: ignore[union-attr]
    import pyarrow as pa

    return pa.concat_tables([p.to_arrow() if isinstance(p, Columns) else p for p in parts])


def distinct_texts(texts: CColumn, counts: CColumn) -> bool:
    """Whether the C reader's text column ``texts`` holds no text twice (nor a NULL) among the
    rows whose int32 column ``counts`` is above 0 (msq/_flatten.c ``distinct_texts``)."""
    assert _c is not None
    return bool(_c.distinct_texts(texts, counts))


def same_column(a: CColumn, b: CColumn) -> bool:
    """Whether two of the C reader's columns hold the same values: kind, length, NULLs and
    buffers byte for byte (compared in C, not copied)."""
    assert _c is not None
    if a[1:4] != b[1:4]:
        return False
    for x, y in zip(a[4:], b[4:], strict=True):
        if x is y:  # one buffer (the C reader's aliased columns: emit_row)
            continue
        if x is None or y is None or not _c.equal_bytes(x, y):
            return False
    return True


def all_text(col: CColumn, text: str) -> bool:
    """Whether every value of the C reader's text column ``col`` is ``text`` (no NULL)."""
    assert _c is not None
    raw = text.encode()
    n, data, offsets = col[2], col[5], col[6]
    return (col[1] == "str" and col[3] == 0 and offsets is not None and len(data) == n * len(raw)
            and (n == 0 or bool(_c.repeats(data, raw)))
            and bool(_c.equal_bytes(offsets, _arithmetic(n + 1, 4, len(raw)))))


def _arithmetic(n: int, width: int, step: int) -> bytes:
    """0, step, 2 * step, ... (``n`` values) as native int32 (``width`` 4) or int64 (8) bytes:
    in C where the reader is built (array's conversion takes ~600 instructions a value: ~20 ms
    of a 100k-row compare's load), else by array."""
    if _c is not None:
        data: bytes = _c.arithmetic(n, width, step)
        return data
    if not step:
        return bytes(width * n)
    return array("i" if width == 4 else "q", range(0, n * step, step)).tobytes()


def coded_column(col: CColumn, values: Sequence[str]) -> tuple[CColumn, int] | None:
    """The C reader's text column ``col`` as one byte a row, the place of its text in
    ``values`` (at most 64; a NULL row stays NULL), and a bit mask of the places it holds; None
    when a row holds a text not among ``values``. Made in C (msq/_flatten.c ``text_codes``)."""
    assert _c is not None
    if col[1] != "str":
        return None
    got = _c.text_codes(col, tuple(v.encode() for v in values))
    if got is None:
        return None
    codes, seen = got
    return (col[0], "u8", col[2], col[3], col[4], codes, None), int(seen)


def constant_column(name: str, text: str, n: int) -> CColumn:
    """A string column of ``n`` times ``text``."""
    data = text.encode()
    return (name, "str", n, 0, None, data * n, _arithmetic(n + 1, 4, len(data)))


def sequence_column(name: str, n: int, kind: str = "i64") -> CColumn:
    """0 .. n-1 as an int32 (``i32``) or int64 (``i64``) column."""
    return (name, kind, n, 0, None, _arithmetic(n, 4 if kind == "i32" else 8, 1), None)


@dataclass
class FastDump:
    """A dump.json read by the C reader: what :func:`flatten_c` returns."""

    task: str
    has_md5: bool          # an md5 key in an op's argument lists (loader._has_md5)
    looks_mindspore: bool  # detect.looks_like_mindspore
    ops: Columns           # op_name, n_rows, n_input_args, n_input, n_output
    rows: Columns          # the tensors table of RowBuffer.to_arrow, without side and row_seq;
                           # its codes: io, disp_io, the kinds and dtype (Columns.codes)


def flatten_c(buf: Any, compat: bool) -> FastDump | str:
    """Parse and flatten a dump.json in C (both sides can run at once: it releases the GIL).

    ``buf`` holds the file and :data:`C_PADDING` spare bytes; it is parsed in place, so its
    content is spent. Returns the tables, or why the C reader gave up: then the Python reader
    (:class:`Flattener` over ``json``) reads the file, with its exact warnings and errors.
    """
    assert _c is not None
    out = _c.flatten_dump(buf, compat)
    if isinstance(out, str):
        return out
    task, has_md5, looks_ms, op_cols, row_cols, codes = out
    return FastDump(task, has_md5, looks_ms, Columns([op_cols]), Columns([row_cols], [codes]))


def check_stack_c(buf: Any) -> str | None:
    """None when a stack.json (in ``buf``, as for :func:`flatten_c`) is an object of lists, else
    why the C reader cannot tell (the Python reader then checks it)."""
    assert _c is not None
    result: str | None = _c.check_stack(buf)
    return result


# -- DuckDB results read back in C (msq/_flatten.c read_stream, stable_order) -------------

#: One column of :func:`arrow_columns`: (format, null count, validity, offsets, data), Arrow's
#: buffers from offset 0 (format: u utf8, g double, l int64, i int32, C uint8, b bits): bytes,
#: or read-only memoryviews of DuckDB's own buffers where the stream was one batch.
ArrowColumn = tuple[str, int, "bytes | memoryview | None", "bytes | memoryview | None",
                    "bytes | memoryview"]


def arrow_columns(relation: Any) -> tuple[int, dict[str, ArrowColumn]] | None:
    """The rows of ``relation`` (a DuckDB relation, or another object exporting an Arrow C
    stream: msq.db.SelectStream; it runs now) as (row count, one buffer per column), read from
    DuckDB's Arrow C stream in C (msq/_flatten.c ``read_stream``; a stream of one batch read in
    place, several copied into one buffer a column): pyarrow and numpy are not
    imported (~0.25 s of a small compare). None, without running it, where the C helpers are
    not built; None too when a column has another type (the caller then reads it again with
    pyarrow)."""
    if _c is None:
        return None
    got = _c.read_stream(relation.__arrow_c_stream__())
    if isinstance(got, str):
        return None
    n = got[0][2] if got else 0
    return n, {name: (fmt, nulls, valid, offs, data) for name, fmt, _, nulls, valid, offs, data in got}


def stable_order(values: bytes | memoryview) -> bytes:
    """The int64 indices that sort the int64 ``values`` stably (C; numpy's argsort where the C
    helpers are not built)."""
    if _c is not None:
        result: bytes = _c.stable_order(values)
        return result
    import numpy as np

    return np.argsort(np.frombuffer(values, np.int64), kind="stable").astype(np.int64).tobytes()
