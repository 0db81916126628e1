"""A plain-Python reference model of TensorFlow's TensorArray V3 state machine.

Written straight from docs/semantics.md (§1-§4, and the deviations of §6),
for tests only: it shares no code with the library (only the error classes), keeps
one NumPy array per slot, and follows every op's checks in TensorFlow's order.

Two modes:

* ``ReferenceModel()`` -- the library's contract: TensorFlow's behaviour with the
  deliberate deviations of docs/semantics.md §6. A failed op changes nothing (the touched
  array is restored), negative Split lengths and Concat on a gradient array whose
  marked size is -1 raise InvalidArgumentError, flows are float32 0-d arrays.
* ``ReferenceModel(tf_faithful=True)`` -- TensorFlow itself: failed ops keep their
  partial effects (dynamic growth, earlier scatter/split writes, gather's
  element_shape merge and clears, grad's DisableDynamicSize), and where TensorFlow
  aborts the process the model raises ``WouldCrash`` before changing anything, so a
  test can leave that call out of a TensorFlow run.

The eleven ops take tf.raw_ops' names and argument names. Values are NumPy arrays;
outputs are NumPy arrays (copies: callers cannot reach the model's state); handles
are opaque hashable ``Handle`` objects with ``.name`` (the name TensorFlow prints).
``snapshot(handle)`` describes an array's whole state for atomicity checks.

Errors carry TensorFlow's message text. Where TensorFlow has no text (the two
deviations), the exception gets ``tf_text = False``: compare its class only.
"""

import collections
import importlib.util
import pathlib

import numpy as np

try:
    from gpu_tensorarray import errors
except Exception:  # the package mid-edit must not take the model down: load errors.py alone
    _spec = importlib.util.spec_from_file_location(
        "_reference_model_errors", pathlib.Path(__file__).resolve().parent.parent / "gpu_tensorarray" / "errors.py")
    errors = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(errors)

__all__ = [
    "ReferenceModel", "Handle", "WouldCrash", "format_shape", "tf_dtype_name", "as_dtype",
    "TensorArrayV3Output", "TensorArrayConcatV3Output", "TensorArrayGradV3Output",
    "TensorArrayGradWithShapeOutput", "OPS", "tf_add", "tf_add_at",
]

OPS = (
    "TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayGatherV3",
    "TensorArrayScatterV3", "TensorArrayConcatV3", "TensorArraySplitV3", "TensorArraySizeV3",
    "TensorArrayCloseV3", "TensorArrayGradV3", "TensorArrayGradWithShape",
)

TensorArrayV3Output = collections.namedtuple("TensorArrayV3", ["handle", "flow"])
TensorArrayConcatV3Output = collections.namedtuple("TensorArrayConcatV3", ["value", "lengths"])
TensorArrayGradV3Output = collections.namedtuple("TensorArrayGradV3", ["grad_handle", "flow_out"])
TensorArrayGradWithShapeOutput = collections.namedtuple("TensorArrayGradWithShape", ["grad_handle", "flow_out"])

_FORWARD_PREFIX = "_tensor_arrays"
_GRAD_PREFIX = "_tensor_array_grads"


class WouldCrash(Exception):
    """TensorFlow aborts the process here (tf_faithful mode only); nothing was changed."""


# -- names and formatting -------------------------------------------------------------------

_TF_NAMES = {"float16": "half", "float32": "float", "float64": "double"}
_ALIASES = {"float": "float32", "double": "float64", "half": "float16"}


def as_dtype(spec):
    """A numpy dtype from a numpy dtype/type, a name ("float32", "float", "double",
    "half") or an object with ``as_numpy_dtype`` (a tf.DType)."""
    if isinstance(spec, str):
        return np.dtype(_ALIASES.get(spec, spec))
    if hasattr(spec, "as_numpy_dtype"):
        return np.dtype(spec.as_numpy_dtype)
    return np.dtype(spec)


def tf_dtype_name(dtype):
    """TensorFlow's DataTypeString: float, double, half, int32, bool, complex64, ..."""
    name = np.dtype(dtype).name
    return _TF_NAMES.get(name, name)


def format_shape(shape):
    """TensorFlow's DebugString of a (partial) shape: [2,3], [], [?,2], <unknown>."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _partial_shape(spec):
    """An attr shape: None (unknown rank) or a tuple of ints / None (unknown dims)."""
    if spec is None:
        return None
    if hasattr(spec, "as_list"):  # tf.TensorShape
        if spec.rank is None:
            return None
        spec = spec.as_list()
    return tuple(None if d is None or int(d) < 0 else int(d) for d in spec)


def _fully_defined(shape):
    return shape is not None and None not in shape


def _compatible(partial, concrete):
    if partial is None or concrete is None:
        return True
    if len(partial) != len(concrete):
        return False
    return all(p is None or c is None or p == c for p, c in zip(partial, concrete))


def _merge(current, attr):
    """PartialTensorShape::MergeWith(current, attr)."""
    if current is None:
        return attr
    if attr is None:
        return current
    if len(current) != len(attr):
        raise errors.InvalidArgumentError(
            f"PartialTensorShape: Incompatible ranks during merge: {len(current)} vs. {len(attr)}")
    merged = []
    for a, b in zip(current, attr):
        if a is not None and b is not None and a != b:
            raise errors.InvalidArgumentError(
                f"PartialTensorShape: Incompatible shapes during merge: {format_shape(current)} vs. {format_shape(attr)}")
        merged.append(a if a is not None else b)
    return tuple(merged)


def tf_add(a, b):
    """``a + b`` element by element as TensorFlow's CPU kernels add: they run with the FTZ and DAZ
    flags set, so in float32 and float64 (and complex parts) a subnormal operand counts as a zero
    of its sign and a subnormal sum becomes one; bfloat16 adds in float32, so the same; float16
    (added in float32, where none of its values is subnormal) and integers add as NumPy does."""
    a = np.asarray(a)
    b = np.asarray(b).astype(a.dtype)
    if a.dtype.kind == "c":
        total = np.empty(np.broadcast_shapes(a.shape, b.shape), a.dtype)
        total.real, total.imag = tf_add(a.real, b.real), tf_add(a.imag, b.imag)
        return total
    if a.dtype.name == "bfloat16":
        return tf_add(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if a.dtype not in (np.float32, np.float64):
            return np.add(a, b, dtype=a.dtype)
        return _flush(_flush(a) + _flush(b))


def _flush(x):
    zero = np.copysign(np.zeros((), x.dtype), x)
    return np.where(np.abs(x) < np.finfo(x.dtype).tiny, zero, x)


def tf_add_at(dst, indices, rows):
    """A copy of ``dst`` with ``rows[k]`` added to row ``indices[k]`` for each k in turn (tf_add):
    a gradient array's aggregation, one add at a time."""
    out = np.array(dst)
    for k, index in enumerate(np.asarray(indices).reshape(-1).tolist()):
        out[index] = tf_add(out[index], rows[k])
    return out


def _host(value, default_int=np.int32):
    """A host NumPy array from a Python number/list or an array (CuPy arrays too)."""
    if hasattr(value, "get") and type(value).__module__.startswith("cupy"):
        value = value.get()
    array = np.asarray(value)
    if not isinstance(value, np.ndarray) and not isinstance(value, np.generic):
        # Python scalars and lists take TensorFlow's conversions.
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
        elif array.dtype.kind in "iu":
            array = array.astype(default_int)
        elif array.dtype.kind == "c":
            array = array.astype(np.complex128)
    return array


def _no_tf_text(error):
    error.tf_text = False
    return error


# -- state ----------------------------------------------------------------------------------

class Handle:
    """An opaque, hashable handle of one model array. ``name`` is TensorFlow's
    display name (``TensorArrayV3_0``, ``foo_1@gradients``); ``key`` the resource
    name (``_tensor_arraysTensorArrayV3_0``)."""

    __slots__ = ("key", "name", "_owner")

    def __init__(self, key, name, owner):
        self.key = key
        self.name = name
        self._owner = owner

    def __eq__(self, other):
        return isinstance(other, Handle) and (self.key, self._owner) == (other.key, other._owner)

    def __hash__(self):
        return hash((self.key, self._owner))

    def __repr__(self):
        return f"<model Handle {self.name}>"


class _Slot:
    __slots__ = ("tensor", "shape", "written", "read", "cleared")

    def __init__(self):
        self.tensor = None      # a NumPy array, never mutated in place (aggregation rebinds)
        self.shape = ()         # TF's TensorAndState.shape: a concrete shape, default scalar
        self.written = False
        self.read = False
        self.cleared = False

    def copy(self):
        other = _Slot()
        other.tensor, other.shape = self.tensor, self.shape
        other.written, other.read, other.cleared = self.written, self.read, self.cleared
        return other


class _Array:
    _FIELDS = ("dtype", "element_shape", "identical_element_shapes", "dynamic_size",
               "clear_after_read", "multiple_writes_aggregate", "is_grad", "marked_size",
               "closed", "gradients_disallowed")

    def __init__(self, key, name, dtype, size, element_shape, identical_element_shapes,
                 dynamic_size, multiple_writes_aggregate, is_grad, marked_size, clear_after_read):
        self.key = key
        self.name = name
        self.dtype = dtype
        self.slots = [_Slot() for _ in range(size)]
        self.element_shape = element_shape
        self.identical_element_shapes = identical_element_shapes
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.multiple_writes_aggregate = multiple_writes_aggregate
        self.is_grad = is_grad
        self.marked_size = marked_size
        self.closed = False
        self.gradients_disallowed = False

    def save(self):
        return ({f: getattr(self, f) for f in self._FIELDS}, [s.copy() for s in self.slots])

    def restore(self, saved):
        fields, slots = saved
        for f, v in fields.items():
            setattr(self, f, v)
        self.slots = slots

    def check_open(self):
        if self.closed:
            raise errors.InvalidArgumentError(f"TensorArray {self.name} has already been closed.")

    # -- TensorArray::LockedWriteOrAggregate (after the op's dtype check) --------------------
    def write_slot(self, index, value):
        self.check_open()
        if index < 0 or (not self.dynamic_size and index >= len(self.slots)):
            raise errors.InvalidArgumentError(
                f"TensorArray {self.name}: Tried to write to index {index} but array is not "
                f"resizeable and size is: {len(self.slots)}")
        if self.dynamic_size and index >= len(self.slots):
            self.slots.extend(_Slot() for _ in range(index + 1 - len(self.slots)))
        slot = self.slots[index]
        if not _compatible(self.element_shape, value.shape):
            raise errors.InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because the value "
                f"shape is {format_shape(value.shape)} which is incompatible with the TensorArray's "
                f"inferred element shape: {format_shape(self.element_shape)} (consider setting infer_shape=False).")
        if self.identical_element_shapes and not _fully_defined(self.element_shape):
            self.element_shape = tuple(value.shape)
        if slot.read:
            raise errors.InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because it has already been read.")
        if not self.multiple_writes_aggregate and slot.written:
            raise errors.InvalidArgumentError(
                f"TensorArray {self.name}: Could not write to TensorArray index {index} because it has already been written to.")
        if slot.written:  # aggregating array (§4)
            if tuple(value.shape) != tuple(slot.shape):
                raise errors.InvalidArgumentError(
                    f"TensorArray {self.name}: Could not aggregate to TensorArray index {index} because the "
                    f"existing shape is {format_shape(slot.shape)} but the new input shape is {format_shape(value.shape)}.")
            if slot.tensor is None or slot.tensor.size == 0:
                slot.tensor = value.copy()
                return
            if value.dtype.kind not in "iufc":
                raise errors.InvalidArgumentError(
                    f"tensor_array::AddToTensor type not supported: {tf_dtype_name(value.dtype)}")
            slot.tensor = tf_add(slot.tensor, value)
            self.gradients_disallowed = True
        else:
            slot.tensor = value.copy()
            slot.shape = tuple(value.shape)
            slot.written = True

    # -- TensorArray::LockedRead ----------------------------------------------------------
    def read_slot(self, index):
        self.check_open()
        size = len(self.slots)
        if index < 0 or (not self.is_grad and index >= size):
            raise errors.InvalidArgumentError(f"Tried to read from index {index} but array size is: {size}")
        if (self.is_grad and (index >= size or not self.slots[index].written)) or \
                (not self.is_grad and not self.slots[index].written):
            if self.is_grad and index < size and len(self.slots[index].shape) > 0:
                zero_shape = self.slots[index].shape  # unreachable in practice (docs/semantics.md §2.3 step 6)
            elif not _fully_defined(self.element_shape):
                raise errors.InvalidArgumentError(
                    f"TensorArray {self.name}: Could not read from TensorArray index {index}.  Furthermore, "
                    f"the element shape is not fully defined: {format_shape(self.element_shape)}.  It is "
                    "possible you are working with a resizeable TensorArray and stop_gradients is not allowing "
                    "the gradients to be written.  If you set the full element_shape property on the forward "
                    "TensorArray, the proper all-zeros tensor will be returned instead of incurring this error.")
            else:
                zero_shape = tuple(self.element_shape)
            if index >= size:
                for _ in range(size, index + 1):
                    slot = _Slot()
                    slot.shape, slot.written = zero_shape, True
                    self.slots.append(slot)
            else:
                self.slots[index].shape = zero_shape
                self.slots[index].written = True
        slot = self.slots[index]
        if slot.cleared:
            raise errors.InvalidArgumentError(
                f"TensorArray {self.name}: Could not read index {index} twice because it was cleared after a "
                "previous read (perhaps try setting clear_after_read = false?).")
        if slot.tensor is None or slot.tensor.size == 0:
            slot.tensor = np.zeros(slot.shape, self.dtype)
        value = slot.tensor
        if self.clear_after_read:
            slot.tensor = None
            slot.cleared = True
        slot.read = True
        return value

    def snapshot(self):
        slots = tuple(
            (s.written, s.read, s.cleared, tuple(s.shape),
             None if s.tensor is None else (s.tensor.dtype.str, s.tensor.shape, s.tensor.tobytes()))
            for s in self.slots)
        state = {f: getattr(self, f) for f in self._FIELDS}
        state.update(name=self.name, dtype=self.dtype.name, size=len(self.slots), slots=slots)
        return state


# -- the ops --------------------------------------------------------------------------------

def _flow(value=0.0):
    return np.asarray(_host(value), dtype=np.float32).reshape(()).copy()


class ReferenceModel:
    """One process's worth of TensorArray resources (TensorFlow's per-step container)."""

    def __init__(self, tf_faithful=False):
        self.tf_faithful = tf_faithful
        self.next_id = 0  # TensorFlow's process-wide tensor_array_counter
        self._arrays = {}

    # -- helpers ---------------------------------------------------------------------------
    def _lookup(self, handle):
        if not isinstance(handle, Handle):
            raise errors.InvalidArgumentError(
                f"Trying to access a handle's resource using the wrong type. Got {type(handle).__name__}")
        array = self._arrays.get(handle.key) if handle._owner is self else None
        if array is None:
            raise errors.NotFoundError(f"Resource __per_step_0/{handle.key} does not exist.")
        return array

    def _atomic(self, handle, body):
        """Run ``body``; unless tf_faithful, undo its effects on the handle's array when it fails."""
        array = self._arrays.get(getattr(handle, "key", None)) if isinstance(handle, Handle) and handle._owner is self else None
        saved = None if self.tf_faithful or array is None else array.save()
        try:
            return body()
        except errors.OpError:
            if saved is not None:
                array.restore(saved)
            raise

    def arrays(self):
        """Handles of every array created so far (forward and gradient)."""
        return [Handle(key, a.name, self) for key, a in self._arrays.items()]

    def snapshot(self, handle):
        """The whole state of one array: attributes, size, element shape, every slot's
        flags, shape and value (as bytes). Equal snapshots = indistinguishable arrays."""
        return self._lookup(handle).snapshot()

    def state(self, handle):
        """The live internal array object (read it, do not change it): for test generators."""
        return self._lookup(handle)

    @staticmethod
    def _check_dtype_write(array, value):
        if value.dtype != array.dtype:
            raise errors.InvalidArgumentError(
                f"TensorArray dtype is {tf_dtype_name(array.dtype)} but Op is trying to write dtype "
                f"{tf_dtype_name(value.dtype)}.")

    @staticmethod
    def _check_dtype_read(array, dtype):
        if as_dtype(dtype) != array.dtype:
            raise errors.InvalidArgumentError(
                f"TensorArray dtype is {tf_dtype_name(array.dtype)} but Op requested dtype {tf_dtype_name(as_dtype(dtype))}.")

    # -- §2.1 --------------------------------------------------------------------------------
    def TensorArrayV3(self, size, dtype, element_shape=None, dynamic_size=False, clear_after_read=True,
                      identical_element_shapes=False, tensor_array_name="", name=None):
        size = _host(size)
        if size.ndim != 0:
            raise errors.InvalidArgumentError(f"TensorArray size must be scalar, but had shape: {format_shape(size.shape)}")
        size = int(size)
        if size < 0:
            raise errors.InvalidArgumentError("Size should be >= 0.")
        unique = f"{tensor_array_name or 'TensorArrayV3'}_{self.next_id}"
        self.next_id += 1
        key = _FORWARD_PREFIX + unique
        self._arrays[key] = _Array(
            key, unique, as_dtype(dtype), size, _partial_shape(element_shape), bool(identical_element_shapes),
            bool(dynamic_size), False, False, -1, bool(clear_after_read))
        return TensorArrayV3Output(Handle(key, unique, self), _flow())

    # -- §2.2 --------------------------------------------------------------------------------
    def TensorArrayWriteV3(self, handle, index, value, flow_in, name=None):
        def body():
            idx = _host(index)
            if idx.ndim != 0:
                raise errors.InvalidArgumentError(f"TensorArray index must be scalar, but had shape: {format_shape(idx.shape)}")
            array = self._lookup(handle)
            v = _host(value)
            self._check_dtype_write(array, v)
            array.check_open()
            array.write_slot(int(idx), v)
            return _flow(flow_in)
        return self._atomic(handle, body)

    # -- §2.3 --------------------------------------------------------------------------------
    def TensorArrayReadV3(self, handle, index, flow_in, dtype, name=None):
        def body():
            idx = _host(index)
            if idx.ndim != 0:
                raise errors.InvalidArgumentError(f"TensorArray index must be scalar, but had shape: {format_shape(idx.shape)}")
            array = self._lookup(handle)
            self._check_dtype_read(array, dtype)
            return array.read_slot(int(idx)).copy()
        return self._atomic(handle, body)

    # -- §2.4 --------------------------------------------------------------------------------
    def TensorArrayGatherV3(self, handle, indices, flow_in, dtype, element_shape=None, name=None):
        def body():
            array = self._lookup(handle)
            self._check_dtype_read(array, dtype)
            attr = _partial_shape(element_shape)
            array.element_shape = _merge(array.element_shape, attr)
            idx = _host(indices)
            if idx.ndim != 1:
                raise errors.InvalidArgumentError(
                    f"Expected indices to be a vector, but received shape: {format_shape(idx.shape)}")
            if idx.shape[0] == 0:
                if not _fully_defined(attr):
                    raise errors.UnimplementedError(
                        f"TensorArray has size zero, but element shape {format_shape(attr)} is not fully defined. "
                        "Currently only static shapes are supported when packing zero-size TensorArrays.")
                return np.zeros((0,) + attr, array.dtype)
            values = [array.read_slot(int(i)) for i in idx]
            if not _compatible(attr, values[0].shape):
                raise errors.InvalidArgumentError(
                    f"TensorArray was passed element_shape {format_shape(attr)} which does not match the Tensor "
                    f"at index 0: {format_shape(values[0].shape)}")
            if values[0].size == 0:
                # TF allocates [n] + shape0 and returns before the consistency check when that
                # has no elements (verified against TF 2.21; docs/semantics.md §2.4 step 8).
                return np.zeros((len(values),) + values[0].shape, array.dtype)
            for i, v in enumerate(values):
                if v.shape != values[0].shape:
                    raise errors.InvalidArgumentError(
                        f"TensorArray has inconsistent shapes.  Index 0 has shape: {format_shape(values[0].shape)} "
                        f"but index {i} has shape: {format_shape(v.shape)}")
            return np.stack(values).astype(array.dtype, copy=False)
        return self._atomic(handle, body)

    # -- §2.5 --------------------------------------------------------------------------------
    def TensorArrayScatterV3(self, handle, indices, value, flow_in, name=None):
        def body():
            array = self._lookup(handle)
            v = _host(value)
            self._check_dtype_write(array, v)
            if v.ndim == 0:
                raise errors.InvalidArgumentError(
                    f"Input value for unpack must be at least a vector but received shape: {format_shape(v.shape)}")
            array.check_open()
            idx = _host(indices)
            if idx.ndim != 1:
                raise errors.InvalidArgumentError(
                    f"Expected indices to be a vector, but received shape: {format_shape(idx.shape)}")
            if idx.shape[0] != v.shape[0]:
                raise errors.InvalidArgumentError(
                    f"Expected len(indices) == values.shape[0], but saw: {idx.shape[0]} vs. {v.shape[0]}")
            max_index = int(idx.max()) if idx.shape[0] else -1
            size = len(array.slots)
            if array.dynamic_size and size < max_index + 1:
                size = max_index + 1
            if max_index >= size:
                raise errors.InvalidArgumentError(f"Max scatter index must be < array size ({max_index} vs. {size})")
            pieces = [v[k].copy() for k in range(v.shape[0])]
            for i, piece in zip(idx, pieces):
                array.write_slot(int(i), piece)
            return _flow(flow_in)
        return self._atomic(handle, body)

    # -- §2.6 --------------------------------------------------------------------------------
    def TensorArraySplitV3(self, handle, value, lengths, flow_in, name=None):
        def body():
            array = self._lookup(handle)
            lens = _host(lengths, default_int=np.int64)
            if lens.ndim != 1:
                raise errors.InvalidArgumentError(
                    f"Expected lengths to be a vector, received shape: {format_shape(lens.shape)}")
            v = _host(value)
            if v.ndim == 0:
                raise errors.InvalidArgumentError(
                    f"Expected value to be at least a vector, but received shape: {format_shape(v.shape)}")
            lens = [int(n) for n in lens]
            total = sum(lens)
            if total != v.shape[0]:
                raise errors.InvalidArgumentError(
                    "Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
                    f"{total} and value's shape is: {format_shape(v.shape)}")
            array.check_open()
            negative = [n for n in lens if n < 0]
            if negative:  # docs/semantics.md §6.2: TF aborts the process right here (verified)
                if self.tf_faithful:
                    raise WouldCrash("TensorFlow: Check failed: size >= 0 (negative Split length)")
                raise _no_tf_text(errors.InvalidArgumentError(
                    f"TensorArray {array.name}: Split lengths must be >= 0, got {negative[0]}"))
            n = len(lens)
            size = len(array.slots)
            if array.dynamic_size and size < n:
                size = n
            if size != n:
                raise errors.InvalidArgumentError(
                    f"TensorArray's size is not equal to the size of lengths ({size} vs. {n}), and the "
                    "TensorArray is not marked as dynamically resizeable")
            self._check_dtype_write(array, v)
            pieces, start = [], 0
            for length in lens:
                pieces.append(v[start:start + length].copy())
                start += length
            array.check_open()
            if not array.is_grad:
                array.marked_size = n
            for i, piece in enumerate(pieces):
                array.write_slot(i, piece)
            return _flow(flow_in)
        return self._atomic(handle, body)

    # -- §2.7 --------------------------------------------------------------------------------
    def TensorArrayConcatV3(self, handle, flow_in, dtype, element_shape_except0=None, name=None):
        def body():
            array = self._lookup(handle)
            self._check_dtype_read(array, dtype)
            array.check_open()
            n = array.marked_size if array.is_grad else len(array.slots)
            attr = _partial_shape(element_shape_except0)
            if n == 0:
                if not _fully_defined(attr):
                    raise errors.UnimplementedError(
                        f"TensorArray has size zero, but element_shape_except0 {format_shape(attr)} is not fully "
                        "defined. Currently only static shapes are supported when concatenating zero-size TensorArrays.")
                return TensorArrayConcatV3Output(np.zeros((0,) + attr, array.dtype), np.zeros((0,), np.int64))
            if n < 0:
                if self.tf_faithful:
                    raise WouldCrash("TensorFlow: segfault (Concat of a gradient array with marked_size -1)")
                raise _no_tf_text(errors.InvalidArgumentError(
                    f"TensorArray {array.name}: Concat of a gradient TensorArray whose forward TensorArray "
                    "never had a Split (marked size -1)"))
            values = [array.read_slot(i) for i in range(n)]
            lengths = []
            rest0 = None
            for i, v in enumerate(values):
                if v.ndim == 0:
                    raise errors.InvalidArgumentError(
                        f"Concat saw a scalar shape at index {i} but requires at least vectors.  Did you mean to call pack?")
                lengths.append(v.shape[0])
                rest = tuple(v.shape[1:])
                if i == 0:
                    rest0 = rest
                    if not _compatible(attr, rest):
                        raise errors.InvalidArgumentError(
                            f"TensorArray was passed element_shape_except0 {format_shape(attr)} but index 0 has "
                            f"(excepting dimension 0) shape: {format_shape(rest)} which does not match.")
                elif rest != rest0:
                    raise errors.InvalidArgumentError(
                        f"TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) shape: "
                        f"{format_shape(rest0)} but index {i} has (excepting dimension 0) shape: {format_shape(rest)}")
            value = np.concatenate(values, axis=0).astype(array.dtype, copy=False)
            return TensorArrayConcatV3Output(value, np.asarray(lengths, np.int64))
        return self._atomic(handle, body)

    # -- §2.8 / §2.9 -------------------------------------------------------------------------
    def TensorArraySizeV3(self, handle, flow_in, name=None):
        array = self._lookup(handle)
        array.check_open()
        return np.asarray(len(array.slots), np.int32)

    def TensorArrayCloseV3(self, handle, name=None):
        array = self._lookup(handle)
        array.slots = []
        array.closed = True
        return None

    # -- 3 ------------------------------------------------------------------------------------
    def TensorArrayGradV3(self, handle, flow_in, source, name=None):
        return TensorArrayGradV3Output(*self._atomic(handle, lambda: self._grad(handle, source, None)))

    def TensorArrayGradWithShape(self, handle, flow_in, shape_to_prepend, source, name=None):
        return TensorArrayGradWithShapeOutput(
            *self._atomic(handle, lambda: self._grad(handle, source, shape_to_prepend)))

    def _grad(self, handle, source, shape_to_prepend):
        key = getattr(handle, "key", "")
        if not key.startswith(_FORWARD_PREFIX):
            raise errors.InvalidArgumentError(f"Wrong input container. {key}")
        forward_name = key[len(_FORWARD_PREFIX):]
        grad_name = f"{forward_name}@{source}"
        grad_key = _GRAD_PREFIX + grad_name
        forward = self._lookup(handle)
        forward.dynamic_size = False  # DisableDynamicSize, before any further check
        forward.check_open()
        size, marked = len(forward.slots), forward.marked_size
        if forward.gradients_disallowed:  # unreachable through V3 (docs/semantics.md §3 step 7)
            raise errors.InvalidArgumentError(
                f"Unable to create a gradients TensorArray for {forward_name}.  Perhaps you used the "
                "multiple_writes_aggregate flag on a previous write?  Gradient calculation is impossible when "
                "multiple writes are performed to the same index.")
        if shape_to_prepend is None:
            prepend = ()
            element_shape = forward.element_shape
        else:
            shape = _host(shape_to_prepend)
            if shape.ndim != 1 or shape.dtype.kind not in "iu":
                raise errors.InvalidArgumentError(
                    f"shape must be a vector of {{int32,int64}}, got shape {format_shape(shape.shape)}")
            prepend = tuple(int(d) for d in shape)
            for d in prepend:
                if d < 0:
                    raise errors.InvalidArgumentError(f"Dimension {d} must be >= 0")
            element_shape = None if forward.element_shape is None else prepend + tuple(forward.element_shape)
        if grad_key not in self._arrays:
            grad = _Array(grad_key, grad_name, forward.dtype, size, element_shape,
                          forward.identical_element_shapes, False, True, True, marked, True)
            for mine, theirs in zip(grad.slots, forward.slots):  # CopyShapesFrom
                if theirs.written:
                    mine.shape = prepend + tuple(theirs.shape)
                    mine.written = True
            self._arrays[grad_key] = grad
        return Handle(grad_key, grad_name, self), _flow()
