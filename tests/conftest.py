"""Fixtures shared by every test package (fixtures of one package's tests stay beside them)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


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
