import time

import pytest
import torch

from foundry import kernels
from foundry.kernels import c

SRC = r"""
#include <stdint.h>
/* a comment mentioning void fake(int x) { */
void axpy(float a, const float* restrict x, float* y, int64_t n) {
    #pragma omp parallel for
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
static float helper(float v) { return v; }
double total(const double* x, int n) {
    double s = 0; for (int i = 0; i < n; i++) s += x[i]; return s;
}
"""


def test_build_parses_prototypes_and_calls_on_tensor_pointers():
    lib = c.build(SRC)
    assert sorted(lib.kernels) == ["axpy", "total"]
    x, y = torch.randn(1000), torch.randn(1000)
    want = y + 2.5 * x
    kernels.reset_launches()
    lib.axpy(2.5, x, y, x.numel())
    assert torch.allclose(y, want)
    assert lib.total(torch.arange(10, dtype=torch.float64), 10) == 45.0
    assert kernels.launches() == {("c", "axpy"): 1, ("c", "total"): 1}


def test_build_is_cached_by_content():
    c.build(SRC)
    t = time.perf_counter()
    assert c.build(SRC) is c.build(SRC)
    assert time.perf_counter() - t < 0.05


def test_build_cache_is_keyed_by_the_cpu(monkeypatch):
    """A library built with -march=native on one CPU is not loaded on another that shares
    the cache: the resolved native target is part of the key."""
    src = SRC.replace("s += x[i]", "s += 2 * x[i]")
    first = c.build(src)
    monkeypatch.setattr(c, "native_target", lambda cc: "-march= some-other-cpu")
    other = c.build(src)
    assert other is not first and other.path != first.path
    assert other.total(torch.arange(4, dtype=torch.float64), 4) == 12.0


def test_native_target_names_this_machines_instructions():
    target = c.native_target(c.compiler("c"))
    assert target  # GCC's resolved options, or /proc/cpuinfo's flags


def test_compile_error_carries_compiler_log():
    with pytest.raises(c.BuildError) as e:
        c.build("void broken(float* x) { x[0] = ; }")
    assert "kernel.c" in str(e.value) and "error" in str(e.value)


def test_bad_arguments_are_named():
    lib = c.build(SRC)
    with pytest.raises(ValueError, match="not contiguous"):
        lib.axpy(1.0, torch.randn(4, 4).t(), torch.randn(4, 4), 16)
    with pytest.raises(TypeError, match="takes 4 arguments"):
        lib.axpy(1.0)
    with pytest.raises(AttributeError, match="no exported function 'nope'"):
        lib.nope
