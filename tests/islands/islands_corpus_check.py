"""Runs the corpus's Triton (interpreter) and C kernels against torch on small inputs.

Used by test_corpus_runs.py in a child process (TRITON_INTERPRET must be set before
triton is imported). Prints one line per kernel: "<file> ok" or "<file> FAIL <why>".
"""

import importlib.util
import os
import pathlib
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

CORPUS = pathlib.Path(__file__).parent / "corpus"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"corpus_{name[:-3]}", CORPUS / name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cases():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 300, generator=g)
    x4 = torch.randn(4, 256, generator=g)
    a = torch.randn(64, 64, generator=g)
    b = torch.randn(64, 64, generator=g)
    small = x[:2, :20].contiguous()
    gelu = torch.nn.functional.gelu(x, approximate="tanh")
    return {
        "triton_relu_block.py": (lambda m: m.ModelNew()(x), torch.relu(x)),
        "triton_softmax_row.py": (lambda m: m.ModelNew()(x), torch.softmax(x, 1)),
        "triton_softmax_online.py": (lambda m: m.ModelNew()(x), torch.softmax(x, 1)),
        "triton_row_sum_streaming.py": (lambda m: m.ModelNew()(x), x.sum(1, keepdim=True)),
        "triton_sum_atomic.py": (lambda m: m.ModelNew()(x), x.sum()),
        "triton_transpose_tiles.py": (lambda m: m.ModelNew()(x), x.t()),
        "triton_gelu_torch_epilogue.py": (lambda m: m.ModelNew()(x), gelu),
        "triton_scale_relu_scalar_two_pass.py": (lambda m: m.ModelNew()(small),
                                                 torch.relu(2 * small)),
        "triton_matmul_dot.py": (lambda m: m.ModelNew()(a, b), a @ b),
        "triton_matmul_grouped_pipelined.py": (lambda m: m.ModelNew()(a, b), a @ b),
        "triton_matmul_tma.py": (lambda m: m.ModelNew()(a, b), a @ b),
        "c_relu_scalar.py": (lambda m: m.ModelNew()(x), torch.relu(x)),
        "c_relu_parallel_simd.py": (lambda m: m.ModelNew()(x), torch.relu(x)),
        "c_sum_omp_reduction.py": (lambda m: m.ModelNew()(x), x.sum()),
        "c_matmul_tiled_prefetch.py": (lambda m: m.ModelNew()(a, b), a @ b),
        "c_softmax_three_functions.py": (lambda m: m.ModelNew()(x4), torch.softmax(x4, 1)),
    }


def main() -> int:
    failed = 0
    for name, (run, ref) in cases().items():
        try:
            out = run(_load(name))
            ok = out.shape == ref.shape and torch.allclose(out, ref, atol=2e-3, rtol=2e-3)
            why = "" if ok else f"max err {(out - ref).abs().max().item():.3g}"
        except Exception as exc:  # noqa: BLE001 - reported to the test
            ok, why = False, f"{type(exc).__name__}: {str(exc)[:200]}"
        failed += not ok
        print(f"{name} {'ok' if ok else 'FAIL ' + why}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
