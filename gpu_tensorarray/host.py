"""Host-side values: the integer arguments of ops, vector queries over slot flags, and how
much host memory one allocation may take.

TensorFlow keeps indices, lengths and sizes in host memory even on GPUs, so
every check on them is a host check that never synchronises with a device.
This module is the one place that turns callers' index arguments into host
integers (NumPy, whatever the array's backend) with TensorFlow's rank checks.
"""

import functools
import os
from typing import Any

import numpy as np

resource: Any
try:
    import resource
except ImportError:         # not on Windows
    resource = None

from .backends.arrays import cupy_to_host, is_cupy_array
from .errors import InvalidArgumentError, ResourceExhaustedError, about, described, host_memory_ran_out, shown
from .python_values import INT64_MAX, INT64_MIN as _INT64_MIN, NUMPY_INTS, as_host_array, integer_leaves

__all__ = ["host_ints", "host_ints_bounded", "host_indices", "scalar_int", "NUMPY_INTS", "index_vector", "spans", "flag_view",
           "is_index_vector", "flags_all_equal", "flags_at", "count_distinct", "distinct", "has_duplicates", "repeats",
           "lone_arrivals",
           "first_true", "element_count", "checked_int64_sum", "host_memory_limit", "INT32_MIN", "INT32_MAX", "INT64_MAX"]

INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
_smallest, _largest = np.minimum.reduce, np.maximum.reduce     # ndarray.min/max without their Python wrapper
_FEW = 32       # up to this many indices, Python's min and max of a list beat a reduction's set-up
_HASHED = 1024  # up to this many, a set counts distinct indices faster than np.unique's sort


def host_ints(value, what, dtype_name="int32", owner=None):
    """Any integer array-like (list, NumPy, CuPy, 0-d) -> int64 NumPy array of any rank.
    Floats, bools, strings and values outside ``dtype_name``'s range are rejected."""
    return host_ints_bounded(value, what, dtype_name, owner)[0]


def host_ints_bounded(value, what, dtype_name="int32", owner=None):
    """host_ints, with the (smallest, largest) value as Python ints (None when empty),
    which the range check finds anyway: callers need not scan the array again."""
    if type(value) is np.ndarray and value.dtype.kind == "i" and value.size:   # the common case
        if value.ndim == 1 and len(value) <= _FEW:
            listed = value.tolist()
            bounds = min(listed), max(listed)
        else:
            bounds = int(_smallest(value, axis=None)), int(_largest(value, axis=None))
        if dtype_name != "int32" or (INT32_MIN <= bounds[0] and bounds[1] <= INT32_MAX):
            return value.astype(np.int64, copy=False), bounds
    if type(value) is range:        # (a stack's gradient scatters into every slot)
        return _range_ints(value, what, dtype_name, owner)
    if is_cupy_array(value):
        try:
            value = cupy_to_host(value)
        except MemoryError as error:   # CuPy's get() of a strided array first copies it on its device
            raise ResourceExhaustedError(f"OOM when copying {what} from cuda:{value.device.id} to the host: "
                                         f"{described(error)}{about(owner)}") from None
    try:
        array = as_host_array(value)
    except MemoryError as error:
        raise host_memory_ran_out(what, error, owner) from None
    except Exception as error:      # whatever a caller's object raises, it is not an index
        raise InvalidArgumentError(
            f"{what} must be {dtype_name} values, got {shown(value)}: {described(error)}{about(owner)}") from None
    if array.dtype.kind not in "iu":
        if array.size == 0 and array.dtype.kind == "f" and not isinstance(value, np.ndarray):
            return np.zeros(array.shape, np.int64), None   # [] from Python has no dtype of its own
        if array.dtype.kind in "Of" and isinstance(value, (list, tuple)):
            leaves = integer_leaves(value)          # ints past int64: as_host_array made objects of them
            low, high = _limits(dtype_name)
            bad = [leaf for leaf in leaves or () if not low <= leaf <= high]
            if bad:
                raise InvalidArgumentError(f"{what} value {bad[0]} does not fit in {dtype_name}{about(owner)}")
        raise InvalidArgumentError(
            f"{what} must be {dtype_name} values, but got dtype {array.dtype} ({shown(value)}){about(owner)}")
    bounds = None
    if array.size:
        bounds = _fitting(int(array.min()), int(array.max()), what, dtype_name, owner)
    return array.astype(np.int64, copy=False), bounds


def _range_ints(value, what, dtype_name, owner):
    """host_ints_bounded of a range, whose bounds are known without a scan."""
    if not len(value):
        return np.zeros(0, np.int64), None
    bounds = _fitting(min(value[0], value[-1]), max(value[0], value[-1]), what, dtype_name, owner)
    try:
        return np.arange(value.start, value.stop, value.step, dtype=np.int64), bounds
    except (MemoryError, ValueError) as error:     # ValueError: more than an address space holds
        raise ResourceExhaustedError(f"OOM when allocating {what} {shown(value)} ({len(value)} int64 values) "
                                     f"on the host: {described(error)}{about(owner)}") from None


def _fitting(low, high, what, dtype_name, owner):
    """(low, high), the bounds of integers that must fit in ``dtype_name``."""
    limit_low, limit_high = _limits(dtype_name)
    if low < limit_low or high > limit_high:
        raise InvalidArgumentError(f"{what} value {low if low < limit_low else high} does not fit in "
                                   f"{dtype_name}{about(owner)}")
    return low, high


def _limits(dtype_name):
    return (INT32_MIN, INT32_MAX) if dtype_name == "int32" else (_INT64_MIN, INT64_MAX)


def host_indices(value, what="indices", owner=None):
    """Like host_ints, but a step-1 range of non-negative ints stays a range: storage
    reads consecutive slots as one slice (stack is a view), never materialising them."""
    if type(value) is range and value.step == 1 and 0 <= value.start <= value.stop <= INT32_MAX + 1:
        return value
    return host_ints(value, what, owner=owner)


def scalar_int(value, what, message, owner=None):
    """A host Python int from a scalar; ``message`` (TensorFlow's) when the rank is not 0."""
    if type(value) is int or type(value) in NUMPY_INTS:     # a NumPy scalar: an index from a tensor
        number = int(value)
        if INT32_MIN <= number <= INT32_MAX:
            return number
    array = host_ints(value, what, owner=owner)
    if array.ndim != 0:
        raise InvalidArgumentError(message + shape_text(array.shape) + about(owner))
    return int(array)


def checked_int64_sum(values, what, owner=None):
    """The sum of a host int64 vector as a Python int, which must fit in int64: NumPy's
    sum wraps around, and a wrapped sum can look like a valid one."""
    count = len(values)
    if count <= 32 or not (int(values.max()) * count <= INT64_MAX and int(values.min()) * count >= _INT64_MIN):
        total = sum(values.tolist())        # exact: Python ints (a few are quicker so than two reductions)
        if not _INT64_MIN <= total <= INT64_MAX:
            raise InvalidArgumentError(f"{what} sum to {total}, which does not fit in int64 ({what}: "
                                       f"{shown(values.tolist())}){about(owner)}")
        return total
    return int(values.sum())                # no partial sum can leave int64


def shape_text(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def flag_view(flags):
    """A NumPy uint8 view of a bytearray of slot flags (valid until the bytearray resizes)."""
    return np.frombuffer(flags, np.uint8)


#: Each slot flag value (0-15) as a 0-d uint8 array: stored into a flag view it allocates
#: nothing (a Python int is converted into a new array first), so an op's commit, which
#: must not fail, cannot run out of memory there.
FLAG_BYTES = tuple(np.array(value, np.uint8) for value in range(16))


def is_index_vector(value):
    """Whether ``value`` is a host vector of signed integers, a NumPy array."""
    return type(value) is np.ndarray and value.dtype.kind == "i" and value.ndim == 1


def flags_all_equal(flags, indices, value):
    """Whether every index of the host vector ``indices`` names a slot of ``flags`` (in
    [0, len(flags))) whose flag is ``value``."""
    view = flag_view(flags)
    return bool(len(indices)) and int(indices.min()) >= 0 and int(indices.max()) < len(view) \
        and bool((view[indices] == value).all())


def flags_at(flags, size, indices):
    """(which of ``indices`` lie in [0, size), the flag of each: 0 outside)."""
    inside = (indices >= 0) & (indices < size)
    at = np.zeros(len(indices), np.uint8)
    at[inside] = flag_view(flags)[indices[inside]]
    return inside, at


def repeats(indices):
    """A bool vector: True where an index occurred earlier in ``indices``."""
    order = np.argsort(indices, kind="stable")
    repeated = np.zeros(len(indices), bool)
    later = order[1:]
    repeated[later[indices[later] == indices[order[:-1]]]] = True
    return repeated


def first_true(mask):
    """The position of the first True in a bool vector, or its length when none is."""
    position = int(mask.argmax()) if len(mask) else 0
    return position if len(mask) and mask[position] else len(mask)


def count_distinct(indices):
    if indices.ndim == 1 and len(indices) <= _HASHED:
        return len(set(indices.tolist()))
    return len(np.unique(indices))


def distinct(indices):
    """Host int64 vector: each index of ``indices`` once, in increasing order."""
    return np.unique(indices)


def broadcast_rows(value, count, row_shape):
    """``count`` rows of ``row_shape`` holding the scalar ``value`` (a view: no memory)."""
    return np.broadcast_to(value, (count,) + tuple(row_shape))


def index_vector(values):
    """Host int64 vector of Python ints (or a range)."""
    return np.fromiter(values, np.int64)


def spans(starts, length):
    """Host int64 vector: start, start + 1, ..., start + length - 1 for each of ``starts`` in turn
    (the element positions of equally long pieces of a flat buffer)."""
    return (np.asarray(starts, np.int64)[:, None] + np.arange(length, dtype=np.int64)).reshape(-1)


def lone_arrivals(indices, among=None):
    """Host int64 vector: the positions of ``indices`` (slots: none negative) whose index occurs
    there once only (of those where ``among``, a bool vector over the positions, holds), in order."""
    if len(indices) and indices.max() < 8 * len(indices) + 4096:     # a count per slot: no sort
        lone = np.flatnonzero(np.bincount(indices)[indices] == 1)
    else:
        _, first, counts = np.unique(indices, return_index=True, return_counts=True)
        lone = np.sort(first[counts == 1])
    return (lone if among is None else lone[among[lone]]).astype(np.int64)


def has_duplicates(indices):
    return len(indices) > 1 and count_distinct(indices) != len(indices)


def element_count(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count


def host_memory_limit():
    """Physical memory, or the address-space limit (RLIMIT_AS) where that is lower."""
    physical = _physical_memory()
    address_space = resource.getrlimit(resource.RLIMIT_AS)[0] if resource is not None else -1
    return physical if address_space < 0 else min(physical, address_space)


@functools.cache
def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 40
