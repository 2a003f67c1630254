"""The offline template engine: recognise a task's op families into one backend-neutral
description, emit `c` and `triton` candidates from it, mutate them without an LLM."""

from foundry.templates.config import TemplateConfig
from foundry.templates.engine import coverage, describe_task, emit, variants
from foundry.templates.proposer import TemplateProposer
from foundry.templates.recognize import NotCovered

__all__ = ["NotCovered", "TemplateConfig", "TemplateProposer", "coverage", "describe_task", "emit", "variants"]
