"""GradientTape: records the TensorArray ops run inside it and differentiates them
through the gradient functions of gradients.py.

Recording goes through raw_ops' one hook (``raw_ops.set_recorder``): installed
while some tape of any thread records, None otherwise. ``tape.gradient`` mints a
fresh source per call, replays the recorded ops backwards and closes the gradient
arrays it made. Only TensorArray ops are differentiated: the math a program does
between a read and a write is not recorded, so a target is a value returned by
read/gather/stack/concat and a source is a value passed to write/scatter/unstack/
split. Values are identified by identity (``id``), the tape keeping every recorded
value alive; a copy or a view of a recorded output is not that output.
"""

import contextlib
import enum
import gc
import os
import threading
import weakref

import numpy as np

from . import dtypes, raw_ops
from .backends import backend_of, get_backend
from .conversion import to_tensor
from .errors import FailedPreconditionError, InvalidArgumentError, described, shown
from .gradients import DTYPE_ATTR, GRADIENTS, READS, WRITE_VALUE, Op
from .host import element_count, index_vector
from .registry import registry

__all__ = ["GradientTape", "UnconnectedGradients", "nested_leaves", "reach"]


class UnconnectedGradients(enum.Enum):
    """What ``gradient`` returns for a source the targets do not depend on
    (TensorFlow's tf.UnconnectedGradients): None, or zeros of the source's shape."""

    NONE = "none"
    ZERO = "zero"


# -- recording --------------------------------------------------------------------------------

# Weak sets: a tape whose ``with`` block an interrupt left (at __exit__'s call, before its first
# line) records no longer once the caller drops it, and the hook goes with the last of them.
_local = threading.local()          # .tapes: the tapes recording in this thread; .paused: depth
_recording_lock = threading.Lock()
_recording: "weakref.WeakSet[GradientTape]" = weakref.WeakSet()      # the tapes recording in any thread


# The gradient computations running now (their _Endings, whose ``ends`` name their arrays and
# source until they end): tapes in two threads must not both pick a name before either has made
# its gradient array (TensorFlow makes its name scopes unique under the graph's lock). The lock
# is the minting's only: an _Ending, which the collector may finalise anywhere, takes none.
_running_lock = threading.Lock()
_running: "weakref.WeakSet[_Ending]" = weakref.WeakSet()


def _after_fork():
    global _recording_lock, _running_lock
    # A thread holding one in the parent does not exist here.
    _recording_lock, _running_lock = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _record(op_type, inputs, outputs, dtype):
    """The recorder raw_ops calls while some tape records: add the op to this thread's tapes
    (those not inside their own stop_recording)."""
    tapes = getattr(_local, "tapes", None)
    if not tapes:
        if not _recording:              # the last tape recording anywhere is gone without stopping
            with _recording_lock:
                if not _recording:
                    raw_ops.set_recorder(None)
        return
    if getattr(_local, "paused", 0):
        return
    op = Op(op_type, inputs, outputs, {DTYPE_ATTR[op_type]: dtype})
    for tape in list(tapes):
        if not tape._stopped:
            tape._add(op)


def _start(tape):
    tapes = getattr(_local, "tapes", None)
    if tapes is None:
        tapes = _local.tapes = weakref.WeakSet()
    with _recording_lock:
        tapes.add(tape)
        _recording.add(tape)
        raw_ops.set_recorder(_record)


def _stop(tape):
    """Undoes ``_start``, also a part of it that an interrupt cut short."""
    with _recording_lock:
        getattr(_local, "tapes", set()).discard(tape)
        _recording.discard(tape)
        if not _recording:
            raw_ops.set_recorder(None)


# -- GradientTape -----------------------------------------------------------------------------

_NON_PERSISTENT = ("A non-persistent GradientTape can only be used to compute one set of gradients "
                   "(or jacobians)")


class GradientTape:
    """Records the TensorArray ops run inside ``with GradientTape() as tape:`` (in this
    thread) and differentiates them:

        with gta.GradientTape() as tape:
            ta = gta.TensorArray("float64", size=0, dynamic_size=True).unstack(x)
            y = ta.read(0)
        dx = tape.gradient(y, x)            # ones in row 0, zeros elsewhere

    ``gradient`` may be called once on a non-persistent tape (a second call raises
    FailedPreconditionError, TensorFlow's RuntimeError there; entered again, it records
    afresh, for one more), any number of times on a persistent one. Each call is its own
    gradient computation with its own source ("gradients", then "gradients_1", ...:
    ``sources_used`` lists them), hence its own
    gradient arrays: calling twice gives the same result twice, never a double count.
    The gradient arrays are closed before ``gradient`` returns, and leave the forward
    arrays' ``grads`` (registry.end_gradient), so repeated calls hold nothing; the forward arrays stay
    the caller's (their size is locked, as TensorArrayGradV3 locks it).
    """

    def __init__(self, persistent=False):
        self._persistent = bool(persistent)
        self._ops = []
        self._producer = {}            # id(value read out) -> the op that returned it
        self._recording = False
        self._stopped = 0               # depth of this tape's stop_recording blocks
        self._used = False
        self._calls = 0
        self.sources_used = []

    @property
    def persistent(self):
        return self._persistent

    @property
    def operations(self):
        """The recorded ops, in program order."""
        return tuple(self._ops or ())

    def __enter__(self):
        if self._recording:             # TensorFlow's ValueError, and its words
            raise InvalidArgumentError("Tape is still recording, This can happen if you try to re-enter an "
                                       "already-active tape.")
        if self._used and not self._persistent:
            # As TensorFlow's: a used non-persistent tape entered again records afresh, for one more gradient.
            self._forget()
            self._used = False
        self._recording = True
        try:
            _start(self)
        except BaseException:           # an interrupt: __exit__ will not run
            self._recording = False
            _stop(self)
            raise
        return self

    def __exit__(self, *exc_info):
        self._recording = False
        _stop(self)
        return False

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops inside are not recorded by this tape (other tapes go on recording them)."""
        if not self._recording:         # TensorFlow's RuntimeError, and its words
            raise FailedPreconditionError("Trying to stop recording a tape which is not recording.")
        self._stopped += 1
        try:
            yield
        finally:
            self._stopped -= 1

    def reset(self):
        """Forget everything recorded so far (inside the tape's block, as TensorFlow allows it)."""
        if not self._recording or self._stopped:    # TensorFlow's ValueError, and its words
            raise InvalidArgumentError("Tape is not recording.")
        self._forget()

    def _forget(self):
        self._ops, self._producer = [], {}

    def _add(self, op):
        if self._ops is None:           # a non-persistent tape that has computed its gradient
            return
        self._ops.append(op)
        if op.type in READS:
            self._producer[id(op.outputs[0])] = op

    # -- gradient --------------------------------------------------------------------------
    def gradient(self, targets, sources, output_gradients=None, unconnected_gradients=UnconnectedGradients.NONE):
        """d(targets)/d(sources) through the recorded TensorArray ops.

        targets: a value returned by read/gather/stack/concat inside the tape, or a
        nested structure of them (lists, tuples, namedtuples, dicts, as tf.nest reads
        them; anything else, a copy of one or math on one included, raises
        InvalidArgumentError). sources: a value passed to write/scatter/unstack/split
        inside the tape, or a nested structure of them. output_gradients: the gradients
        of the targets (their structure, or any that flattens to one per target as
        tf.nest flattens it; None or a missing entry means ones like the target; each of
        the target's dtype, a torch tensor too). unconnected_gradients: "none" (or
        UnconnectedGradients.NONE) gives None
        for a source the targets do not depend on, "zero" gives zeros of its shape and
        dtype; a source of a dtype without gradients (integers, bool, strings) is not
        connected. Returns one gradient per source, in the sources' structure: an array
        of the backend of the array it went through. A value written at several indices
        gets the sum; a value written where nothing read afterwards is not connected.
        """
        if self._used and not self._persistent:
            raise FailedPreconditionError(_NON_PERSISTENT)
        unconnected = _unconnected_mode(unconnected_gradients)
        target_list, _ = _as_list(targets, "targets")
        source_list, rebuild = _as_list(sources, "sources")
        if output_gradients is not None and isinstance(targets, (list, tuple, dict)):
            output_gradients = _along(targets, output_gradients)
        for what, values, role in (("targets", target_list, "returned by read/gather/stack/concat"),
                                   ("sources", source_list, "passed as the value of write/scatter/unstack/split")):
            for position, value in enumerate(values):
                if not (hasattr(value, "shape") and hasattr(value, "dtype")):
                    raise InvalidArgumentError(
                        f"{what}[{position}] is a {type(value).__name__}, not an array: {what} are arrays "
                        f"{role} inside the tape")
        producers = [self._producer_of(target, position) for position, target in enumerate(target_list)]
        given = _output_gradient_list(output_gradients, targets, len(target_list))
        target_grads = [_target_gradient(target, gradient, producer)
                        for target, gradient, producer in zip(target_list, given, producers)]
        self._used = True
        if self._recording and not self._persistent:
            # As TensorFlow's: its gradient taken inside its block, a non-persistent tape stops recording.
            self.__exit__(None, None, None)
        # No tape of this thread records the computation's own ops. Counted up and down by plain
        # statements around the try (a context manager's exit may be skipped by an interrupt).
        _local.paused = getattr(_local, "paused", 0) + 1
        try:
            grads = self._backward(self._ops, target_list, target_grads, source_list, unconnected)
        finally:
            _local.paused -= 1
            if not self._persistent:
                self._ops, self._producer = None, None
        callers = {id(gradient) for gradient in given}
        return rebuild([None if gradient is None else _own(gradient, id(gradient) in callers, backend)
                        for gradient, backend in grads])

    def _watched_ids(self, ops):
        """The ids of the values that may have a gradient, or None: every value written inside
        the tape may, and every value read."""
        return None

    def _producer_of(self, target, position):
        """The recorded op that returned ``target``; InvalidArgumentError when none did."""
        producer = self._producer.get(id(target)) if self._producer else None
        if producer is None or producer.outputs[0] is not target:
            raise InvalidArgumentError(
                f"targets[{position}] (shape {list(target.shape)}, dtype {target.dtype}) is not the output of a "
                f"TensorArray op recorded by this tape: a target is a value that read/gather/stack/concat "
                f"returned inside the tape, not a copy or view of one nor the result of math on one. For math "
                f"between TensorArray ops, differentiate with gpu_tensorarray.torch (PyTorch autograd through "
                f"the TensorArray ops).")
        return producer

    def _mint_source(self, arrays, ending):
        """A source name that no gradient computation on any of ``arrays`` used or uses now,
        taken for this one: ``ending``'s ends name it with the arrays until it ends."""
        with _running_lock:
            taken = {source for running in list(_running) for array, source in running.ends
                     if any(array is ours for ours in arrays)}
            while True:
                source = "gradients" if self._calls == 0 else f"gradients_{self._calls}"
                self._calls += 1
                if source not in taken and not any(source in array.grads for array in arrays):
                    # Listed running first, then given its ends: one with ends is always listed, so
                    # an interrupt can never leave a computation whose name another may take.
                    ends = [(array, source) for array in arrays]
                    _running.add(ending)
                    ending.ends = ends
                    self.sources_used.append(source)
                    return source

    def _backward(self, ops, targets, target_grads, sources, unconnected):
        """One (gradient, its backend) per source, in order: gradient None or zeros where
        it is not connected. All array math runs through the backend of the array the
        gradient went through, which puts it on that array's device."""
        # Which arrays and values depend on the sources (TensorFlow differentiates only
        # the ops between xs and ys).
        # A source of a dtype without gradients (integers, bool, strings) reaches nothing, as in TensorFlow;
        # one that is a target gets its gradient, watched or not, as in TensorFlow.
        watched = self._watched_ids(ops)
        if watched is not None:
            watched |= {id(target) for target in targets}
        reached, arrays, backend_of_value = reach(ops, {
            id(source) for source in sources if _differentiable(source) and (watched is None or id(source) in watched)})

        value_grads = {}                                 # id(value) -> its gradient so far
        for target, gradient in zip(targets, target_grads):
            backend = self._producer[id(target)].array.backend
            backend_of_value.setdefault(id(target), backend)
            _accumulate(value_grads, id(target), gradient, backend)

        _end_dropped()                                   # their sources are free again
        # Before any gradient array exists: what releases this computation's, whatever ends it.
        ending = _Ending(())
        source = self._mint_source(list(arrays.values()), ending)
        # The name TensorFlow's incoming gradient tensor would have: grad_source() finds the source in it.
        grad_names = {op_type: f"{source}/{op_type}_grad" for op_type in DTYPE_ATTR}
        array_flow = {}                                  # id(array) -> incoming flow gradient
        try:
            for op in reversed(ops):
                array = op.array
                if id(array) not in arrays:
                    continue
                fn = GRADIENTS[op.type]
                grad_name = grad_names[op.type]
                if op.type in READS:
                    output = op.outputs[0]
                    gradient = value_grads.get(id(output))
                    if gradient is None or id(output) not in reached or self._producer.get(id(output)) is not op:
                        continue                         # not between the sources and the targets
                    if op.type == "TensorArrayConcatV3":
                        input_grads = fn(op, gradient, None, grad_name=grad_name)
                    else:
                        input_grads = fn(op, gradient, grad_name=grad_name)
                    array_flow[id(array)] = input_grads[-1]
                else:
                    value = op.inputs[WRITE_VALUE[op.type]]
                    flow = array_flow.get(id(array))
                    if flow is None or id(value) not in reached:
                        continue                         # nothing read after it: not connected
                    if _writes_nothing(op):              # connected, with an empty gradient
                        _accumulate(value_grads, id(value), array.backend.zeros(tuple(value.shape), value.dtype),
                                    array.backend)
                        continue
                    input_grads = fn(op, flow, grad_name=grad_name)
                    _accumulate(value_grads, id(value), input_grads[WRITE_VALUE[op.type]], array.backend)
                    array_flow[id(array)] = input_grads[-1]
        finally:
            ending()
        results = [value_grads.get(id(value)) if id(value) in reached else None for value in sources]
        if unconnected is UnconnectedGradients.ZERO:
            results = [_zeros_like(value, backend_of_value.get(id(value))) if gradient is None else gradient
                       for value, gradient in zip(sources, results)]
        return [(gradient, backend_of_value.get(id(value))) for value, gradient in zip(sources, results)]


def reach(ops, reached):
    """What depends on the values whose ids are ``reached`` through ``ops``, in their order: a
    write of a reached value reaches its array, a later read of a reached array reaches its
    output. -> (``reached`` with those outputs, {id(array): array} of the arrays reached,
    {id(value written): the backend of the first array it reached})."""
    arrays, backend_of_value = {}, {}
    for op in ops:
        if op.type in READS:
            if id(op.array) in arrays:
                reached.add(id(op.outputs[0]))
        elif id(op.inputs[WRITE_VALUE[op.type]]) in reached:
            arrays[id(op.array)] = op.array
            backend_of_value.setdefault(id(op.inputs[WRITE_VALUE[op.type]]), op.array.backend)
    return reached, arrays, backend_of_value


class _Ending:
    """Ends a gradient computation on its forward arrays (registry.end_gradients): called when
    it finishes, and again when dropped, should an interrupt have landed as the call began (the
    frame's exception then drops it). One the cycle collector finalises leaves its ends to the
    next gradient computation (_end_dropped): a collection may run anywhere, also where its
    thread holds a forward array's lock, which ending would take."""

    __slots__ = ("ends", "__weakref__")

    def __init__(self, ends):
        self.ends = ends

    def __call__(self):
        registry.end_gradients(self.ends)
        self.ends = ()          # only now: an interrupt before leaves them for __del__ (ending twice is harmless)

    def __del__(self):
        ends = getattr(self, "ends", ())        # (none, should an interrupt have cut __init__)
        if not ends:
            return
        if getattr(_collection, "running", False):
            _dropped.append(ends)               # one call, no lock
            return
        try:
            self()
        except Exception:       # at interpreter exit the modules it needs may be gone
            pass


_dropped: list = []             # the ends of computations the collector finalised, for _end_dropped
_collection = threading.local()     # .running: a cycle collection runs in this thread


def _collecting(phase, info):
    _collection.running = phase == "start"


gc.callbacks.append(_collecting)


def _end_dropped():
    """End the computations dropped unfinished (their _Ending's finaliser listed them), where no
    lock is held. Each is ended before it leaves the list: ending twice is harmless, so an
    interrupt, or another thread ending it too, loses none."""
    while _dropped:
        try:
            ends = _dropped[-1]
        except IndexError:      # another thread took the last
            return
        registry.end_gradients(ends)
        try:
            _dropped.remove(ends)
        except ValueError:
            pass


def _zeros_like(value, backend):
    """Zeros of ``value``'s shape and dtype on ``backend``, else on the backend of its kind."""
    backend = backend or backend_of(value) or get_backend()
    return backend.zeros(tuple(value.shape), dtypes.as_dtype(_dtype_of(value).newbyteorder("=")))


def _differentiable(value):
    dtype = _dtype_of(value)
    return dtype.kind in "fc" or dtypes.name_of(dtype) == dtypes.BFLOAT16


def _dtype_of(value):
    """A source's dtype, as NumPy's: another library's value (a torch tensor, which a write
    takes) has the dtype its conversion gives it, as in the write."""
    try:
        return np.dtype(value.dtype)
    except TypeError:
        return to_tensor(backend_of(value) or get_backend(), value).dtype


def _unconnected_mode(value):
    """"none" or "zero", spelled as a string or as any enum of those values (TensorFlow's
    tf.UnconnectedGradients too)."""
    try:
        return UnconnectedGradients(value.value if isinstance(value, enum.Enum) else value)
    except ValueError:
        raise InvalidArgumentError(f"Unknown value for unconnected_gradients: {shown(value)}") from None


def _writes_nothing(op):
    """A Scatter of no indices or a Split into no pieces: its gradient is empty, and
    asking the gradient array for it (a Gather of [] / a Concat of nothing) would
    need a fully defined element shape that a forward array may not have."""
    if op.type == "TensorArrayScatterV3":
        return len(op.inputs[1]) == 0
    return op.type == "TensorArraySplitV3" and len(op.inputs[2]) == 0


def _as_list(values, what):
    """(list, rebuild): a single value or a nested structure of them (lists, tuples, namedtuples,
    dicts: tf.nest's, a dict's values in the order of its sorted keys), and how to give results
    back in that structure."""
    if values is None:
        raise InvalidArgumentError(f"{what} must be an array or a structure of arrays, got None")
    if not isinstance(values, (list, tuple, dict)):
        return [values], lambda results: results[0]
    return nested_leaves(values), lambda results: _packed(values, iter(results))


def nested_leaves(structure):
    """The values of a nested structure (lists, tuples, namedtuples, dicts by sorted key), as tf.nest flattens it."""
    if isinstance(structure, dict):
        return [leaf for key in _sorted_keys(structure) for leaf in nested_leaves(structure[key])]
    if isinstance(structure, (list, tuple)):
        return [leaf for item in structure for leaf in nested_leaves(item)]
    return [structure]


def _sorted_keys(mapping):
    """A dict's keys in tf.nest's order; keys that do not sort are InvalidArgumentError (tf.nest's TypeError)."""
    try:
        return sorted(mapping)
    except Exception as error:          # keys of types that do not compare, or a key's own __lt__ failing
        raise InvalidArgumentError(f"A dict's keys must sort, as tf.nest sorts them to flatten a structure: "
                                   f"{described(error)}") from None


def _packed(structure, leaves):
    """``structure`` with its leaves taken from the iterator ``leaves``, in nested_leaves' order."""
    if isinstance(structure, dict):
        values = {key: _packed(structure[key], leaves) for key in _sorted_keys(structure)}
        return {key: values[key] for key in structure}
    if isinstance(structure, (list, tuple)):
        items = [_packed(item, leaves) for item in structure]
        if isinstance(structure, tuple) and hasattr(structure, "_fields"):      # a namedtuple
            return type(structure)(*items)
        return tuple(items) if isinstance(structure, tuple) else items
    return next(leaves)


def _along(targets, output_gradients):
    """The output gradients of a structure of targets, one entry per target in nested_leaves' order:
    ``output_gradients`` has the targets' structure, its entries anything (a Python list too), or
    it flattens, as tf.nest flattens it (TensorFlow's way), to one leaf per target."""
    try:
        return _structured(targets, output_gradients)
    except InvalidArgumentError:
        leaves = nested_leaves(output_gradients)
        if len(leaves) != len(nested_leaves(targets)):
            raise
        return leaves


def _structured(targets, output_gradients):
    if isinstance(targets, dict):
        if not isinstance(output_gradients, dict) or set(output_gradients) != set(targets):
            raise InvalidArgumentError(f"output_gradients must have the targets' keys {_sorted_keys(targets)}, got "
                                       f"{type(output_gradients).__name__}")
        return [entry for key in _sorted_keys(targets) for entry in _structured(targets[key], output_gradients[key])]
    if isinstance(targets, (list, tuple)):
        if not isinstance(output_gradients, (list, tuple)) or len(output_gradients) != len(targets):
            raise InvalidArgumentError(f"output_gradients must be a list with one entry per target "
                                       f"({len(targets)}), got {type(output_gradients).__name__}"
                                       + (f" of {len(output_gradients)}" if isinstance(output_gradients, (list, tuple))
                                          else ""))
        return [entry for target, given in zip(targets, output_gradients) for entry in _structured(target, given)]
    return [output_gradients]


def _output_gradient_list(output_gradients, targets, count):
    """One entry per target (``count``): the caller's gradient, or None (ones); for a structure
    of targets, ``output_gradients`` comes flattened by _along."""
    if not isinstance(targets, (list, tuple, dict)):
        if output_gradients is None:
            return [None]
        # One target: its gradient, also as a list of one (TensorFlow takes both), or in any
        # structure that tf.nest flattens to one array.
        if isinstance(output_gradients, (list, tuple, dict)):
            leaves = nested_leaves(output_gradients)
            if len(leaves) == 1 and hasattr(leaves[0], "shape"):
                return leaves
        if isinstance(output_gradients, (list, tuple)) and len(output_gradients) == 1:
            return list(output_gradients)
        return [output_gradients]
    return [None] * count if output_gradients is None else output_gradients


def _target_gradient(target, gradient, producer):
    """The gradient of one target: ones like it by default; else the caller's, checked, as an
    array of the target's backend; of the target's dtype, as tf.function requires."""
    backend = producer.array.backend
    if gradient is None:
        shape = tuple(target.shape)
        return backend.allocate(lambda: backend.from_host(np.ones(shape, target.dtype)),
                                element_count(shape) * target.dtype.itemsize, f"tensor of shape {list(shape)}")
    if not hasattr(gradient, "dtype"):
        try:
            host = np.asarray(gradient, dtype=target.dtype)
        except (TypeError, ValueError, OverflowError) as error:     # a string, a ragged list
            raise InvalidArgumentError(f"An output gradient {shown(gradient)} cannot be converted to the target's "
                                       f"dtype {target.dtype}: {described(error)}") from None
        gradient = backend.asarray(host)
    elif type(gradient) is not backend.array_type:
        gradient = backend.asarray(gradient)         # a torch tensor, another backend's array: its dtype, NumPy's
    if gradient.dtype != target.dtype:
        raise InvalidArgumentError(f"An output gradient of dtype {gradient.dtype} was given for a target of "
                                   f"dtype {target.dtype}")
    if tuple(gradient.shape) != tuple(target.shape):
        raise InvalidArgumentError(f"An output gradient of shape {list(gradient.shape)} was given for a target "
                                   f"of shape {list(target.shape)}")
    return gradient


def _accumulate(grads, key, gradient, backend):
    """Add ``gradient`` to ``grads[key]`` on ``backend`` (its primitives enter its device)."""
    previous = grads.get(key)
    if previous is None:
        grads[key] = gradient
        return
    shape = (1,) + tuple(previous.shape)
    if previous.dtype not in dtypes.AGGREGATABLE:          # bool: TensorFlow's add is a logical or
        grads[key] = backend.from_host(backend.to_numpy(previous) + backend.to_numpy(gradient))
        return
    # The scatter-add kernel, never ``+``: CuPy's element-wise add flushes float32
    # subnormals. Into a fresh copy: ``previous`` may be the caller's own array.
    total = backend.empty(shape, previous.dtype)
    first = index_vector([0])
    backend.put_rows(total, first, backend.asarray(previous).reshape(shape))
    backend.add_rows(total, first, backend.asarray(gradient).reshape(shape), "deterministic")
    grads[key] = total.reshape(shape[1:])


def _own(gradient, is_callers, backend):
    """A gradient the caller may keep and modify: a writable array, never a view of a
    (closed) gradient array's storage nor the caller's own output gradient."""
    if isinstance(gradient, np.generic):
        return np.array(gradient)
    flags = getattr(gradient, "flags", None)
    if is_callers or (flags is not None and not getattr(flags, "writeable", True)):
        return (backend or backend_of(gradient) or get_backend()).copy(gradient)
    return gradient
