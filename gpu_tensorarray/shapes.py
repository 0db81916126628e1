"""Partial shapes as TensorFlow's PartialTensorShape has them.

A partial shape is ``None`` (unknown rank) or a tuple whose entries are ints
or ``None`` (an unknown dimension). Concrete shapes are tuples of ints.
"""

import operator

import numpy as np

from .errors import InvalidArgumentError, about, shown

__all__ = ["as_partial_shape", "format_shape", "is_fully_defined", "is_compatible", "merge"]


def as_partial_shape(spec, what="element_shape", owner=None):
    """Normalise a user's shape: None, a sequence of ints/None, or an object
    with ``as_list()`` (a TensorShape). -1 is not an unknown dimension here:
    like TensorFlow's Python API we reject negative dimensions."""
    if spec is None:
        return None
    if type(spec) is tuple and all(type(dim) is int and dim >= 0 or dim is None for dim in spec):
        return spec     # already normalised (the common case: our own shapes passed back)
    if hasattr(spec, "as_list"):
        if getattr(spec, "rank", 0) is None or getattr(spec, "dims", 0) is None:
            return None
        spec = spec.as_list()
    if isinstance(spec, (str, bytes)) or not hasattr(spec, "__iter__"):
        raise InvalidArgumentError(f"{what} must be None or a sequence of dimensions, got {shown(spec)}{about(owner)}")
    try:
        entries = list(spec)
    except Exception as error:
        raise InvalidArgumentError(f"{what} {shown(spec)} is not a sequence of dimensions: {error}{about(owner)}") from None
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
    return tuple(dims)


def format_shape(shape):
    """TensorFlow's rendering: [2,3], [], [?,2], <unknown>."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def is_fully_defined(shape):
    return shape is not None and None not in shape


def is_compatible(shape, other):
    """Whether two partial shapes could describe the same concrete shape."""
    if shape is None or other is None or shape == other:
        return True
    if len(shape) != len(other):
        return False
    return all(a is None or b is None or a == b for a, b in zip(shape, other))


def merge(shape, other):
    """The most specific shape compatible with both (PartialTensorShape::MergeWith)."""
    if shape is None or shape == other:
        return other
    if other is None:
        return shape
    if len(shape) != len(other):
        raise InvalidArgumentError(
            f"PartialTensorShape: Incompatible ranks during merge: {len(shape)} vs. {len(other)}")
    if not is_compatible(shape, other):
        raise InvalidArgumentError(
            f"PartialTensorShape: Incompatible shapes during merge: {format_shape(shape)} vs. {format_shape(other)}")
    return tuple(a if a is not None else b for a, b in zip(shape, other))
