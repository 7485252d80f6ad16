"""cc_* targets that exist only when the CUDA toolkit is present.

BUILD files cannot branch, so the host-compiled (.cc) parts of the CUDA
backend use these wrappers: with @local_cuda//:defs.bzl CUDA_AVAILABLE = False
they define nothing, exactly like cuda_library / cuda_test in
//tools/bazel:cuda.bzl, and the CPU-only build never sees CUDA headers.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE")

def cuda_cc_library(name, tags = [], **kwargs):
    """A host-compiled cc_library that includes CUDA headers. Absent without CUDA."""
    if not CUDA_AVAILABLE:
        return
    native.cc_library(name = name, tags = tags + ["gpu"], **kwargs)

def cuda_cc_binary(name, tags = [], **kwargs):
    """A cc_binary that needs CUDA (benchmarks, probes). Absent without CUDA."""
    if not CUDA_AVAILABLE:
        return
    native.cc_binary(name = name, tags = tags + ["gpu"], **kwargs)

def cuda_cc_test(name, tags = [], **kwargs):
    """A cc_test that links CUDA but needs no device (runs in CI). Absent without CUDA."""
    if not CUDA_AVAILABLE:
        return
    native.cc_test(name = name, tags = tags, **kwargs)
