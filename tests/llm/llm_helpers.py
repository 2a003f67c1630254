"""Shared values and helpers for the LLM tests (a uniquely named module, so it does not
clash with other areas' conftest modules)."""

from __future__ import annotations

from foundry.llm.config import LLMConfig
from support.openai_server import ScriptedOpenAIServer

RELU_TASK_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


N = 4096
SMALL_SIZES = {"N": 256}


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
'''

PARENT_SOURCE = '''import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""
_lib = c.build(SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu(x, y, x.numel())
        return y
'''


def make_config(server: ScriptedOpenAIServer, **overrides) -> LLMConfig:
    """A config for the scripted server: fast retries, short timeouts."""
    data = {"provider": "compatible", "base_url": server.base_url, "model": "scripted-model",
            "api_key_env": "FOUNDRY_TEST_LLM_KEY", "timeout_s": 2.0, "max_retries": 2,
            "backoff_base_s": 0.01, "backoff_max_s": 0.05, "max_tokens": 1024}
    budget = overrides.pop("budget", None)
    data.update(overrides)
    if budget is not None:
        data["budget"] = budget
    return LLMConfig.from_config(data)
