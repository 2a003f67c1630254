"""Descriptors on a corpus of real kernels across the four backends."""

import re

import pytest

from islands import describe
from islands.patterns import AXES

from island_helpers import backend_of, corpus_files, expected_levels

FILES = corpus_files()


def test_corpus_is_big_enough_and_covers_every_backend():
    assert len(FILES) >= 20
    assert {backend_of(f) for f in FILES} == {"triton", "cuda", "cuda_inline", "c"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_corpus_kernel_gets_its_expected_levels(path):
    d = describe(source=path.read_text(), backend=backend_of(path))
    assert d.levels == expected_levels(path), d.matched
    for axis, level in zip(AXES, d.levels):
        assert bool(d.matched[axis]) == (level > 0)  # a level above 0 names its patterns


@pytest.mark.parametrize("backend", ["triton", "cuda"])
def test_every_level_of_every_axis_is_reached(backend):
    seen = {axis: set() for axis in AXES}
    for path in FILES:
        if backend_of(path) != backend:
            continue
        for axis, level in zip(AXES, describe(source=path.read_text(),
                                                backend=backend).levels):
            seen[axis].add(level)
    assert seen == {axis: {0, 1, 2, 3} for axis in AXES}


def test_deterministic():
    for path in FILES:
        src = path.read_text()
        assert describe(source=src, backend=backend_of(path)) == describe(
            source=src, backend=backend_of(path))


def test_comments_and_docstrings_do_not_count():
    path = next(p for p in FILES if p.name == "cuda_relu_vec4.py")
    src = path.read_text()
    base = describe(source=src, backend="cuda")
    noisy = src.replace(
        "long long i = blockIdx.x",
        "// __shared__ tiles, __shfl_down_sync and cp.async would go here\n"
        "    /* __syncthreads(); wmma::mma_sync */ long long i = blockIdx.x")
    noisy = '"""Uses __shared__ memory and __syncthreads()."""\n' + noisy
    noisy += "\n# TODO: __shfl_xor_sync, tl.dot, atomicAdd\n"
    assert describe(source=noisy, backend="cuda").levels == base.levels


def test_torch_compute_in_forward_makes_it_multi_pass():
    path = next(p for p in FILES if p.name == "triton_relu_block.py")
    src = path.read_text()
    assert describe(source=src, backend="triton").levels[1] == 1
    worse = src.replace("return y", "return torch.sigmoid(y)")
    assert describe(source=worse, backend="triton").levels[1] == 0
    assert describe(source=src.replace("return y", "return y.sum(dim=0)"),
                    backend="triton").levels[1] == 0


def test_hint_names_level_matches_and_next_step():
    path = next(p for p in FILES if p.name == "cuda_relu_vec4.py")
    hint = describe(source=path.read_text(), backend="cuda").hint()
    lines = hint.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("memory level 1 (coalesced / vectorised access; matched: "
                               "vector_types); try level 2: shared-memory tiling")
    assert "__shared__" in lines[0]
    assert lines[2].startswith("parallelism level 0 (thread-only); try level 1")
    top = next(p for p in FILES if p.name == "triton_matmul_grouped_pipelined.py")
    assert "top level" in describe(source=top.read_text(), backend="triton").hint()


def test_features_and_errors():
    path = next(p for p in FILES if p.name == "triton_relu_block.py")
    d = describe(source=path.read_text(), backend="triton")
    assert d.features["kernel_count"] == 1 and d.features["tunable_count"] == 1
    assert d.values(axis_names=("memory", "kernel_count")) == (1, 1)
    with pytest.raises(ValueError, match="nope"):
        d.values(axis_names=("nope",))
    with pytest.raises(ValueError, match="unknown backend 'sycl'"):
        describe(source="", backend="sycl")
    empty = describe(source="", backend="cuda")
    assert empty.levels == (0, 0, 0)


def _cuda_source(path) -> str:
    m = re.search(r'SRC = r"""(.*?)"""', path.read_text(), re.S)
    assert m, path.name
    return m.group(1)


@pytest.mark.parametrize("path", [p for p in FILES if backend_of(p) == "cuda"],
                         ids=lambda p: p.name)
def test_cuda_corpus_compiles_with_nvrtc(path):
    """The corpus is real CUDA: NVRTC compiles each kernel for sm_90 (no GPU needed)."""
    cuda = pytest.importorskip("foundry.kernels.cuda")
    try:
        cuda.nvrtc_version()
    except Exception as exc:  # noqa: BLE001 - NVRTC missing on this machine
        pytest.skip(f"NVRTC unavailable: {exc}")
    image = cuda.compile_image(_cuda_source(path), capability=(9, 0), use_disk_cache=False)
    assert image.image
