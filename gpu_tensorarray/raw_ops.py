"""tf.raw_ops-compatible TensorArray V3 ops.

Same names, argument names, order and defaults as ``tf.raw_ops``; ``name`` is
accepted and ignored (there is no graph to name nodes in). Each function
converts its host arguments with TensorFlow's checks, in TensorFlow's order,
then hands over to the array (storage.py) or the registry (registry.py).
Values come back as arrays of the array's backend.
"""

import functools
from collections import namedtuple
from operator import index as _as_int    # a NumPy integer's __index__, without int()'s type call

import numpy as np

from . import dtypes
from .backends import get_backend
from .errors import InvalidArgumentError, NotFoundError, ResourceExhaustedError, about, described, shown
from .host import (INT32_MAX, INT32_MIN, NUMPY_INTS, checked_int64_sum, host_indices, host_ints, host_ints_bounded,
                   is_index_vector, scalar_int)
from .registry import FORWARD, GRADIENTS, Handle, registry
from .shapes import as_partial_shape

__all__ = [
    "TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayGatherV3",
    "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3",
    "TensorArrayCloseV3", "TensorArrayGradV3", "TensorArrayGradWithShape",
]
# __all__ is the op family, as tf.raw_ops; set_recorder (the tape's hook) is not an op.

TensorArrayV3Output = namedtuple("TensorArrayV3", ["handle", "flow"])
TensorArrayConcatV3Output = namedtuple("TensorArrayConcatV3", ["value", "lengths"])
TensorArrayGradV3Output = namedtuple("TensorArrayGradV3", ["grad_handle", "flow_out"])
TensorArrayGradWithShapeOutput = namedtuple("TensorArrayGradWithShape", ["grad_handle", "flow_out"])

# The recorder (set_recorder): None unless something records, so one global check
# per op is all recording costs when nothing does.
_record = None
_INDEX_NOT_SCALAR = "TensorArray index must be scalar, but had shape: "
_DTYPES = dtypes.CACHE


def _out_of_host_memory(op, handle, error):
    """An op's host temporaries (index vectors, flag masks, the plans of its checks) ran out
    of memory: ResourceExhaustedError, as an allocation through the backend. Every op makes
    them before it changes anything, so the array is as it was. The op's own
    ResourceExhaustedError (a MemoryError too) already says what ran out: it goes as it is."""
    if isinstance(error, ResourceExhaustedError):
        return error
    return ResourceExhaustedError(f"OOM in {op}: host memory ran out ({described(error)}){about(handle)}")


def _host_memory_guarded(op):
    """``op`` raising ResourceExhaustedError for a host MemoryError (Write and Read, the
    hot ops, do the same inline, without this wrapper's call)."""
    @functools.wraps(op)
    def guarded(*args, **kwargs):
        try:
            return op(*args, **kwargs)
        except MemoryError as error:
            raise _out_of_host_memory(op.__name__, args[0] if args else kwargs.get("handle"), error) from None
    return guarded


def _lookup(handle):
    """The array behind a handle, a name, or TensorFlow's string handle."""
    if type(handle) is Handle:
        return handle.array
    return registry.lookup(_resource_key(handle))


_CONTAINERS = (FORWARD, GRADIENTS)


def _resource_key(handle):
    """What the registry looks ``handle`` up by: a Handle, or a name as an exact str (a
    str subclass's own __hash__/__eq__ are never run). TensorFlow's string handle, a
    2-element vector [container, name] (a list or a NumPy string array), names its
    array by (container, name); a container TensorArrays do not live in is NotFoundError."""
    if type(handle) is Handle or type(handle) is str:
        return handle
    if isinstance(handle, str):
        return str.__str__(handle)
    parts = _string_pair(handle)
    if parts is not None:
        container, name = parts
        if container not in _CONTAINERS:
            raise NotFoundError(f"Container {container} does not exist. (Could not find resource: "
                                f"{container}/{name}: TensorArrays live in the containers {' and '.join(_CONTAINERS)})")
        return str.__str__(container), str.__str__(name)
    return handle


def _string_pair(handle):
    if type(handle) is np.ndarray and handle.shape == (2,) and handle.dtype.kind in "US":
        handle = handle.tolist()
    if type(handle) is list and len(handle) == 2 and all(type(part) in (str, bytes) for part in handle):
        return [_decoded(part) if type(part) is bytes else part for part in handle]
    return None


def recording():
    """Whether a recorder (a GradientTape) sees the ops."""
    return _record is not None


def set_recorder(recorder):
    """Install ``recorder`` (None: stop recording) -> the one it replaces. After each
    differentiable op that succeeds (Read, Write, Gather, Scatter, Concat, Split),
    ``recorder(op_type, inputs, outputs, dtype)`` gets the op's type, its inputs and
    outputs in the V3 op's order, and the array's dtype; a failed op is never seen."""
    global _record
    previous, _record = _record, recorder
    return previous


@_host_memory_guarded
def TensorArrayV3(size, dtype, element_shape=None, dynamic_size=False, clear_after_read=True,
                  identical_element_shapes=False, tensor_array_name="", name=None):
    """Create an array of ``size`` slots on the active backend -> (handle, flow)."""
    dtype = dtypes.as_dtype(dtype)
    element_shape = as_partial_shape(element_shape)
    size = scalar_int(size, "size", "TensorArray size must be scalar, but had shape: ")
    if size < 0:
        raise InvalidArgumentError("Size should be >= 0.")
    backend = get_backend()
    flow = _new_flow(backend)                   # before the array exists: a failure leaves nothing
    handle = registry.create(backend, dtype, size, element_shape, _attr_bool(dynamic_size, "dynamic_size", False),
                             _attr_bool(clear_after_read, "clear_after_read", True),
                             _attr_bool(identical_element_shapes, "identical_element_shapes", False),
                             _attr_string(tensor_array_name, "tensor_array_name", default=""))
    return TensorArrayV3Output(handle, flow)


def TensorArrayWriteV3(handle, index, value, flow_in, name=None):
    """Write ``value`` at ``index`` -> flow_out (``flow_in`` passed through)."""
    if type(index) is not int:      # a NumPy integer scalar (an index from a tensor) without a call
        index = _as_int(index) if type(index) in NUMPY_INTS else scalar_int(index, "index", _INDEX_NOT_SCALAR, handle)
    if not INT32_MIN <= index <= INT32_MAX:
        index = scalar_int(index, "index", _INDEX_NOT_SCALAR, handle)
    array = handle.array if type(handle) is Handle else _lookup(handle)
    flow_out = array.backend.flow(flow_in, handle)     # a bad flow fails before the op changes anything
    try:
        array.write(index, value)
    except MemoryError as error:
        raise _out_of_host_memory("TensorArrayWriteV3", handle, error) from None
    if _record is not None:
        _record("TensorArrayWriteV3", (handle, index, value, flow_in), (flow_out,), array.dtype)
    return flow_out


def TensorArrayReadV3(handle, index, flow_in, dtype, name=None):
    """The element at ``index`` (zeros for unwritten slots of a fully defined element shape)."""
    if type(index) is not int:      # a NumPy integer scalar (an index from a tensor) without a call
        index = _as_int(index) if type(index) in NUMPY_INTS else scalar_int(index, "index", _INDEX_NOT_SCALAR, handle)
    if not INT32_MIN <= index <= INT32_MAX:
        index = scalar_int(index, "index", _INDEX_NOT_SCALAR, handle)
    array = handle.array if type(handle) is Handle else _lookup(handle)
    try:
        dtype = _DTYPES[dtype]          # as_dtype's cache, without the call
    except Exception:                   # KeyError, unhashable, or a hostile __hash__/__eq__
        dtype = dtypes.as_dtype(dtype, handle)
    try:
        value = array.read(index, dtype)
    except MemoryError as error:
        raise _out_of_host_memory("TensorArrayReadV3", handle, error) from None
    if _record is not None:
        _record("TensorArrayReadV3", (handle, index, flow_in), (value,), array.dtype)
    return value


@_host_memory_guarded
def TensorArrayGatherV3(handle, indices, flow_in, dtype, element_shape=None, name=None):
    """The elements at ``indices``, stacked along a new first axis."""
    if type(indices) is range:
        indices, bounds = host_indices(indices, owner=handle), None
    else:       # host_indices' conversion, keeping the bounds its range check found
        indices, bounds = host_ints_bounded(indices, "indices", owner=handle)
    element_shape = as_partial_shape(element_shape, owner=handle)
    array = handle.array if type(handle) is Handle else _lookup(handle)
    value = array.gather(indices, dtypes.as_dtype(dtype, handle), element_shape, bounds)
    if _record is not None:
        _record("TensorArrayGatherV3", (handle, indices, flow_in), (value,), array.dtype)
    return value


@_host_memory_guarded
def TensorArrayScatterV3(handle, indices, value, flow_in, name=None):
    """Write ``value[k]`` at ``indices[k]`` for every k, in order -> flow_out."""
    array = handle.array if type(handle) is Handle else None
    if array is not None and is_index_vector(indices) and array.backend.is_flow(flow_in) \
            and array.try_add(indices, value):
        # A gradient array's aggregating scatter in its common case: done, every check passing.
        flow_out = flow_in
    else:
        indices, bounds = host_ints_bounded(indices, "indices", owner=handle)
        array = _lookup(handle)
        flow_out = array.backend.flow(flow_in, handle)     # a bad flow fails before the op changes anything
        array.scatter(indices, value, bounds)
    if _record is not None:
        _record("TensorArrayScatterV3", (handle, indices, value, flow_in), (flow_out,), array.dtype)
    return flow_out


@_host_memory_guarded
def TensorArrayConcatV3(handle, flow_in, dtype, element_shape_except0=None, name=None):
    """Every element joined along axis 0 -> (value, lengths as int64)."""
    element_shape_except0 = as_partial_shape(element_shape_except0, "element_shape_except0", handle)
    array = _lookup(handle)
    # lengths: a host int64 vector, as TensorFlow keeps them (HostMemory("lengths")): no
    # device copy, and reading them (concat's gradient splits by them) never synchronises.
    output = TensorArrayConcatV3Output(*array.concat(dtypes.as_dtype(dtype, handle), element_shape_except0))
    if _record is not None:
        _record("TensorArrayConcatV3", (handle, flow_in), output, array.dtype)
    return output


@_host_memory_guarded
def TensorArraySplitV3(handle, value, lengths, flow_in, name=None):
    """Split ``value`` along axis 0 into pieces of ``lengths``, one per slot -> flow_out."""
    lengths = host_ints(lengths, "lengths", "int64", owner=handle)
    if lengths.ndim == 1:
        checked_int64_sum(lengths, "lengths", handle)   # storage may then sum in int64
    array = _lookup(handle)
    flow_out = array.backend.flow(flow_in, handle)     # a bad flow fails before the op changes anything
    array.split(value, lengths)
    if _record is not None:
        _record("TensorArraySplitV3", (handle, value, lengths, flow_in), (flow_out,), array.dtype)
    return flow_out


@_host_memory_guarded
def TensorArraySizeV3(handle, flow_in, name=None):
    """The current number of slots, as an int32 scalar in host memory (TensorFlow's
    HostMemory("size")): reading it never waits for the device."""
    return np.array(_lookup(handle).current_size(), np.int32)


# A new array's flow: a flow carries no data (TensorFlow passes it through), so each is
# a view of one zero per backend: a distinct object (the tape tells values apart by
# identity) that allocates nothing. The zero is made by the first TensorArrayV3 on the
# backend, before its array exists.
_flows = {}


def _new_flow(backend):
    zero = _flows.get(backend)
    if zero is None:
        zero = _flows.setdefault(backend, backend.flow(0.0))
    return zero.view()              # a new array object over the same bytes: no device work


@_host_memory_guarded
def TensorArrayCloseV3(handle, name=None):
    """Release the array's storage; later ops fail with 'has already been closed'."""
    registry.close(_resource_key(handle))


@_host_memory_guarded
def TensorArrayGradV3(handle, flow_in, source, name=None):
    """The gradient array of (``handle``, ``source``), created on first use -> (grad_handle, flow_out)."""
    source = _attr_string(source, "source", handle)
    grad_handle = registry.grad(_resource_key(handle), source)
    return TensorArrayGradV3Output(grad_handle, _new_flow(_lookup(grad_handle).backend))


@_host_memory_guarded
def TensorArrayGradWithShape(handle, flow_in, shape_to_prepend, source, name=None):
    """As TensorArrayGradV3, the gradient element shape prefixed by ``shape_to_prepend``."""
    source = _attr_string(source, "source", handle)
    shape_to_prepend = host_ints(shape_to_prepend, "shape_to_prepend", owner=handle)
    grad_handle = registry.grad(_resource_key(handle), source, shape_to_prepend)
    return TensorArrayGradWithShapeOutput(grad_handle, _new_flow(_lookup(grad_handle).backend))


def _decoded(data):
    """TensorFlow's string attributes and names are bytes: as a str that tells any two
    apart (bytes that are not UTF-8 keep their values as lone surrogates, PEP 383), so two
    sources never share a gradient array."""
    return data.decode("utf-8", "surrogateescape")


# An attribute given as None takes its default, as TensorFlow's op builder takes it (a required one has none).

def _attr_string(value, what, owner=None, default=None):
    if value is None and default is not None:
        return default
    if isinstance(value, bytes):
        value = _decoded(bytes(value))
    if isinstance(value, str):
        return str.__str__(value)       # an exact str: a subclass's __hash__/__eq__ never run
    raise InvalidArgumentError(f"{what} must be a string, got {type(value).__name__}: {shown(value)}{about(owner)}")


def _attr_bool(value, what, default):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if value is None:
        return default
    raise InvalidArgumentError(f"Expected bool for argument '{what}' not {shown(value)}.")
