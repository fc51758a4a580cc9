"""What a wheel holds: every folder of msq/ and sql/ is a declared package.

An editable install finds any folder on disk, so a package missing from pyproject.toml only shows
in a real `pip install .`: msq.blame was missing once and every compare of such an install failed
with ModuleNotFoundError. Building a wheel here would compile the C parts again (slow); the list in
pyproject.toml against the tree is the whole question.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

tomllib = pytest.importorskip("tomllib") if sys.version_info >= (3, 11) else None


def _folders(root: Path, prefix: str) -> set[str]:
    """Dotted names of root and every folder under it with a file somewhere below."""
    names = set()
    for path in [root, *root.rglob("*")]:
        if not path.is_dir() or path.name == "__pycache__" or path.name.endswith(".egg-info"):
            continue
        if not any(child.is_file() for child in path.rglob("*")):
            continue
        rel = path.relative_to(root).parts
        names.add(".".join((prefix, *rel)))
    return names


@pytest.mark.skipif(tomllib is None, reason="reading pyproject.toml needs Python 3.11's tomllib")
def test_every_folder_of_the_package_is_declared() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())  # type: ignore[union-attr]
    setuptools = config["tool"]["setuptools"]
    declared = set(setuptools["packages"])
    assert setuptools["package-dir"] == {"msq.sql": "sql"}
    on_disk = _folders(REPO / "msq", "msq") | _folders(REPO / "sql", "msq.sql")
    assert on_disk - declared == set(), "folders a wheel would leave out"
    assert declared - on_disk == set(), "declared packages with no folder"


@pytest.mark.skipif(tomllib is None, reason="reading pyproject.toml needs Python 3.11's tomllib")
def test_data_files_are_declared_for_the_folders_that_hold_no_python() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())  # type: ignore[union-attr]
    data = config["tool"]["setuptools"]["package-data"]
    for package in ("msq.data", "msq.report.assets", "msq._vendor.yyjson"):
        assert package in data, package
    assert "**/*.sql" in data["msq.sql"]
