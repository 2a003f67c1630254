"""Where the browser tests find Playwright's client and a Chromium, and what to say when
they cannot."""

from __future__ import annotations

import os
import shutil

INSTALL_HINT = ("the run page's browser tests need Playwright and a Chromium: `pip install playwright` and "
                "`apt-get install -y chromium` (Debian), or point FOUNDRY_CHROMIUM at a Chromium binary")


def chromium_path() -> str | None:
    explicit = os.environ.get("FOUNDRY_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None
