"""docs/errors.md lists every error msq can report: each ``raise <...>Error("...")`` in ``msq/``
(and each ``return <...>Error("...")`` of a helper that builds one to be raised) must have its
message in the page (its longest literal part, at least).

A new error without a row fails here: add the message, its exit status and what the user should
do to docs/errors.md.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DOC = ROOT / "docs" / "errors.md"
# raised for a user to read; internal signals (_Refused, _NeedsTorch, ValueError, AttributeError,
# yaml's ComposerError) are turned into one of these before they leave msq
USER_ERRORS = {"MsqError", "UsageError", "InputError", "DumpError", "TensorFileError",
               "SqlFileError", "ExportError", "HistoryError", "PairsFailedError",
               "click.UsageError"}


def _fragments(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [v.value for v in node.values
                if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if isinstance(node, ast.BinOp):
        return _fragments(node.left) + _fragments(node.right)
    return []


def raised_messages() -> list[tuple[str, str]]:
    """(where, longest literal part) of every user-facing raise in msq/."""
    found = []
    for path in sorted((ROOT / "msq").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            call = node.exc if isinstance(node, ast.Raise) else (
                node.value if isinstance(node, ast.Return) else None)
            if not isinstance(call, ast.Call):
                continue
            if ast.unparse(call.func) not in USER_ERRORS or not call.args:
                continue
            parts = [p.split("\n")[0].strip() for p in _fragments(call.args[0])]
            longest = max(parts, key=len, default="")
            found.append((f"{path.relative_to(ROOT)}:{node.lineno}", longest))
    return found


def test_the_catalogue_is_found() -> None:
    assert len(raised_messages()) > 150


@pytest.mark.parametrize("where, text", [m for m in raised_messages() if len(m[1]) >= 8],
                         ids=lambda v: v if ".py:" in str(v) else "")
def test_every_error_is_documented(where: str, text: str) -> None:
    doc = " ".join(DOC.read_text(encoding="utf-8").split())
    assert " ".join(text.split()) in doc, f"{where}: add {text!r} to docs/errors.md"
