"""The emulated backend: NumPy arrays, but gather, scatter and scatter-add run the
GPU kernels (kernels/*.cu) compiled for the CPU with kernels/emulation.h standing in
for CUDA, through the same launch code as the cupy backend.

It exists so that machines without a GPU exercise the kernels and their launch
code. The library, gpu_tensorarray._emulated_kernels (kernels/emulated_kernels.cpp),
is built when the package is installed (setup.py); where it was not, this backend is
unavailable, and says why. Nothing is compiled at run time.
"""

import ctypes
import functools
import importlib.util

import numpy as np

from .. import dtypes
from ..errors import UnavailableError
from . import kernel_sources
from .extensions import not_built
from .kernel_rows import KernelRows
from .launch import CompiledKernels
from .numpy import NumpyBackend

__all__ = ["EmulatedBackend", "LIBRARY"]

LIBRARY = "gpu_tensorarray._emulated_kernels"


class EmulatedBackend(KernelRows, NumpyBackend):
    name = "emulated"

    def __init__(self):
        super().__init__(device="cpu")
        self._module = _library()

    def _device_indices(self, host_indices):
        return self.contiguous(host_indices, np.int64)


class _EmulatedModule(CompiledKernels):
    """The compiled kernels: one C entry point per instantiation (EMULATED_EXPORT in
    kernels/emulation.h), taking (blocks, threads, args) where args is the
    kernelParams array that cuLaunchKernel takes: one pointer to each argument's value."""

    def __init__(self, path):
        super().__init__()
        self._library = ctypes.CDLL(path)
        missing = [symbol(kernel, dtype) for kernel, dtype in kernel_sources.instantiations()
                   if not hasattr(self._library, symbol(kernel, dtype))]
        if missing:
            raise UnavailableError(f"The emulated backend's library {path} lacks {len(missing)} kernels "
                                   f"({', '.join(missing[:3])}...): it is from another version of gpu_tensorarray; "
                                   f"reinstall the package")

    def _load_function(self, kernel, dtype):
        function = getattr(self._library, symbol(kernel, dtype))
        function.argtypes = (ctypes.c_uint, ctypes.c_uint, ctypes.POINTER(ctypes.c_void_p))
        function.restype = None
        return function

    def run(self, kernel, dtype, blocks, threads, args):
        # Each argument's value in memory: an array's data pointer, a scalar's bytes.
        values = [np.array([arg.ctypes.data], np.uintp) if isinstance(arg, np.ndarray) else np.array([arg])
                  for arg in args]
        self.function(kernel, dtype)(blocks, threads,
                                     (ctypes.c_void_p * len(values))(*(value.ctypes.data for value in values)))


def symbol(kernel, dtype):
    """The C entry point of one instantiation: ``<kernel>_<dtype name>``."""
    return f"{kernel}_{dtypes.name_of(dtype)}"


@functools.cache
def _library():
    """The loaded library (an object with ``.function(kernel, dtype)`` -> a callable
    ``(blocks, threads, kernelParams)``), once per process; UnavailableError when the
    install did not build it."""
    spec = importlib.util.find_spec(LIBRARY)
    if spec is None or not spec.origin:
        raise UnavailableError("The emulated backend's kernels are missing: " + not_built(
            LIBRARY, ". Install a compiler (Debian/Ubuntu: apt-get install g++; Fedora: dnf install gcc-c++) "
                     "and reinstall the package"))
    try:
        return _EmulatedModule(spec.origin)
    except OSError as error:
        raise UnavailableError(f"The emulated backend's library {spec.origin} cannot be loaded: {error}") from None
