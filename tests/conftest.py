"""Fixtures shared by every test package (fixtures of one package's tests stay beside them), and
the one place that says where msprobe's golden cases are.

Golden data (real msprobe 1.1.0 dumps and outputs) lives outside the repository: ``$MSQ_GOLDEN``,
else ``../shared/golden`` beside the clone. A test that needs it is marked ``golden`` (or takes
its cases from :func:`golden_params`); when the folder is missing it is skipped with the reason,
except under ``CI=true``, where it fails: CI must check msprobe's real outputs.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.msprobe_oracle import IN_CI, VENV_PYTHON

# A CI harness or a non-interactive shell's background job may start pytest with SIGINT ignored;
# the msq processes the tests start would inherit SIG_IGN across exec, and msq rightly leaves an
# ignored SIGINT alone (as a background job must), so the Ctrl-C tests would wait for nothing.
# A Python handler is reset to the default on exec: restoring it here (in the controller and in
# each xdist worker) gives every child the default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
#: msprobe's golden cases: $MSQ_GOLDEN, else ../shared/golden beside the repository
GOLDEN = Path(os.environ.get("MSQ_GOLDEN") or ROOT.parent / "shared" / "golden")


def golden_missing() -> str | None:
    """Why the golden tests cannot run (None when they can)."""
    if GOLDEN.is_dir():
        return None
    return f"golden data not found at {GOLDEN} (set MSQ_GOLDEN to the folder of msprobe's cases)"


def golden_params(values: Sequence[Any], ids: Any = None) -> list[Any]:
    """Parameters over golden cases; without golden data, one placeholder marked ``golden``
    (skipped, or failed under CI) instead of an empty list that pytest would quietly skip."""
    if values:
        return [pytest.param(v, marks=pytest.mark.golden, id=ids(v) if callable(ids) else None)
                for v in values]
    return [pytest.param(None, marks=pytest.mark.golden, id="no-golden-data")]


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("golden") is None:
        return
    reason = golden_missing()
    if reason is None:
        return
    if IN_CI:
        pytest.fail(f"{reason}; CI=true needs it", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def msq_logging() -> Iterator[None]:
    """The CLI points the msq logger at its own stderr and stops propagation; undo that around
    every test, so that caplog sees the warnings of later API calls."""
    _reset()
    yield
    _reset()


def _reset() -> None:
    logger = logging.getLogger("msq")
    logger.handlers[:] = []
    logger.propagate = True
    logger.setLevel(logging.NOTSET)


@pytest.fixture
def msprobe_venv() -> None:
    """The msprobe 1.1.0 venv of the oracle tests: a skip without it, a failure in CI (which
    builds it with bench/setup_msprobe.sh)."""
    if not VENV_PYTHON.exists():
        message = f"{VENV_PYTHON} is missing: run bash bench/setup_msprobe.sh"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
