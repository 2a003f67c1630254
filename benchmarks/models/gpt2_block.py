"""A small GPT-2 from transformers (GPT2Config: 2 blocks of width 256, 4 heads, random
weights, nothing downloaded), in eval mode, fp32 (`build`) or bf16 (`build_bf16`), for
extract -> run -> deploy on real embeddings, attention, layer norms and GELU MLPs.

    python -m foundry.extract benchmarks.models.gpt2_block:build --out runs/gpt2_tasks
    python -m foundry tasks.path=runs/gpt2_tasks llm=none budget.wall_time_s=300 hydra.run.dir=runs/gpt2_run
    OMP_NUM_THREADS=1 python -m foundry.deploy benchmarks.models.gpt2_block:build runs/gpt2_run --check

and the same with `build_bf16`, `runs/gpt2_bf16_tasks`, `runs/gpt2_bf16_run`. On a GPU,
`build_cuda` and `build_bf16_cuda`: GPT-2 small's width (768, 12 heads), 2 blocks, batch
8 x 256 tokens, on the current CUDA device.
Needs transformers (`pip install -e '.[models]'`)."""

import torch
import torch.nn as nn

from benchmarks.models.packages import import_transformers

BATCH = 4
SEQ = 64
WIDTH = 256
HEADS = 4
LAYERS = 2


class HiddenStates(nn.Module):
    """The GPT-2 stack's last hidden state as a plain tensor (transformers returns a
    ModelOutput; the KV cache is off)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def build(seed: int = 0, dtype: torch.dtype = torch.float32, *, batch: int = BATCH, seq: int = SEQ,
          width: int = WIDTH, heads: int = HEADS):
    """(model, example_inputs): a seeded small GPT2Model and one batch of token ids."""
    transformers = import_transformers()
    config = transformers.GPT2Config(n_embd=width, n_head=heads, n_layer=LAYERS, n_positions=max(seq, 128),
                                     use_cache=False, attn_implementation="sdpa")
    torch.manual_seed(seed)
    model = HiddenStates(transformers.GPT2Model(config)).eval().to(dtype)
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    return model, (ids,)


def build_bf16(seed: int = 0):
    """`build` in bfloat16."""
    return build(seed, dtype=torch.bfloat16)


CUDA_BATCH, CUDA_SEQ, CUDA_WIDTH, CUDA_HEADS = 8, 256, 768, 12


def build_cuda(seed: int = 0, dtype: torch.dtype = torch.float32):
    """`build` at GPT-2 small's width, batch 8 x 256 tokens, on the current CUDA device."""
    model, (ids,) = build(seed, dtype, batch=CUDA_BATCH, seq=CUDA_SEQ, width=CUDA_WIDTH, heads=CUDA_HEADS)
    return model.cuda(), (ids.cuda(),)


def build_bf16_cuda(seed: int = 0):
    """`build_cuda` in bfloat16."""
    return build_cuda(seed, dtype=torch.bfloat16)
