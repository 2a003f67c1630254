"""Fixtures for the LLM tests: a scripted OpenAI-compatible server on loopback and a
small task."""

from __future__ import annotations

import pytest

from foundry.types import Task
from support.openai_server import ScriptedOpenAIServer

from llm_helpers import RELU_TASK_SOURCE


@pytest.fixture
def server():
    with ScriptedOpenAIServer() as s:
        yield s


@pytest.fixture
def relu_task(tmp_path) -> Task:
    path = tmp_path / "19_ReLU.py"
    path.write_text(RELU_TASK_SOURCE)
    return Task(task_id="19_ReLU", path=str(path), source=RELU_TASK_SOURCE,
                size_profile="small", size_overrides={"N": 256}, level=1,
                instructions="Keep float32 throughout.")
