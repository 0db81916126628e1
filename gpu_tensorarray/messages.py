"""TensorFlow's TensorArray error texts, one builder each (users and tests match them).

Each builder takes the array (anything with ``name`` and ``dtype``) and the facts
of the failure, and returns the exception for the caller to raise. TensorFlow's
wording comes first; our context (the array's name) follows as TensorFlow's
tensor_array.h does ("TensorArray <name>: ...") or, for kernel messages that do
not name the array, as a suffix " (TensorArray <name>)".
"""

import re

from .dtypes import tf_name
from .errors import AbortedError, InvalidArgumentError, ResourceExhaustedError, UnimplementedError, about, described
from .host import INT32_MAX, shape_text
from .shapes import format_shape


def _shape(shape):
    return format_shape(tuple(shape))


def _named(array, text, cls=InvalidArgumentError):
    return cls(f"TensorArray {array.name}: {text}")


def _suffixed(array, text, cls=InvalidArgumentError):
    return cls(f"{text} (TensorArray {array.name})")


# -- any op ------------------------------------------------------------------------------------
def closed(array):
    return InvalidArgumentError(f"TensorArray {array.name} has already been closed.")


def out_of_memory(array, error):
    """A ResourceExhaustedError of an allocation for ``array``'s op, naming the array."""
    return error if array.name in str(error) else _suffixed(array, str(error), ResourceExhaustedError)


def write_bounds(array, index, size):
    return _named(array, f"Tried to write to index {index} but array is not resizeable and size is: {size}"
                         f"{_size_fixed(array)}")


def _size_fixed(array):
    """Why an array made with dynamic_size=True no longer grows, after TensorFlow's text."""
    if array.created_dynamic and not array.dynamic_size:
        return (" (the array was made with dynamic_size=True: a gradient array of it, TensorArrayGradV3, "
                "fixed its size, as in TensorFlow)")
    return ""


def too_many_slots(array, size):
    """docs/semantics.md §6.2: TensorFlow's index + 1 overflows its int32 size here."""
    return _named(array, f"Could not grow to {size} slots: a TensorArray's size is an int32, at most {INT32_MAX}")


def read_bounds(array, index, size):
    return _suffixed(array, f"Tried to read from index {index} but array size is: {size}")


def written_dtype(array, dtype):
    return _suffixed(array, f"TensorArray dtype is {tf_name(array.dtype)} but Op is trying to write "
                            f"dtype {tf_name(dtype)}.")


def requested_dtype(array, dtype):
    return _suffixed(array, f"TensorArray dtype is {tf_name(array.dtype)} but Op requested dtype {tf_name(dtype)}.")


def converted(array, error):
    """A conversion error of a caller's value, naming the array."""
    return type(error)(error.message + about(array))


# -- writes ------------------------------------------------------------------------------------
def incompatible_shape(array, index, shape, element_shape):
    return _named(array, f"Could not write to TensorArray index {index} because the value shape is {_shape(shape)} "
                         f"which is incompatible with the TensorArray's inferred element shape: "
                         f"{format_shape(element_shape)} (consider setting infer_shape=False).")


def already_read(array, index):
    return _named(array, f"Could not write to TensorArray index {index} because it has already been read.")


def already_written(array, index):
    return _named(array, f"Could not write to TensorArray index {index} because it has already been written to.")


def aggregate_shape(array, index, slot_shape, shape):
    return _named(array, f"Could not aggregate to TensorArray index {index} because the existing shape is "
                         f"{_shape(slot_shape)} but the new input shape is {_shape(shape)}.")


def not_aggregatable(array):
    return _suffixed(array, f"tensor_array::AddToTensor type not supported: {tf_name(array.dtype)}")


def no_zeros(array):
    """A read of a slot without a value, of a dtype TensorFlow has no zeros for (strings)."""
    return _suffixed(array, f"tensor_array::TensorSetZero type not supported: {tf_name(array.dtype)}")


# -- reads -------------------------------------------------------------------------------------
def cleared(array, index):
    return _named(array, f"Could not read index {index} twice because it was cleared after a previous read "
                         f"(perhaps try setting clear_after_read = false?).")


def zeros_shape_unknown(array, index, element_shape):
    return _named(array,
                  f"Could not read from TensorArray index {index}.  Furthermore, the element shape is not fully "
                  f"defined: {format_shape(element_shape)}.  It is possible you are working with a resizeable "
                  f"TensorArray and stop_gradients is not allowing the gradients to be written.  If you set the "
                  f"full element_shape property on the forward TensorArray, the proper all-zeros tensor will be "
                  f"returned instead of incurring this error.")


def indices_not_vector(array, shape):
    return _suffixed(array, f"Expected indices to be a vector, but received shape: {_shape(shape)}")


def empty_gather_shape(array, element_shape):
    return _suffixed(array, f"TensorArray has size zero, but element shape {format_shape(element_shape)} is not "
                            f"fully defined. Currently only static shapes are supported when packing zero-size "
                            f"TensorArrays.", UnimplementedError)


def gather_shape(array, element_shape, first_shape):
    return _suffixed(array, f"TensorArray was passed element_shape {format_shape(element_shape)} which "
                            f"does not match the Tensor at index 0: {_shape(first_shape)}")


def gather_inconsistent(array, first_shape, position, shape):
    return _suffixed(array, f"TensorArray has inconsistent shapes.  Index 0 has shape: "
                            f"{_shape(first_shape)} but index {position} has shape: {_shape(shape)}")


def empty_concat_shape(array, element_shape_except0):
    return _suffixed(array, f"TensorArray has size zero, but element_shape_except0 "
                            f"{format_shape(element_shape_except0)} is not fully defined. Currently only static "
                            f"shapes are supported when concatenating zero-size TensorArrays.", UnimplementedError)


def concat_unmarked(array):
    return _named(array, "Concat of a gradient TensorArray whose forward array had no Split before the gradient "
                         "array was created: its marked size is -1, so the number of elements is unknown.")


def concat_scalar(array, index):
    return _suffixed(array, f"Concat saw a scalar shape at index {index} but requires at least vectors."
                            f"  Did you mean to call pack?")


def concat_shape(array, element_shape_except0, shape):
    return _suffixed(array, f"TensorArray was passed element_shape_except0 {format_shape(element_shape_except0)} "
                            f"but index 0 has (excepting dimension 0) shape: {_shape(shape[1:])} which does "
                            f"not match.")


def concat_inconsistent(array, first, index, shape):
    return _suffixed(array, f"TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: "
                            f"{_shape(first[1:])} but index {index} has (excepting dimension 0) shape: "
                            f"{_shape(shape[1:])}")


# -- Scatter, Split ----------------------------------------------------------------------------
def unpack_scalar(array, shape):
    return _suffixed(array, f"Input value for unpack must be at least a vector but received shape: {_shape(shape)}")


def scatter_count(array, count, rows):
    return _suffixed(array, f"Expected len(indices) == values.shape[0], but saw: {count} vs. {rows}")


def scatter_bounds(array, max_index, size):
    return _suffixed(array, f"Max scatter index must be < array size ({max_index} vs. {size}){_size_fixed(array)}")


def lengths_not_vector(array, shape):
    return _suffixed(array, f"Expected lengths to be a vector, received shape: {_shape(shape)}")


def split_scalar(array, shape):
    return _suffixed(array, f"Expected value to be at least a vector, but received shape: {_shape(shape)}")


def split_total(array, total, shape):
    return _suffixed(array, f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                            f"{total} and value's shape is: {_shape(shape)}")


def split_count(array, size, count):
    return _suffixed(array, f"TensorArray's size is not equal to the size of lengths ({size} vs. {count}), "
                            f"and the TensorArray is not marked as dynamically resizeable")


def split_negative(array, position, length):
    return _named(array, f"Split lengths must be >= 0, but lengths[{position}] is {length}")


# -- gradient arrays ---------------------------------------------------------------------------
def grad_of_grad(array):
    return InvalidArgumentError(f"Wrong input container. _tensor_array_grads{array.name} (a gradient TensorArray "
                                f"has no gradient TensorArray of its own)")


def prepend_not_vector(array, shape):
    return InvalidArgumentError(f"shape must be a vector of {{int32,int64}}, got shape {shape_text(shape)}"
                                f"{about(array)}")


def prepend_negative(array, dim, dims):
    return InvalidArgumentError(f"Dimension {dim} must be >= 0 (shape_to_prepend {shape_text(dims)}){about(array)}")


# -- mode tf2's lists --------------------------------------------------------------------------
# TensorFlow 2's words (its TensorList kernels' and its Python side's, or ours where it has none);
# the context is the TensorArray method and the mode. Both tf2 classes, the library's (tf2_array)
# and the torch bridge's (torch.tf2), raise these, so their texts cannot drift apart.
def tf2_error(text, method, error_class=InvalidArgumentError):
    return error_class(f"{text} (TensorArray.{method}, mode 'tf2')")


_TF2_CONTEXT = re.compile(r" \(TensorArray\.(\w+), mode 'tf2'\)$")


def name_tf2_error(error, name, method, index=None):
    """A mode tf2 op's error (``tf2_error``'s) told as mode tf1's are, in place: it names the
    array, and the index of a write or read (TensorFlow's TensorList texts name neither): an
    int, as the op converts one it takes (one it refused, a bool, a tensor, says what it is)."""
    context = _TF2_CONTEXT.search(error.message)
    if context is None:
        return
    where = f" at index {index}" if type(index) is int and context.group(1) == method else ""
    text = f"TensorArray {name}: {error.message[:context.start()]} (TensorArray.{context.group(1)}{where}, mode 'tf2')"
    error.message = text
    error.args = (text,)


def _tshape(shape):
    """TensorShape's str, as TensorFlow's Python side prints shapes: (2, 3), (2,), (None, 2), <unknown>."""
    if shape is None:
        return "<unknown>"
    dims = ", ".join("None" if d is None else str(d) for d in shape)
    return f"({dims},)" if len(shape) == 1 else f"({dims})"


#: Why a forked child cannot use an array another thread was changing when the process forked.
FORKED_MID_OP = ("was in use by another thread when this process was forked: that op may have been half done here, "
                 "so the array cannot be used in this process (use it in the parent, or fork while no op runs)")


def list_forked_mid_op(name):
    return AbortedError(f"TensorArray {name} {FORKED_MID_OP}")


def superseded(name):
    return InvalidArgumentError(
        f"TensorArray {name}: This TensorArray was already used by write/scatter/unstack/split, which returned "
        "a new one: use the TensorArray they return (ta = ta.write(...)). TensorFlow 2 disagrees with itself here "
        "(inside tf.function the old TensorArray keeps the old contents, in eager it sees the new ones)")


def list_dtype(method, value_dtype, list_dtype):
    """A value of another dtype; both dtypes by TensorFlow's names (dtypes.tf_name)."""
    return tf2_error(f"Invalid data types; op elements {value_dtype} but list elements {list_dtype}", method)


def list_inconsistent_shapes(method, shape, element_shape):
    # TensorFlow's text ends in a space.
    return tf2_error(f"Inconsistent shapes: saw {_tshape(shape)} but expected {_tshape(element_shape)} ", method)


def list_incompatible_item(method, shape, list_shape):
    return tf2_error(f"Tried to set a tensor with incompatible shape at a list index. Item element shape: "
                     f"{format_shape(shape)} list shape: {format_shape(list_shape)}", method)


def list_out_of_memory(method, length, error):
    """A list's table of ``length`` slots (a huge size or index of a dynamic list) found no host memory."""
    return tf2_error(f"OOM when allocating a list of {length} elements: host memory ran out ({described(error)})",
                     method, ResourceExhaustedError)


def list_modify_bounds(method, index, length):
    return tf2_error(f"Trying to modify element {index} in a list with {length} elements.", method)


def list_read_bounds(index, length):
    return tf2_error(f"Trying to access element {index} in a list with {length} elements.", "read")


def list_gather_bounds(index, length, shape_defined):
    """TensorListGather's two texts: its loop over the indices, which merges their shapes while the
    list's own element shape is not fully defined, says one; its copy, where it is, the other
    (TensorFlow's typo kept)."""
    if shape_defined:
        return tf2_error(f"Index {index} out o range; list only has {length} elements.", "gather")
    return tf2_error(f"Trying to gather element {index} in a list with {length} elements.", "gather")


def list_indices_not_vector(method, shape):
    return tf2_error(f"indices must be a vector, got shape {list(shape)}", method)


def list_scatter_rows(count, value_shape):
    rows = value_shape[0] if len(value_shape) else "a scalar"
    return tf2_error(f"Invalid number of rows in input tensor. Expected: {count} Actual: {rows}", "scatter")


def list_unpack_scalar():
    return tf2_error("Input value for unpack must be at least a vector but received shape: []", "unstack")


def list_unstack_count(count, size):
    return tf2_error(f"Cannot unstack {count} tensors into a TensorArray of static size {size}: create it with "
                     f"size={count} or dynamic_size=True", "unstack")


def list_split_lengths_not_vector(shape):
    return tf2_error(f"Expected lengths to be a vector, received shape: {list(shape)}", "split")


def list_split_scalar():
    return tf2_error("Expected value to be at least a vector, but received shape: []", "split")


def list_split_negative(lengths):
    return tf2_error(f"Split lengths must be >= 0, got {list(lengths)}", "split")


def list_split_total(total, value_shape):
    return tf2_error(f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is {total} and "
                     f"value's shape is: {list(value_shape)}", "split")


def list_split_count(size, count):
    return tf2_error(f"TensorArray's size is not equal to the size of lengths ({size} vs. {count}), and the "
                     f"TensorArray is not marked as dynamically resizeable: create it with size={count} or "
                     f"dynamic_size=True", "split")


def list_split_no_lengths():
    # TensorFlow's Python side fails on it with NumPy's error (max() of no lengths).
    return tf2_error("split needs at least one length", "split")


def split_rest_incompatible(rest, element_shape):
    return tf2_error(f"tensor shape {format_shape(rest)} is not compatible with element_shape "
                     f"{format_shape(element_shape)} (excepting dimension 0)", "split")


def list_zeros_unknown(method, shape):
    """No shape for a list's unwritten slot: ``shape`` is what is known, not fully defined."""
    if method == "read":
        return tf2_error(f"Trying to read an uninitialized tensor but element_shape is not fully defined: "
                         f"{format_shape(shape)} and no list element is set.", method)
    if method == "stack":
        return tf2_error(f"Tried to stack list which only contains uninitialized tensors and has a non-fully-defined "
                         f"element_shape: {format_shape(shape)}", method)
    return tf2_error(f"Tried to {method} uninitialized tensors from a list with non-fully-defined element_shape: "
                     f"{format_shape(shape)}", method)


def list_rows_differ(method, expected, shape):
    return tf2_error(f"PartialTensorShape: Incompatible shapes during merge: {format_shape(expected)} vs. "
                     f"{format_shape(shape)} (the rows of one {method} must have one shape)", method)


def list_empty_gather_shape(shape):
    return tf2_error(f"Tried to gather 0-elements from a list with non-fully-defined shape: {format_shape(shape)}",
                     "gather")


def list_empty_stack_shape(shape):
    return tf2_error(f"Tried to stack elements of an empty list with non-fully-defined element_shape: "
                     f"{_tshape(shape)}", "stack")


def list_concat_scalar(index):
    return tf2_error(f"Concat saw a scalar shape at index {index} but requires at least vectors.", "concat")


def list_empty_concat_shape(shape):
    return tf2_error(f"All except the first dimension must be fully defined when concating an empty tensor list. "
                     f"element_shape: {_tshape(shape)}", "concat")


def list_concat_no_leading(index):
    return tf2_error(f"List contains uninitialized tensor at index {index} but leading_dims has only 0 elements.",
                     "concat")


def list_concat_rest_unknown(rest):
    return tf2_error(f"Trying to concat list with only uninitialized tensors but element_shape_except_first_dim is "
                     f"not fully defined: {format_shape(rest)}", "concat")
