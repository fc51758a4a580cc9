"""Running the real msprobe 1.1.0 (bench/.venv-msprobe) as an oracle: in CI, or opt-in.

MindSpore is not installed: ``MINDSPORE_STUB`` is a prelude for the runner scripts that answers
every ``import mindspore...`` with an empty stub module, enough for msprobe's compare code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

VENV_PYTHON = Path(__file__).resolve().parents[1] / "bench" / ".venv-msprobe" / "bin" / "python"
IN_CI = bool(os.environ.get("CI"))
# CI (.ci/run builds the venv) always runs them; elsewhere they are opt-in: they take minutes
RUN_ORACLE = IN_CI or os.environ.get("MSQ_MSPROBE_ORACLE") == "1"
ORACLE_MARKS = [
    pytest.mark.slow,
    pytest.mark.skipif(not RUN_ORACLE, reason="opt-in outside CI: set MSQ_MSPROBE_ORACLE=1 "
                                              "(needs bash bench/setup_msprobe.sh)"),
    pytest.mark.usefixtures("msprobe_venv"),
]

MINDSPORE_STUB = r'''
import sys, types, importlib.abc, importlib.machinery
class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"): raise AttributeError(name)
        return _Meta(name, (), {"__init__": lambda self, *a, **k: None})
class _Stub(types.ModuleType):
    __path__ = []
    def __getattr__(self, name):
        if name.startswith("__"): raise AttributeError(name)
        value = _Meta(name, (), {"__init__": lambda self, *a, **k: None})
        setattr(self, name, value)
        return value
class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "mindspore" or fullname.startswith("mindspore."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
    def create_module(self, spec): return _Stub(spec.name)
    def exec_module(self, module): pass
sys.meta_path.insert(0, _Finder())
'''
