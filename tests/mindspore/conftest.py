"""Fixtures for the MindSpore compare tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def msq_logging() -> Iterator[None]:
    """The CLI points the msq logger at its own stderr and stops propagation; undo that so that
    caplog sees the warnings of API calls made after a CLI run."""
    _reset()
    yield
    _reset()


def _reset() -> None:
    logger = logging.getLogger("msq")
    logger.handlers[:] = []
    logger.propagate = True
    logger.setLevel(logging.NOTSET)
