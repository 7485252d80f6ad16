"""Macros for CUDA code: cuda_library (.cu via nvcc), cuda_test, if_cuda.

cuda_library compiles each .cu with nvcc into a position-independent object
(sm_90 SASS for the H200 plus compute_90 PTX for later GPUs) and wraps the
objects in a cc_library that links the CUDA runtime. Without a toolkit
(@local_cuda//:defs.bzl CUDA_AVAILABLE = False) no CUDA target is defined, and
code that wants CUDA uses if_cuda() to pick it in or out.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NVCC")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

def if_cuda(with_cuda, without_cuda = []):
    """Returns with_cuda when the CUDA toolkit is present, else without_cuda."""
    return with_cuda if CUDA_AVAILABLE else without_cuda

def cuda_library(name, srcs, hdrs = [], deps = [], nvcc_flags = [], visibility = None, tags = []):
    """A cc_library whose .cu sources are compiled by nvcc. Absent without CUDA."""
    if not CUDA_AVAILABLE:
        return
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj.replace(".", "_") + "_nvcc",
            srcs = {k: None for k in [src] + hdrs + native.glob(["**/*.h", "**/*.cuh"], allow_empty = True)}.keys(),
            outs = [obj],
            cmd = " ".join([
                NVCC,
                "-c",
                "-O3",
                "-std=c++17",
                "--expt-relaxed-constexpr",
                "-Xcompiler=-fPIC",
                "-I.",
                "-I$(GENDIR)",
            ] + CUDA_ARCH_FLAGS + nvcc_flags + [
                "-o $@",
                "$(location " + src + ")",
            ]),
            tags = tags,
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        visibility = visibility,
        tags = tags + ["gpu"],
        alwayslink = True,
    )

def cuda_test(name, tags = [], **kwargs):
    """A cc_test tagged gpu; it must GTEST_SKIP when no device is present."""
    if not CUDA_AVAILABLE:
        return
    native.cc_test(name = name, tags = tags + ["gpu"], **kwargs)
