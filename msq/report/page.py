"""The self-contained HTML page: template, styles, the vendored chart library, the page's
script and the base64 data, written atomically.

Every script and style is inline; a Content-Security-Policy names the two scripts by hash, so a
script that an op name might smuggle into the page would not run even if it reached the DOM (the
page's script only ever sets ``textContent``).
"""

from __future__ import annotations

import base64
import hashlib
import html
from functools import cache
from importlib import resources
from pathlib import Path

from msq.db import atomic_write
from msq.report.payload import Payload

ASSETS = ("template.html", "report.css", "report.js", "uPlot.iife.min.js", "uPlot.min.css")


@cache
def asset(name: str) -> str:
    """One file of ``msq/report/assets`` as text."""
    text = (resources.files("msq.report") / "assets" / name).read_text(encoding="utf-8")
    # inline code must not be able to end its own element early
    if name.endswith(".js") and "</script" in text.lower():
        raise ValueError(f"msq/report/assets/{name}: holds '</script', cannot be inlined")
    if name.endswith(".css") and "</style" in text.lower():
        raise ValueError(f"msq/report/assets/{name}: holds '</style', cannot be inlined")
    return text


def _csp_hash(script: str) -> str:
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def render(payload: Payload) -> str:
    """The page's HTML text."""
    lib, app = asset("uPlot.iife.min.js"), asset("report.js")
    csp = ("default-src 'none'; img-src data: blob:; style-src 'unsafe-inline'; "
           f"script-src {_csp_hash(lib)} {_csp_hash(app)}")
    data = base64.b64encode(payload.blob).decode("ascii")
    parts = {
        "{{CSP}}": html.escape(csp, quote=False).replace('"', "&quot;"),
        "{{TITLE}}": html.escape(f"msq report: {payload.title}", quote=False),
        "{{STYLE}}": asset("uPlot.min.css") + "\n" + asset("report.css"),
        "{{LIB}}": lib,
        "{{APP}}": app,
        "{{DATA}}": data,
    }
    page = asset("template.html")
    # one pass over the template: a value is never searched for the next placeholder
    out: list[str] = []
    rest = page
    while "{{" in rest:
        before, _, after = rest.partition("{{")
        key, _, rest = after.partition("}}")
        out.append(before)
        out.append(parts["{{" + key + "}}"])
    out.append(rest)
    return "".join(out)


def write(payload: Payload, path: Path) -> None:
    """Write the page to ``path`` atomically (a temporary file renamed into place)."""
    text = render(payload)
    with atomic_write(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
