"""A scripted "LLM" for the end-to-end tests: real C ReLU kernels (every fourth one
wrong, so failures flow through too) for kernel requests; prompt edits as the shared
stand-in answers them."""

from __future__ import annotations

import itertools

from support.openai_server import ScriptedResponse, stand_in_responder

_n = itertools.count(1)

RELU = '''import torch
import torch.nn as nn
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
void relu_f32(const float* x, float* y, int64_t n) {{
    for (int64_t i = 0; i < n; i++) {{ float v = x[i]; y[i] = v > 0.f ? v : {neg}; }}
}}
"""
TUNABLE = {{"VARIANT": [{variant}]}}
PARAMS = {{"VARIANT": {variant}}}
_lib = c.build(SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_f32(x, y, x.numel())
        return y
'''


def relu_source(variant: int) -> str:
    neg = "0.01f * v" if variant % 4 == 0 else "0.f"
    return RELU.format(neg=neg, variant=variant) + f"# variant {variant}\n"


def responder(request: dict) -> ScriptedResponse:
    prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages", []))
    if "## Reference module" not in prompt:
        return stand_in_responder(request)
    return ScriptedResponse.full_file(relu_source(next(_n)))
