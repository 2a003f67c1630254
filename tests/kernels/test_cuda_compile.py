"""The cuda backend's compile stage, run on the CPU through NVRTC (no GPU needed)."""

from __future__ import annotations

import ctypes

import pytest

from foundry.kernels import cuda, cuda_module


def _nvrtc_loads() -> bool:
    try:
        cuda.nvrtc_version()
        return True
    except Exception:  # noqa: BLE001 - no cuda-bindings or no libnvrtc
        return False


needs_nvrtc = pytest.mark.skipif(not _nvrtc_loads(), reason="NVRTC cannot be loaded here")

RELU = r'''
extern "C" __global__ void relu(const float* __restrict__ x, float* y, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
__global__ void __launch_bounds__(256) scale(float* y, float a, int n) {  // C++ linkage
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] *= a;
}
template <int B> __global__ void tmpl(float* y) { y[threadIdx.x] = B; }
'''


def test_parse_kernels_reads_parameter_types():
    sigs = {s.name: s for s in cuda.parse_kernels(RELU)}
    assert set(sigs) == {"relu", "scale"}  # the template is not launchable by name
    relu = sigs["relu"].params
    assert [p.pointer for p in relu] == [True, True, False]
    assert relu[2].ctype is ctypes.c_longlong
    scale = sigs["scale"].params
    assert scale[1].ctype is ctypes.c_float and scale[2].ctype is ctypes.c_int


@needs_nvrtc
def test_compiles_to_cubin_with_lowered_names(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_CACHE_DIR", str(tmp_path))
    img = cuda.compile_image(RELU, capability=(9, 0))
    assert img.arch == "sm_90" and img.is_cubin
    assert img.image[:4] == b"\x7fELF"  # a cubin is an ELF image
    assert img.lowered_names["relu"] == "relu"  # extern "C": unmangled
    assert img.lowered_names["scale"] != "scale" and "scale" in img.lowered_names["scale"]
    again = cuda.compile_image(RELU, capability=(9, 0))
    assert again.from_cache and again.image == img.image and again.key == img.key
    other = cuda.compile_image(RELU, capability=(8, 0))
    assert other.key != img.key and other.arch == "sm_80"


@needs_nvrtc
def test_compile_error_carries_nvrtc_log(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_CACHE_DIR", str(tmp_path))
    bad = 'extern "C" __global__ void k(float* y) { y[0] = undefined_name; }'
    with pytest.raises(cuda.CompileError) as info:
        cuda.compile_image(bad, capability=(9, 0))
    assert "undefined_name" in info.value.log


@needs_nvrtc
def test_corrupt_disk_cache_entry_is_recompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_CACHE_DIR", str(tmp_path))
    img = cuda.compile_image(RELU, capability=(9, 0))
    (tmp_path / "cuda" / f"{img.key}.bin").write_bytes(b"garbage")
    again = cuda.compile_image(RELU, capability=(9, 0))
    assert not again.from_cache and again.image == img.image


@needs_nvrtc
def test_newer_device_than_nvrtc_gets_ptx(tmp_path, monkeypatch):
    monkeypatch.setenv("FOUNDRY_CACHE_DIR", str(tmp_path))
    img = cuda.compile_image(RELU, capability=(99, 9))
    assert img.arch.startswith("compute_") and b".entry" in img.image


@needs_nvrtc
def test_cuda_headers_are_found_for_half_precision(tmp_path, monkeypatch):
    if not cuda.include_dirs():
        pytest.skip("no CUDA headers on this machine")
    monkeypatch.setenv("FOUNDRY_CACHE_DIR", str(tmp_path))
    src = ('#include <cuda_fp16.h>\nextern "C" __global__ void h(__half* y, float v)'
           ' { y[0] = __float2half(v); }')
    assert cuda.compile_image(src, capability=(9, 0)).image[:4] == b"\x7fELF"


def test_compile_without_gpu_names_the_problem():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(cuda.CudaBackendUnavailable, match="GPU"):
        cuda.compile(RELU)


def test_bad_launch_geometry_is_rejected_before_launch():
    with pytest.raises(ValueError, match="block"):
        cuda_module._dim3((0,), "block", "relu")
    assert cuda_module._dim3(7, "grid", "k") == (7, 1, 1)
