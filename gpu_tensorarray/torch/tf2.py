"""``gpu_tensorarray.torch.TensorArray(..., mode="tf2")``: TensorFlow 2's rules, the ones a
PyTorch user who thinks in lists expects.

* Writing a slot again replaces its value; reads never clear (clear_after_read is ignored).
* An unwritten slot reads as zeros when its shape is known (the element shape merged with the
  list's, which an unstack or split sets, and with the shapes of the values written, also with
  infer_shape=False; for a gather, of the slots gathered).
* unstack and split replace the whole contents (a dynamic array takes their length, a fixed size
  must equal it).
* Only the TensorArray an op returned may be used after it (superseded: an error).
* close() does nothing (TensorFlow 2's does nothing either).
* The checks, their order and their error texts are the library class's (tf2_lists, messages).

Storage stays V3, as in the NumPy class's TF2 mode (gpu_tensorarray/tf2_array.py): a logical
list over one torch TensorArray of V3 rules (dynamic, reads that never clear) and a map from
logical slot to physical slot. A write always goes to a fresh physical slot, so a value is
never written twice and the V3 gradient rules give the list's gradients: an overwritten value
is never read again (no gradient), a slot read twice gets the sum, an unwritten slot is a
zeros tensor that depends on nothing. The values move, through bridge ops, to a fresh storage
when the old one's size was locked by a backward pass (TensorArrayGradV3) and it must grow, and
once overwrites have used more than twice the list's slots (tf2_lists.worth_moving): memory
follows the list's length, not the number of its writes. unstack and split write the new
contents into a fresh storage.
"""

import itertools
import weakref

import numpy as np
import torch

from .. import messages, tf2_lists
from ..conversion import truth
from ..dtypes import attribute_of, python_value_as, tf_name
from ..errors import InvalidArgumentError, OpError, UnimplementedError, described, host_memory_ran_out, shown
from ..host import host_ints, scalar_int
from ..registry import deep_copy_refused, registry
from ..shapes import as_partial_shape, is_fully_defined, merge
from .crossing import as_dtype, from_host, host_value, joined, out_of_memory, refuse_tangent, refused, zeros

__all__ = ["TF2TensorArray", "register_storage_class", "is_storage"]

_forward_ad = torch.autograd.forward_ad     # its level is >= 0 inside a dual level (forward-mode AD)

_new = object.__new__
_storage_class = []            # the V3 torch TensorArray (tensor_array.py registers it)


def register_storage_class(cls):
    _storage_class[:] = [cls]


# The handles of the V3 arrays that hold mode tf2's lists: their slots are not the list's, which
# an error message must not show the user (weak: a storage goes with its last reference).
_storages = weakref.WeakSet()


def is_storage(handle):
    """Whether ``handle`` is a V3 array holding a mode tf2 list (asked on error paths only)."""
    return handle in _storages


class _Contents:
    """The list behind one chain of TF2 TensorArrays (each op's result continues it)."""

    __slots__ = ("storage", "phys", "next_phys", "element_shape", "list_shape", "version", "make_storage", "values",
                 "versions", "shapes", "label")

    def __init__(self, make_storage, length, element_shape):
        self.make_storage = make_storage
        self.phys = []                          # logical slot -> physical slot (None: unwritten)
        _grow(self.phys, length, "__init__")
        self.storage = make_storage(length)
        self.label = self.storage._ta.handle.name   # what errors call the list: its first storage's name, for good
        self.next_phys = 0
        self.values = {}                        # physical slot -> the tensor written there
        self.versions = {}                      # physical slot -> that tensor's version counter then
        self.shapes = {}                        # physical slot -> the shape of the value written there
        self.element_shape = element_shape     # Python-side: given, merged with writes (infer_shape)
        self.list_shape = element_shape        # the TensorList's own: given, then unstack's or split's
        self.version = 0


def _kept(first, value, rows):
    """({slot: row}, {slot: its version counter}) of the tensors ``rows()`` of ``value``, written to
    physical slots ``first``, ``first + 1``, ..., kept for a move when the write recorded them for a
    gradient (as the storage's write decides: the value requires grad, and grad mode is on). Others
    are not kept: they move as the old storage holds them, untracked as written, and an inference
    tensor has no version counter to read."""
    if not (value.requires_grad and torch.is_grad_enabled()):
        return {}, {}
    values = dict(enumerate(rows(), first))
    return values, {slot: row._version for slot, row in values.items()}


class _AsWritten(torch.autograd.Function):
    """(the tensor written, the value the array holds) -> that value, whose gradient goes to the
    tensor: a move keeps what the array holds, also where the tensor changed in ways torch does not
    count (through ``.data``, a NumPy or DLPack view), and links the gradient to the tensor itself."""

    @staticmethod
    def forward(ctx, tensor, held):
        return held

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def _grow(phys, length, method):
    """``phys`` grown with unwritten logical slots to ``length`` (an op does this first, and
    cuts it back should the op fail); a huge size or index that finds no host memory for them
    is ResourceExhaustedError, as the storage's own allocations are, and changes nothing."""
    if length > len(phys):
        tf2_lists.check_tables(length, method)
    try:
        phys.extend(itertools.repeat(None, length - len(phys)))
    except MemoryError as error:
        raise messages.list_out_of_memory(method, length, error) from None


class TF2TensorArray:
    """tf.TensorArray as TensorFlow 2 runs it, with torch tensors and autograd (see the module doc)."""

    __slots__ = ("_contents", "_version", "_dynamic_size", "_infer_shape", "_dtype", "__weakref__")

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None,
                 colocate_with_first_write_call=True, name=None, device=None, mode=None):
        if handle is not None or flow is not None:
            raise UnimplementedError("A TensorArray in mode 'tf2' cannot wrap an existing handle or flow: "
                                     "create it with size=..., or use mode='tf1' to wrap a V3 handle")
        if size is None:
            raise InvalidArgumentError("Size must be provided if handle is not provided")
        size = scalar_int(host_value(size), "size", "TensorArray size must be scalar, but had shape: ")
        if size < 0:
            raise InvalidArgumentError(f"TensorArray size must be >= 0, got {size}")

        name_given = tf2_lists.list_name(tensor_array_name)

        def make_storage(length):
            # Named as the user named the array (errors name the storage), else as TensorFlow 2's lists.
            storage = _storage_class[0](dtype, size=length, dynamic_size=True, clear_after_read=False,
                                        infer_shape=False, tensor_array_name=name_given,
                                        device=device, mode="tf1")
            _storages.add(storage._ta.handle)   # not .handle, which readies the storage for wrapping
            return storage

        self._dynamic_size = truth(dynamic_size, "dynamic_size")
        self._infer_shape = truth(infer_shape, "infer_shape")
        self._contents = _Contents(make_storage, size, as_partial_shape(element_shape))
        self._version = 0
        self._dtype = self._contents.storage.dtype

    # -- the chain -----------------------------------------------------------------------------
    def _array_name(self):
        """The name errors give the array: its first storage's (tensor_array_name, else TensorFlow 2's
        default, numbered), the same after unstack, split or a move make new ones."""
        return self._contents.label

    def _current(self):
        contents = self._contents
        if self._version != contents.version:
            raise messages.superseded(self._array_name())
        return contents

    def _next(self, contents, bump=True):
        # The result first, the list's version last: an interrupt before it leaves this
        # TensorArray the one to go on with (the op done), not none at all.
        result = _new(TF2TensorArray)
        result._contents, result._version = contents, contents.version + bump
        result._dynamic_size, result._infer_shape, result._dtype = self._dynamic_size, self._infer_shape, self._dtype
        contents.version = result._version
        return result

    # -- properties ----------------------------------------------------------------------------
    @property
    def handle(self):
        """The V3 array holding the values now (unstack, split and moves put them in a new one)."""
        return self._current().storage.handle

    @property
    def flow(self):
        return self._current().storage.flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def dynamic_size(self):
        return self._dynamic_size

    @property
    def element_shape(self):
        return self._contents.element_shape

    @property
    def device(self):
        return self._contents.storage.device

    def __copy__(self):
        return self.identity()

    def __deepcopy__(self, memo):
        raise deep_copy_refused(self._contents.label)

    def __repr__(self):
        return f"<gpu_tensorarray.torch.TensorArray mode='tf2' dtype={self._dtype} size={len(self._contents.phys)}>"

    # -- helpers -------------------------------------------------------------------------------
    @property
    def _static_size(self):
        return None if self._dynamic_size else len(self._contents.phys)

    def _index(self, index, method):
        return tf2_lists.index(host_value(index), method)

    def _value(self, value, method):
        if not isinstance(value, torch.Tensor):
            # As the library's class: a Python value converted to the list's dtype (refusing what
            # TensorFlow refuses), anything with a dtype of its own taken only at the list's dtype.
            dtype, own = as_dtype(self._dtype), attribute_of(value, "dtype")
            if own is None and attribute_of(value, "__dlpack__") is None:
                value = tf2_lists.converted(method, python_value_as, value, dtype)
            elif isinstance(own, np.dtype) and own != dtype:
                raise messages.list_dtype(method, tf_name(own), tf_name(dtype))
            try:
                array = np.asarray(value)
                # bfloat16 (ml_dtypes'), which torch's NumPy import lacks, through its bits
                value = from_host(np.array(array)) if array.dtype == dtype and self._dtype is torch.bfloat16 else \
                    torch.as_tensor(array, dtype=self._dtype)
            except MemoryError as error:
                raise host_memory_ran_out(f"{shown(value)} to a {self._dtype} tensor", error, self.handle) from None
            except Exception as error:      # None, a string, ragged lists, whatever a caller's object raises
                if isinstance(error, RuntimeError) and out_of_memory(error):      # torch's allocator
                    raise host_memory_ran_out(f"{shown(value)} to a {self._dtype} tensor", error,
                                              self.handle) from None
                raise messages.tf2_error(f"Cannot convert {shown(value)} to a {self._dtype} tensor: "
                                         f"{described(error)}", method) from None
        if type(value) is not torch.Tensor or value.is_nested or value.layout != torch.strided or value.is_meta:
            refusal = refused(value, self.handle)   # the V3 array's words, before anything asks its shape
            if refusal is not None:
                raise refusal
        if _forward_ad._current_level >= 0:
            refuse_tangent(value, self.handle)      # before the op changes the list (its shape, its slots)
        if value.dtype != self._dtype:
            raise messages.list_dtype(method, _tf_name(value.dtype), _tf_name(self._dtype))
        return value

    def _shape_after(self, contents, shape, method):
        """The element shape after an op stores values of ``shape`` (merged when infer_shape);
        the op sets it once nothing else can fail, so a failed op changes nothing."""
        tf2_lists.check_element(contents.element_shape, tuple(shape), method)
        return merge(contents.element_shape, tuple(shape)) if self._infer_shape else contents.element_shape

    def _fresh(self, contents, count, method):
        """``count`` fresh physical slots: past the end of a storage that can grow, or of a
        new one holding the written values (a backward pass locked the old one's size, or
        overwrites filled it: tf2_lists.worth_moving)."""
        storage = contents.storage
        array = registry.lookup(storage._ta.handle)
        if (not array.dynamic_size and contents.next_phys + count > array.size) or \
                tf2_lists.worth_moving(contents.next_phys, len(contents.phys), count):
            live = [(logical, slot) for logical, slot in enumerate(contents.phys) if slot is not None]
            moved = [self._moved(contents, slot, method) for _, slot in live]    # may fail: nothing changed yet
            fresh = contents.make_storage(tf2_lists.room_after_move(len(live), count))
            with torch.enable_grad():       # a move under no_grad keeps the values' gradients
                for physical, (value, _) in enumerate(moved):
                    fresh = fresh.write(physical, value)
            phys = list(contents.phys)
            for physical, (logical, _) in enumerate(live):
                phys[logical] = physical
            kept = {physical: tensor_and_version for physical, (_, tensor_and_version) in enumerate(moved)
                    if tensor_and_version is not None}
            # One statement: an interrupt leaves the old storage and its tables, or the new ones.
            contents.storage, contents.phys, contents.next_phys, contents.shapes, contents.values, \
                contents.versions = fresh, phys, len(live), \
                {physical: contents.shapes[slot] for physical, (_, slot) in enumerate(live)}, \
                {physical: tensor for physical, (tensor, _) in kept.items()}, \
                {physical: version for physical, (_, version) in kept.items()}
        first = contents.next_phys
        contents.next_phys += count
        return first

    def _moved(self, contents, slot, method):
        """(what a physical slot's value moves as, the (tensor, version counter) the move keeps for the
        next one, or None). One that needs a gradient, unchanged since its write: the value the old
        storage holds, whose gradient goes to the tensor written (a read back would chain every later
        storage's nodes, and keep every earlier storage alive, through the old one's), also under
        inference_mode, which these two steps leave; changed in place since, read back with its
        gradient (its write's node holds the value as written; the bridge's nodes save no tensors, so
        a backward pass that ran them, and locked the old storage, leaves them to run again), but not
        under inference_mode, where that read would make an inference tensor. Any other: the value the
        old storage holds (as written), read without a gradient."""
        value = contents.values.get(slot)
        if value is None:
            with torch.no_grad():
                return contents.storage.read(slot), None
        version = contents.versions[slot]
        if value._version == version:
            with torch.inference_mode(False):
                with torch.no_grad():
                    held = contents.storage.read(slot)
                with torch.enable_grad():
                    return _AsWritten.apply(value, held), (value, version)
        if not torch.is_inference_mode_enabled():
            with torch.enable_grad():
                read_back = contents.storage.read(slot)
            return read_back, (read_back, read_back._version)
        raise messages.tf2_error("a tensor written to this TensorArray was modified in place after the write (it, "
                                 "or another view of its memory), and the array must move its values to new "
                                 "storage under torch.inference_mode: its gradient would be the modified "
                                 "tensor's. Write a copy (value.clone()) of a tensor that changes later, or of "
                                 "a row of a buffer filled in place", method)

    def _keep(self, contents, first, value, rows):
        """Remember the tensors ``rows()`` of ``value``, written to physical slots ``first``,
        ``first + 1``, ..., for a move (_kept)."""
        values, versions = _kept(first, value, rows)
        contents.values.update(values)
        contents.versions.update(versions)

    def _replaced(self, contents, storage, shapes, value, pieces, element_shape, list_shape):
        """The contents become the pieces of ``value`` (unstack's rows, split's pieces; ``pieces()``
        makes them, asked only when they are kept for a gradient), of ``shapes`` (a list), written
        to physical slots 0, 1, ... of ``storage``, a fresh one (what the old one holds is replaced):
        put in place in one statement once written, so a failed op leaves the old contents."""
        values, versions = _kept(0, value, pieces)
        contents.storage, contents.phys, contents.next_phys, contents.shapes, contents.values, contents.versions, \
            contents.element_shape, contents.list_shape = \
            storage, list(range(len(shapes))), len(shapes), dict(enumerate(shapes)), values, versions, \
            element_shape, list_shape

    def _zero_shape(self, contents, method, among=None):
        """The shape an unwritten slot reads as, as the library's class finds it (zeros_shape): the
        element shape merged with the list's and with the shape of every set slot (of the slots
        ``among``, for a gather); with infer_shape=False the element shape alone may not say it."""
        phys, shapes = contents.phys, contents.shapes
        shape = tf2_lists.merged(contents.element_shape, contents.list_shape, method)
        return tf2_lists.zeros_shape(shape, (shapes[phys[index]] for index in (
            range(len(phys)) if among is None else among) if phys[index] is not None), method)

    def _zeros(self, contents, shape):
        storage = contents.storage
        return zeros(shape, self._dtype, storage.device, storage._backend)

    def _rows(self, contents, indices, method):
        """The values of logical ``indices``: one gather of the written ones, and rows of zeros
        for the others, put in order by one differentiable index_select (a read per slot made a
        node and a Python call each)."""
        slots = [contents.phys[i] for i in indices]
        shape = tf2_lists.merged(contents.element_shape, contents.list_shape, method)
        tf2_lists.check_rows(shape, {contents.shapes[slot] for slot in slots if slot is not None}, method)
        written = [slot for slot in slots if slot is not None]
        if len(written) == len(slots):
            return contents.storage.gather(np.asarray(slots, np.int64))
        zeros = self._zeros(contents, self._zero_shape(contents, method, indices if method == "gather" else None))
        rows = [contents.storage.gather(np.asarray(written, np.int64))] if written else []
        # Position k of the written rows, or the zeros row after them for an unwritten slot.
        order, taken = [], 0
        for slot in slots:
            order.append(len(written) if slot is None else taken)
            taken += slot is not None

        def in_order(parts):
            return torch.cat(parts).index_select(0, torch.tensor(order, dtype=torch.int64, device=zeros.device))
        return joined(in_order, rows + [zeros.unsqueeze(0)], f"a {method} of {len(slots)} values")

    # -- ops -----------------------------------------------------------------------------------
    def identity(self):
        return self._next(self._current(), bump=False)

    def grad(self, source, flow=None, name=None):
        raise UnimplementedError("TensorArray.grad is not supported in mode 'tf2' (TensorFlow 2 has no gradient "
                                 "TensorArrays): gradients flow through torch autograd")

    def write(self, index, value, name=None):
        try:
            contents = self._current()
            index = self._index(index, "write")
            value = self._value(value, "write")
            shape = tuple(value.shape)
            element_shape = self._shape_after(contents, shape, "write")
            tf2_lists.check_list_element(contents.list_shape, shape, "write")
            length = len(contents.phys)
            if index < 0 or (index >= length and not self._dynamic_size):
                raise messages.list_modify_bounds("write", index, length)
            if index >= length:
                _grow(contents.phys, index + 1, "write")
            try:
                slot = self._fresh(contents, 1, "write")
                contents.storage = contents.storage.write(slot, value)
            except BaseException:
                del contents.phys[length:]
                raise
            contents.element_shape = element_shape
            self._keep(contents, slot, value, lambda: (value,))
            contents.shapes[slot] = shape
            contents.phys[index] = slot
            return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "write", index)
            raise

    def read(self, index, name=None):
        try:
            contents = self._current()
            index = self._index(index, "read")
            if not 0 <= index < len(contents.phys):
                raise messages.list_read_bounds(index, len(contents.phys))
            slot = contents.phys[index]
            if slot is None:
                return self._zeros(contents, self._zero_shape(contents, "read"))
            return contents.storage.read(slot)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "read", index)
            raise

    def gather(self, indices, name=None):
        try:
            contents = self._current()
            indices = tf2_lists.converted("gather", host_ints, host_value(indices), "indices")
            if indices.ndim != 1:
                raise messages.list_indices_not_vector("gather", indices.shape)
            indices = indices.tolist()
            for index in indices:
                if not 0 <= index < len(contents.phys):
                    raise messages.list_gather_bounds(index, len(contents.phys), is_fully_defined(contents.list_shape))
            if not indices:
                shape = tf2_lists.empty_gather_shape(contents.element_shape, contents.list_shape)
                return self._zeros(contents, (0,) + tuple(shape))
            return self._rows(contents, indices, "gather")
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "gather", None)
            raise

    def stack(self, name=None):
        try:
            contents = self._current()
            if not contents.phys:
                shape = tf2_lists.empty_stack_shape(contents.element_shape, contents.list_shape)
                return self._zeros(contents, (0,) + tuple(shape))
            return self._rows(contents, range(len(contents.phys)), "stack")
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "stack", None)
            raise

    def concat(self, name=None):
        try:
            contents = self._current()
            if not contents.phys:
                rest = tf2_lists.empty_concat_shape(contents.element_shape, contents.list_shape)
                return self._zeros(contents, (0,) + tuple(rest))
            slot_shapes = [None if slot is None else contents.shapes[slot] for slot in contents.phys]
            tf2_lists.check_concat_rows(slot_shapes)
            zeros = None
            if None in slot_shapes:
                zeros = self._zeros(contents, tf2_lists.concat_zeros_shape(contents.element_shape, contents.list_shape,
                                                                           slot_shapes))
            return joined(torch.cat, [zeros if slot is None else contents.storage.read(slot) for slot in contents.phys],
                          "a concat")
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "concat", None)
            raise

    def scatter(self, indices, value, name=None):
        try:
            contents = self._current()
            indices = tf2_lists.converted("scatter", host_ints, host_value(indices), "indices")
            value = self._value(value, "scatter")
            tf2_lists.check_scatter(indices.shape, tuple(value.shape))
            indices = indices.tolist()
            element_shape = self._shape_after(contents, value.shape[1:], "scatter")
            if indices:
                tf2_lists.check_scatter_bounds(min(indices), max(indices), len(contents.phys), self._dynamic_size)
                length = len(contents.phys)
                if max(indices) >= length:
                    _grow(contents.phys, max(indices) + 1, "scatter")
                try:
                    first = self._fresh(contents, len(indices), "scatter")
                    contents.storage = contents.storage.scatter(range(first, first + len(indices)), value)
                except BaseException:
                    del contents.phys[length:]
                    raise
                self._keep(contents, first, value, lambda: value.unbind(0))
                contents.shapes.update(dict.fromkeys(range(first, first + len(indices)), tuple(value.shape[1:])))
                for k, index in enumerate(indices):         # a repeated index: the last row wins
                    contents.phys[index] = first + k
            contents.element_shape = element_shape
            return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "scatter", None)
            raise

    def unstack(self, value, name=None):
        try:
            contents = self._current()
            value = self._value(value, "unstack")
            # A fixed size takes as many rows: fewer too (tf.function's stack() then fails, eager shrinks).
            tf2_lists.check_unstack(tuple(value.shape), self._static_size)
            count = value.shape[0]
            element_shape = self._shape_after(contents, value.shape[1:], "unstack")
            storage = contents.make_storage(count)
            if count:
                storage = storage.scatter(range(count), value)
            row_shape = tuple(value.shape[1:])
            self._replaced(contents, storage, [row_shape] * count, value, lambda: value.unbind(0), element_shape,
                           row_shape)
            return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "unstack", None)
            raise

    def split(self, value, lengths, name=None):
        try:
            contents = self._current()
            value = self._value(value, "split")
            lengths = tf2_lists.converted("split", host_ints, host_value(lengths), "lengths", "int64")
            lengths_shape, lengths = lengths.shape, (lengths.tolist() if lengths.ndim == 1 else [])
            tf2_lists.check_split(tuple(value.shape), lengths_shape, lengths, self._static_size)
            element_shape = tf2_lists.split_element_shape(contents.element_shape, self._infer_shape, tuple(value.shape),
                                                          lengths)
            start, storage, pieces = 0, contents.make_storage(len(lengths)), []
            for k, length in enumerate(lengths):
                pieces.append(value[start:start + length])
                storage = storage.write(k, pieces[-1])
                start += length
            self._replaced(contents, storage, [tuple(piece.shape) for piece in pieces], value, lambda: pieces,
                           element_shape, element_shape)
            return self._next(contents)
        except OpError as error:
            messages.name_tf2_error(error, self._array_name(), "split", None)
            raise

    def size(self, name=None):
        return torch.tensor(len(self._current().phys), dtype=torch.int32)

    def close(self, name=None):
        """Nothing to do, as in TensorFlow 2 and the library's class: the values go when the last
        reference does (the storage's registry entry is weak)."""
        self._current()


def _tf_name(dtype):
    """TensorFlow's name for a torch dtype, as the library's class names its dtypes in errors."""
    try:
        return tf_name(as_dtype(dtype))
    except InvalidArgumentError:        # a dtype the bridge does not take: torch's name, as TensorFlow writes one
        return str(dtype).removeprefix("torch.")
