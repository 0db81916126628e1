"""Mode tf2's list rules that both tf2 classes follow, the library's (tf2_array) and the torch
bridge's (torch.tf2), worked out once here so they cannot drift: the shapes TensorFlow 2's
TensorList ops find for a list, and their errors (built by messages).
"""

from . import messages
from .errors import InvalidArgumentError
from .shapes import is_compatible, is_fully_defined, merge

__all__ = ["check_element", "check_list_element", "merged", "split_element_shape", "zeros_shape"]


def merged(element_shape, list_shape, method):
    """The element shape the Python side knows (given, merged with writes when infer_shape)
    merged with the list's own (given, then an unstack's rows' or a split's pieces')."""
    try:
        return merge(element_shape, list_shape)
    except InvalidArgumentError as failure:
        raise messages.tf2_error(failure.message, method) from None


def check_element(element_shape, shape, method):
    """TensorFlow's Python-side check of a value's (or row's) shape (_check_element_shape)."""
    if not is_compatible(element_shape, shape):
        raise messages.list_inconsistent_shapes(method, shape, element_shape)


def check_list_element(list_shape, shape, method):
    """The TensorList kernel's check of a written element: it must fit the list's own element shape."""
    if not is_compatible(list_shape, shape):
        raise messages.list_incompatible_item(method, shape, list_shape)


def split_element_shape(element_shape, infer_shape, value_shape, lengths):
    """The element shape (Python side's and list's alike) after a split of a value of ``value_shape``
    into pieces of ``lengths`` rows (a list of at least one int): TensorFlow checks, and with
    infer_shape merges, the piece shape only when the lengths are equal; the rest of the value's
    shape must fit the element shape's past dimension 0."""
    rest = tuple(value_shape[1:])
    if len(set(lengths)) == 1:
        piece = (lengths[0],) + rest
        check_element(element_shape, piece, "split")
        if infer_shape:
            element_shape = merge(element_shape, piece)
    if element_shape is not None and (len(element_shape) == 0 or not is_compatible(element_shape[1:], rest)):
        raise messages.split_rest_incompatible(rest, element_shape)
    return element_shape


def zeros_shape(shape, slot_shapes, method):
    """The shape a list's unwritten slots read as (zeros): ``shape``, the element shape known,
    merged with each of ``slot_shapes`` (the set slots') while not fully defined. Where no fully
    defined shape results, TensorFlow's TensorList words (messages.list_zeros_unknown)."""
    try:
        if not is_fully_defined(shape):
            for slot_shape in slot_shapes:
                shape = merge(shape, slot_shape)
    except InvalidArgumentError as failure:
        raise messages.tf2_error(failure.message, method) from None
    if not is_fully_defined(shape):
        raise messages.list_zeros_unknown(method, shape)
    return shape
