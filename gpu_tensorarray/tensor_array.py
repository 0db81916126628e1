"""The pythonic TensorArray: tf.TensorArray's constructor and methods with
TF1 graph-mode semantics (``_GraphTensorArray``), each op a delegation to raw_ops.
``mode="tf2"`` (or a tf2 default, modes.py) gives TensorFlow 2's rules instead
(tf2_array.py). Attributes (size, element shape, backend) are read from the
array's read-only public face (storage.ArrayStorage, found by registry.lookup).

Like TensorFlow's V3 class, ``write``/``scatter``/``split``/``unstack`` return a
new TensorArray that shares the handle and carries the op's flow; the old object
stays usable (it is the same resource).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dtypes, messages, modes, raw_ops
from .conversion import to_tensor, truth
from .errors import InvalidArgumentError, about
from .host import host_ints
from .registry import Handle, deep_copy_refused, registry
from .shapes import except_first, is_compatible, merge
from .strings import is_string_like

__all__ = ["TensorArray", "Tensor", "TensorLike", "DTypeLike", "IntLike", "IntsLike", "ShapeLike"]

# What the public signatures mean (kept Any: NumPy, CuPy, torch and JAX arrays, DLPack
# capsules' owners, Python scalars and lists all go through one conversion):
Tensor = Any        # a value the library returns: a NumPy array (numpy/emulated) or a CuPy array (cupy)
TensorLike = Any    # a value it accepts: any of the above, a Python scalar or (nested) list, __dlpack__, __array__
DTypeLike = Any     # a NumPy dtype or its name ("float32"), TensorFlow's name ("float") or DType, a torch dtype
IntLike = Any       # an integer scalar: int, a NumPy integer, a 0-d integer array
IntsLike = Any      # integers: a list, a range, a 1-d integer array
ShapeLike = Any     # None (unknown rank) or a sequence of ints and None (unknown dimensions)

_new = object.__new__
_PYTHON_VALUES = (bool, int, float, complex, list, tuple)


class TensorArray:
    """tf.TensorArray: a list of tensors of one dtype on one backend.

    By default (mode "tf1") it follows TensorFlow's V3 ops, as TF1 graph code runs
    them: each slot is written once and (with ``clear_after_read``, the default) read
    once, and ``grad`` gives gradient arrays whose writes add up. ``mode="tf2"`` (or a
    tf2 default: ``gta.tensor_array_mode``) makes a TensorArray with TensorFlow 2's
    rules instead (slots overwrite, reads never clear). Arguments not listed are
    tf.TensorArray's and mean what they mean there.

    Args:
        dtype: the element dtype (a NumPy dtype or name, TensorFlow's name or DType).
        size: the number of elements (required unless ``handle`` is given).
        dynamic_size: whether writes past the end grow the array (default False).
        clear_after_read: whether a read clears its slot (default True; mode "tf1").
        tensor_array_name: the name TensorFlow gives the array (``handle.name``).
        handle, flow: wrap an existing V3 array (raw_ops' handle and flow) instead.
        infer_shape: whether the element shape is learnt from the values written.
        element_shape: the element shape, if known (None for unknown dimensions).
        colocate_with_first_write_call, name: accepted and ignored (no graph here).
        mode: "tf1" or "tf2"; default: gta.get_tensor_array_mode().

    ``write``, ``scatter``, ``unstack`` and ``split`` return a new TensorArray, as in
    TensorFlow: use the one returned.
    """

    # _shape_cell: the element shape known from the values passed in (TensorFlow's
    # Python-side shape inference), shared by every TensorArray of one handle and
    # by its gradient arrays, as in TensorFlow.
    __slots__ = ("_handle", "_flow", "_dtype", "_infer_shape", "_dynamic_size", "_known_size", "_shape_cell",
                 "__weakref__")
    _shape_cell: Any        # [shape or None]; None in mode "tf2", which keeps shapes elsewhere

    def __new__(cls, dtype: DTypeLike, size: IntLike | None = None, dynamic_size: bool | None = None,
                clear_after_read: bool | None = None, tensor_array_name: str | None = None,
                handle: Handle | None = None, flow: TensorLike | None = None, infer_shape: bool = True,
                element_shape: ShapeLike = None, colocate_with_first_write_call: bool = True,
                name: str | None = None, mode: str | None = None) -> TensorArray:
        # TensorArray(...) makes the class of the mode (tf2_array.TF2TensorArray for "tf2").
        return _new(modes.class_for(mode) if cls is TensorArray else cls)

    def __init__(self, dtype: DTypeLike, size: IntLike | None = None, dynamic_size: bool | None = None,
                 clear_after_read: bool | None = None, tensor_array_name: str | None = None,
                 handle: Handle | None = None, flow: TensorLike | None = None, infer_shape: bool = True,
                 element_shape: ShapeLike = None, colocate_with_first_write_call: bool = True,
                 name: str | None = None, mode: str | None = None) -> None:
        # colocate_with_first_write_call and name mean nothing here: an array lives on
        # the backend active at its creation, and there is no graph to name. ``mode``
        # was used by __new__ ("tf1" here).
        self._dtype = dtypes.as_dtype(dtype)
        self._infer_shape = truth(infer_shape, "infer_shape")
        if handle is not None:
            _check_wrapping(handle, flow, size, tensor_array_name, element_shape, dynamic_size, clear_after_read)
            array = registry.lookup(handle)
            self._handle, self._flow = handle, array.backend.flow(flow, handle)
            self._dynamic_size = array.dynamic_size
            self._known_size = None
            self._shape_cell = [None]
            return
        if size is None:
            raise InvalidArgumentError("Size must be provided if handle is not provided")
        self._dynamic_size = False if dynamic_size is None else dynamic_size
        self._handle, self._flow = raw_ops.TensorArrayV3(
            size, self._dtype, element_shape=element_shape, dynamic_size=self._dynamic_size,
            clear_after_read=True if clear_after_read is None else clear_after_read,
            identical_element_shapes=self._infer_shape,
            tensor_array_name="" if tensor_array_name is None else tensor_array_name)
        self._known_size = None if self._dynamic_size else registry.lookup(self._handle).size
        self._shape_cell = [registry.lookup(self._handle).element_shape]

    # -- properties ----------------------------------------------------------------------------
    @property
    def handle(self) -> Handle:
        """The V3 array's handle, for raw_ops (``handle.name`` is TensorFlow's name)."""
        return self._handle

    @property
    def flow(self) -> Tensor:
        """The flow value of the last op (a float32 scalar), for raw_ops."""
        return self._flow

    @property
    def dtype(self) -> np.dtype:
        """The element dtype, as a NumPy dtype."""
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        """Whether writes past the end grow the array."""
        return self._dynamic_size

    @property
    def element_shape(self) -> tuple[int | None, ...] | None:
        """The element shape known so far: None (unknown rank) or a tuple with None for unknown dims."""
        known = registry.lookup(self._handle).element_shape
        inferred = self._shape_cell[0]
        if inferred is None or inferred == known:
            return known
        try:
            return merge(inferred, known)
        except InvalidArgumentError:
            return known

    def _check_value_shape(self, index: Any, shape: Sequence[int | None]) -> None:
        """TensorFlow's class checks a value's shape against the element shape every
        TensorArray of the array and its gradient arrays share, before the op: a gradient
        array made before its forward knew the shape does not know it itself."""
        known = self._shape_cell[0]
        if known is not None and tuple(shape) != known and not is_compatible(known, tuple(shape)):
            raise messages.incompatible_shape(registry.lookup(self._handle), index, tuple(shape), known)

    def _infer(self, shape: Sequence[int]) -> None:
        """Merge a shape learnt from a value into the shared cell (infer_shape only)."""
        current = self._shape_cell[0]
        if self._infer_shape and (current is None or None in current):
            try:
                self._shape_cell[0] = merge(current, tuple(shape))
            except InvalidArgumentError:
                pass    # the op itself reported any real conflict

    def __copy__(self) -> TensorArray:
        return self.identity()

    def __deepcopy__(self, memo: dict) -> TensorArray:
        raise deep_copy_refused(self._handle.name)

    def __repr__(self) -> str:
        return f"<gpu_tensorarray.TensorArray {self._handle.name!r} dtype={self._dtype.name}>"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        # np.asarray(ta) would otherwise make a 0-d object array without a word.
        raise InvalidArgumentError("A TensorArray is not an array: call ta.stack() (or ta.concat()) for its values")

    def _with_flow(self, flow: Tensor) -> TensorArray:
        result = _new(TensorArray)
        result._handle, result._flow, result._dtype = self._handle, flow, self._dtype
        result._infer_shape, result._dynamic_size, result._known_size, result._shape_cell = \
            self._infer_shape, self._dynamic_size, self._known_size, self._shape_cell
        return result

    def _value(self, value: TensorLike) -> tuple[Any, tuple[int, ...]]:
        """-> (what the op gets, its shape). TensorFlow converts Python scalars and lists
        with the array's dtype; typed values keep theirs (a mismatch is then the op's dtype
        error) and reach the op as they are (a tape knows them by identity), after a
        conversion here that fails before the op and gives their shape, so nothing after
        the op touches the caller's object again."""
        backend = self._handle.array.backend
        if type(value) is backend.array_type:
            return value, value.shape
        if isinstance(value, _PYTHON_VALUES) and not isinstance(value, np.generic):
            try:
                value = dtypes.python_value_as(value, self._dtype, self._handle)
            except InvalidArgumentError as error:
                written = getattr(error, "written_dtypes", None)
                if written is None:
                    raise
                # TensorFlow converts the value to its own dtype, which the op refuses.
                raise InvalidArgumentError(f"TensorArray dtype is {written[1]} but Op is trying to write dtype "
                                           f"{written[0]}.{about(self._handle)}") from None
        if type(value) is np.ndarray:
            return value, value.shape
        return value, to_tensor(backend, value, self._dtype, self._handle).shape

    # -- ops -------------------------------------------------------------------------------------
    def identity(self) -> TensorArray:
        """A TensorArray with the same handle and flow."""
        return self._with_flow(self._flow)

    def grad(self, source: str, flow: TensorLike | None = None, name: str | None = None) -> TensorArray:
        """The gradient array for ``source`` (TensorArrayGradV3): the same source gives
        the same array, and every write, scatter or split into it adds to what its slots
        hold. Two gradient computations use two sources ("gradients", "gradients_1").
        Making one locks a dynamic array's size, as in TensorFlow. Mode "tf1" only."""
        # The flow is checked first: a refused one must leave no gradient array, and the size unlocked.
        flow = self._flow if flow is None else self._handle.array.backend.flow(flow, self._handle)
        grad_handle, _ = raw_ops.TensorArrayGradV3(self._handle, flow, source)
        grad = TensorArray(self._dtype, handle=grad_handle, flow=flow, infer_shape=self._infer_shape, mode="tf1")
        grad._shape_cell = self._shape_cell
        return grad

    def read(self, index: IntLike, name: str | None = None) -> Tensor:
        """The element at ``index`` (a read-only view on the CPU backends). With
        ``clear_after_read`` (mode "tf1"), a second read of the slot fails."""
        return raw_ops.TensorArrayReadV3(self._handle, index, self._flow, self._dtype)

    def write(self, index: IntLike, value: TensorLike, name: str | None = None) -> TensorArray:
        """``value`` copied into slot ``index``; returns the TensorArray to go on with.
        Mode "tf1": each slot is written once (a gradient array's writes add)."""
        if type(value) is np.ndarray:
            shape = value.shape
        else:
            value, shape = self._value(value)
        known = self._shape_cell[0]
        if known is not None and shape != known:
            self._check_value_shape(index, shape)
        result = self._with_flow(raw_ops.TensorArrayWriteV3(self._handle, index, value, self._flow))
        if known is None or None in known:      # the common case skips this: a known shape
            self._infer(shape)
        return result

    def stack(self, name: str | None = None) -> Tensor:
        """Every element stacked along a new first axis (a view when the array was
        written in full, slot by slot in order)."""
        size = self._known_size
        if size is None:        # TensorArraySizeV3's lookup and checks, without making its int32 array
            size = registry.lookup(self._handle).current_size()
        return self.gather(range(size), name=name)

    def gather(self, indices: IntsLike, name: str | None = None) -> Tensor:
        """The elements at ``indices``, stacked along a new first axis."""
        return raw_ops.TensorArrayGatherV3(self._handle, indices, self._flow, self._dtype,
                                           element_shape=self.element_shape)

    def concat(self, name: str | None = None) -> Tensor:
        """Every element joined along its first axis (elements may differ in it)."""
        value, _ = raw_ops.TensorArrayConcatV3(self._handle, self._flow, self._dtype,
                                               element_shape_except0=except_first(self.element_shape))
        return value

    def unstack(self, value: TensorLike, name: str | None = None) -> TensorArray:
        """Row i of ``value`` into slot i (TensorArrayScatterV3 with indices 0..n-1);
        returns the TensorArray to go on with."""
        value, shape = self._value(value)
        if len(shape) == 0:
            raise InvalidArgumentError(f"TensorArray {self._handle.name}: unstack needs a value of rank >= 1, "
                                       f"got a scalar")
        count = shape[0]
        try:
            return self.scatter(range(count), value, name=name)     # (the op checks a range before listing it)
        except InvalidArgumentError as error:
            # TensorFlow's unstack is this scatter, so its text comes first; the advice follows it.
            if not error.message.startswith("Max scatter index must be < array size") or \
                    self._handle.array.created_dynamic:     # (a gradient array fixed the size: the error says so)
                raise
            raise type(error)(f"{error.message} (TensorArray.unstack of {count} rows: create the TensorArray "
                              f"with size={count} or dynamic_size=True)") from None

    def scatter(self, indices: IntsLike, value: TensorLike, name: str | None = None) -> TensorArray:
        """Row k of ``value`` into slot ``indices[k]``; returns the TensorArray to go on with."""
        value, shape = self._value(value)
        if self._shape_cell[0] is not None and len(shape) and tuple(shape[1:]) != self._shape_cell[0]:
            first = host_ints(indices, "indices", owner=self._handle).reshape(-1)      # the slot the op names
            self._check_value_shape(int(first[0]) if first.size else 0, shape[1:])
        result = self._with_flow(raw_ops.TensorArrayScatterV3(self._handle, indices, value, self._flow))
        self._infer(shape[1:])
        return result

    def split(self, value: TensorLike, lengths: IntsLike, name: str | None = None) -> TensorArray:
        """``value`` cut along its first axis into pieces of ``lengths`` rows, piece i into
        slot i; returns the TensorArray to go on with."""
        value, shape = self._value(value)
        if self._dtype is not dtypes.STRING and is_string_like(value):
            # TensorFlow's class checks the dtype (_check_dtypes) before the op, which checks the rank first
            raise InvalidArgumentError(f"TensorArray dtype is {dtypes.tf_name(self._dtype)} but Op is trying to "
                                       f"write dtype string.{about(self._handle)}")
        lengths = host_ints(lengths, "lengths", "int64", owner=self._handle)
        try:
            if lengths.ndim == 1 and lengths.size and len(shape) and (lengths == lengths[0]).all():
                # TensorFlow's class checks the pieces' one shape first, as the op would name the first
                # piece; unequal pieces go to the op, whose own checks come first then.
                self._check_value_shape(0, (int(lengths[0]),) + tuple(shape[1:]))
            flow = raw_ops.TensorArraySplitV3(self._handle, value, lengths, self._flow)
        except InvalidArgumentError as error:
            raise _explained(error, self, "split") from None
        result = self._with_flow(flow)
        lengths = lengths.reshape(-1)
        if len(lengths) and (lengths == lengths[0]).all():     # equal pieces have one shape
            self._infer((int(lengths[0]),) + tuple(shape[1:]))
        return result

    def size(self, name: str | None = None) -> Tensor:
        """The number of elements, an int32 scalar (a constant for arrays that cannot
        grow, as in TensorFlow)."""
        if self._known_size is not None:
            return np.array(self._known_size, np.int32)      # host memory, as TensorArraySizeV3's
        return raw_ops.TensorArraySizeV3(self._handle, self._flow)

    def close(self, name: str | None = None) -> None:
        """Release the storage (TensorArrayCloseV3); later ops on the array fail."""
        raw_ops.TensorArrayCloseV3(self._handle)


def _explained(error: InvalidArgumentError, ta: TensorArray, method: str) -> InvalidArgumentError:
    """``error`` with what to change, after TensorFlow's text, where the kernel's own advice does
    not fit the class's array."""
    text = error.message
    if not ta._infer_shape and "(consider setting infer_shape=False)" in text:
        text += (f" (TensorArray.{method}: infer_shape is already False; the pieces must match the element_shape "
                 f"given at creation: leave element_shape out, or give None for the dimensions that vary)")
    elif "is not marked as dynamically resizeable" in text:
        text += (f" (TensorArray.{method}: a dynamic array takes as many pieces as it has slots, or more)"
                 if ta._dynamic_size else
                 f" (TensorArray.{method}: create the TensorArray with that size or dynamic_size=True)")
    else:
        return error
    return type(error)(text)


def _check_wrapping(handle: Any, flow: Any, size: Any, tensor_array_name: Any, element_shape: Any,
                    dynamic_size: Any, clear_after_read: Any) -> None:
    """_GraphTensorArray's argument rules when wrapping an existing handle."""
    if truth(tensor_array_name, "tensor_array_name"):
        raise InvalidArgumentError("Cannot construct with both handle and tensor_array_name")
    if not isinstance(handle, Handle):
        raise InvalidArgumentError(f"Handle must be a TensorArray handle, got {type(handle).__name__}")
    for value, what in ((size, "size"), (element_shape, "element_shape"), (dynamic_size, "dynamic_size"),
                        (clear_after_read, "clear_after_read")):
        if value is not None:
            raise InvalidArgumentError(f"Cannot provide both a handle and {what} at the same time")
    if flow is None:
        raise InvalidArgumentError("flow must not be None if handle is not None.")


modes.register_class("tf1", TensorArray)
