"""Fixtures shared by every test package (fixtures of one package's tests stay beside them)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.msprobe_oracle import IN_CI, VENV_PYTHON


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
