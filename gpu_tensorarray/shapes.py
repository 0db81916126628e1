"""Partial shapes as TensorFlow's PartialTensorShape has them.

A partial shape is ``None`` (unknown rank) or a tuple whose entries are ints
or ``None`` (an unknown dimension). Concrete shapes are tuples of ints.
"""

import operator

import numpy as np

from .backends.arrays import cupy_to_host, is_cupy_array
from .errors import InvalidArgumentError, ResourceExhaustedError, about, described, shown

__all__ = ["as_partial_shape", "check_element_count", "except_first", "format_shape", "is_fully_defined",
           "is_compatible", "merge"]


_INT64_MAX = 2**63 - 1


def as_partial_shape(spec, what="element_shape", owner=None):
    """Normalise a user's shape: None, a single integer n (meaning [n], as
    TensorShape(n) does), a sequence of ints/None, or an object with ``as_list()``
    (a TensorShape). -1 is not an unknown dimension here: like TensorFlow's Python
    API we reject negative dimensions. A shape whose known dimensions multiply past
    2**63 - 1 is TensorFlow's InvalidArgumentError; below that, dimensions stay Python
    ints, so sizes computed from them never wrap around (what cannot be allocated is
    the allocation's ResourceExhaustedError)."""
    if spec is None:
        return None
    if type(spec) is tuple:
        # Already normalised (the common case: our own shapes passed back). ``bound`` bounds
        # every count _check_size makes (zeros as ones): only a large one needs its exact check.
        bound = 1
        for dim in spec:            # a loop, not all(...): no generator per call
            if type(dim) is int and dim >= 0:
                bound *= dim or 1
            elif dim is not None:
                break
        else:
            if bound > _INT64_MAX:
                _check_size(spec, owner)
            return spec
    if is_cupy_array(spec):
        # As indices given on a device (host.host_ints): CuPy's 0-d arrays are no integers
        # (no __index__), so the dimensions are read on the host.
        try:
            spec = cupy_to_host(spec)
        except MemoryError as error:
            raise ResourceExhaustedError(f"OOM when copying {what} from cuda:{spec.device.id} to the host: "
                                         f"{described(error)}{about(owner)}") from None
    try:
        entries = _entries(spec)
    except InvalidArgumentError:
        raise
    except Exception as error:      # whatever a caller's object raises, it is not a shape
        raise InvalidArgumentError(
            f"{what} {shown(spec)} is not a sequence of dimensions: {described(error)}{about(owner)}") from None
    if entries is None:
        return None
    if entries is _NOT_A_SEQUENCE:
        raise InvalidArgumentError(
            f"{what} must be None, an integer or a sequence of dimensions, got {shown(spec)}{about(owner)}")
    dims = []
    for dim in entries:
        if dim is None:
            dims.append(None)
            continue
        try:
            if isinstance(dim, (bool, np.bool_)):
                raise TypeError("a bool is not a dimension")
            dim = operator.index(dim)
        except Exception:
            raise InvalidArgumentError(f"{what} {shown(spec)}: dimension {shown(dim)} is not an integer or None{about(owner)}") from None
        if dim < 0:
            raise InvalidArgumentError(f"{what} {shown(spec)}: Dimension {dim} must be >= 0{about(owner)}")
        dims.append(dim)
    dims = tuple(dims)
    _check_size(dims, owner)
    return dims


def _check_size(dims, owner, too_many="is too large (more than 2**63 - 1 entries)"):
    """TensorFlow's IsValidShape: the known dimensions, multiplied in order up to the
    first unknown one, must stay within int64 (so [2**62,4,?] fails, [?,2**62,4] does not)."""
    count = 1
    for dim in dims:        # in order: TensorFlow refuses [2**62,4,0] at the 4, before the 0
        if dim is None:
            return
        count *= dim
        if count > _INT64_MAX:
            raise InvalidArgumentError(f"Shape {format_shape(dims)} {too_many}{about(owner)}")


def check_element_count(dims, owner=None):
    """A shape TensorFlow builds (TensorShapeUtils::MakeShape, PartialTensorShape's
    Concatenate) from checked dimensions: the same bound as IsValidShape's, in its words."""
    _check_size(dims, owner, "would have more than 2**63 - 1 elements")


_NOT_A_SEQUENCE = object()


def _entries(spec):
    """The dimensions of ``spec`` as a list (None: unknown rank), or _NOT_A_SEQUENCE;
    may raise whatever ``spec`` raises."""
    if hasattr(spec, "as_list"):
        if getattr(spec, "rank", 0) is None or getattr(spec, "dims", 0) is None:
            return None
        spec = spec.as_list()
    if not isinstance(spec, (bool, np.bool_)) and hasattr(type(spec), "__index__") and getattr(spec, "ndim", 0) == 0:
        # an integer n is [n], as TensorShape(n) is (a bool is no dimension)
        return [spec]
    if isinstance(spec, (str, bytes)) or not hasattr(spec, "__iter__"):
        return _NOT_A_SEQUENCE
    return list(spec)


def format_shape(shape):
    """TensorFlow's rendering: [2,3], [], [?,2], <unknown>."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def except_first(shape):
    """An element shape without its first dimension, as a concat passes it (TensorArrayConcatV3's
    element_shape_except0): unknown stays unknown; a scalar's is (), which the op refuses."""
    return None if shape is None else shape[1:]


def is_fully_defined(shape):
    return shape is not None and None not in shape


def is_compatible(shape, other):
    """Whether two partial shapes could describe the same concrete shape."""
    if shape is None or other is None or shape == other:
        return True
    if len(shape) != len(other):
        return False
    return all(a is None or b is None or a == b for a, b in zip(shape, other))


def merge(shape, other, owner=None):
    """The most specific shape compatible with both (PartialTensorShape::MergeWith); ``owner``
    (an array) is named in the error."""
    if shape is None or shape == other:
        return other
    if other is None:
        return shape
    if len(shape) != len(other):
        raise InvalidArgumentError(
            f"PartialTensorShape: Incompatible ranks during merge: {len(shape)} vs. {len(other)}{about(owner)}")
    if not is_compatible(shape, other):
        raise InvalidArgumentError(f"PartialTensorShape: Incompatible shapes during merge: {format_shape(shape)} vs. "
                                   f"{format_shape(other)}{about(owner)}")
    return tuple(a if a is not None else b for a, b in zip(shape, other))
