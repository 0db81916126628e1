"""Mode tf2's list rules that both tf2 classes follow, the library's (tf2_array) and the torch
bridge's (torch.tf2), worked out once here so they cannot drift: the shapes TensorFlow 2's
TensorList ops find for a list, the checks of the ops' arguments in TensorFlow's order, and
their errors (built by messages).
"""

from . import messages
from .errors import InvalidArgumentError
from .host import host_memory_limit, scalar_int
from .shapes import except_first, is_compatible, is_fully_defined, merge

__all__ = ["check_concat_rows", "check_element", "check_list_element", "check_rows", "check_scatter",
           "check_scatter_bounds", "check_split", "check_unstack", "concat_zeros_shape", "converted",
           "empty_concat_shape", "empty_gather_shape", "empty_stack_shape", "index", "list_name", "merged",
           "room_after_move", "split_element_shape", "worth_moving", "zeros_shape"]

# Physical slots a list may use beyond twice its length before its values move to a fresh storage.
_SLACK = 16


def worth_moving(used, length, count):
    """Whether a list of ``length`` slots whose storage has used ``used`` physical slots (each
    write takes a fresh one) should move its values to a fresh storage before taking ``count``
    more: once overwrites have used more than twice what the list can hold. So its memory
    follows its length, not the number of its writes (a ring buffer's), and a move of n values
    comes after at least n more writes (amortised O(1) per write); writes in order never move."""
    return used + count > 2 * (length + count) + _SLACK


def list_name(tensor_array_name):
    """The name a list's storages take: ``tensor_array_name`` when it is a non-empty string (TensorFlow 2
    ignores it; here it names the array in errors), else TensorFlow 2's lists' own."""
    return tensor_array_name if isinstance(tensor_array_name, (str, bytes)) and tensor_array_name else "TensorArrayV2"


def room_after_move(live, count):
    """The physical slots of the storage a list's ``live`` values move to before taking ``count``
    more: as many again, so moves forced by a locked size (a gradient computed between writes)
    come once per doubling, amortised O(1) per write."""
    return 2 * (live + count)


def converted(method, convert, *args):
    """``convert(*args)``, an op's conversion of an argument (scalar_int, host_ints,
    python_value_as), whose error gets the op's context, as every mode tf2 error has it."""
    try:
        return convert(*args)
    except InvalidArgumentError as failure:
        written_dtypes = getattr(failure, "written_dtypes", None)     # (dtypes.python_value_as)
        if written_dtypes is not None:
            raise messages.list_dtype(method, *written_dtypes) from None
        raise messages.tf2_error(failure.message, method) from None


# What one slot takes in a list's tables, at most: its physical slot and its shape.
_TABLE_BYTES = 16


def check_tables(length, method):
    """ResourceExhaustedError for tables of ``length`` slots that host memory cannot hold: asking
    for them may succeed (the kernel overcommits), and filling them get the process killed."""
    limit = host_memory_limit()
    if length * _TABLE_BYTES > limit:
        raise messages.list_out_of_memory(method, length, MemoryError(
            f"{length * _TABLE_BYTES} bytes of tables, more than the host's {limit}"))


def index(value, method):
    """An op's index as a Python int, or its error in the op's context."""
    return converted(method, scalar_int, value, "index", "TensorArray index must be scalar, but had shape: ")


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


def check_rows(shape, row_shapes, method):
    """The rows of one stack or gather (``row_shapes``: the set slots') must all have ``shape``, the
    element shape merged with the list's, where it is fully defined, else one shape (a TensorList
    whose element shape is fully defined does not look, and reads memory it never wrote)."""
    shapes = set(row_shapes)
    expected = shape if is_fully_defined(shape) else (min(shapes) if shapes else None)
    for row_shape in sorted(shapes):
        if row_shape != expected:
            raise messages.list_rows_differ(method, expected, row_shape)


def empty_gather_shape(element_shape, list_shape):
    """The element shape of a gather of no indices, which must be fully defined (set slots aside)."""
    shape = merged(element_shape, list_shape, "gather")
    if not is_fully_defined(shape):
        raise messages.list_empty_gather_shape(shape)
    return shape


def empty_stack_shape(element_shape, list_shape):
    """The element shape of a stack of an empty list, which must be fully defined."""
    shape = merged(element_shape, list_shape, "stack")
    if not is_fully_defined(shape):
        raise messages.list_empty_stack_shape(shape)
    return shape


def empty_concat_shape(element_shape, list_shape):
    """The shape, past dimension 0, of a concat of an empty list, which must be fully defined."""
    shape = merged(element_shape, list_shape, "concat")
    if list_shape == ():
        raise messages.list_concat_scalar(0)
    rest = except_first(shape)
    if not is_fully_defined(rest):
        raise messages.list_empty_concat_shape(shape)
    return rest


def concat_zeros_shape(element_shape, list_shape, slot_shapes):
    """The shape the unwritten slots of a concat read as (``slot_shapes``: each slot's, None where
    unwritten). TensorFlow passes the element shape with an unknown first dimension, merged with the
    list's; an unknown leading dimension is the one every set slot shares, unknown other dimensions
    come from the set slots."""
    set_shapes = [shape for shape in slot_shapes if shape]          # scalars: check_concat_rows refuses them
    try:
        base = merge(None if element_shape is None else (None,) + element_shape[1:], list_shape)
        leading = {base[0]} if base is not None and base[0] is not None else {shape[0] for shape in set_shapes}
        rest = except_first(base)
        for shape in set_shapes if not is_fully_defined(rest) else ():
            rest = merge(rest, shape[1:])
    except InvalidArgumentError as failure:
        raise messages.tf2_error(failure.message, "concat") from None
    # TensorListConcat's order: the shape past dimension 0 (known unless every slot is unwritten) first.
    if not is_fully_defined(rest):
        raise messages.list_concat_rest_unknown(rest)
    if len(leading) != 1:
        raise messages.list_concat_no_leading(list(slot_shapes).index(None))
    return (leading.pop(),) + rest


def check_concat_rows(slot_shapes):
    """TensorListConcat's check of the set slots (``slot_shapes``, None where unwritten), in order:
    each at least a vector, all of one shape past dimension 0."""
    rest = None
    for index, shape in enumerate(slot_shapes):
        if shape is not None:
            if not shape:
                raise messages.list_concat_scalar(index)
            rest = merged(rest, shape[1:], "concat")


def check_scatter(indices_shape, value_shape):
    """A scatter's arguments: a vector of indices, one row of the value for each."""
    if len(indices_shape) != 1:
        raise messages.list_indices_not_vector("scatter", indices_shape)
    if len(value_shape) == 0 or value_shape[0] != indices_shape[0]:
        raise messages.list_scatter_rows(indices_shape[0], value_shape)


def check_scatter_bounds(low, high, length, growable):
    """The lowest and highest index of a scatter (of at least one row) into a list of ``length``."""
    if low < 0 or (high >= length and not growable):
        raise messages.list_modify_bounds("scatter", low if low < 0 else high, length)


def check_unstack(value_shape, static_size):
    """An unstack's value: at least a vector, as many rows as a fixed size (None: dynamic) says."""
    if len(value_shape) == 0:
        raise messages.list_unpack_scalar()
    if static_size is not None and value_shape[0] != static_size:
        raise messages.list_unstack_count(value_shape[0], static_size)


def check_split(value_shape, lengths_shape, lengths, static_size):
    """A split's arguments, in TensorFlow's order: ``lengths`` (ints) a vector of non-negative
    lengths that add up to the value's rows, as many as a fixed size (None: dynamic) says, and at
    least one."""
    if len(lengths_shape) != 1:
        raise messages.list_split_lengths_not_vector(lengths_shape)
    if len(value_shape) == 0:
        raise messages.list_split_scalar()
    if min(lengths, default=0) < 0:
        raise messages.list_split_negative(lengths)
    if sum(lengths) != value_shape[0]:
        raise messages.list_split_total(sum(lengths), value_shape)
    if static_size is not None and len(lengths) != static_size:
        raise messages.list_split_count(static_size, len(lengths))
    if not lengths:
        raise messages.list_split_no_lengths()
