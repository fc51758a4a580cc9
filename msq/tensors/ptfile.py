"""Read a ``torch.save`` file holding one tensor, without importing torch and without running it.

A ``.pt`` file is a zip archive (members stored uncompressed)::

    <root>/data.pkl      pickle: torch._utils._rebuild_tensor_v2(<persistent storage id>, offset, size, stride, ...)
    <root>/data/<key>    raw storage bytes
    <root>/byteorder     "little" or "big"

The pickle is run by a restricted unpickler: the only globals it can name are the tensor rebuild
functions, storage types, dtypes, ``torch.Size`` and ``collections.OrderedDict``, each replaced by
an inert stand-in that records the layout. Anything else from outside ``torch`` is refused with
:class:`TensorFileError` before it can run. A ``torch.*`` name the fast path does not know (a
quantized or sparse tensor, say) is handed to ``torch.load(weights_only=True)``, torch's own safe
loader, imported lazily. The result must be one tensor; dicts, lists and scalars are refused.
"""

from __future__ import annotations

import collections
import io
import os
import pickle
import struct
import warnings
import zipfile
from typing import Any, TypeGuard

import numpy as np

from msq import cext
from msq.errors import TensorFileError
from msq.tensors.meta import TensorFile, TensorMeta, check_shape, open_tensor, to_array

# the C extension's zip directory reader (msq/tensors/_fused.c); else the Python one alone
_pt_members = getattr(cext.load("msq.tensors._fused"), "pt_members", None)
if os.environ.get("MSQ_NO_FUSED"):  # troubleshooting: msq's C tensor code off (as fused.py)
    _pt_members = None

_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": np.uint16,  # widened to float32 on read
    "ByteStorage": np.uint8,
    "CharStorage": np.int8,
    "ShortStorage": np.int16,
    "IntStorage": np.int32,
    "LongStorage": np.int64,
    "BoolStorage": np.bool_,
    "ComplexFloatStorage": np.complex64,
    "ComplexDoubleStorage": np.complex128,
}

# dtypes that _rebuild_tensor_v3 names explicitly (storage is then untyped bytes)
_TORCH_DTYPES = {
    "float32": np.float32, "float": np.float32, "float64": np.float64, "double": np.float64,
    "float16": np.float16, "half": np.float16, "bfloat16": np.uint16,
    "uint8": np.uint8, "int8": np.int8, "int16": np.int16, "short": np.int16,
    "int32": np.int32, "int": np.int32, "int64": np.int64, "long": np.int64, "bool": np.bool_,
    "uint16": np.uint16, "uint32": np.uint32, "uint64": np.uint64,
    "complex64": np.complex64, "cfloat": np.complex64, "complex128": np.complex128,
    "cdouble": np.complex128,
}  # fmt: skip


class _NeedsTorch(Exception):
    """The pickle names a torch object the fast path does not model; torch's safe loader may."""


class _Refused(Exception):
    pass


class _StandIn:
    """Base of every object a pickle can reach: immutable, whatever instruction it is given.

    A pickle can aim BUILD (``__setstate__`` or a write into ``__dict__``), SETITEM(S) and APPEND
    at any object on its stack, and the module-level stand-ins are shared by every load in the
    process: one file could otherwise retype ``torch.FloatStorage`` for all the files after it.
    Stand-ins have no ``__dict__``, refuse attribute writes, and refuse BUILD and item
    assignment with :class:`_Refused` (APPEND finds no ``append``: a corrupt pickle).
    """

    __slots__ = ("qualname",)
    qualname: str

    def __init__(self, qualname: str) -> None:
        object.__setattr__(self, "qualname", qualname)

    def __setattr__(self, name: str, value: object) -> None:
        raise _Refused(f"an attribute assignment on {self.qualname}")

    def __delattr__(self, name: str) -> None:
        raise _Refused(f"an attribute deletion on {self.qualname}")

    def __setstate__(self, state: object) -> None:
        raise _Refused(f"a BUILD instruction on {self.qualname}")

    def __setitem__(self, key: object, value: object) -> None:
        raise _Refused(f"an item assignment on {self.qualname}")


class _StorageType(_StandIn):
    __slots__ = ("bf16", "dtype")
    dtype: np.dtype | None  # None: untyped (bytes); the dtype then comes from _rebuild_tensor_v3
    bf16: bool

    def __init__(self, qualname: str, dtype: np.dtype | None, bf16: bool) -> None:
        super().__init__(qualname)
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "bf16", bf16)


class _TorchDType(_StandIn):
    __slots__ = ("name",)
    name: str

    def __init__(self, name: str) -> None:
        super().__init__(f"torch.{name}")
        object.__setattr__(self, "name", name)


class _Callable(_StandIn):
    """A function a pickle may call (``_rebuild_tensor_v2``, ``torch.Size``, ...)."""

    __slots__ = ("fn",)
    fn: Any

    def __init__(self, qualname: str, fn: Any) -> None:
        super().__init__(qualname)
        object.__setattr__(self, "fn", fn)

    def __call__(self, *args: object) -> object:
        return self.fn(*args)


class _Storage(_StandIn):
    """What ``persistent_load`` returns for a storage reference (a fresh one per reference)."""

    __slots__ = ("key", "numel", "stype")
    key: str
    stype: _StorageType
    numel: int

    def __init__(self, key: str, stype: _StorageType, numel: int) -> None:
        super().__init__("a tensor storage")
        for name, value in (("key", key), ("stype", stype), ("numel", numel)):
            object.__setattr__(self, name, value)


class _TensorStub:
    """What the restricted unpickler builds instead of a tensor: its layout, nothing else."""

    __slots__ = ("bf16", "derived", "dtype", "offset", "shape", "storage", "stride")

    def __init__(
        self, storage: _Storage, offset: int, shape: tuple, stride: tuple, dtype: Any, bf16: bool
    ) -> None:
        self.storage, self.offset, self.shape, self.stride = storage, offset, shape, stride
        self.dtype, self.bf16 = dtype, bf16
        self.derived: tuple | None = None  # (little, dtype, strides, bytes needed), see _layout

    def __setstate__(self, state: object) -> None:
        raise _Refused("a BUILD instruction on a tensor (tensor subclasses are not supported)")

    def __setitem__(self, key: object, value: object) -> None:
        raise _Refused("an item assignment on a tensor")


_INT64 = range(-(1 << 63), 1 << 63)


def _int64(value: object) -> TypeGuard[int]:
    return type(value) is int and value in _INT64


def _ints(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or not all(_int64(v) for v in value):
        raise _Refused(f"a tensor {what} that is not a tuple of 64-bit integers")
    return tuple(value)


def _rebuild_v2(
    storage: object, offset: object, size: object, stride: object, *_: object
) -> _TensorStub:
    if not isinstance(storage, _Storage) or storage.stype.dtype is None or not _int64(offset):
        raise _Refused("a tensor rebuilt from something that is not a typed storage")
    stype = storage.stype
    return _TensorStub(
        storage, offset, _ints(size, "size"), _ints(stride, "stride"), stype.dtype, stype.bf16
    )


def _rebuild_v3(
    storage: object, offset: object, size: object, stride: object, _rg: object, _hooks: object,
    dtype: object, *_: object,
) -> _TensorStub:  # fmt: skip
    if (
        not isinstance(storage, _Storage)
        or not isinstance(dtype, _TorchDType)
        or not _int64(offset)
    ):
        raise _Refused("a tensor rebuilt from something that is not a storage")
    np_dtype = _TORCH_DTYPES.get(dtype.name)
    if np_dtype is None:
        raise _Refused(f"dtype torch.{dtype.name}, which numpy cannot represent")
    return _TensorStub(
        storage, offset, _ints(size, "size"), _ints(stride, "stride"), np.dtype(np_dtype),
        dtype.name == "bfloat16",
    )  # fmt: skip


def _rebuild_parameter(data: object, *_: object) -> object:
    return data


def _rebuild_from_type_v2(func: object, new_type: object, args: object, state: object) -> object:
    if new_type is not _TENSOR_CLASS or state or not isinstance(args, tuple):
        raise _Refused("a tensor subclass or a tensor with extra attributes")
    if func not in _REBUILDS:
        raise _Refused("an unexpected rebuild function")
    assert isinstance(func, _Callable)
    return func(*args)


def _size(*args: Any) -> tuple:
    # torch.Size((2, 3)); any other call raises TypeError: a corrupt pickle
    return tuple(*args)


_REBUILD_V2 = _Callable("torch._utils._rebuild_tensor_v2", _rebuild_v2)
_REBUILD_V3 = _Callable("torch._utils._rebuild_tensor_v3", _rebuild_v3)
_REBUILD_PARAM = _Callable("torch._utils._rebuild_parameter", _rebuild_parameter)
_REBUILDS = (_REBUILD_V2, _REBUILD_V3, _REBUILD_PARAM)
_TENSOR_CLASS = _StandIn("torch.Tensor")  # as named by _rebuild_from_type_v2

_GLOBALS: dict[tuple[str, str], _StandIn] = {
    ("torch._utils", "_rebuild_tensor_v2"): _REBUILD_V2,
    ("torch._utils", "_rebuild_tensor_v3"): _REBUILD_V3,
    ("torch._utils", "_rebuild_parameter"): _REBUILD_PARAM,
    ("torch._utils", "_rebuild_parameter_with_state"): _Callable(
        "torch._utils._rebuild_parameter_with_state", _rebuild_parameter
    ),
    ("torch._tensor", "_rebuild_from_type_v2"): _Callable(
        "torch._tensor._rebuild_from_type_v2", _rebuild_from_type_v2
    ),
    ("torch", "Tensor"): _TENSOR_CLASS,
    ("torch", "Size"): _Callable("torch.Size", _size),
    ("torch.storage", "UntypedStorage"): _StorageType("torch.storage.UntypedStorage", None, False),
    # torch passes an empty OrderedDict (backward hooks): each call makes a new, unshared one
    ("collections", "OrderedDict"): _Callable("collections.OrderedDict", collections.OrderedDict),
}
for _name, _dt in _STORAGE_DTYPES.items():
    _GLOBALS[("torch", _name)] = _StorageType(
        f"torch.{_name}", np.dtype(_dt), _name == "BFloat16Storage"
    )
for _name in _TORCH_DTYPES:
    _GLOBALS[("torch", _name)] = _TorchDType(_name)

#: The only element dtypes a pickle can give a tensor: the numeric ones torch writes.
_NUMERIC = frozenset(np.dtype(d) for d in (*_STORAGE_DTYPES.values(), *_TORCH_DTYPES.values()))


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        found = _GLOBALS.get((module, name))
        if found is not None:
            return found
        if module == "torch" or module.startswith("torch."):
            raise _NeedsTorch(f"{module}.{name}")
        raise _Refused(f"the global {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        if (
            not isinstance(pid, tuple)
            or len(pid) != 5
            or pid[0] != "storage"
            or not isinstance(pid[1], _StorageType)
            or not isinstance(pid[2], str)
            or type(pid[4]) is not int
        ):
            raise _Refused(f"a persistent id that is not a storage reference: {pid!r:.80}")
        return _Storage(pid[2], pid[1], pid[4])


# --------------------------------------------------------------------------------------- zip


_EOCD = struct.Struct("<4s4H2LH")
_EOCD64_LOC = struct.Struct("<4sLQL")
_EOCD64 = struct.Struct("<4sQ2H2L4Q")
# method, compressed size, size, name and extra lengths, local header offset (record + 10)
_CDIR_ENTRY = struct.Struct("<H8xLLHH10xL")
_CDIR_LENGTHS = struct.Struct("<3H")  # name, extra, comment lengths at offset 28 of a record
_LOCAL_LENGTHS = struct.Struct("<HH")  # name and extra lengths at offset 26 of a local header


class _Zip:
    """Minimal reader of a zip's central directory, over bytes in memory or an open file.

    zipfile is the reference, but it costs about 93 us of CPU per small file against 14-18 us
    for this whole parse (zip, pickle and layout; bench/ptparse.py, bench/README.md): 1.7 CPU
    seconds on the tensor-small workload, a third of msq's whole compare. This reads only what a
    torch archive needs and checks every offset against the size. It is the only zip parser
    here: a second, one-pass one for files held in memory saved 3-6 us per file (0.06-0.13 s on
    22k files, 1-3 % of the compare) and was dropped (issue 11). Members must be stored:
    torch.save never compresses, and inflating what a rewritten archive holds could turn a small
    file into gigabytes (issue 17).
    """

    def __init__(self, path: str, file: TensorFile | None, data: bytes | None, size: int) -> None:
        self.path, self.file, self.data, self.size = path, file, data, size
        self.cdir = b""
        self._members: dict[str, int] | None = None
        self._count = self._locate_directory()

    @property
    def members(self) -> dict[str, int]:
        """member name -> position of its record in the central directory (``self.cdir``)."""
        if self._members is None:
            self._members = self._directory()
        return self._members

    def find(self, name: str) -> int | None:
        """Record position of the member called ``name``, or None (fast search, then full walk)."""
        want = name.encode()
        pos = self.cdir.find(want)
        while pos >= 0:
            at = pos - 46
            if (
                at >= 0
                and self.cdir[at : at + 4] == b"PK\x01\x02"
                and _CDIR_LENGTHS.unpack_from(self.cdir, at + 28)[0] == len(want)
            ):
                return at
            pos = self.cdir.find(want, pos + 1)
        return self.members.get(name)

    def find_pickle(self) -> tuple[str, int]:
        """Name and record position of the one ``<root>/data.pkl`` member."""
        pos = self.cdir.find(b"/data.pkl")
        if pos >= 0:
            at = self.cdir.rfind(b"PK\x01\x02", 0, pos)
            if at >= 0 and _CDIR_LENGTHS.unpack_from(self.cdir, at + 28)[0] == pos + 9 - at - 46:
                name = self.cdir[at + 46 : pos + 9].decode("utf-8", "replace")
                if name.count("/") == 1 and self.cdir.find(b"/data.pkl", pos + 1) < 0:
                    return name, at
        found = [m for m in self.members if m.endswith("/data.pkl") and m.count("/") == 1]
        if len(found) != 1:
            raise self._bad("no single <archive>/data.pkl member")
        return found[0], self.members[found[0]]

    def read_at(self, offset: int, n: int) -> bytes:
        if offset < 0 or offset + n > self.size:
            raise self._bad("a record points past the end of the file")
        if self.data is not None:
            return self.data[offset : offset + n]
        assert self.file is not None
        return self.file.pread(n, offset)

    def _bad(self, why: str) -> TensorFileError:
        return TensorFileError(
            f"{self.path}: not a complete torch.save archive ({why}); "
            "the file is truncated or corrupt, dump it again"
        )

    def _locate_directory(self) -> int:
        tail_start = max(0, self.size - _EOCD.size - 65535)
        if self.data is not None:
            tail, base = self.data, 0
        else:
            tail, base = self.read_at(tail_start, self.size - tail_start), tail_start
        pos = tail.rfind(b"PK\x05\x06", tail_start - base)
        if pos < 0 or pos + _EOCD.size > len(tail):
            raise self._bad("no zip end-of-directory record")
        _, _, _, _, count, cd_size, cd_off, _ = _EOCD.unpack_from(tail, pos)
        if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_off == 0xFFFFFFFF:
            count, cd_size, cd_off = self._zip64_directory(base + pos)
        self.cdir = self.read_at(cd_off, cd_size)
        return count

    def _directory(self) -> dict[str, int]:
        cdir = self.cdir
        members: dict[str, int] = {}
        at, end, lengths = 0, len(cdir), _CDIR_LENGTHS.unpack_from
        for _ in range(self._count):
            if at + 46 > end or cdir[at : at + 4] != b"PK\x01\x02":
                raise self._bad("a damaged central directory")
            nlen, xlen, clen = lengths(cdir, at + 28)
            members[cdir[at + 46 : at + 46 + nlen].decode("utf-8", "replace")] = at
            at += 46 + nlen + xlen + clen
        return members

    def _zip64_directory(self, eocd_at: int) -> tuple[int, int, int]:
        loc = self.read_at(eocd_at - _EOCD64_LOC.size, _EOCD64_LOC.size)
        sig, _, rec_at, _ = _EOCD64_LOC.unpack(loc)
        if sig != b"PK\x06\x07":
            raise self._bad("a zip64 archive without its locator")
        rec = _EOCD64.unpack(self.read_at(rec_at, _EOCD64.size))
        if rec[0] != b"PK\x06\x06":
            raise self._bad("a damaged zip64 end-of-directory record")
        return rec[7], rec[8], rec[9]

    def span(self, at: int, name: str) -> tuple[int, int]:
        """(start, length) of the bytes of the member whose directory record is at ``at``.

        One unpack of the central record, one read of the local header; refuses a compressed
        member and any size or offset that does not fit the file.
        """
        method, csize, size, nlen, xlen, header = _CDIR_ENTRY.unpack_from(self.cdir, at + 10)
        if 0xFFFFFFFF in (size, csize, header):
            extra = self.cdir[at + 46 + nlen : at + 46 + nlen + xlen]
            size, csize, header = _zip64_extra(extra, size, csize, header)
        if method != zipfile.ZIP_STORED:
            raise TensorFileError(
                f"{self.path}: member {name} is compressed (zip method {method}); torch.save "
                "never compresses its members, so the file was rewritten by another tool: save "
                "the tensor again with torch.save"
            )
        if size != csize:
            raise self._bad(f"member {name} is stored but gives two different sizes")
        head = self.read_at(header, 30)
        if head[:4] != b"PK\x03\x04":
            raise self._bad(f"a damaged local header for {name}")
        nlen, xlen = _LOCAL_LENGTHS.unpack_from(head, 26)
        start = header + 30 + nlen + xlen
        if start + csize > self.size:
            raise self._bad(f"member {name} extends past the end of the file")
        return start, csize

    def read_member(self, at: int, name: str) -> bytes:
        return self.read_at(*self.span(at, name))

    def check_all_stored(self) -> None:
        for name, at in self.members.items():
            self.span(at, name)


def _zip64_extra(extra: bytes, size: int, csize: int, header: int) -> tuple[int, int, int]:
    at = 0
    while at + 4 <= len(extra):
        tag, length = struct.unpack_from("<2H", extra, at)
        if tag == 1:
            vals = list(struct.unpack_from(f"<{length // 8}Q", extra, at + 4))
            if size == 0xFFFFFFFF and vals:
                size = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if header == 0xFFFFFFFF and vals:
                header = vals.pop(0)
        at += 4 + length
    return size, csize, header


# ------------------------------------------------------------------------------------ public


def inspect_pt(path: str, data: bytes | TensorFile | None = None) -> TensorMeta:
    """Parse a ``torch.save`` file holding one tensor and return where its elements are.

    Args:
        path: the ``.pt`` file.
        data: the whole file when the caller already read it (small files), the open file
            (large ones, see ``paths.read_confined``), or None to open ``path``.

    Returns:
        The tensor's :class:`TensorMeta`; small files carry their bytes in ``data``, large ones
        their open file.

    Raises:
        TensorFileError: the file is not a torch archive, is truncated, holds something other
            than one plain tensor, or its pickle names anything outside the allowed torch set.
    """
    try:
        source = open_tensor(path) if data is None else data
        try:
            if isinstance(source, TensorFile):
                return _inspect(path, source, None, source.size)
            return _inspect(path, None, source, len(source))
        except _NeedsTorch as exc:
            return _torch_fallback(path, str(exc), source)
    except OSError as exc:
        raise TensorFileError(f"{path}: cannot read tensor file ({exc.strerror or exc})") from exc


def _inspect(path: str, file: TensorFile | None, data: bytes | None, size: int) -> TensorMeta:
    if data is not None and _pt_members is not None:
        listed = _inspect_listed(path, data)
        if listed is not None:
            return listed
    head = data[:4] if data is not None else file.pread(4, 0)  # type: ignore[union-attr]
    if size < 4 or head != b"PK\x03\x04":
        if head[:1] == b"\x80":  # legacy (pre-1.6) torch.save: a bare pickle stream
            raise _NeedsTorch("legacy torch.save format")
        raise TensorFileError(
            f"{path}: not a torch.save archive (no zip header); expected a .pt tensor file"
        )
    try:
        z = _Zip(path, file, data, size)
        pkl_name, pkl_at = z.find_pickle()
        root = pkl_name[: -len("data.pkl")]
        stub = _unpickle(path, z.read_member(pkl_at, pkl_name))
    except _NeedsTorch:
        # torch.load would inflate a compressed member whole: check them all before handing over
        _Zip(path, file, data, size).check_all_stored()
        raise
    order_at = z.find(root + "byteorder")
    little = order_at is None or z.read_member(order_at, "byteorder").strip() != b"big"
    return _meta_from_stub(path, z, root, stub, little, data, file)


def _inspect_listed(path: str, data: bytes) -> TensorMeta | None:
    """:func:`_inspect` of a whole file in memory from the C extension's reading of its zip
    directory (one call instead of a dozen struct unpacks and searches: 6.8 -> ~4 us a file, 11k
    files a side on tensor_small). None when the archive is not the plain kind that covers, or
    its storage member is missing: :func:`_inspect`'s own reader then reads the file (and says
    what is wrong). For the files it accepts, the members, the pickle run and the layout are the
    ones that reader finds."""
    listed = _pt_members(data)  # type: ignore[misc]
    if listed is None:
        return None
    _root, (start, n), order, storages = listed
    stub = _unpickle(path, data[start : start + n])
    little = order is None or data[order[0] : order[0] + order[1]].strip() != b"big"
    for key, at, size in storages:
        if key == stub.storage.key:
            return _layout(path, stub, little, at, size, data)
    return None


_STUB_CACHE: dict[bytes, _TensorStub] = {}


def _unpickle(path: str, payload: bytes) -> _TensorStub:
    # Dumps hold many tensors of one shape, whose data.pkl bytes are identical: parse each once.
    cached = _STUB_CACHE.get(payload)
    if cached is not None:
        return cached
    stub = _unpickle_new(path, payload)
    if len(_STUB_CACHE) >= 4096:
        _STUB_CACHE.clear()
    _STUB_CACHE[payload] = stub
    return stub


def _unpickle_new(path: str, payload: bytes) -> _TensorStub:
    try:
        obj = _Unpickler(io.BytesIO(payload)).load()
    except _Refused as exc:
        raise TensorFileError(
            f"{path}: refused to load: its pickle uses {exc}; only plain tensors are accepted "
            "(this file may be malicious, or not a msprobe tensor dump)"
        ) from None
    except _NeedsTorch:
        raise
    except Exception as exc:  # noqa: BLE001  (any malformed stream: truncated, wrong arity, ...)
        raise TensorFileError(f"{path}: the tensor pickle (data.pkl) is corrupt: {exc}") from None
    if not isinstance(obj, _TensorStub):
        raise TensorFileError(
            f"{path}: holds a {type(obj).__name__}, expected a single tensor (torch.save(tensor))"
        )
    if not isinstance(obj.dtype, np.dtype) or obj.dtype not in _NUMERIC:
        raise TensorFileError(
            f"{path}: refused to load: its pickle gives the tensor the element type "
            f"{obj.dtype!r:.40}, which is not a numeric dtype torch writes"
        )
    return obj


def _meta_from_stub(
    path: str, z: _Zip, root: str, stub: _TensorStub, little: bool, data: bytes | None,
    file: TensorFile | None,
) -> TensorMeta:  # fmt: skip
    name = f"{root}data/{stub.storage.key}"
    at = z.find(name)
    if at is None:
        raise z._bad(f"storage data/{stub.storage.key} is missing")
    start, avail = z.span(at, name)
    return _layout(path, stub, little, start, avail, data, file)


#: A layout that reads storage elements more than once (stride 0: ``expand``; overlapping
#: strides) may name more elements than its storage holds, up to this many: beyond, a file of a
#: few bytes could keep a compare busy for hours (issue 17). Other layouts are bounded by the file.
MAX_REPEATED_ELEMS = 1 << 24


def _layout(
    path: str, stub: _TensorStub, little: bool, start: int, avail: int, data: bytes | None,
    file: TensorFile | None = None,
) -> TensorMeta:  # fmt: skip
    """The meta of a tensor whose storage bytes are ``[start, start + avail)`` of the file/data."""
    cached = stub.derived
    if cached is None or cached[0] != little:
        cached = stub.derived = _derive(path, stub, little)
    _, dtype, strides, need, numel = cached
    first = stub.offset * dtype.itemsize
    if first + need > avail:
        raise TensorFileError(
            f"{path}: the tensor layout needs {first + need} bytes of storage but only {avail} "
            "are present; the file is truncated or corrupt, dump it again"
        )
    stored = (avail - first) // dtype.itemsize
    if numel > max(stored, MAX_REPEATED_ELEMS):
        raise TensorFileError(
            f"{path}: the tensor layout names {numel} elements (shape {stub.shape}, strides "
            f"{stub.stride}) but its storage holds {stored}; msq reads at most "
            f"{MAX_REPEATED_ELEMS} elements of a layout that repeats storage elements: save a "
            "contiguous copy (tensor.contiguous())"
        )
    return TensorMeta(path, dtype, stub.bf16, stub.shape, strides, start + first, data, file)


def _derive(path: str, stub: _TensorStub, little: bool) -> tuple:
    """What a layout implies, computed once per distinct data.pkl (stubs are cached and shared):
    (little, dtype, element strides or None, bytes needed from element 0, element count)."""
    dtype = np.dtype(stub.dtype).newbyteorder("<" if little else ">")
    shape, stride = stub.shape, stub.stride
    if len(shape) != len(stride):
        raise TensorFileError(
            f"{path}: tensor size and stride have different lengths; corrupt file"
        )
    check_shape(path, shape, "tensor", dtype.itemsize)
    if stub.offset < 0 or any(d < 0 for d in shape) or any(s < 0 for s in stride):
        raise TensorFileError(f"{path}: negative offset, size or stride; the file is corrupt")
    # a dimension of size 0 or 1 never steps: its stride (any value torch or a file gives) is 0
    stride = tuple(s if d > 1 else 0 for d, s in zip(shape, stride))
    meta = TensorMeta(
        path, dtype, stub.bf16, shape, None if _is_c_contiguous(shape, stride) else stride, 0
    )
    return little, dtype, meta.strides, meta.span * dtype.itemsize, meta.numel


def _is_c_contiguous(shape: tuple[int, ...], stride: tuple[int, ...]) -> bool:
    if 0 in shape:  # no element to step to: any strides read as torch reads them (nothing); a
        return True  # huge one would only overflow numpy's byte strides
    expect = 1
    for d, s in zip(reversed(shape), reversed(stride)):
        if d != 1 and s != expect:
            return False
        expect *= d
    return True


def _torch_fallback(path: str, why: str, source: bytes | TensorFile) -> TensorMeta:
    """Load with ``torch.load(weights_only=True)`` (torch's own allow-list) and wrap the result.

    torch reads the bytes or the descriptor msq already holds, never the name again.
    """
    try:
        import torch
    except ImportError:
        raise TensorFileError(
            f"{path}: uses {why}, which msq reads only through torch; install torch==2.13.0"
        ) from None
    stream = io.BytesIO(source) if isinstance(source, bytes) else source.reader()
    try:
        with warnings.catch_warnings(), stream:  # e.g. "Detected pickle protocol 4": see below
            warnings.simplefilter("ignore")
            obj = torch.load(stream, weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001  (torch raises many types for a refused file)
        raise TensorFileError(
            f"{path}: torch refused to load it safely (weights_only): {_torch_reason(exc)}; "
            "the file may be malicious, or not a msprobe tensor dump"
        ) from None
    if not isinstance(obj, torch.Tensor):
        raise TensorFileError(f"{path}: holds a {type(obj).__name__}, expected a single tensor")
    t = obj.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()
    try:
        arr = np.ascontiguousarray(t.resolve_conj().resolve_neg().numpy())
    except (TypeError, RuntimeError) as exc:
        raise TensorFileError(f"{path}: tensor of {t.dtype} cannot be compared: {exc}") from None
    return TensorMeta(path, arr.dtype, False, tuple(arr.shape), None, 0, arr.tobytes())


_TORCH_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation")


def _torch_reason(exc: Exception) -> str:
    """The specific line(s) of torch's multi-paragraph refusal, on one line."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith(_TORCH_BOILERPLATE)]
    return " ".join(kept or [line for line in lines if line][:1]) or type(exc).__name__


def load_pt(path: str) -> np.ndarray:
    """The tensor in a ``.pt`` file as a numpy array (bfloat16 widened to float32).

    The array is read-only: a view over the file's bytes or a memory map where possible.
    """
    return to_array(inspect_pt(path))
