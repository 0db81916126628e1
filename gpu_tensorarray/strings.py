"""TensorFlow's string values on the host: what a str or bytes value becomes.

TensorFlow keeps tf.string tensors in host memory, also on a GPU, and hands them
to Python as NumPy object arrays of bytes (tf.Tensor.numpy()). Here every string
value is one: str is encoded as UTF-8, as TensorFlow encodes it, bytes are kept
as they are, on every backend. The arrays made here are fresh: no caller holds
them, so a layout may keep them without copying.
"""

import numpy as np

from .errors import InvalidArgumentError, about, host_memory_ran_out, shown

__all__ = ["STRING", "is_string_like", "as_strings", "as_objects", "empty_strings", "stacked", "joined", "payload_bytes"]

#: The dtype of string values and arrays: NumPy's object (TensorFlow's as_numpy_dtype
#: of tf.string).
STRING = np.dtype(object)
_KINDS = "OSU"


def is_string_like(value):
    """Whether TensorFlow's conversion makes ``value`` a string tensor: str, bytes,
    NumPy str/bytes/object scalars and arrays (no other object reaches here)."""
    if isinstance(value, (str, bytes)):
        return True
    return isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in _KINDS


def as_strings(value, owner=None):
    """``value`` (str, bytes, a NumPy str/bytes/object array or scalar, a nested list of
    str and bytes) as a fresh NumPy object array of bytes; InvalidArgumentError naming
    the first element that is neither str nor bytes."""
    try:
        if isinstance(value, (np.ndarray, np.bytes_, np.str_)) and value.dtype.kind in "SU":
            # NumPy's fixed-width strings: plain str/bytes elements, trailing NULs dropped (a NumPy
            # string scalar's too, as TensorFlow converts it; not those in a list, nor Python's own)
            array = np.asarray(value).astype(object)
        else:
            array = np.array(value, dtype=object)
    except MemoryError as error:
        raise host_memory_ran_out("a value to strings", error, owner) from None
    except Exception as error:          # ragged lists, hostile __len__/__getitem__
        raise InvalidArgumentError(f"Cannot convert value {shown(value)} to a string tensor: "
                                   f"{type(error).__name__}: {error}{about(owner)}") from None
    flat = array.reshape(-1)
    for position, element in enumerate(flat.tolist()):
        if type(element) is bytes:
            continue
        if isinstance(element, str):
            flat[position] = str.encode(element, "utf-8", "surrogatepass")
        elif isinstance(element, bytes):
            flat[position] = bytes(element)     # np.bytes_ and other subclasses: plain bytes
        else:
            raise InvalidArgumentError(
                f"Cannot convert value {shown(value)} to a string tensor: element {position} (in row-major order) is "
                f"{shown(element)} of type {type(element).__name__}, neither str nor bytes{about(owner)}")
    return array


def as_objects(value):
    """A string-like ``value`` as a fresh object array, its elements unchecked: for
    an array of another dtype, which refuses it for its dtype ("string") anyway."""
    return value.astype(object) if isinstance(value, np.ndarray) else np.array(value, dtype=object)


def empty_strings(shape):
    """An object array of ``shape`` holding b"" (what TensorFlow's strings start as)."""
    array = np.empty(shape, dtype=object)
    array.fill(b"")
    return array


def stacked(arrays):
    """Same-shaped object arrays stacked along a new first axis, as a new array."""
    return np.stack(arrays)


def joined(arrays):
    """Object arrays joined along their first axis, as a new array."""
    return np.concatenate(arrays, axis=0)


def payload_bytes(array):
    """Host bytes ``array`` holds: its pointers and the bytes objects' contents."""
    return array.nbytes + sum(map(len, array.flat))
