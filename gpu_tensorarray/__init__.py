"""gpu_tensorarray: TensorFlow's TensorArray V3 ops and their gradients on
NVIDIA GPUs (CuPy) or the CPU (NumPy), without TensorFlow.

    import gpu_tensorarray as gta
    ta = gta.TensorArray("float32", size=0, dynamic_size=True)
    ta = ta.write(0, [1.0, 2.0])
    gta.raw_ops.TensorArrayReadV3(ta.handle, 0, ta.flow, "float32")
"""

from typing import Any as _Any

import numpy as _numpy

from .backends.arrays import is_cupy_array as _is_cupy_array
from .backends.base import cupy_values as _cupy_values

from . import errors, gradients, raw_ops
from .backends import accumulation, available_backends, default_backend, device, get_accumulation, get_backend
from .registry import Handle, registry
from .gradcheck import check_gradients
from .modes import get_tensor_array_mode, set_tensor_array_mode, tensor_array_mode
from .tape import GradientTape, UnconnectedGradients
from .tensor_array import TensorArray
from . import tf2

__version__ = "0.1.0"
__all__ = [
    "TensorArray", "raw_ops", "errors", "gradients", "GradientTape", "UnconnectedGradients", "check_gradients",
    "device", "get_backend",
    "accumulation", "get_accumulation", "available_backends", "default_backend", "to_numpy", "stats", "Handle",
    "tensor_array_mode", "set_tensor_array_mode", "get_tensor_array_mode", "tf2", "__version__",
]


def to_numpy(array: _Any) -> _numpy.ndarray:
    """A NumPy copy (or, for NumPy input, the array itself) of any backend's array."""
    return _cupy_values(array) if _is_cupy_array(array) else _numpy.asarray(array)


def stats() -> dict[str, _Any]:
    """Open TensorArrays and the bytes they hold, per backend."""
    return registry.stats()
