"""TensorArray with TensorFlow 2's rules (``mode="tf2"``): what tf.TensorArray does
inside a tf.function, where it is a TensorList.

* Writing a slot again replaces its value; reads never clear (clear_after_read is
  ignored, as TensorFlow 2 ignores it there).
* An unwritten slot reads as zeros when its shape is known: the element shape, merged
  with the shapes of the slots that are set.
* unstack and split replace the whole contents (a dynamic array takes their length).
* Where TensorFlow 2 crashes or contradicts itself, the nearest sane rule raises
  TensorFlow's error class (docs/guide.md lists each case).

Storage stays V3: each TF2 array is a logical list over one V3 array (dynamic, reads
that never clear) and a map from logical slot to physical slot. A write always goes
to a fresh physical slot, so a value once returned never changes and a physical slot
is never written twice; the V3 gradient rules then give TF2's gradients: an
overwritten value is never read again (no gradient), a slot read twice gets the sum.
While slots were written in order 0, 1, 2, ... the map is the identity and stack is a
view, as in the V3 class.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from . import dtypes, messages, modes, raw_ops, tf2_lists
from .conversion import to_tensor, truth
from .errors import InvalidArgumentError, OpError, UnimplementedError
from .host import INT32_MAX, INT32_MIN, host_ints, scalar_int
from .shapes import as_partial_shape, is_fully_defined, merge
from .strings import as_strings, empty_strings
from .registry import Handle, deep_copy_refused
from .tensor_array import DTypeLike, IntLike, IntsLike, ShapeLike, Tensor, TensorArray, TensorLike

__all__ = ["TF2TensorArray"]

_new = object.__new__
_UNSET = -1


class _Contents:
    """The list behind one chain of TF2 TensorArrays (each op's result continues it)."""

    __slots__ = ("handle", "array", "flow", "phys", "length", "next_phys", "in_order", "element_shape", "list_shape",
                 "slot_shapes", "odd_shapes", "zero_slots", "version", "lock", "name", "label", "__weakref__")

    def __init__(self, dtype, element_shape, length, name):
        # Every op runs under it: even a read may change the contents (a zeros slot made, the values
        # moved to a fresh storage), and TensorArrays of one contents (identity()) may be read from
        # several threads, none of which may see another's change half made.
        self.lock = threading.RLock()
        _every_contents.add(self)
        self.element_shape = element_shape      # Python-side: given, merged with writes (infer_shape)
        self.list_shape = element_shape         # the TensorList's own: given, then unstack's or split's
        self.version = 0
        self.name = name                        # its storages' base name
        self.slot_shapes = []                   # per logical slot: its value's shape, None if unwritten
        self.odd_shapes = False                 # some value's shape differs from the element shape
        tf2_lists.check_tables(length, "__init__")
        try:
            slot_shapes = [None] * length
        except MemoryError as error:
            raise messages.list_out_of_memory("__init__", length, error) from None
        handle, flow, phys = fresh_storage(dtype, length, "__init__", name)
        self.label = handle.name                # what errors call the list: its first storage's name, for good
        self.install(handle, flow, phys, length, 0, True, slot_shapes)

    def install(self, handle, flow, phys, length, used, in_order, slot_shapes, shapes=None):
        """A storage (fresh_storage's, its values written) and its tables in place of the old:
        one statement, so an interrupt leaves the one or the other. ``in_order``: phys[k] == k
        for every k < used; zero_slots maps a shape to a physical slot holding zeros of it.
        ``shapes``: (element_shape, list_shape, odd_shapes) of new contents (None: as they are)."""
        element_shape, list_shape, odd_shapes = shapes or (self.element_shape, self.list_shape, self.odd_shapes)
        self.handle, self.flow, self.array, self.phys, self.length, self.next_phys, self.in_order, \
            self.zero_slots, self.slot_shapes, self.element_shape, self.list_shape, self.odd_shapes = \
            handle, flow, handle.array, phys, length, used, in_order, {}, slot_shapes, element_shape, list_shape, \
            odd_shapes

    def reserve(self, length, method):
        """Room in the tables for ``length`` logical slots (their length stays): an op grows
        them before it changes anything, so a huge index fails as ResourceExhaustedError."""
        if length > len(self.phys):
            tf2_lists.check_tables(length, method)
        try:
            if length > len(self.phys):
                grown = np.full(max(length, 2 * len(self.phys)), _UNSET, np.int64)
                grown[:len(self.phys)] = self.phys
                self.phys = grown
            if length > len(self.slot_shapes):
                self.slot_shapes.extend([None] * (length - len(self.slot_shapes)))
        except MemoryError as error:
            raise messages.list_out_of_memory(method, length, error) from None

    def identity(self):
        """Whether logical slot k is physical slot k for every k (all written, in order)."""
        return self.in_order and self.next_phys == self.length


_FORKED_MID_OP = -1                     # the version of a list a forked child cannot use: no TensorArray has it
_every_contents: "weakref.WeakSet[_Contents]" = weakref.WeakSet()


def _after_fork():
    """In a forked child: a fresh lock for every list. One that another thread held, whose op may be
    half done here (that thread does not exist), refuses every op with AbortedError, as a V3 array does."""
    for contents in list(_every_contents):
        if contents.lock.acquire(blocking=False):
            contents.lock.release()
        else:
            contents.version = _FORKED_MID_OP
        contents.lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def fresh_storage(dtype, length, method, name, slots=0):
    """(handle, flow, phys): a storage sized for ``length`` logical slots, or ``slots`` physical
    ones where more (no growth while they are written once, in order; overwrites and zero rows go
    past them), and its slot map, all unset. The map first: a huge size fails before a storage exists."""
    try:
        phys = np.full(max(8, length), _UNSET, np.int64)
    except MemoryError as error:
        raise messages.list_out_of_memory(method, length, error) from None
    handle, flow = raw_ops.TensorArrayV3(max(length, slots), dtype, dynamic_size=True, clear_after_read=False,
                                         tensor_array_name=name)
    return handle, flow, phys


class TF2TensorArray(TensorArray):
    """tf.TensorArray as TensorFlow 2 runs it inside tf.function: writing a slot again
    replaces its value, reads never clear, an unwritten slot reads as zeros when its
    shape is known, and unstack and split replace the contents. ``clear_after_read``,
    ``colocate_with_first_write_call`` and ``name`` are accepted and ignored, as TensorFlow 2
    ignores them, and ``tensor_array_name`` only names the array in errors; ``handle``/``flow`` and ``grad`` are
    mode "tf1"'s (TensorFlow 2 has neither: use gpu_tensorarray.GradientTape)."""

    __slots__ = ("_contents", "_version", "_static_size")

    def __init__(self, dtype: DTypeLike, size: IntLike | None = None, dynamic_size: bool | None = None,
                 clear_after_read: bool | None = None, tensor_array_name: str | None = None,
                 handle: Handle | None = None, flow: TensorLike | None = None, infer_shape: bool = True,
                 element_shape: ShapeLike = None, colocate_with_first_write_call: bool = True,
                 name: str | None = None, mode: str | None = None) -> None:
        # clear_after_read, colocate_with_first_write_call and name: accepted and ignored, as
        # TensorFlow 2 ignores them inside tf.function; a tensor_array_name names the array in errors.
        self._dtype = dtypes.as_dtype(dtype)
        if handle is not None or flow is not None:
            raise UnimplementedError("A TensorArray in mode 'tf2' cannot wrap an existing handle or flow: "
                                     "create it with size=..., or use mode='tf1' to wrap a V3 handle")
        if size is None:
            raise InvalidArgumentError("Size must be provided if handle is not provided")
        size = scalar_int(size, "size", "TensorArray size must be scalar, but had shape: ")
        if size < 0:
            raise InvalidArgumentError(f"TensorArray size must be >= 0, got {size}")
        self._infer_shape = truth(infer_shape, "infer_shape")
        self._dynamic_size = truth(dynamic_size, "dynamic_size")
        self._static_size = None if self._dynamic_size else size
        self._known_size = self._static_size
        self._shape_cell = None
        contents = _Contents(self._dtype, as_partial_shape(element_shape), size, tf2_lists.list_name(tensor_array_name))
        self._contents, self._version = contents, 0

    # -- properties ----------------------------------------------------------------------------
    @property
    def handle(self) -> Handle:
        """The V3 array holding this TensorArray's values now (unstack, split and some
        concats move them to a new one)."""
        return self._current().handle

    @property
    def flow(self) -> Tensor:
        """The flow of the V3 array holding the values now."""
        return self._current().flow

    @property
    def element_shape(self) -> tuple[int | None, ...] | None:
        """The element shape known so far: given, merged with the values' shapes."""
        return self._contents.element_shape

    def __deepcopy__(self, memo: dict) -> TensorArray:
        raise deep_copy_refused(self._contents.label)

    def __repr__(self) -> str:
        return f"<gpu_tensorarray.TensorArray mode='tf2' dtype={self._dtype.name} size={self._contents.length}>"

    # -- the chain -----------------------------------------------------------------------------
    def _array_name(self) -> str:
        """The name errors give the array: its first storage's (tensor_array_name, else TensorFlow 2's
        default, numbered), the same after unstack, split or a move make new ones."""
        return self._contents.label

    def _current(self):
        contents = self._contents
        if self._version != contents.version:
            raise messages.superseded(contents.label) if contents.version != _FORKED_MID_OP else \
                messages.list_forked_mid_op(contents.label)
        return contents

    def _next(self, contents, bump=True):
        # The result first, the list's version last: an interrupt before it leaves this
        # TensorArray the one to go on with (the op done), not none at all.
        result = _new(TF2TensorArray)
        result._dtype, result._infer_shape, result._dynamic_size = self._dtype, self._infer_shape, self._dynamic_size
        result._static_size, result._known_size, result._shape_cell = self._static_size, self._known_size, None
        result._contents, result._version = contents, contents.version + bump
        contents.version = result._version
        return result

    # -- values --------------------------------------------------------------------------------
    def _converted(self, value, contents, method):
        """-> what the op gets. A value with a dtype and shape of its own (a NumPy array or
        scalar, in either byte order, a tf2.Variable) reaches it as it is, as on the class
        under TF1 rules (a tape knows a source by identity; the op converts it, as TensorFlow
        converts a value in the other byte order); other values are converted here, so the
        checks can read them."""
        backend = contents.array.backend
        if dtypes.attribute_of(value, "dtype") is None and dtypes.attribute_of(value, "__dlpack__") is None:
            if self._dtype is dtypes.STRING:    # read as strings first, TensorFlow's preferred dtype: [] too
                value = tf2_lists.converted(method, to_tensor, backend, value, self._dtype, contents.handle)
            else:
                value = tf2_lists.converted(method, dtypes.python_value_as, value, self._dtype)
        if type(value) is not backend.array_type and not _numpy_as_is(value):
            try:
                converted = backend.asarray(value)
            except InvalidArgumentError as error:
                raise messages.tf2_error(error.message, method, type(error)) from None
            # (A value taken as it is may state its dtype in its own terms: a torch tensor's.)
            value, dtype = value if _typed(value, converted) else converted, converted.dtype
        else:
            dtype = value.dtype
        if dtype != self._dtype:
            native = np.dtype(dtype).newbyteorder("=")
            if native != self._dtype:
                raise messages.list_dtype(method, dtypes.tf_name(native), dtypes.tf_name(self._dtype))
        if self._dtype is dtypes.STRING:
            # Every element checked now: unstack and split replace the storage before their op converts.
            value = as_strings(value, contents.handle)
        return value

    def _check_shape(self, contents, shape, method):
        tf2_lists.check_element(contents.element_shape, shape, method)

    def _check_list_shape(self, contents, shape, method):
        tf2_lists.check_list_element(contents.list_shape, shape, method)

    def _note_shape(self, contents, shape):
        """Remember when a stored shape is not the element shape: stack and gather then check
        every row (a TensorList whose element shape is fully defined does not, and reads
        memory it never wrote)."""
        if not contents.odd_shapes:
            contents.odd_shapes = _odd(shape, contents.element_shape, contents.list_shape)

    def _merge_shape(self, contents, shape):
        if self._infer_shape:
            contents.element_shape = merge(contents.element_shape, shape)

    def _merged(self, contents, method):
        return tf2_lists.merged(contents.element_shape, contents.list_shape, method)

    def _zero_shape(self, contents, method, among=None):
        """The shape an unwritten slot reads as (tf2_lists.zeros_shape), every set slot's shape (of
        the slots ``among``, for a gather) merged in."""
        shape = self._merged(contents, method)
        slot_shapes = contents.slot_shapes if among is None else [contents.slot_shapes[i] for i in among]
        return tf2_lists.zeros_shape(shape, (slot_shape for slot_shape in slot_shapes if slot_shape is not None),
                                     method)

    def _zero_slot(self, contents, shape, method):
        """A physical slot holding zeros of ``shape`` (unwritten slots gather from it)."""
        slot = contents.zero_slots.get(shape)
        if slot is None:
            slot = self._allocate(contents, 1, method)
            zeros = _zeros(contents.array.backend, shape, self._dtype)
            raw_ops.TensorArrayWriteV3(contents.handle, slot, zeros, 0.0)
            contents.zero_slots[shape] = slot
            contents.in_order = False
        return slot

    def _empty(self, shape):
        """Zero rows of ``shape``, as the output of a recorded gather (a tape then knows
        it depends on nothing) from a scratch array of size 0."""
        handle, flow = raw_ops.TensorArrayV3(0, self._dtype, element_shape=shape)
        try:
            return raw_ops.TensorArrayGatherV3(handle, [], flow, self._dtype, element_shape=shape)
        finally:
            raw_ops.TensorArrayCloseV3(handle)

    def _allocate(self, contents, count, method):
        """``count`` fresh physical slots; a storage without them, locked by a gradient computation
        (TensorArrayGradV3 locks the size), or filled by overwrites (tf2_lists.worth_moving), is
        first moved to a fresh one."""
        array = contents.array
        if (not array.dynamic_size and contents.next_phys + count > array.size) or \
                tf2_lists.worth_moving(contents.next_phys, contents.length, count):
            self._compact(contents, count, method)
        first = contents.next_phys
        contents.next_phys += count
        return first

    def _physical(self, contents, indices, method):
        """Physical slots for logical ``indices`` (unwritten ones: a zeros slot, made first: making
        it may move the values to a fresh storage, where they have other slots)."""
        unset = contents.phys[indices] == _UNSET
        if not unset.any():
            return contents.phys[indices]
        among = indices.tolist() if method == "gather" else None
        zeros = self._zero_slot(contents, self._zero_shape(contents, method, among), method)
        slots = contents.phys[indices]
        slots[unset] = zeros
        return slots

    def _copy_values(self, contents, zeros_for_unset):
        """Each logical slot's value read out (recorded, so gradients follow); with
        ``zeros_for_unset`` unwritten slots as zeros, else left out."""
        unset_shape = None
        phys = contents.phys[:contents.length].tolist()
        if zeros_for_unset and _UNSET in phys:
            unset_shape = tf2_lists.concat_zeros_shape(contents.element_shape, contents.list_shape,
                                                       contents.slot_shapes[:contents.length])
        values = {}
        for logical, slot in enumerate(phys):
            if slot != _UNSET:
                values[logical] = raw_ops.TensorArrayReadV3(contents.handle, slot, 0.0, self._dtype)
            elif unset_shape is not None:
                values[logical] = _zeros(contents.array.backend, unset_shape, self._dtype)
        return values

    def _compact(self, contents, count, method):
        """Move the written values into a fresh storage (the old one is size-locked by a
        gradient computation, or holds more overwritten values than live ones), through
        recorded ops so gradients follow them. It has room for as many again (and the ``count``
        slots asked for): a loop that computes gradients between writes moves once per doubling."""
        values = self._copy_values(contents, zeros_for_unset=False)
        handle, flow, phys = fresh_storage(self._dtype, contents.length, method, contents.name,
                                           tf2_lists.room_after_move(len(values), count))
        in_order = True
        for physical, (logical, value) in enumerate(values.items()):
            raw_ops.TensorArrayWriteV3(handle, physical, value, 0.0)
            phys[logical] = physical
            in_order = in_order and physical == logical
        contents.install(handle, flow, phys, contents.length, len(values), in_order, contents.slot_shapes)

    # -- ops -----------------------------------------------------------------------------------
    def identity(self) -> TF2TensorArray:
        """Another TensorArray of the same contents (both stay usable until one changes them)."""
        with self._contents.lock:
            return self._next(self._current(), bump=False)

    def grad(self, source: str, flow: TensorLike | None = None, name: str | None = None) -> TensorArray:
        """Not in mode "tf2": raises UnimplementedError (use gpu_tensorarray.GradientTape)."""
        raise UnimplementedError("TensorArray.grad is not supported in mode 'tf2' (TensorFlow 2 has no gradient "
                                 "TensorArrays: use gpu_tensorarray.GradientTape)")

    def write(self, index: IntLike, value: TensorLike, name: str | None = None) -> TF2TensorArray:
        """``value`` into slot ``index`` (replacing what it held); a dynamic array grows
        to ``index + 1``. Returns the TensorArray to go on with."""
        try:
            with self._contents.lock:
                contents = self._current()
                if type(index) is not int or not INT32_MIN <= index <= INT32_MAX:
                    index = tf2_lists.index(index, "write")
                value = self._converted(value, contents, "write")
                shape = value.shape
                if shape != contents.element_shape:
                    self._check_shape(contents, shape, "write")
                    self._check_list_shape(contents, shape, "write")
                length = contents.length
                if index < 0 or (index >= length and not self._dynamic_size):
                    raise messages.list_modify_bounds("write", index, length)
                slot = self._allocate(contents, 1, "write")
                contents.reserve(index + 1, "write")
                raw_ops.TensorArrayWriteV3(contents.handle, slot, value, contents.flow)
                if index >= length:
                    contents.length = index + 1
                phys = contents.phys
                if slot != index or phys[index] != _UNSET:
                    contents.in_order = False
                phys[index] = slot
                contents.slot_shapes[index] = shape
                if shape != contents.element_shape:
                    self._merge_shape(contents, shape)
                    self._note_shape(contents, shape)
                return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "write", index)
            raise

    def read(self, index: IntLike, name: str | None = None) -> Tensor:
        """The element at ``index`` (zeros for an unwritten slot of known shape)."""
        try:
            with self._contents.lock:
                contents = self._current()
                if type(index) is not int or not INT32_MIN <= index <= INT32_MAX:
                    index = tf2_lists.index(index, "read")
                if not 0 <= index < contents.length:
                    raise messages.list_read_bounds(index, contents.length)
                slot = int(contents.phys[index])
                if slot == _UNSET:
                    slot = self._zero_slot(contents, self._zero_shape(contents, "read"), "read")
                return raw_ops.TensorArrayReadV3(contents.handle, slot, contents.flow, self._dtype)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "read", index)
            raise

    def gather(self, indices: IntsLike, name: str | None = None) -> Tensor:
        """The elements at ``indices``, stacked along a new first axis."""
        try:
            with self._contents.lock:
                contents = self._current()
                indices = tf2_lists.converted("gather", host_ints, indices, "indices")
                if indices.ndim != 1:
                    raise messages.list_indices_not_vector("gather", indices.shape)
                bad = (indices < 0) | (indices >= contents.length)
                if bad.any():
                    raise messages.list_gather_bounds(int(indices[bad.nonzero()[0][0]]), contents.length,
                                                      is_fully_defined(contents.list_shape))
                return self._rows(contents, indices, "gather")
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "gather", None)
            raise

    def _rows(self, contents, indices, method):
        if len(indices) == 0:               # a gather of no indices (a stack of no slots returned earlier)
            return self._empty(tf2_lists.empty_gather_shape(contents.element_shape, contents.list_shape))
        self._check_row_shapes(contents, indices, method)
        slots = self._physical(contents, indices, method)
        return raw_ops.TensorArrayGatherV3(contents.handle, slots, contents.flow, self._dtype)

    def _check_row_shapes(self, contents, indices, method):
        """Rows of one stack/gather must all have the element shape (where it is fully
        defined), else one shape. Only arrays that stored an odd shape need the look."""
        if contents.odd_shapes:
            shapes = {contents.slot_shapes[index] for index in list(indices)} - {None}
            tf2_lists.check_rows(self._merged(contents, method), shapes, method)

    def stack(self, name: str | None = None) -> Tensor:
        """Every element stacked along a new first axis (a view while the slots were
        written once each, in order)."""
        try:
            with self._contents.lock:
                contents = self._current()
                length = contents.length
                if length == 0:
                    return self._empty(tf2_lists.empty_stack_shape(contents.element_shape, contents.list_shape))
                if contents.identity():
                    self._check_row_shapes(contents, range(length), "stack")
                    return raw_ops.TensorArrayGatherV3(contents.handle, range(length), contents.flow, self._dtype)
                return self._rows(contents, np.arange(length), "stack")
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "stack", None)
            raise

    def concat(self, name: str | None = None) -> Tensor:
        """Every element joined along its first axis."""
        try:
            with self._contents.lock:
                contents = self._current()
                if contents.length == 0:
                    return self._empty(tf2_lists.empty_concat_shape(contents.element_shape, contents.list_shape))
                handle = contents.handle
                if contents.odd_shapes or not contents.identity() or contents.slot_shapes[0] == ():
                    # TensorList's checks of the rows (the V3 concat's words would name the storage). Otherwise
                    # every slot holds one shape, a vector at least: nothing to check.
                    tf2_lists.check_concat_rows(contents.slot_shapes[:contents.length])
                if not contents.identity() or raw_ops.recording() or contents.array.size != contents.length:
                    # A V3 concat joins physical slots 0, 1, ... of the whole storage (which a move leaves room
                    # in): join the logical order in a scratch array.
                    # A recorded one always: the storage grows with later writes, and the concat's gradient
                    # (TensorFlow's rule: a split into the gradient array) needs an array of its pieces alone.
                    values = self._copy_values(contents, zeros_for_unset=True)
                    handle, _ = raw_ops.TensorArrayV3(0, self._dtype, dynamic_size=True, clear_after_read=False)
                    for logical, value in values.items():
                        raw_ops.TensorArrayWriteV3(handle, logical, value, 0.0)
                value, _ = raw_ops.TensorArrayConcatV3(handle, 0.0, self._dtype)
                return value
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "concat", None)
            raise

    def unstack(self, value: TensorLike, name: str | None = None) -> TF2TensorArray:
        """The rows of ``value`` become the contents (a fixed size must equal their number)."""
        try:
            with self._contents.lock:
                contents = self._current()
                value = self._converted(value, contents, "unstack")
                tf2_lists.check_unstack(value.shape, self._static_size)
                count = value.shape[0]
                self._check_shape(contents, value.shape[1:], "unstack")
                row = value.shape[1:]
                element_shape = merge(contents.element_shape, row) if self._infer_shape else contents.element_shape
                handle, flow, phys = self._in_order(count, "unstack")
                raw_ops.TensorArrayScatterV3(handle, np.arange(count), value, 0.0)
                contents.install(handle, flow, phys, count, count, True, [row] * count,
                                 (element_shape, row, bool(count) and _odd(row, element_shape, row)))
                return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "unstack", None)
            raise

    def _in_order(self, count, method):
        """fresh_storage for new contents of ``count`` values, logical slot k physical slot k:
        the op writes them there, then installs it (a failed op leaves the old contents)."""
        handle, flow, phys = fresh_storage(self._dtype, count, method, self._contents.name)
        phys[:count] = np.arange(count)
        return handle, flow, phys

    def scatter(self, indices: IntsLike, value: TensorLike, name: str | None = None) -> TF2TensorArray:
        """Row k of ``value`` into slot ``indices[k]`` (replacing; a repeated index: the last row)."""
        try:
            with self._contents.lock:
                contents = self._current()
                indices = tf2_lists.converted("scatter", host_ints, indices, "indices")
                value = self._converted(value, contents, "scatter")
                tf2_lists.check_scatter(indices.shape, value.shape)
                row_shape = value.shape[1:]
                self._check_shape(contents, row_shape, "scatter")
                length = contents.length
                if len(indices):
                    low, high = int(indices.min()), int(indices.max())
                    tf2_lists.check_scatter_bounds(low, high, length, self._dynamic_size)
                    first = self._allocate(contents, len(indices), "scatter")
                    contents.reserve(high + 1, "scatter")
                    slots = np.arange(first, first + len(indices))
                    raw_ops.TensorArrayScatterV3(contents.handle, slots, value, 0.0)
                    if high >= length:
                        contents.length = high + 1
                    if not (np.array_equal(slots, indices) and (contents.phys[indices] == _UNSET).all()):
                        contents.in_order = False
                    contents.phys[indices] = slots          # a repeated index: the last row wins
                    for index in indices.tolist():
                        contents.slot_shapes[index] = row_shape
                else:       # nothing written, yet the op takes the value: a tape gives it zeros (TensorFlow's too)
                    raw_ops.TensorArrayScatterV3(contents.handle, indices, value, 0.0)
                self._merge_shape(contents, row_shape)
                if len(indices):
                    self._note_shape(contents, row_shape)
                return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "scatter", None)
            raise

    def split(self, value: TensorLike, lengths: IntsLike, name: str | None = None) -> TF2TensorArray:
        """The pieces of ``value`` (``lengths`` rows each, along its first axis) become the contents."""
        try:
            with self._contents.lock:
                contents = self._current()
                value = self._converted(value, contents, "split")
                lengths = tf2_lists.converted("split", host_ints, lengths, "lengths", "int64")
                tf2_lists.check_split(value.shape, lengths.shape, lengths.tolist() if lengths.ndim == 1 else [],
                                      self._static_size)
                count = len(lengths)
                rest = tuple(value.shape[1:])
                shapes = [(int(n),) + rest for n in lengths.tolist()]
                element_shape = tf2_lists.split_element_shape(contents.element_shape, self._infer_shape, value.shape,
                                                              lengths.tolist())
                handle, flow, phys = self._in_order(count, "split")
                raw_ops.TensorArraySplitV3(handle, value, lengths, 0.0)
                odd = any(_odd(shape, element_shape, element_shape) for shape in set(shapes))
                contents.install(handle, flow, phys, count, count, True, shapes, (element_shape, element_shape, odd))
                return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "split", None)
            raise

    def size(self, name: str | None = None) -> Tensor:
        """The number of elements, an int32 scalar."""
        with self._contents.lock:
            contents = self._current()
            return np.array(contents.length, np.int32)         # host memory, as TensorArraySizeV3's

    def close(self, name: str | None = None) -> None:
        """Nothing to do: as in TensorFlow 2, the values go when the last reference does."""
        self._current()


def _odd(shape, element_shape, list_shape):
    """Whether a stored ``shape`` is not the element shape merged with the list's (they may not merge)."""
    try:
        return shape != merge(element_shape, list_shape)
    except InvalidArgumentError:
        return True


def _typed(value, converted):
    """Whether the op may take ``value`` itself: it states the dtype and shape it converts to
    (a NumPy scalar, a tf2.Variable, a torch tensor), so the checks read what the op will store."""
    try:
        return dtypes.as_dtype(value.dtype) == converted.dtype and tuple(value.shape) == tuple(converted.shape)
    except Exception:               # whatever a caller's object raises: the converted value it is
        return False


def _numpy_as_is(value):
    """A NumPy array whose dtype and shape are NumPy's own, a subclass's too (what a read returns
    on the CPU is one): the op gets it as it is, so that a tape knows it by identity."""
    cls = type(value)
    return cls is np.ndarray or (isinstance(value, np.ndarray) and cls.dtype is np.ndarray.dtype
                                 and cls.shape is np.ndarray.shape)


modes.register_class("tf2", TF2TensorArray)


def _zeros(backend, shape, dtype):
    """What TensorFlow 2's lists fill unset elements with: zeros, or b"" for strings (host)."""
    return empty_strings(shape) if dtype is dtypes.STRING else backend.zeros(shape, dtype)
