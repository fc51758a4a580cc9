"""Coverage-guided fuzzing of the dump reader with atheris (libFuzzer), for long local hunts.

The CI target is ``test_fuzz_reader.py`` (hypothesis); this one needs ``pip install atheris``::

    python tests/hostile/fuzz_atheris.py -atheris_runs=200000 [corpus_dir]

Same contract: reading a dump.json / stack.json either succeeds or raises ``MsqError``.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from msq.errors import MsqError
    from msq.jsonio import read_stack
    from msq.loader import read_side

_DIR = tempfile.mkdtemp(prefix="msq-atheris-")
_PATH = Path(_DIR) / "dump.json"


def one_input(raw: bytes) -> None:
    _PATH.write_bytes(raw)
    for compat in (False, True):
        try:
            read_side("npu", _PATH, compat)
        except MsqError:
            pass
    try:
        read_stack(_PATH)
    except MsqError:
        pass


def main() -> None:
    from tests.conftest import GOLDEN as seeds  # the golden cases, where the tests find them

    args = list(sys.argv)
    if not [a for a in args[1:] if not a.startswith("-")] and seeds.is_dir():
        # no corpus given: start from the small real dumps
        corpus = tempfile.mkdtemp(prefix="msq-corpus-")
        for i, dump in enumerate(sorted(seeds.glob("*/npu/step0/rank/*.json"))):
            if dump.stat().st_size < 200_000:
                (Path(corpus) / f"{i}.json").write_bytes(dump.read_bytes())
        args.append(corpus)
    atheris.Setup(args, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    import logging

    logging.disable(logging.CRITICAL)  # the duplicate-op warnings would flood the terminal
    os.environ.setdefault("MSQ_MAX_JSON_BYTES", str(1 << 22))
    main()
