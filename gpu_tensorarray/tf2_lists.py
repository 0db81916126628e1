"""Mode tf2's list rules that both tf2 classes follow, the library's (tf2_array) and the torch
bridge's (torch.tf2), worked out once here so they cannot drift: the shapes TensorFlow 2's
TensorList ops find for a list, and their errors (built by messages).
"""

from . import messages
from .errors import InvalidArgumentError
from .shapes import is_fully_defined, merge

__all__ = ["zeros_shape"]


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
