"""Python scalars and (nested) lists read as TensorFlow reads them, where NumPy reads them
otherwise: NumPy makes floats of integers no one integer dtype holds (an int64 beside a uint64
scalar, an int past int64's maximum beside smaller ones) and objects of ints past uint64, where
TensorFlow sees integers (int32 or int64 by their range, an error past int64); and it makes
numbers of bools beside numbers, which TensorFlow refuses (``leaf_types`` finds them)."""

import numpy as np

__all__ = ["NUMPY_INTS", "INT64_MIN", "INT64_MAX", "leaves", "leaf_types", "integer_leaves", "as_host_array"]

# NumPy's integer scalar types, exactly: np.timedelta64 subclasses np.signedinteger, and
# np.bool_ is no integer, so an isinstance test would let the one in and a kind test the other.
NUMPY_INTS = frozenset(np.dtype(code).type for code in "bBhHiIlLqQnN")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def leaves(value):
    """The leaves of a nested list or tuple (``value`` itself when it is neither), in no set order."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            yield item


def leaf_types(value):
    """The types of a nested list or tuple's leaves, a row at a time (``type()`` of each element
    in C: a long flat list costs one pass with no Python step per element)."""
    types, rows = set(), [value]
    while rows:
        row = rows.pop()
        row_types = set(map(type, row))
        nested = {kind for kind in row_types if issubclass(kind, (list, tuple))}
        if nested:
            rows.extend(item for item in row if type(item) in nested)
        types |= row_types - nested
    return types


def integer_leaves(value):
    """The leaves of a nested list or tuple as Python ints, or None when one is anything else
    (a bool too: TensorFlow does not read it as an integer here)."""
    ints = []
    for item in leaves(value):
        if type(item) is not int and type(item) not in NUMPY_INTS:
            return None
        ints.append(int(item))
    return ints


def as_host_array(value):
    """``np.asarray(value)``, but a list or tuple whose leaves are all integers as an int64
    array when they fit in int64, else as an object array of them (which the callers refuse
    by naming the integer that does not fit), never as floats."""
    host = np.asarray(value)
    if host.dtype.kind in "fO" and isinstance(value, (list, tuple)) and _first_leaf_is_an_int(value):
        ints = integer_leaves(value)
        if ints:
            fits = INT64_MIN <= min(ints) and max(ints) <= INT64_MAX
            return np.array(value, dtype=np.int64 if fits else object)
    return host


def _first_leaf_is_an_int(value):
    """Whether a list's first leaf is an integer: else not all are (a float list's one test)."""
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    return type(value) is int or type(value) in NUMPY_INTS
