"""The compiled host code, built when the package is built (pyproject.toml holds the rest).

Two optional extensions, from kernels/:
- gpu_tensorarray._cpu_add_rows: the numpy backend's scatter-add (cpu_add_rows.cpp), a
  CPython extension module. Without it the numpy backend adds with NumPy.
- gpu_tensorarray._emulated_kernels: every kernels/*.cu compiled for the CPU
  (emulated_kernels.cpp), a plain shared library the emulated backend loads with ctypes.
  Without it the emulated backend is unavailable.

Optional: where no C++ compiler works, the install still succeeds, with a warning that
says why (pip shows it with -v). The compiler and its flags are setuptools' own
(CXX, CXXFLAGS, LDFLAGS). From a checkout: ``python setup.py build_ext --inplace``.
"""

import errno
import os
import resource
import shutil
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# -ffp-contract=off: no fused multiply-adds, so float sums are the kernels' as written
# (bitwise TensorFlow's adds on the host, the GPU's order in the emulated kernels).
FLAGS = ["-std=c++17", "-O3", "-ffp-contract=off"]
_CONSEQUENCE = {
    "gpu_tensorarray._cpu_add_rows": "the numpy backend adds with NumPy (the same sums, slower)",
    "gpu_tensorarray._emulated_kernels": "the emulated backend is unavailable",
}


def _cause(compiler, error, folders):
    """(the real reason a build failed, as far as the build can tell; what to do)."""
    command = getattr(compiler, "compiler_so_cxx", None) or getattr(compiler, "compiler_so", None)
    executable = command[0] if command else None
    if executable and shutil.which(executable) is None:
        return (f"no C++ compiler: {executable!r} is not on PATH (set CXX to choose one)",
                "Install a C++17 compiler (Debian/Ubuntu: apt-get install g++) and reinstall to build it.")
    advice = "Remove the cause and reinstall to build it."
    for folder in folders:
        try:
            if shutil.disk_usage(folder).free < (16 << 20):
                return f"{os.strerror(errno.ENOSPC)} in {folder}", advice
        except OSError:
            pass
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and limit < (256 << 20):
        return f"{os.strerror(errno.EFBIG)}: the file size limit (ulimit -f) is {limit} bytes", advice
    return (f"the compiler failed ({error}; its own messages are above)",
            "It needs C++17 (g++ 8 or newer, or clang 7); set CXX to choose another, and reinstall.")


class OptionalBuildExt(build_ext):
    """build_ext whose failures are warnings naming the cause and what it costs."""

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:      # setuptools' compile, link and spawn errors
            folders = [self.build_temp, os.path.dirname(self.get_ext_fullpath(ext.name)) or "."]
            cause, advice = _cause(self.compiler, error, folders)
            line = "*" * 78
            sys.stderr.write(f"\n{line}\nWARNING: gpu_tensorarray's optional extension {ext.name} was not built: "
                             f"{cause}.\nWithout it {_CONSEQUENCE[ext.name]}. {advice}\n{line}\n\n")


setup(
    ext_modules=[
        Extension("gpu_tensorarray._cpu_add_rows", ["kernels/cpu_add_rows.cpp"], include_dirs=["kernels"],
                  depends=["kernels/common.cuh", "kernels/emulation.h", "kernels/cpu_add_rows_dtypes.h"],
                  extra_compile_args=FLAGS, language="c++", optional=True),
        Extension("gpu_tensorarray._emulated_kernels", ["kernels/emulated_kernels.cpp"], include_dirs=["kernels"],
                  depends=["kernels/common.cuh", "kernels/emulation.h", "kernels/add_rows.cu",
                           "kernels/gather_rows.cu", "kernels/put_rows.cu"],
                  extra_compile_args=FLAGS, language="c++", optional=True),
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
