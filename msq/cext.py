"""msq's optional C extensions, loaded only when they were built from the source beside them.

Each extension (``msq._flatten``, ``msq.export._sheetxml``, ``msq.tensors._fused``,
``msq.history._names``) is optional: without it msq runs its Python/numpy code, which gives the
same cells, only slower. In an
editable install (``pip install -e .``) the compiled module stays where it was built while the
source moves on with ``git pull``: a module built from an older ``.c`` file can take other
arguments or return other columns than the Python code that calls it now expects, and fails
with a traceback, or worse. So setup.py compiles the CRC-32 of each extension's own ``.c`` file
into it (``SOURCE_CRC``), and :func:`load` compares it with the file found beside the package:
a module built from another text is not used, and msq says to rebuild it, once per process.

An installed wheel ships no ``.c`` files: there is nothing to compare with, and the module it
was built with is used. The check costs one read of a file of 20-65 KB (~0.05 ms).
"""

from __future__ import annotations

import importlib
import logging
import os
import zlib
from types import ModuleType

log = logging.getLogger(__name__)

#: The folder of the msq package (the sources' paths below are relative to it)
_PACKAGE = os.path.dirname(os.path.abspath(__file__))

#: Each extension's own source file (the first of setup.py's ``sources`` for it: vendored code
#: is not checked, it changes only with a deliberate update of its folder)
SOURCES = {
    "msq._flatten": "_flatten.c",
    "msq.export._sheetxml": os.path.join("export", "_sheetxml.c"),
    "msq.tensors._fused": os.path.join("tensors", "_fused.c"),
    "msq.history._names": os.path.join("history", "_names.c"),
}

_loaded: dict[str, ModuleType | None] = {}
_why: dict[str, str] = {}  # name -> why it is not used (see :func:`why_not`)


def source_crc(path: str) -> int | None:
    """The CRC-32 of a file's bytes, as setup.py computes it; None when it cannot be read."""
    try:
        with open(path, "rb") as file:
            return zlib.crc32(file.read())
    except OSError:
        return None


def load(name: str) -> ModuleType | None:
    """The extension ``name`` (a key of :data:`SOURCES`), or None when it was not built or was
    built from another text of its source than the one beside the package (then a warning)."""
    if name in _loaded:
        return _loaded[name]
    try:
        module: ModuleType | None = importlib.import_module(name)
    except ImportError:  # built without a C compiler: the Python code does all the work
        module = None
        _why[name] = f"{name} was not built: no C compiler at install time"
    source = SOURCES[name].replace(os.sep, "/")
    if module is not None and stale(module, os.path.join(_PACKAGE, SOURCES[name])):
        log.warning("%s was compiled from an older msq/%s and is not used (msq runs its slower "
                    "Python code instead): run `pip install -e .` again to rebuild it",
                    name, source)
        module = None
        _why[name] = f"{name} is out of date: compiled from an older msq/{source}"
    _loaded[name] = module
    return module


def why_not(name: str) -> str:
    """Why :func:`load` gave None for ``name`` (for ``compare -v``)."""
    return _why.get(name, f"{name} was not loaded")


def stale(module: ModuleType, source: str) -> bool:
    """Whether ``module`` was compiled from another text than the file ``source`` holds now (a
    module built before its CRC was compiled in counts as another text); False without the
    file (an installed wheel)."""
    crc = source_crc(source)
    return crc is not None and getattr(module, "SOURCE_CRC", None) != crc
