"""The scripted OpenAI-compatible server that other areas use as a stand-in LLM."""

from __future__ import annotations

import types

import openai
import pytest
import torch

from foundry import kernels
from support.openai_server import (ScriptedOpenAIServer, ScriptedResponse, reference_source_from_prompt,
                                   stand_in_candidate, unary_candidate)

from llm_helpers import RELU_TASK_SOURCE

TUPLE_TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.lin = nn.Linear(features, features)

    def forward(self, x):
        y = self.lin(x)
        return y.sum(dim=1), y.to(torch.float64)


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
'''


def _run(source: str, init_args=(), inputs=()):
    mod = types.ModuleType("stand_in_candidate")
    exec(compile(source, "candidate.py", "exec"), mod.__dict__)
    mod.PARAMS = {"CHUNK": 4096}
    torch.manual_seed(0)
    ref = mod.Model(*init_args)
    torch.manual_seed(0)
    new = mod.ModelNew(*init_args)
    return ref(*inputs), new(*inputs), new


def test_stand_in_candidate_is_a_real_working_c_candidate():
    kernels.reset_launches()
    x = torch.randn(1000)
    ref, out, new = _run(stand_in_candidate(RELU_TASK_SOURCE), inputs=(x,))
    assert torch.equal(ref, out) and out.data_ptr() != ref.data_ptr()
    assert new._chunk == 4096
    assert kernels.launches().get(("c", "copy_bytes")) == 1


def test_stand_in_candidate_handles_tuple_outputs_and_weights():
    kernels.reset_launches()
    ref, out, _ = _run(stand_in_candidate(TUPLE_TASK), init_args=(8,), inputs=(torch.randn(4, 8),))
    assert isinstance(out, tuple) and len(out) == 2
    assert torch.equal(ref[0], out[0]) and torch.equal(ref[1], out[1]) and out[1].dtype == torch.float64
    assert kernels.launches().get(("c", "copy_bytes")) == 2


async def test_models_endpoint_and_default_responder_over_openai_client():
    with ScriptedOpenAIServer(models=("m1", "m2")) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="no-key", max_retries=0)
        assert [m.id for m in (await client.models.list()).data] == ["m1", "m2"]
        prompt = f"## Reference module (task `t`)\n\n```python\n{RELU_TASK_SOURCE}```\n"
        r = await client.chat.completions.create(model="m1", messages=[{"role": "user", "content": prompt}])
        text = r.choices[0].message.content
        assert "_lib.unary(x, y" in text and r.usage.completion_tokens > 0
        r2 = await client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
        assert "cannot find the reference" in r2.choices[0].message.content
        await client.close()
    assert reference_source_from_prompt(prompt).strip() == RELU_TASK_SOURCE.strip()


async def test_script_queue_runs_before_default_and_records_requests():
    with ScriptedOpenAIServer([ScriptedResponse.text("first")]) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k-123", max_retries=0)
        first = await client.chat.completions.create(model="x", messages=[{"role": "user", "content": "a"}])
        second = await client.chat.completions.create(model="x", messages=[{"role": "user", "content": "b"}])
        await client.close()
        assert first.choices[0].message.content == "first"
        assert "cannot find" in second.choices[0].message.content
        assert server.pending == 0 and [r.prompt_text for r in server.chat_requests()] == ["a", "b"]


@pytest.mark.parametrize("call, ref", [("torch.relu", torch.relu), ("F.gelu", torch.nn.functional.gelu),
                                       ("torch.sigmoid", torch.sigmoid), ("F.silu", torch.nn.functional.silu),
                                       ("torch.tanh", torch.tanh)])
def test_unary_candidate_is_a_real_kernel(call, ref):
    task = RELU_TASK_SOURCE.replace("torch.relu(x)", f"{call}(x)")
    src = unary_candidate(task)
    assert src is not None and "Model" not in src.replace("ModelNew", "")
    mod = types.ModuleType("unary_candidate")
    exec(compile(src, "candidate.py", "exec"), mod.__dict__)
    mod.PARAMS = {"CHUNK": 1000}
    x = torch.randn(4099) * 5
    kernels.reset_launches()
    torch.testing.assert_close(mod.ModelNew()(x), ref(x), rtol=1e-5, atol=1e-6)
    assert kernels.launches() == {("c", "unary"): 1}


def test_unary_candidate_declines_other_references():
    assert unary_candidate(RELU_TASK_SOURCE.replace("torch.relu(x)", "torch.relu(x) * 2")) is None
    assert unary_candidate(RELU_TASK_SOURCE.replace("torch.relu(x)", "torch.cumsum(x)")) is None
