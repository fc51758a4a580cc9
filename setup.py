"""Build hook for the optional C extensions; all other metadata lives in pyproject.toml.

``msq.tensors._fused`` computes every real-data metric of a tensor pair in one pass over memory
(see msq/tensors/_fused.c). It is optional: where it cannot be compiled (no C compiler), the
install still succeeds and msq uses its numpy kernel, which gives the same cells, only slower.

``msq._flatten`` parses dump.json with yyjson (vendored in msq/_vendor/yyjson, MIT) and flattens
it into Arrow columns in C (see msq/_flatten.c); ``msq.export._sheetxml`` renders workbook rows.
Both optional too: without them msq reads dump.json with Python's json and msq/flatten.py, and
renders the rows in DuckDB, which give the same rows and bytes, several times slower.

``msq.history._names`` holds the history's names as a hash table for a directory compare's
driver (see msq/history/_names.c); optional too: without it the names are looked up in Arrow,
with the same keys.
"""

import sys
import zlib
from pathlib import Path

from setuptools import Extension, setup

# -ffp-contract=off: no fused multiply-add contraction, so the portable and the AVX2 loops (and
# any CPU) sum the dot products with identical roundings.
ARGS = [] if sys.platform == "win32" else ["-O3", "-ffp-contract=off", "-fno-fast-math"]

# yyjson: only its reader is compiled in; MSQ_PYTHON_LITERALS (msq's patch of its reader): NaN,
# Infinity and -Infinity are the only non-finite literals it reads, as Python's json
YYJSON_MACROS = [("YYJSON_DISABLE_WRITER", "1"), ("YYJSON_DISABLE_INCR_READER", "1"),
                 ("YYJSON_DISABLE_UTILS", "1"), ("MSQ_PYTHON_LITERALS", "1")]


def source_crc(source: str) -> list[tuple[str, str]]:
    """The macro that compiles the CRC-32 of an extension's own .c file into it (SOURCE_CRC):
    msq.cext then refuses a module built from an older text of that file (an editable install
    after a git pull) instead of calling it with what it does not know."""
    return [("MSQ_SOURCE_CRC", f"{zlib.crc32(Path(source).read_bytes())}UL")]



def optional_extension(name: str, sources: list[str], depends: tuple[str, ...] = (),
                       macros: list[tuple[str, str]] | None = None) -> Extension:
    """One of msq's C extensions: built where a compiler is, skipped (not failed) where none
    is; its own .c file (the first of ``sources``) checked by its CRC at import (source_crc)."""
    return Extension(name, sources, depends=[*depends, "msq/_source_crc.h"],
                     define_macros=(macros or []) + source_crc(sources[0]),
                     extra_compile_args=ARGS, optional=True)


setup(
    ext_modules=[
        optional_extension("msq.tensors._fused", ["msq/tensors/_fused.c"]),
        optional_extension("msq.export._sheetxml", ["msq/export/_sheetxml.c"]),
        optional_extension("msq.history._names", ["msq/history/_names.c"]),
        optional_extension("msq._flatten", ["msq/_flatten.c", "msq/_vendor/yyjson/yyjson.c"],
                           depends=("msq/_vendor/yyjson/yyjson.h",), macros=YYJSON_MACROS),
    ]
)
