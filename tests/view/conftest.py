from __future__ import annotations

import shutil

import pytest

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
