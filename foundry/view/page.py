"""The page itself: one HTML document with its script and styles inline (they ship with the
package under `static/`), so the live page and `report.html` are the same file and neither
fetches anything from the internet.

Its Content-Security-Policy allows only the page's own inline script and style (by their
SHA-256) and, for the live page, requests back to the server it came from: a script
that somehow got into the document would not run.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
from importlib import resources
from typing import Any

from pygments.formatters import HtmlFormatter

from foundry.view.jsonsafe import script_json

SCRIPTS = ("chart.js", "view.js", "kernel.js", "run.js")  # one script, in this order
STYLES = ("view.css",)


@functools.lru_cache(maxsize=None)
def _static(name: str) -> str:
    return resources.files("foundry.view").joinpath("static", name).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def script() -> str:
    return "\n".join(_static(n) for n in SCRIPTS)


@functools.lru_cache(maxsize=1)
def style() -> str:
    highlight = HtmlFormatter(style="default").get_style_defs(".src")
    return "\n".join(_static(n) for n in STYLES) + "\n" + highlight


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def content_security_policy(*, live: bool) -> str:
    return "; ".join([
        "default-src 'none'", f"script-src {_sha256(script())}", f"style-src {_sha256(style())}",
        "img-src data:", "connect-src 'self'" if live else "connect-src 'none'",
        "base-uri 'none'", "form-action 'none'", "object-src 'none'"])


def page_html(*, title: str, config: dict[str, Any], data: dict[str, Any] | None = None) -> str:
    """The page. `config["mode"]` is "live" (it polls the server it came from) or
    "static" (`data` holds everything: the update, every kernel's detail)."""
    live = config.get("mode") == "live"
    csp = content_security_policy(live=live)
    blocks = [f'<script type="application/json" id="kf-config">{script_json(config)}</script>']
    if data is not None:
        blocks.append(f'<script type="application/json" id="kf-data">{script_json(data)}</script>')
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>", f"<style>{style()}</style>", "</head>", "<body>",
        '<header id="header"><h1>KernelFoundry run <span id="run-name"></span></h1>'
        '<p id="status">loading…</p></header>',
        '<main id="main"><section id="summary"></section><section id="tasks"></section>'
        '<section id="recent"></section><section id="run"></section></main>',
        '<aside id="kernel" hidden></aside>',
        *blocks, f"<script>{script()}</script>", "</body>", "</html>", ""])
