"""Detects the CUDA toolkit at fetch time and exposes it as @local_cuda.

With a toolkit (nvcc at $TANDEM_CUDA_PATH or /usr/local/cuda), @local_cuda
holds cc_library targets for the CUDA runtime, cuBLAS and NCCL, and
@local_cuda//:defs.bzl says CUDA_AVAILABLE = True. Without one, the same
targets exist but are empty and CUDA_AVAILABLE = False, so the CPU build never
needs CUDA. GPU code is selected by targets (see //tools/bazel:cuda.bzl), never
by #if in shared code.
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("TANDEM_CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(root + "/bin/nvcc")
    available = nvcc.exists and ctx.os.environ.get("TANDEM_NO_CUDA", "") == ""
    if available:
        ctx.symlink(root + "/include", "include")
        lib = root + "/lib64"
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.inl", "include/nv/**"], allow_empty = True),
    includes = ["include"],
)

cc_library(
    name = "cudart",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcudart"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cublas",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lcublas", "-lcublasLt"],
    deps = [":cudart"],
)

cc_library(
    name = "nccl",
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}", "-lnccl"],
    deps = [":cudart"],
)
""".format(lib = lib))
    else:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda_headers")

cc_library(name = "cudart")

cc_library(name = "cublas")

cc_library(name = "nccl")
""")
    ctx.file("defs.bzl", "CUDA_AVAILABLE = {}\nNVCC = \"{}\"\n".format(
        "True" if available else "False",
        str(nvcc) if available else "",
    ))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["TANDEM_CUDA_PATH", "TANDEM_NO_CUDA"],
    local = True,
)
