from __future__ import annotations

import shutil

import pytest

from browser_env import INSTALL_HINT, chromium_path
from view_run import add_hostile_candidates, smoke_run


@pytest.fixture(scope="session")
def view_run_dir(tmp_path_factory):
    """A real smoke run's directory with the hostile candidates added (read-only: tests
    that write to a run copy it with `run_copy`)."""
    run_dir = smoke_run(tmp_path_factory.mktemp("view") / "run")
    hostile = add_hostile_candidates(run_dir)
    return run_dir, hostile


@pytest.fixture
def run_copy(view_run_dir, tmp_path):
    run_dir, hostile = view_run_dir
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    return copy, hostile


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (the system's) driven by Playwright; skips, saying why, without one."""
    try:
        from playwright.sync_api import Error, sync_playwright
    except ImportError:
        pytest.skip(f"Playwright is not installed: {INSTALL_HINT}")
    path = chromium_path()
    if path is None:
        pytest.skip(f"no Chromium found: {INSTALL_HINT}")
    with sync_playwright() as pw:
        try:
            chromium = pw.chromium.launch(executable_path=path, headless=True)
        except Error as e:
            pytest.skip(f"Chromium at {path} did not start ({str(e).splitlines()[0]}): {INSTALL_HINT}")
        yield chromium
        chromium.close()
