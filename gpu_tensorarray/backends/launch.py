"""Launching a kernel from kernels/*.cu, the same way for every compiled backend.

``launch()`` checks each argument against the C signature parsed from the .cu
source, computes the launch geometry, and hands the launch to the backend's
compiled module (NVRTC's on the GPU; for the emulated backend, the CPU library built at
install). A mismatch is our bug, never the user's, so it raises InternalError: the kernel
would otherwise read the wrong bytes without complaint.
"""

import numpy as np

from .. import dtypes
from . import kernel_sources
from ..errors import InternalError

__all__ = ["launch", "check_arguments", "geometry", "CompiledKernels", "BLOCK_SIZE", "MAX_BLOCKS"]

BLOCK_SIZE = 256
# Grid-stride loops cover any size; this many blocks fill every SM of current GPUs.
MAX_BLOCKS = 8192


def geometry(n_threads):
    """(blocks, threads per block) for ``n_threads`` units of work."""
    return min(-(-n_threads // BLOCK_SIZE), MAX_BLOCKS), BLOCK_SIZE


class CompiledKernels:
    """A backend's compiled module: ``run(kernel, dtype, blocks, threads, args)``
    launches one instantiation, whose function is looked up once and kept."""

    def __init__(self):
        self._functions = {}

    def function(self, kernel, dtype):
        function = self._functions.get((kernel, dtype))
        if function is None:
            function = self._functions[kernel, dtype] = self._load_function(kernel, dtype)
        return function

    def _load_function(self, kernel, dtype):
        raise NotImplementedError(f"{type(self).__name__} does not implement _load_function()")

    def run(self, kernel, dtype, blocks, threads, args):
        raise NotImplementedError(f"{type(self).__name__} does not implement run()")


def launch(module, kernel, dtype, n_threads, *args):
    """Run ``kernel<c_type(dtype)>`` over ``n_threads`` work items (nothing when 0).

    Arrays are passed as pointers (C-contiguous, element type as declared),
    scalars as numpy scalars of the declared C type: np.int64 for ``long long``.
    ``module.run(kernel, dtype, blocks, threads, args)`` performs the launch."""
    check_arguments(kernel, dtype, args)
    if n_threads > 0:
        blocks, threads = geometry(n_threads)
        module.run(kernel, dtype, blocks, threads, args)


def check_arguments(kernel, dtype, args):
    """InternalError unless ``args`` match the kernel's signature for ``dtype``."""
    expected = _expected.get((kernel, dtype))
    if expected is not None and len(args) == len(expected):
        # The common case, a match, at a few comparisons per argument: the dtype each
        # parameter takes, a scalar for a scalar, and a contiguous (for output, writable)
        # array for a pointer. Anything else is worded by the full check below.
        for (pointer, const, want), value in zip(expected, args):
            if getattr(value, "dtype", None) != want:
                break
            if not pointer:
                if not isinstance(value, np.generic):
                    break
            elif isinstance(value, np.generic):
                break
            else:
                flags = value.flags
                if not flags.c_contiguous or not (const or getattr(flags, "writeable", True)):
                    break
        else:
            return
    _check_arguments(kernel, dtype, args)
    if expected is None:
        _expected[kernel, dtype] = _expected_arguments(kernel, dtype)


_expected: dict = {}      # (kernel, dtype) -> ((pointer, const, the numpy dtype taken), ...) per parameter


def _expected_arguments(kernel, dtype):
    def numpy_dtype(c_type):
        if c_type == kernel_sources.TEMPLATE_PARAMETER:
            return np.dtype(dtype)
        # The first dtype spelled so (never bfloat16's, whose import is ml_dtypes')
        return next((np.dtype(name) for names in kernel_sources.KERNEL_DTYPES.values() for name in names
                     if name != dtypes.BFLOAT16 and dtypes.c_type(name) == c_type), None)
    return tuple((parameter.pointer, parameter.const, numpy_dtype(parameter.type))
                 for parameter in kernel_sources.signature(kernel).parameters)


def _check_arguments(kernel, dtype, args):
    dtype_name = np.dtype(dtype).name       # the kernel tables are keyed by name (see kernel_sources)
    if dtype_name not in kernel_sources.KERNEL_DTYPES[kernel]:
        raise InternalError(f"kernel {kernel} is not instantiated for {dtype_name}")
    name = kernel_sources.name_expression(kernel, dtype_name)
    parameters = kernel_sources.signature(kernel).parameters
    if len(args) != len(parameters):
        raise InternalError(f"kernel {name} takes {len(parameters)} arguments, got {len(args)}")
    type_argument = dtypes.c_type(dtype_name)
    for position, (parameter, value) in enumerate(zip(parameters, args)):
        problem = _mismatch(parameter, type_argument, value)
        if problem:
            raise InternalError(f"kernel {name} argument {position} ({parameter.name}): expected "
                                f"{parameter.c_type(type_argument)}, got {problem}")


def _mismatch(parameter, type_argument, value):
    """What is wrong with passing ``value`` for ``parameter``, or None."""
    expected = type_argument if parameter.type == kernel_sources.TEMPLATE_PARAMETER else parameter.type
    if isinstance(value, np.generic) or not hasattr(value, "dtype"):
        if parameter.pointer:
            return f"a scalar {_describe(value)}"
        return None if _c_name(value) == expected else _describe(value)
    if not parameter.pointer:
        return f"an array of {_describe(value)}; pass a numpy scalar"
    if _c_name(value) != expected:
        return f"an array of {_describe(value)}"
    if not value.flags.c_contiguous:
        return "a non-contiguous array"
    if not parameter.const and not getattr(value.flags, "writeable", True):
        return "a read-only array"
    return None


def _c_name(value):
    dtype = getattr(value, "dtype", None)
    return dtypes.c_type(dtype) if dtype is not None and dtypes.is_supported(dtype) else None


def _describe(value):
    if hasattr(value, "dtype"):
        c_name = _c_name(value)
        return f"{value.dtype} ({c_name})" if c_name else str(value.dtype)
    return f"{type(value).__name__}; pass an explicitly typed numpy scalar"
