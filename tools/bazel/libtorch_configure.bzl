"""Finds libtorch (the PyTorch C++ library) at fetch time: @local_libtorch.

Looked for, in order: the directory $TANDEM_LIBTORCH_PATH (a libtorch
download or a pip torch's `torch/` folder: include/ and lib/ under it), then
Debian's libtorch-dev (headers under /usr/include, the C++ API under
/usr/include/torch/csrc/api/include, libraries in the multiarch folder).
With one, @local_libtorch//:libtorch is a cc_library to depend on and
@local_libtorch//:defs.bzl says TORCH_AVAILABLE = True (TORCH_CUDA says
whether it has libtorch_cuda). Without one (or TANDEM_NO_LIBTORCH set), the
target is empty and TORCH_AVAILABLE = False: everything else builds, and
`--model torchscript:` is refused with what to install (common/torchscript).
"""

_DEBIAN_LIB = "/usr/lib/x86_64-linux-gnu"

def _libtorch_configure_impl(ctx):
    env_root = ctx.os.environ.get("TANDEM_LIBTORCH_PATH", "")
    disabled = ctx.os.environ.get("TANDEM_NO_LIBTORCH", "") != ""
    available = False
    cuda = False
    includes = []
    lib = ""
    if not disabled and env_root != "":
        if ctx.path(env_root + "/include/torch/script.h").exists:
            ctx.symlink(env_root + "/include", "include")
            includes = ["include", "include/torch/csrc/api/include"]
            lib = env_root + "/lib"
            cuda = ctx.path(lib + "/libtorch_cuda.so").exists
            available = True
    elif not disabled:
        if (ctx.path("/usr/include/torch/script.h").exists and
            ctx.path(_DEBIAN_LIB + "/libtorch.so").exists and
            ctx.path("/usr/include/torch/csrc/api/include/torch/torch.h").exists):
            # ATen, c10 and torch/csrc are found in /usr/include (a system
            # directory); only the C++ API folder needs an include path.
            ctx.symlink("/usr/include/torch/csrc/api/include", "api_include")
            includes = ["api_include"]
            lib = _DEBIAN_LIB
            available = True
    if available:
        libs = ["-ltorch", "-ltorch_cpu", "-lc10"]
        if cuda:
            libs = ["-Wl,--no-as-needed", "-ltorch_cuda", "-lc10_cuda", "-Wl,--as-needed"] + libs
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "libtorch",
    hdrs = glob([d + "/**/*.h" for d in {includes}], allow_empty = True),
    includes = {includes},
    linkopts = ["-L{lib}", "-Wl,-rpath,{lib}"] + {libs},
)
""".format(includes = repr(includes), lib = lib, libs = repr(libs)))
    else:
        ctx.file("BUILD.bazel", """
package(default_visibility = ["//visibility:public"])

cc_library(name = "libtorch")
""")
    ctx.file("defs.bzl", "TORCH_AVAILABLE = {}\nTORCH_CUDA = {}\n".format(
        "True" if available else "False",
        "True" if cuda else "False",
    ))

libtorch_configure = repository_rule(
    implementation = _libtorch_configure_impl,
    environ = ["TANDEM_LIBTORCH_PATH", "TANDEM_NO_LIBTORCH"],
    local = True,
)
