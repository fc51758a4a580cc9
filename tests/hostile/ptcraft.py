"""Write hostile ``torch.save`` archives by hand: pickle opcodes, zip members, compression.

A ``.pt`` file is a zip of ``<root>/data.pkl`` (a pickle that calls
``torch._utils._rebuild_tensor_v2``), ``<root>/data/<key>`` (the storage bytes) and a few small
members. The functions here take a file torch wrote and change one thing in it, or build a tensor
pickle from its parts, so that each test says exactly what is hostile about its file.
"""

from __future__ import annotations

import pickle
import pickletools
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

# ------------------------------------------------------------------------------ pickle opcodes

PROTO2 = b"\x80\x02"
MARK, STOP, POP, DUP = b"(", b".", b"0", b"2"
EMPTY_DICT, EMPTY_LIST, EMPTY_TUPLE, NONE = b"}", b"]", b")", b"N"
SETITEM, SETITEMS, BUILD, APPEND, TUPLE, TUPLE2, REDUCE, BINPERSID = (
    b"s", b"u", b"b", b"a", b"t", b"\x86", b"R", b"Q")
NEWFALSE = b"\x89"


def glob(module: str, name: str) -> bytes:
    """GLOBAL: push ``module.name`` (what the unpickler's find_class returns)."""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def const(value: object) -> bytes:
    """The opcodes that push ``value`` (a str, int, tuple of ints, None, bool)."""
    return pickle.dumps(value, protocol=2)[2:-1]


def state_dict(items: Iterable[tuple[object, object]]) -> bytes:
    """Push a dict of ``items`` (EMPTY_DICT, MARK, key value..., SETITEMS)."""
    body = b"".join(const(k) + const(v) for k, v in items)
    return EMPTY_DICT + MARK + body + SETITEMS


def tensor_pickle(*, storage: str = "FloatStorage", key: str = "0", numel: int = 1,
                  offset: int = 0, size: tuple[int, ...] = (1,), stride: tuple[int, ...] = (1,),
                  prefix: bytes = b"") -> bytes:
    """A ``_rebuild_tensor_v2`` pickle as torch writes it, any layout; ``prefix`` runs first."""
    return (PROTO2 + prefix + glob("torch._utils", "_rebuild_tensor_v2") + MARK + MARK
            + const("storage") + glob("torch", storage) + const(key) + const("cpu")
            + const(numel) + TUPLE + BINPERSID + const(offset) + const(size) + const(stride)
            + NEWFALSE + glob("collections", "OrderedDict") + EMPTY_TUPLE + REDUCE + TUPLE
            + REDUCE + STOP)


def opcode_ends(payload: bytes) -> list[int]:
    """Byte positions right after each opcode of ``payload`` (before STOP): insertion points."""
    return [pos for op, _, pos in pickletools.genops(payload)][1:]


# ------------------------------------------------------------------------------ zip archives


def members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as archive:
        return [(info.filename, archive.read(info)) for info in archive.infolist()]


def write_members(path: Path, items: list[tuple[str, bytes]],
                  deflated: Callable[[str], bool] = lambda name: False) -> None:
    """Write a zip of ``items``; members for which ``deflated(name)`` is true are compressed."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in items:
            method = zipfile.ZIP_DEFLATED if deflated(name) else zipfile.ZIP_STORED
            archive.writestr(zipfile.ZipInfo(name), data, compress_type=method)


def archive(path: Path, payload: bytes, storage: bytes, root: str = "archive") -> None:
    """A torch-like archive of one pickle and one storage (member ``data/0``)."""
    write_members(path, [(f"{root}/data.pkl", payload), (f"{root}/byteorder", b"little"),
                         (f"{root}/data/0", storage), (f"{root}/version", b"3\n")])


def pickle_of(path: Path) -> bytes:
    return next(data for name, data in members(path) if name.endswith("/data.pkl"))


def rewrite_pickle(path: Path, edit: Callable[[bytes], bytes], dst: Path | None = None) -> None:
    """Replace the data.pkl of a torch file by ``edit(data.pkl)``, keeping every other member."""
    items = [(n, edit(d) if n.endswith("/data.pkl") else d) for n, d in members(path)]
    write_members(dst or path, items)


def poison_storage_type(payload: bytes, dtype: str = "int32",
                        storage: str = "FloatStorage") -> bytes:
    """Issue 17's attack: before the tensor, ``torch.<storage>`` gets a BUILD that sets its
    ``dtype`` (the stand-in's own attribute), then the real pickle runs."""
    attack = glob("torch", storage) + state_dict([("dtype", dtype)]) + BUILD + POP
    return payload[:2] + attack + payload[2:]


def deflate_bomb(size: int, chunk: int = 1 << 20) -> bytes:
    """A raw deflate stream of ``size`` zero bytes (about 1/1000 of that on disk)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(chunk)
    out = [comp.compress(zeros) for _ in range(size // chunk)]
    return b"".join(out) + comp.compress(bytes(size % chunk)) + comp.flush()


def raw_zip(path: Path, entries: list[tuple[str, int, bytes, int, int]]) -> None:
    """Write a zip byte by byte: ``(name, method, bytes as stored, size, crc32)`` per member, so a
    member can claim any method and inflated size (zipfile would compress for us)."""
    import struct

    body, cdir = b"", b""
    for name, method, raw, size, crc in entries:
        n = name.encode()
        head = struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(raw),
                           size, len(n), 0)
        cdir += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc,
                            len(raw), size, len(n), 0, 0, 0, 0, 0, len(body)) + n
        body += head + n + raw
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(entries), len(entries), len(cdir),
                      len(body), 0)
    path.write_bytes(body + cdir + end)


def bomb_archive(path: Path, payload: bytes, inflated: int) -> None:
    """An archive whose storage member is a deflate stream of ``inflated`` zero bytes."""
    crc = 0
    zeros = bytes(1 << 20)
    for _ in range(inflated >> 20):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(bytes(inflated & ((1 << 20) - 1)), crc)
    stored = zipfile.ZIP_STORED
    raw_zip(path, [("archive/data.pkl", stored, payload, len(payload), zlib.crc32(payload)),
                   ("archive/byteorder", stored, b"little", 6, zlib.crc32(b"little")),
                   ("archive/version", stored, b"3\n", 2, zlib.crc32(b"3\n")),
                   ("archive/data/0", zipfile.ZIP_DEFLATED, deflate_bomb(inflated), inflated, crc)])
