"""The c backend's C++ mode, which CPU seeds build Inductor's kernels with."""

from __future__ import annotations

import pytest
import torch

from foundry.kernels import c

SRC = r"""
#include <ATen/cpu/vec/vec.h>
#include <cstdint>

namespace {
inline float twice(float v) { return 2.f * v; }
}

extern "C" void scale_rows(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = twice(x[i]);
}

float not_exported(float v) { return v; }
"""


def test_cpp_kernel_with_torch_headers_builds_and_runs():
    lib = c.build(SRC, language="c++", torch_headers=True)
    assert set(lib.kernels) == {"scale_rows"}  # only extern "C" functions are kernels
    x = torch.randn(1000)
    y = torch.empty_like(x)
    lib.scale_rows(x, y, x.numel())
    assert torch.equal(y, 2 * x)


def test_bad_language_options_name_the_problem():
    with pytest.raises(ValueError, match="unknown language 'fortran'"):
        c.build(SRC, language="fortran")
    with pytest.raises(ValueError, match="torch_headers=True needs language='c\\+\\+'"):
        c.build("void f(float* x) {}", torch_headers=True)


def test_cpp_build_error_carries_the_log():
    with pytest.raises(c.BuildError, match="kernel.cpp"):
        c.build('extern "C" void broken(float* x) { undeclared(x); }', language="c++")
