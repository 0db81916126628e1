"""TensorFlow's rules for callers' values: what a value becomes on a backend.

- An array of the backend's own type is taken as it is (a NumPy subclass as a plain
  ndarray over its memory); NumPy arrays and scalars keep their dtype, which must be
  one TensorFlow supports.
- Python scalars and (nested) lists or tuples take TensorFlow's dtypes: floats
  float32 (float16 for lists of np.float16), ints int32 unless they need 64 bits
  (dtypes.python_value_dtype). What NumPy holds only as objects (an int outside
  int64, None in a list) is a conversion error naming the element, as TensorFlow's.
- Other libraries' arrays (CuPy on another backend, DLPack producers) come
  through the backend's ``from_foreign``.
- Anything else NumPy can read (typed buffers: memoryview, array.array, bytes;
  objects with ``__array__``; str) keeps its own dtype, as TensorFlow keeps a
  typed value's: a float64 buffer is never narrowed to float32 on the way.
- bfloat16 values (ml_dtypes') keep their dtype, as every typed value does.
- Strings (str, bytes, NumPy's str/bytes/object arrays, lists of str and bytes)
  become NumPy object arrays of bytes on the host, on every backend (strings.py):
  TensorFlow keeps string tensors in host memory. A Python list for a string
  array is read as strings first (TensorFlow's preferred dtype), else by the rules
  above, and the op then refuses its dtype.
- A flow is a float32 scalar, passed through unchanged when it already is one.

Whatever a caller's object raises while being read (``__array__``, ``__dlpack__``,
``__len__``...) becomes an InvalidArgumentError naming it, before any op starts.
"""

import numpy as np

from . import dtypes, strings
from .errors import InvalidArgumentError, OpError, ResourceExhaustedError, about, described, host_memory_ran_out, shown
from .python_values import as_host_array

__all__ = ["to_tensor", "to_flow", "truth", "host_array"]

_FLOAT32 = np.dtype("float32")
_PYTHON_VALUES = (bool, int, float, complex, list, tuple)


def to_tensor(backend, value, dtype=None, owner=None):
    """``value`` as an array of ``backend``. ``dtype`` is the array's, when known: a
    value no TensorFlow dtype holds then gets TensorFlow's write error. ``owner``
    (a handle) names the array in messages."""
    if isinstance(value, np.ndarray) and type(value) is not np.ndarray:
        # A NumPy subclass, as a plain array over its memory (a C-level view): its own
        # attributes (dtype, reshape, __getitem__...) never run inside an op.
        value = np.asarray(value)
    if isinstance(value, backend.array_type):
        return value
    if strings.is_string_like(value):
        if dtype is not None and dtype is not dtypes.STRING:
            return strings.as_objects(value)    # the op refuses its dtype, after its earlier checks
        return strings.as_strings(value, owner)
    if isinstance(value, (np.ndarray, np.generic)):
        return backend.from_host(_supported(np.asarray(value), dtype, owner))
    if isinstance(value, _PYTHON_VALUES):
        host = host_array(value, owner)
        if host.dtype.kind in "SU" or dtype is dtypes.STRING:
            try:
                return strings.as_strings(value, owner)
            except InvalidArgumentError:
                if host.dtype.kind in "SU":
                    raise
        if host.dtype.kind == "O":
            # NumPy's fallback for what no dtype holds (an int past int64, None): TensorFlow's
            # conversion error, not a write error for the "string" NumPy's object dtype stands for.
            problem = dtypes.object_value_problem(host, value)
            if problem is not None:
                raise InvalidArgumentError(problem + about(owner))
        if host.dtype.kind not in "biufc" and dtype is not None:
            _supported(host, dtype, owner)          # strings: TensorFlow's write error
        try:
            python_dtype = dtypes.python_value_dtype(host, value)
        except InvalidArgumentError as error:
            raise InvalidArgumentError(error.message + about(owner)) from None
        return backend.from_host(host.astype(python_dtype, copy=False))
    try:
        foreign = backend.from_foreign(value)
    except ResourceExhaustedError as error:     # a device copy (of another device's, to the host) found no room
        raise ResourceExhaustedError(error.message + about(owner)) from None
    except OpError:
        raise
    except MemoryError as error:    # a foreign (GPU) tensor's host copy
        raise host_memory_ran_out(f"a value of type {type(value).__name__}", error, owner) from None
    except Exception as error:      # a hostile __dlpack__, __dlpack_device__ or __getattr__
        raise InvalidArgumentError(f"Cannot convert a value of type {type(value).__name__} to a tensor: reading "
                                   f"it as an array raised {described(error)}{about(owner)}") from None
    if foreign is not None:
        return foreign
    host = host_array(value, owner)
    if host.dtype.kind == "O":
        raise InvalidArgumentError(f"Cannot convert value {shown(value)} of type {type(value).__name__} to a tensor: "
                                   f"it is no number, array or buffer{about(owner)}")
    return backend.from_host(_supported(host, dtype, owner))


def host_array(value, owner=None):
    """A Python value (scalar, nested list) as NumPy's array of it, read as TensorFlow reads it
    (python_values.as_host_array; a list of str beside non-ASCII bytes as strings); what NumPy
    cannot read is InvalidArgumentError."""
    try:
        return as_host_array(value)
    except MemoryError as error:
        raise host_memory_ran_out(f"a value of type {type(value).__name__}", error, owner) from None
    except Exception as error:      # whatever a caller's object raises, it is no value
        if isinstance(value, (list, tuple)):
            try:        # str beside bytes that NumPy cannot decode as ASCII: TensorFlow's strings
                return strings.as_strings(value, owner)
            except InvalidArgumentError:
                pass
        raise InvalidArgumentError(f"Cannot convert a value of type {type(value).__name__} to a tensor: "
                                   f"{described(error)}{about(owner)}") from None


def _supported(host, dtype, owner):
    """``host`` itself when TensorFlow has its dtype (a copy in this machine's byte order when it
    is in the other, as TensorFlow converts it), else the error naming the dtype."""
    if not host.dtype.isnative and host.dtype.kind in "biufc":
        host = host.astype(host.dtype.newbyteorder("="))
    if dtypes.is_supported(host.dtype):
        return host
    if dtype is not None:
        raise InvalidArgumentError(f"TensorArray dtype is {dtypes.tf_name(dtype)} but Op is trying to write dtype "
                                   f"{dtypes.tf_name(host.dtype)}.{about(owner)}")
    raise InvalidArgumentError(f"Values of dtype {dtypes.tf_name(host.dtype)} are not supported (supported: "
                               f"{', '.join(sorted(d.name for d in dtypes.SUPPORTED))}){about(owner)}")


def to_flow(backend, flow_in=0.0, owner=None):
    """A float32 0-d array of ``backend``: ``flow_in`` itself when it already is one
    (TensorFlow passes flows through unchanged), else a fresh one holding its value.
    ``owner`` (a handle) names the array in messages."""
    if type(flow_in) is backend.array_type and flow_in.dtype is _FLOAT32 and not flow_in.shape:
        return flow_in
    if flow_in is None:
        raise InvalidArgumentError(f"flow_in must be a float scalar, got None{about(owner)}")
    try:
        host = np.asarray(backend.to_numpy(flow_in) if isinstance(flow_in, backend.array_type) else flow_in,
                          dtype=_FLOAT32)
    except MemoryError as error:
        raise host_memory_ran_out("flow_in", error, owner) from None
    except Exception as error:
        raise InvalidArgumentError(f"flow_in must be a float scalar, got {shown(flow_in)}: {described(error)}"
                                   f"{about(owner)}") from None
    if host.ndim != 0:
        raise InvalidArgumentError(f"flow_in must be a scalar, but had shape: {list(host.shape)}{about(owner)}")
    return backend.from_host(host.copy())


def truth(value, what):
    """``bool(value)`` of a caller's argument (dynamic_size, infer_shape, a name), as TensorFlow's
    classes test these; a truth value that raises is the argument's error, not the caller's
    exception."""
    try:
        return bool(value)
    except Exception as error:
        raise InvalidArgumentError(f"{what} must have a truth value, but bool() raised {described(error)}") from None
