"""Gradients of the TensorArray ops (tensorflow/python/ops/tensor_array_grad.py),
TensorFlow's grad-source rule, a GradientTape that records TensorArray ops, and a
finite-difference checker for TensorArray programs.

The gradient functions follow TensorFlow's one for one: each wraps the forward
handle in a TensorArray, asks it for the gradient array of the current gradient
computation (``.grad(source, flow)``, i.e. TensorArrayGradV3) and runs the adjoint
op on it:

    forward op   flow given to TensorArrayGradV3   op on the gradient array
    ReadV3       the read's flow_in                write(index, grad)
    WriteV3      the write barrier flow            read(index)
    GatherV3     the gather's flow_in              scatter(indices, grad)
    ScatterV3    the write barrier flow            gather(indices)
    ConcatV3     the concat's flow_in              split(grad, lengths=the concat's lengths)
    SplitV3      the write barrier flow            concat()

TensorFlow finds the source of a gradient computation in the name of the incoming
gradient tensor (``_GetGradSource``: "gradients/..." -> "gradients",
"gradients_1/..." -> "gradients_1"). There are no named tensors here, so every
gradient function takes that name as ``grad_name``; the tape passes
"<source>/<op type>_grad".

GradientTape records the TensorArray ops (raw_ops, and the TensorArray class,
which delegates to them) run inside it. ``tape.gradient`` mints a fresh source
per call, replays the recorded ops backwards through their gradient functions,
and closes the gradient arrays it made. Only TensorArray ops are differentiated:
the math a program does between a read and a write is not recorded, so a target
is a value returned by read/gather/stack/concat and a source is a value passed to
write/scatter/unstack/split. Arrays are identified by identity (``id``), the tape
keeping every recorded value alive.
"""

import collections
import contextlib
import functools
import sys
import threading

import numpy as np

from . import raw_ops
from .errors import FailedPreconditionError, InvalidArgumentError
from .registry import Handle, registry
from .tensor_array import TensorArray

__all__ = [
    "NOT_DIFFERENTIABLE", "GRADIENTS", "Op", "grad_source", "gradient_function",
    "read_grad", "write_grad", "gather_grad", "scatter_grad", "concat_grad", "split_grad",
    "GradientTape", "numeric_gradients", "check_gradients", "GradientCheckError", "GradientCheck",
]


# -- _GetGradSource ---------------------------------------------------------------------------

def grad_source(name):
    """TensorFlow's ``_GetGradSource``: the name of the gradient computation that a
    gradient tensor or op named ``name`` belongs to. ``name`` is a string or an object
    with a ``.name``. Splits on "/", keeps the tokens up to the last one that starts
    with "gradients". "gradients_1/foo" -> "gradients_1"; "outer/gradients/foo" ->
    "outer/gradients"; a name with no such token raises InvalidArgumentError (a
    ValueError, as TensorFlow's)."""
    return _grad_source(getattr(name, "name", name))


@functools.lru_cache(maxsize=1024)
def _grad_source(name):
    name_tokens = name.split("/")
    grad_pos = [i for i, x in enumerate(name_tokens) if x.startswith("gradients")]
    if not grad_pos:
        raise InvalidArgumentError(
            "Expected op/tensor name to start with gradients (excluding scope)"
            f", got: {name}. This means that a tf.gradients op with "
            "this op in its dependency path has a custom name that does not start "
            "with 'gradients'. Please make sure all calls to tf.gradients that "
            "have non-empty `name` arguments use names that start with "
            "'gradients'.")
    return "/".join(name_tokens[:grad_pos[-1] + 1])


# -- recorded ops -----------------------------------------------------------------------------

# The dtype attribute's name per op type (TensorFlow's: reads have "dtype", writes "T").
_DTYPE_ATTR = {
    "TensorArrayReadV3": "dtype", "TensorArrayGatherV3": "dtype", "TensorArrayConcatV3": "dtype",
    "TensorArrayWriteV3": "T", "TensorArrayScatterV3": "T", "TensorArraySplitV3": "T",
}
# Ops whose first output is a value that can be a target, and ops whose ``value``
# input (at this position) can be a source.
_READS = frozenset(("TensorArrayReadV3", "TensorArrayGatherV3", "TensorArrayConcatV3"))
_WRITE_VALUE = {"TensorArrayWriteV3": 2, "TensorArrayScatterV3": 2, "TensorArraySplitV3": 1}


class Op:
    """One op as a gradient function sees it (TensorFlow's ``op``): ``type``, ``inputs``
    and ``outputs`` in the V3 op's order, attributes through ``get_attr``. Inputs hold
    host indices and lengths as the op converted them (a range for stack)."""

    __slots__ = ("type", "inputs", "outputs", "attrs", "array")

    def __init__(self, type, inputs, outputs, attrs=None):
        inputs = tuple(inputs)
        if inputs and type in _DTYPE_ATTR and not isinstance(inputs[0], Handle):
            inputs = (Handle(registry.lookup(inputs[0])),) + inputs[1:]   # a name handle
        self.type = type
        self.inputs = inputs
        self.outputs = tuple(outputs)
        self.attrs = dict(attrs or {})
        #: The TensorArray resource (registry storage) the op ran on.
        self.array = registry.lookup(inputs[0]) if inputs and type in _DTYPE_ATTR else None

    def get_attr(self, name):
        try:
            return self.attrs[name]
        except KeyError:
            raise InvalidArgumentError(f"Operation {self.type} has no attr named '{name}'.") from None

    def __repr__(self):
        return f"<Op {self.type} on {self.inputs[0].name!r}>"


# -- the gradient functions -------------------------------------------------------------------

def _grad_array(handle, dtype, flow, grad_name):
    # As TensorFlow: wrap the forward handle, then TensorArrayGradV3 with ``flow``.
    return (TensorArray(dtype=dtype, handle=handle, flow=flow, colocate_with_first_write_call=False)
            .grad(source=grad_source(grad_name), flow=flow))


def _write_barrier(flow):
    # TensorFlow's identity(flow) with a control dependency on the forward op's
    # flow_out, so the gradient array is made after the forward write ran (and sees
    # the final size of a dynamic array). Ops here run in program order and a tape
    # differentiates after the whole forward pass: the identity is all that is left.
    return flow


def read_grad(op, grad, grad_name="gradients"):
    """TensorArrayReadV3: write ``grad`` at the read's index of the gradient array
    (reads of one slot add up there). Returns [None, None, flow]."""
    handle, index, flow = op.inputs
    g = _grad_array(handle, op.get_attr("dtype"), flow, grad_name)
    w_g = g.write(index, grad)
    return [None, None, w_g.flow]


def write_grad(op, flow, grad_name="gradients"):
    """TensorArrayWriteV3: the gradient of the written value is the gradient array's
    element at that index (zeros when nothing was read there). ``flow`` is the
    incoming flow gradient. Returns [None, None, grad, flow]."""
    handle, index = op.inputs[0], op.inputs[1]
    flow = _write_barrier(flow)
    g = _grad_array(handle, op.get_attr("T"), flow, grad_name)
    grad = g.read(index)
    return [None, None, grad, flow]


def gather_grad(op, grad, grad_name="gradients"):
    """TensorArrayGatherV3 (and stack): scatter ``grad``'s rows to the gathered
    indices of the gradient array (repeated indices add). Returns [None, None, flow]."""
    handle, indices, flow = op.inputs
    g = _grad_array(handle, op.get_attr("dtype"), flow, grad_name)
    u_g = g.scatter(indices, grad)
    return [None, None, u_g.flow]


def scatter_grad(op, flow, grad_name="gradients"):
    """TensorArrayScatterV3 (and unstack): gather the scattered indices of the
    gradient array. Returns [None, None, grad, flow]."""
    handle, indices = op.inputs[0], op.inputs[1]
    flow = _write_barrier(flow)
    g = _grad_array(handle, op.get_attr("T"), flow, grad_name)
    grad = g.gather(indices)
    return [None, None, grad, flow]


def concat_grad(op, grad, unused_lengths_grad=None, grad_name="gradients"):
    """TensorArrayConcatV3: split ``grad`` into the gradient array with the lengths
    the forward concat returned. Returns [None, flow]."""
    handle, flow = op.inputs
    lengths = op.outputs[1]
    g = _grad_array(handle, op.get_attr("dtype"), flow, grad_name)
    u_g = g.split(grad, lengths=lengths)
    return [None, u_g.flow]


def split_grad(op, flow, grad_name="gradients"):
    """TensorArraySplitV3: concat the gradient array (its marked size: the forward's
    number of split pieces). Returns [None, grad, None, flow]."""
    handle = op.inputs[0]
    flow = _write_barrier(flow)
    g = _grad_array(handle, op.get_attr("T"), flow, grad_name)
    grad = g.concat()
    return [None, grad, None, flow]


class _NotDifferentiable:
    def __repr__(self):
        return "NOT_DIFFERENTIABLE"


#: Marks ops that have no gradient (TensorFlow's ops.NotDifferentiable).
NOT_DIFFERENTIABLE = _NotDifferentiable()

#: Op type -> gradient function, or NOT_DIFFERENTIABLE (tensor_array_grad.py's registrations).
GRADIENTS = {
    "TensorArrayV3": NOT_DIFFERENTIABLE,
    "TensorArrayGradV3": NOT_DIFFERENTIABLE,
    "TensorArrayGradWithShape": NOT_DIFFERENTIABLE,
    "TensorArraySizeV3": NOT_DIFFERENTIABLE,
    "TensorArrayCloseV3": NOT_DIFFERENTIABLE,
    "TensorArrayReadV3": read_grad,
    "TensorArrayWriteV3": write_grad,
    "TensorArrayGatherV3": gather_grad,
    "TensorArrayScatterV3": scatter_grad,
    "TensorArrayConcatV3": concat_grad,
    "TensorArraySplitV3": split_grad,
}


def gradient_function(op_type):
    """The gradient function of ``op_type``, or None for a non-differentiable op;
    LookupError (TensorFlow's) for an op with no registration."""
    fn = GRADIENTS.get(op_type)
    if fn is None:
        raise LookupError(f"No gradient defined for operation of type '{op_type}'")
    return None if fn is NOT_DIFFERENTIABLE else fn


# -- recording --------------------------------------------------------------------------------

_local = threading.local()          # .tapes: tapes recording in this thread; .paused: depth
_recording_lock = threading.Lock()
_recording_count = 0                # tapes recording in any thread


def _record(op_type, inputs, outputs, dtype):
    """raw_ops' hook while some tape records: add the op to this thread's tapes."""
    tapes = getattr(_local, "tapes", None)
    if not tapes or getattr(_local, "paused", 0):
        return
    op = Op(op_type, inputs, outputs, {_DTYPE_ATTR[op_type]: dtype})
    for tape in tapes:
        tape._add(op)


def _start(tape):
    global _recording_count
    tapes = getattr(_local, "tapes", None)
    if tapes is None:
        tapes = _local.tapes = []
    tapes.append(tape)
    with _recording_lock:
        _recording_count += 1
        raw_ops._record = _record


def _stop(tape):
    global _recording_count
    _local.tapes.remove(tape)
    with _recording_lock:
        _recording_count -= 1
        if not _recording_count:
            raw_ops._record = None


@contextlib.contextmanager
def _paused():
    """No tape of this thread records inside (the gradient computation's own ops)."""
    _local.paused = getattr(_local, "paused", 0) + 1
    try:
        yield
    finally:
        _local.paused -= 1


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
    FailedPreconditionError, TensorFlow's RuntimeError there), any number of times on
    a persistent one. Each call is its own gradient computation with its own source
    ("gradients", then "gradients_1", ...: ``sources_used`` lists them), hence its own
    gradient arrays: calling twice gives the same result twice, never a double count.
    The gradient arrays are closed before ``gradient`` returns; the forward arrays stay
    the caller's (their size is locked, as TensorArrayGradV3 locks it).
    """

    def __init__(self, persistent=False):
        self._persistent = bool(persistent)
        self._ops = []
        self._producer = {}            # id(value read out) -> the op that returned it
        self._recording = False
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
        if self._recording:
            raise FailedPreconditionError("This GradientTape is already recording.")
        if self._used and not self._persistent:
            raise FailedPreconditionError(_NON_PERSISTENT)
        self._recording = True
        _start(self)
        return self

    def __exit__(self, *exc_info):
        self._recording = False
        _stop(self)
        return False

    @contextlib.contextmanager
    def stop_recording(self):
        """Ops inside are not recorded (by any tape of this thread)."""
        with _paused():
            yield

    def reset(self):
        """Forget everything recorded so far."""
        self._ops, self._producer = [], {}

    def _add(self, op):
        if self._ops is None:           # a non-persistent tape that has computed its gradient
            return
        self._ops.append(op)
        if op.type in _READS:
            self._producer[id(op.outputs[0])] = op

    # -- gradient --------------------------------------------------------------------------
    def gradient(self, targets, sources, output_gradients=None):
        """d(targets)/d(sources) through the recorded TensorArray ops.

        targets: a value returned by read/gather/stack/concat inside the tape, or a
        list/tuple of them. sources: a value passed to write/scatter/unstack/split inside
        the tape, or a list/tuple of them. output_gradients: the gradients of the
        targets (same structure; None or a missing entry means ones like the target).
        Returns one gradient per source, in the sources' structure: an array of the
        backend of the array it went through, zeros where a source is not connected
        to any target (never None). A value written at several indices gets the sum.
        """
        if self._used and not self._persistent:
            raise FailedPreconditionError(_NON_PERSISTENT)
        self._used = True
        target_list, _ = _as_list(targets, "targets")
        source_list, rebuild = _as_list(sources, "sources")
        for what, values, role in (("targets", target_list, "returned by read/gather/stack/concat"),
                                   ("sources", source_list, "passed as the value of write/scatter/unstack/split")):
            for position, value in enumerate(values):
                if not (hasattr(value, "shape") and hasattr(value, "dtype")):
                    raise InvalidArgumentError(
                        f"{what}[{position}] is a {type(value).__name__}, not an array: {what} are arrays "
                        f"{role} inside the tape")
        given = _output_gradient_list(output_gradients, targets)
        ops = self._ops
        try:
            with _paused():
                grads = self._backward(ops, target_list, source_list, given)
        finally:
            if not self._persistent:
                self._ops, self._producer = None, None
        return rebuild(grads)

    def _mint_source(self, arrays):
        """A source name no gradient computation used yet on any of ``arrays``."""
        while True:
            source = "gradients" if self._calls == 0 else f"gradients_{self._calls}"
            self._calls += 1
            if not any(source in array.grads for array in arrays):
                self.sources_used.append(source)
                return source

    def _backward(self, ops, targets, sources, given):
        # Which arrays and values depend on the sources (TensorFlow differentiates only
        # the ops between xs and ys): a write of a reached value reaches its array, a
        # later read of a reached array reaches its output.
        reached = {id(source) for source in sources}
        arrays = {}                                      # id(array) -> array, reached ones
        backend_of = {}                                  # id(value written) -> the array's backend
        for op in ops:
            if op.type in _READS:
                if id(op.array) in arrays:
                    reached.add(id(op.outputs[0]))
            elif id(op.inputs[_WRITE_VALUE[op.type]]) in reached:
                array = op.array
                arrays[id(array)] = array
                backend_of.setdefault(id(op.inputs[_WRITE_VALUE[op.type]]), array.backend)

        user_gradients = set()
        value_grads = {}                                 # id(value) -> its gradient so far
        for target, gradient in zip(targets, given):
            producer = self._producer.get(id(target))
            gradient = _target_gradient(target, gradient, producer)
            user_gradients.add(id(gradient))
            _accumulate(value_grads, id(target), gradient)

        source = self._mint_source(arrays.values())
        # The name TensorFlow's incoming gradient tensor would have: grad_source() finds the source in it.
        grad_names = {op_type: f"{source}/{op_type}_grad" for op_type in _DTYPE_ATTR}
        array_flow = {}                                  # id(array) -> incoming flow gradient
        try:
            for op in reversed(ops):
                array = op.array
                if id(array) not in arrays:
                    continue
                fn = GRADIENTS[op.type]
                grad_name = grad_names[op.type]
                if op.type in _READS:
                    output = op.outputs[0]
                    gradient = value_grads.get(id(output))
                    if gradient is None or self._producer.get(id(output)) is not op:
                        continue
                    if op.type == "TensorArrayConcatV3":
                        input_grads = fn(op, gradient, None, grad_name=grad_name)
                    else:
                        input_grads = fn(op, gradient, grad_name=grad_name)
                    array_flow[id(array)] = input_grads[-1]
                else:
                    value = op.inputs[_WRITE_VALUE[op.type]]
                    flow = array_flow.get(id(array))
                    if flow is None or id(value) not in reached or _writes_nothing(op):
                        continue                         # nothing read after it: no gradient
                    input_grads = fn(op, flow, grad_name=grad_name)
                    _accumulate(value_grads, id(value), input_grads[_WRITE_VALUE[op.type]])
                    array_flow[id(array)] = input_grads[-1]
        finally:
            for array in arrays.values():                # release this computation's grad arrays
                grad_handle = array.grads.get(source)
                if grad_handle is not None:
                    raw_ops.TensorArrayCloseV3(grad_handle)

        results = []
        for value in sources:
            gradient = value_grads.get(id(value))
            if gradient is None:
                results.append(_zeros_like(value, backend_of.get(id(value))))
            else:
                results.append(_own(gradient, id(gradient) in user_gradients))
        return results


def _writes_nothing(op):
    """A Scatter of no indices or a Split into no pieces: its gradient is empty, and
    asking the gradient array for it (a Gather of [] / a Concat of nothing) would
    need a fully defined element shape that a forward array may not have."""
    if op.type == "TensorArrayScatterV3":
        return len(op.inputs[1]) == 0
    return op.type == "TensorArraySplitV3" and len(op.inputs[2]) == 0


def _as_list(values, what):
    """(list, rebuild): a single value or a list/tuple, and how to give results back alike."""
    if isinstance(values, list):
        return values, list
    if isinstance(values, tuple):
        return list(values), tuple
    if values is None:
        raise InvalidArgumentError(f"{what} must be an array or a list of arrays, got None")
    return [values], lambda results: results[0]


def _output_gradient_list(output_gradients, targets):
    """One entry per target: the caller's gradient, or None (ones)."""
    count = 1 if not isinstance(targets, (list, tuple)) else len(targets)
    if output_gradients is None:
        return [None] * count
    if not isinstance(targets, (list, tuple)):
        return [output_gradients]
    if not isinstance(output_gradients, (list, tuple)) or len(output_gradients) != count:
        raise InvalidArgumentError(f"output_gradients must be a list with one entry per target ({count}), got "
                                   f"{type(output_gradients).__name__}"
                                   + (f" of {len(output_gradients)}" if isinstance(output_gradients, (list, tuple))
                                      else ""))
    return list(output_gradients)


def _target_gradient(target, gradient, producer):
    """The gradient of one target: ones like it by default; else the caller's, checked."""
    backend = producer.array.backend if producer is not None else None
    if gradient is None:
        return _ones_like(target, backend)
    if not hasattr(gradient, "dtype"):
        gradient = np.asarray(gradient, dtype=target.dtype)
        if backend is not None:
            gradient = backend.asarray(gradient)
    if gradient.dtype != target.dtype:
        raise InvalidArgumentError(f"An output gradient of dtype {gradient.dtype} was given for a target of "
                                   f"dtype {target.dtype}")
    if tuple(gradient.shape) != tuple(target.shape):
        raise InvalidArgumentError(f"An output gradient of shape {list(gradient.shape)} was given for a target "
                                   f"of shape {list(target.shape)}")
    return gradient


def _accumulate(grads, key, gradient):
    previous = grads.get(key)
    grads[key] = gradient if previous is None else previous + gradient


def _array_module(value):
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(value, cupy.ndarray):
        return cupy
    return np


def _zeros_like(value, backend):
    if backend is not None:
        return backend.zeros(tuple(value.shape), value.dtype)
    return _array_module(value).zeros(tuple(value.shape), value.dtype)


def _ones_like(value, backend):
    ones = _zeros_like(value, backend)
    ones[...] = 1
    return ones


def _own(gradient, is_callers):
    """A gradient the caller may keep and modify: a writable array, never a view of a
    (closed) gradient array's storage nor the caller's own output gradient."""
    if isinstance(gradient, np.generic):
        return np.array(gradient)
    flags = getattr(gradient, "flags", None)
    if is_callers or (flags is not None and not getattr(flags, "writeable", True)):
        return gradient.copy()
    return gradient


# -- finite differences ------------------------------------------------------------------------

_DEFAULT_RTOL = {np.dtype("float64"): 1e-6, np.dtype("float32"): 1e-3, np.dtype("float16"): 5e-2}

GradientCheck = collections.namedtuple("GradientCheck", ["max_relative_error", "errors", "analytic", "numeric"])
GradientCheck.__doc__ = """check_gradients(..., details=True): the worst relative error, the
relative error per input, and the analytic and numeric gradients (NumPy float64)."""


class GradientCheckError(AssertionError):
    """Analytic and numeric gradients differ by more than the tolerance."""


def _host(value):
    return np.asarray(value.get() if _array_module(value) is not np else value)


def _like(host, original):
    """``host`` (NumPy) as an array of the kind ``original`` is (NumPy or CuPy)."""
    xp = _array_module(original)
    return xp.asarray(host) if xp is not np else host


def _check_real(inputs):
    for position, value in enumerate(inputs):
        dtype = np.dtype(getattr(value, "dtype", np.float64))
        if dtype.kind != "f":
            raise InvalidArgumentError(f"Finite differences need real floating inputs; input {position} has "
                                       f"dtype {dtype}")


def numeric_gradients(f, inputs, delta=None):
    """Central differences of the scalar function ``f(*inputs)`` -> one NumPy float64
    array per input. Each evaluation gets a fresh perturbed copy of the input it varies
    (of the input's kind: NumPy or CuPy). ``delta`` defaults to cbrt(machine epsilon)
    of the input's dtype, times max(1, |x|); the step actually taken (after rounding
    to the dtype) is what the difference is divided by."""
    inputs = list(inputs)
    _check_real(inputs)
    results = []
    for position, original in enumerate(inputs):
        host = _host(original)
        dtype = host.dtype
        step = float(np.finfo(dtype).eps) ** (1.0 / 3.0) if delta is None else float(delta)
        gradient = np.zeros(host.shape, np.float64)
        flat = host.reshape(-1)
        for element in range(flat.size):
            h = step * max(1.0, abs(float(flat[element])))
            plus, minus = host.copy(), host.copy()
            plus.reshape(-1)[element] = flat[element] + dtype.type(h)
            minus.reshape(-1)[element] = flat[element] - dtype.type(h)
            taken = float(plus.reshape(-1)[element]) - float(minus.reshape(-1)[element])
            args = list(inputs)
            args[position] = _like(plus, original)
            f_plus = float(f(*args))
            args[position] = _like(minus, original)
            f_minus = float(f(*args))
            gradient.reshape(-1)[element] = (f_plus - f_minus) / taken
        results.append(gradient)
    return results


def _close_recorded(tape):
    for op in tape.operations:
        array = op.array
        if not array.closed:
            raw_ops.TensorArrayCloseV3(op.inputs[0])


def check_gradients(fn, inputs, output_gradients=None, delta=None, rtol=None, seed=0,
                    raise_on_mismatch=True, details=False):
    """Compare the tape's gradients of a TensorArray program with central differences.

    ``fn(*inputs)`` builds its TensorArrays inside, passes each input as the value of
    a write/scatter/unstack/split, and returns what it read out (read/gather/stack/
    concat results: one array or a list). The checker differentiates the scalar
    ``sum_k sum(w_k * output_k)``, with ``w_k`` = ``output_gradients`` or seeded random
    normals, once under a GradientTape and once by central differences (one fresh call
    of ``fn`` per evaluation, so write-once and clear-after-read never get in the way).
    The arrays ``fn`` used are closed after each call. Inputs: real floating arrays
    (NumPy or CuPy).

    The relative error of an input is max|analytic - numeric| / max(max|analytic|,
    max|numeric|) (0 when both vanish). Returns the largest over the inputs (or, with
    ``details=True``, a GradientCheck); raises GradientCheckError when it exceeds
    ``rtol`` (default by dtype: float64 1e-6, float32 1e-3, float16 5e-2) unless
    ``raise_on_mismatch`` is false.
    """
    single = not isinstance(inputs, (list, tuple))
    inputs = [inputs] if single else list(inputs)
    _check_real(inputs)

    with GradientTape() as tape:
        outputs = fn(*inputs)
    output_list = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if output_gradients is None:
        rng = np.random.default_rng(seed)
        weights = [_like(rng.standard_normal(tuple(out.shape)).astype(out.dtype), out) for out in output_list]
    else:
        weights = list(output_gradients) if isinstance(output_gradients, (list, tuple)) else [output_gradients]
    host_weights = [_host(w).astype(np.float64) for w in weights]
    try:
        analytic = tape.gradient(output_list, inputs, output_gradients=weights)
    finally:
        _close_recorded(tape)
    analytic = [_host(g).astype(np.float64) for g in analytic]

    def loss(*args):
        with GradientTape() as evaluation:
            outs = fn(*args)
        try:
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return sum(float((_host(o).astype(np.float64) * w).sum()) for o, w in zip(outs, host_weights))
        finally:
            _close_recorded(evaluation)

    numeric = numeric_gradients(loss, inputs, delta)
    errors = []
    worst = None
    for position, (a, n) in enumerate(zip(analytic, numeric)):
        scale = max(float(np.abs(a).max(initial=0.0)), float(np.abs(n).max(initial=0.0)))
        diff = np.abs(a - n)
        error = float(diff.max(initial=0.0)) / scale if scale > 0 else 0.0
        errors.append(error)
        if worst is None or error > errors[worst]:
            worst = position
    max_error = max(errors, default=0.0)
    if rtol is None:
        rtol = max((_DEFAULT_RTOL.get(np.dtype(x.dtype), 1e-3) for x in inputs), default=1e-6)
    if raise_on_mismatch and max_error > rtol:
        a, n = analytic[worst], numeric[worst]
        element = np.unravel_index(int(np.abs(a - n).argmax()), a.shape) if a.size else ()
        raise GradientCheckError(
            f"gradient check failed: relative error {max_error:.3g} > rtol {rtol:g} for input {worst}; "
            f"worst element {tuple(int(i) for i in element)}: analytic {float(a[element]):.9g}, numeric "
            f"{float(n[element]):.9g}")
    if details:
        return GradientCheck(max_error, errors, analytic, numeric)
    return max_error
