"""TensorFlow's flow mechanism, in torch autograd, at every order of differentiation.

Every array carries a 0-d float flow tensor: what orders the gradient ops, never a value.
All torch TensorArrays of one array share an ``ArrayState``: its current flow, and the
tracked writes (write/scatter/unstack/split of a value that requires grad) that are not
yet an autograd node. Writes create no node: the first read (read/gather/stack/concat)
after them turns the whole run into one ``_WriteRun`` node, (flow, *values) -> flow,
and the read is a ``_Reader`` node, flow -> value. Autograd runs a node's backward
only after every node that used its outputs, so a read's backward (writing its output
gradient into the gradient array: TF's read_grad, gather_grad, concat_grad) runs before
the backward of the writes it read from (reading their values' gradient back: write_grad,
scatter_grad, split_grad), exactly as TensorFlow orders them through flows. A run's
backward is one gather from the gradient array where its writes allow it: the same rule,
batched.

The gradient array of an array is TensorArrayGradV3(handle, flow, source), made once
per backward pass (per autograd graph task), whose source is minted for that pass: two
passes, or two losses, never share an accumulator. Each rule runs as ops of this module
on the gradient array, so with create_graph=True they are themselves nodes, and the
next pass differentiates them: an op on the gradient array for source S accumulates in
the array's gradient array for source "S/S2" (TensorFlow refuses a gradient array of a
gradient array; the forward array's own gradient array for the longer source has the
same slots and shapes). A pass's gradient arrays are closed when its graph task ends,
whatever ends it: a callback autograd runs on success, or the same object's finalizer
when the task is freed after an error or an interrupt. Under compiled autograd the nodes run
as they are (graph breaks), and a read's flow gradient is a tensor, which its sums need.
"""

import itertools
import os
import re
import secrets
import sys
import threading
import weakref
from threading import get_ident as _get_ident

import numpy as np
import torch
from torch.autograd import Function

from .. import raw_ops
from ..registry import registry
from ..errors import FailedPreconditionError, InvalidArgumentError, OpError, UnimplementedError, described, shown
from ..host import host_ints
from ..shapes import except_first
from .crossing import cuda_scope, joined, to_torch, torch_has_cuda, unsupported_transform
from .tf2 import is_storage

__all__ = ["ArrayState", "WRITE", "SCATTER", "SPLIT", "READ", "GATHER", "CONCAT", "EVERY", "ZERO_FLOW",
           "materialize", "read_node", "read_value", "record_write", "check_not_busy", "tracked", "open_passes",
           "register_wrapper", "check_current"]

#: The flow of an array no tracked write has reached: shared, never handed out (``flow`` gives a copy).
ZERO_FLOW = torch.zeros((), dtype=torch.float32)

WRITE, SCATTER, SPLIT = 0, 1, 2          # a tracked write's kind
READ, GATHER, CONCAT = 0, 1, 2           # a read's kind (stack is a gather of every slot)
EVERY = object()                         # a stack's gather indices (None is a user's: refused)

_wrap = None                             # (library TensorArray, ArrayState) -> torch TensorArray


def register_wrapper(wrap):
    """tensor_array.py's constructor of a torch TensorArray from a library one and a state:
    the rules run as that class's ops."""
    global _wrap
    _wrap = wrap


class ArrayState:
    """What the torch TensorArrays of one array share.

    ``root`` and ``path``: the forward array and the sources of the passes this array is
    the gradient array of ("" for a forward array); its own gradient array for a pass of
    source S is TensorArrayGradV3(root, ..., path + S). ``internal``: a gradient array the
    rules use (no superseded-read check: its writes accumulate by design)."""

    __slots__ = ("array", "flow", "pending", "kinds", "wheres", "versions", "count", "written_by", "internal",
                 "handed", "busy", "__weakref__")

    def __init__(self, root, path, library_flow, flow, internal=False):
        # What the nodes keep (never the state: its flow holds the nodes, a cycle gc cannot see).
        self.array = (root, path, library_flow)
        self.flow = flow
        self.internal = internal
        # The tracked writes not yet in a node, as three parallel lists (no object per
        # write: thousands of them, kept until a read, would wake the cyclic collector).
        self.pending = []          # their values
        self.kinds = []            # WRITE, SCATTER or SPLIT
        self.wheres = []           # index, indices (an int64 vector) or lengths
        self.versions = []         # their torch version counters when written (in-place changes since)
        self.count = 0             # tracked writes so far
        self.written_by = {}       # slot -> ``count`` just after the tracked write that wrote it
        # The flow last handed out under no_grad past pending writes, and its TensorArray's count.
        self.handed = None
        self.busy = None            # the thread whose record_write or materialize is changing the lists


def check_current(ta, state, n, slots, method):
    """InvalidArgumentError when a read through a TensorArray that a later tracked write
    superseded would read a value that write wrote: its gradient would be lost."""
    written_by = state.written_by
    if slots is None:                        # stack, concat: every slot (listed whole: other threads write)
        with state_lock:
            slots = list(written_by)
    for slot in slots:
        if written_by.get(slot, 0) > n:
            raise InvalidArgumentError(
                f"TensorArray {ta.handle.name}: {method} through a TensorArray that a later write/scatter/unstack/"
                f"split superseded reads slot {slot}, which that op wrote: the gradient of its value would be lost. "
                f"Use the TensorArray the write returned (ta = ta.write(...)), or read under torch.no_grad()")


# -- backward passes and their sources ---------------------------------------------------------

# In every pass's source: a gradient array a user makes with a source of their own (ta.grad)
# is never one a pass adds into, whatever name they choose.
_SOURCE_TAG = secrets.token_hex(4)


class _Pass:
    __slots__ = ("source", "grads", "rows", "compiled", "flows", "end")

    def __init__(self, number, end):
        self.source = f"gradients_torch_{_SOURCE_TAG}_{number}"
        self.end = end                   # a weak reference to the pass's _PassEnd
        # (root handle, path) -> (gradient array handle, its library TensorArray); None while
        # TensorArrayGradV3 runs, so the pass's end closes whatever an interrupted one made.
        self.grads = {}
        self.rows = {}                   # (root handle, path) -> {slot: row read} (_accumulated_grads)
        # Compiled autograd sums the gradients of a tensor used twice (a flow that two reads
        # follow) with torch.add, which takes no None: there every gradient must be a tensor.
        self.compiled = _in_compiled_autograd()
        # Whether a read's backward returns the flow of its writes into the gradient array
        # (grad mode is the pass's create_graph, the same in each of its nodes).
        self.flows = self.compiled or torch.is_grad_enabled()


def _in_compiled_autograd():
    """Whether the pass runs as a compiled autograd graph (torch._dynamo.compiled_autograd),
    asked once per pass; never imports Dynamo."""
    module = sys.modules.get("torch._dynamo.compiled_autograd")
    return module is not None and getattr(module, "in_compiled_autograd_region", False) is True


_passes = {}                             # autograd graph task id -> _Pass
# Reentrant: a _PassEnd's finaliser takes it, and the cycle collector may run one at any
# allocation, also in a thread that holds it (each section below survives that).
_passes_lock = threading.RLock()
_pass_numbers = itertools.count()
# What the torch TensorArrays of one array share between threads: a tracked write's entries in
# its state's lists, and a read's turning them into a node (two threads reading at once must not
# make two nodes of one run). Reentrant: a signal handler, or a finaliser the collector runs
# (which may also take _passes_lock), can write into an array while its thread holds it.
state_lock = threading.RLock()


class _PassEnd:
    """Queued on autograd's engine: called when the pass succeeds; finalised when the
    engine frees the graph task, after success, an error or an interrupt alike. An
    interrupt landing in the finaliser is lost: the next pass ends what it left open."""

    __slots__ = ("task", "__weakref__")

    def __init__(self, task):
        self.task = task

    def __call__(self):
        _end_pass(self.task)

    def __del__(self):
        try:
            _end_pass(self.task)
        except Exception:       # at interpreter exit the modules it needs may be gone
            pass


def open_passes():
    """How many backward passes still hold gradient arrays (0 between passes)."""
    _end_abandoned()
    with _passes_lock:
        return len(_passes)


def _current_pass():
    task = torch._C._current_graph_task_id()
    with _passes_lock:
        backward_pass = _passes.get(task)
    return _open_pass(task) if backward_pass is None else backward_pass


def _open_pass(task):
    _end_abandoned()
    with _passes_lock:
        backward_pass = _passes.get(task)
        if backward_pass is not None:       # opened by another of its nodes meanwhile
            return backward_pass
        end = _PassEnd(task)
        backward_pass = _passes[task] = _Pass(next(_pass_numbers), weakref.ref(end))
    torch.autograd.Variable._execution_engine.queue_callback(end)
    return backward_pass


def _after_fork_in_child():
    """A child process has its locks anew (another thread may have held one at the fork), and
    the passes of the parent's other threads, which do not exist here, are abandoned: the next
    pass, or open_passes(), ends them and closes their gradient arrays."""
    global _passes_lock, state_lock
    _passes_lock, state_lock = threading.RLock(), threading.RLock()
    running = torch._C._current_graph_task_id()
    for task, backward_pass in list(_passes.items()):
        if task != running:
            backward_pass.end = _abandoned


def _abandoned():
    return None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _end_abandoned():
    """Ends the passes whose _PassEnd is gone while they are open: its finaliser was cut short
    (CPython clears a weak reference once the finaliser has run, whatever it raised)."""
    with _passes_lock:      # the keys first: a finaliser run by an allocation below may end a pass
        passes = [(task, _passes.get(task)) for task in list(_passes)]
    for task, backward_pass in passes:
        # Asked outside the lock: the reference this makes may be the last, its finaliser then ends the pass.
        if backward_pass is not None and backward_pass.end() is None:
            _end_pass(task)


def _end_pass(task):
    with _passes_lock:
        backward_pass = _passes.get(task)
    if backward_pass is not None:
        # Closed and out of the forward array's grads: each pass has a fresh source, so a
        # graph run backward many times (retain_graph) would otherwise pile them up. The pass
        # goes only once they are: should an interrupt stop this, the finalizer ends it again.
        source = backward_pass.source
        registry.end_gradients([(registry.lookup(root), path + source) for root, path in backward_pass.grads])
        with _passes_lock:
            _passes.pop(task, None)


def _grad_array(ctx, backward_pass, flow, create):
    """The torch TensorArray of the running pass's gradient array of the array a node ran
    on, whose reads follow ``flow``; None when it does not exist and ``create`` is false
    (no read of the array has written a gradient in this pass)."""
    root, path, library_flow = ctx.array
    key = (root, path)
    made = backward_pass.grads.get(key)
    if made is None:
        if not create:
            return None
        backward_pass.grads[key] = None
        with cuda_scope(ctx.backend):
            handle, _ = raw_ops.TensorArrayGradV3(root, library_flow, path + backward_pass.source)
        backward_pass.grads[key] = made = (handle, None)
    handle, library = made
    state = ArrayState(root, f"{path}{backward_pass.source}/", library_flow, flow, internal=True)
    gradient = _wrap(ctx.ta, handle, state, library)
    if library is None:                 # its library object, for the pass's next rule
        backward_pass.grads[key] = (handle, gradient._ta)
    return gradient


# Whether the running pass keeps its graph (retain_graph, create_graph); a torch without the
# query keeps the nodes' arrays, as if it did.
_keep_graph = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", lambda: True)


def _failing(describe):
    """Run a node's backward; a failure ends (and cleans up) its pass at once. ``describe(ctx)``
    names the node's forward op, for the error (asked only then). A pass that frees its graph
    frees what the node holds, as torch frees saved tensors: the arrays and the values written."""
    def decorate(node):
        def backward(ctx, *grads):
            if ctx.released is not None:
                raise FailedPreconditionError(
                    f"Trying to backward through the graph a second time: TensorArray {ctx.released}'s node "
                    f"gave its arrays and values back after the first backward pass, as torch frees saved "
                    f"tensors. Specify retain_graph=True if you need to backward through the graph a second time")
            try:
                result = node(ctx, *grads)
            except BaseException as error:
                _end_pass(torch._C._current_graph_task_id())
                if isinstance(error, OpError):
                    _name_the_users_op(error, ctx, describe)
                elif isinstance(error, Exception) and _compiled_autograd_on():
                    raise _compiled_refusal(ctx, describe, error) from error
                raise
            # Not under compiled autograd, which may run it again; nor for a mode tf2 list, whose
            # values a later op moves through the nodes that wrote them.
            if not _keep_graph() and not _compiled_autograd_on() and not is_storage(ctx.array[0]):
                ctx.released = ctx.array[0].name
                ctx.array = ctx.ta = ctx.writes = None
            return result
        return backward
    return decorate


# -- what a failing node tells the user (error paths only) --------------------------------------

# A gradient array's name: its forward array's, "@", the sources of the passes it serves, which
# only the bridge knows. Where a message names one, it names the forward array's gradient array.
_GRADIENT_NAME = re.compile(rf"@((?:gradients_torch_{_SOURCE_TAG}_\d+/?)+)")
_IN_BACKWARD = " (in the backward pass of "


def _gradient_array(match):
    order = match.group(1).count("gradients_torch_")
    return "'s gradient array" if order == 1 else f"'s gradient array of order {order}"


def _name_the_users_op(error, ctx, describe):
    """A library error of a node's backward, told in the user's terms: the gradient arrays it names
    as their forward array's, and the forward op whose gradient failed. TensorFlow's text stays."""
    text = error.message
    if _IN_BACKWARD in text:                 # said already, by the node that raised it first
        return
    text = f"{_GRADIENT_NAME.sub(_gradient_array, text)}{_IN_BACKWARD}{_op_of(ctx, describe)})"
    error.message = text
    error.args = (text,)


def _read_op(ctx):
    """A read node's forward op, as the user called it."""
    if is_storage(ctx.array[0]):
        return "read/gather/stack/concat (mode 'tf2')"
    kind, where = ctx.kind, ctx.where
    if kind == READ:
        return f"read({where})"
    if kind == CONCAT:
        return "concat()"
    return "stack()" if type(where) is range else f"gather({shown(np.asarray(where).tolist())})"


def _run_op(ctx):
    """A run node's forward ops (its writes), as the user called them."""
    if is_storage(ctx.array[0]):
        return "write/scatter/unstack/split (mode 'tf2')"
    kinds, wheres, _ = ctx.writes
    ops = [f"write({where}, ...)" if kind == WRITE else
           f"scatter({shown(np.asarray(where).tolist())}, ...) or unstack(...)" if kind == SCATTER else
           f"split(..., {shown(np.asarray(where).tolist())})" for kind, where in zip(kinds, wheres)]
    if len(ops) == 1:
        return ops[0]
    shown_ops = ", ".join(ops[:3]) + (", ..." if len(ops) > 3 else "")
    return f"{len(ops)} writes ({shown_ops})"


def _op_of(ctx, describe):
    """"TensorArray <the user's array>'s <op>" for a node's error."""
    root, path, _ = ctx.array
    if path:                                 # an op of a gradient rule, on the gradient array
        return f"TensorArray {root.name}'s gradient rule {describe(ctx)}, differentiated again"
    return f"TensorArray {root.name}'s {describe(ctx)}"


def _compiled_autograd_on():
    """Running a compiled autograd graph, or capturing one (which a torch may do by running the
    nodes' backward on fake tensors)."""
    module = sys.modules.get("torch._dynamo.compiled_autograd")
    return _in_compiled_autograd() or (module is not None
                                       and getattr(module, "compiled_autograd_enabled", False) is True)


def _compiled_refusal(ctx, describe, error):
    """The library's error for a node's backward that failed under compiled autograd with an error
    of torch or Python: the pass cannot go on there, and the bare error would not say why."""
    return UnimplementedError(
        f"gpu_tensorarray.torch: the backward of {_op_of(ctx, describe)} failed under compiled autograd "
        f"({described(error)}): run this backward pass without compiled autograd "
        f"(torch._dynamo.config.compiled_autograd = False, or outside torch._dynamo.compiled_autograd._enable); "
        f"torch.compile of the forward is supported")


# -- the nodes ---------------------------------------------------------------------------------

class _WriteRun(Function):
    """(flow, *values) -> the flow after a run of tracked writes of those values."""

    @staticmethod
    def forward(ctx, flow, state, ta, backend, writes, *values):
        ctx.set_materialize_grads(False)
        ctx.array, ctx.ta, ctx.backend, ctx.writes, ctx.internal = state.array, ta, backend, writes, state.internal
        ctx.released = None
        return torch.zeros((), dtype=torch.float32)      # a value nothing reads, but anomaly mode checks it

    @staticmethod
    @_failing(_run_op)
    def backward(ctx, flow_grad):
        kinds, wheres, values = ctx.writes
        none = (flow_grad, None, None, None, None)
        backward_pass = _current_pass()
        gradient = _grad_array(ctx, backward_pass, ZERO_FLOW if flow_grad is None else flow_grad, create=False)
        if gradient is None:                 # nothing read this array in this pass: zeros
            if backward_pass.compiled:       # tensors, which compiled autograd can add up
                return none + tuple(torch.zeros_like(value) for value in values)
            return none + (None,) * len(values)
        if ctx.internal:
            rows = backward_pass.rows.setdefault(ctx.array[:2], {})
            return none + _accumulated_grads(gradient, zip(kinds, wheres, values), rows, flow_grad)
        # On a CPU backend without CUDA every value was a CPU tensor.
        same_device = ctx.backend.name != "cupy" and not torch_has_cuda()
        return none + _value_grads(gradient, kinds, wheres, values, same_device, flow_grad)


class _Reader(Function):
    """flow -> the value a read/gather/stack/concat returns."""

    @staticmethod
    def forward(ctx, flow, state, ta, backend, kind, where):
        value, where = read_value(ta, backend, kind, where)
        ctx.array, ctx.ta, ctx.backend, ctx.kind, ctx.where = state.array, ta, backend, kind, owned(kind, where)
        ctx.released = None
        return value

    @staticmethod
    @_failing(_read_op)
    def backward(ctx, grad):
        # The gradient array's writes chain from a fresh flow; with create_graph=True the
        # flow they return carries them to the writes' backward, which reads through it.
        backward_pass = _current_pass()
        gradient = _grad_array(ctx, backward_pass, ZERO_FLOW, create=True)
        kind, where = ctx.kind, ctx.where
        if kind == READ:
            gradient = gradient.write(where, grad)
        elif kind == GATHER:
            gradient = gradient.scatter(where, grad)
        else:
            gradient = _concat_grad(gradient, grad, where)
        flow = gradient.flow if backward_pass.flows else None
        return flow, None, None, None, None, None


def _concat_grad(gradient, grad, lengths):
    """concat_grad: ``gradient.split(grad, lengths)``. A gradient array's concat (a split's
    gradient, differentiated again) covers only the slots its forward array's split marked, which
    dynamic growth may have outgrown; the gradient array here has all of that array's slots, and
    a split must cover them all: then the pieces go in slot by slot, adding up as the split's would."""
    if len(lengths) == registry.lookup(gradient._ta.handle).size:
        return gradient.split(grad, lengths)
    start = 0
    for slot, length in enumerate(lengths.tolist()):
        gradient = gradient.write(slot, grad[start:start + length])
        start += length
    return gradient


def _value_grads(gradient, kinds, wheres, values, same_device, flow_grad):
    """The gradient of each write's value (the run's writes as three parallel lists): the
    gradient array's rows at its slots (write_grad: read; scatter_grad: gather; split_grad:
    concat of the whole array), one gather for a run of writes and scatters of one element
    shape."""
    if len(values) > 1 and kinds.count(WRITE) == len(kinds):
        if len({value.shape for value in values}) == 1:
            # An int64 vector: the form the compiled gather takes.
            rows = gradient.gather(np.array(wheres, np.int64))
            return rows.unbind(0) if same_device else tuple(_on(row, value) for row, value in zip(rows, values))
    elif len(values) > 1 and SPLIT not in kinds:
        shapes = {value.shape if kind == WRITE else value.shape[1:] for kind, value in zip(kinds, values)}
        if len(shapes) == 1 and all(kind == WRITE or value.shape[0] for kind, value in zip(kinds, values)):
            rows = gradient.gather(np.concatenate([np.atleast_1d(where) for where in wheres]))
            grads, start = [], 0
            for kind, value in zip(kinds, values):
                count = 1 if kind == WRITE else value.shape[0]
                grads.append(_on(rows[start] if kind == WRITE else rows[start:start + count], value))
                start += count
            return tuple(grads)
    grads = []
    for kind, where, value in zip(kinds, wheres, values):
        if kind == WRITE:
            grads.append(_on(gradient.read(where), value))
        elif value.shape[0] == 0 or (kind == SPLIT and len(where) == 0):
            grads.append(_zeros(value, flow_grad))  # nothing written: asking the array for nothing may fail
        elif kind == SCATTER:
            grads.append(_on(gradient.gather(where), value))
        else:
            grads.append(_on(gradient.concat(), value))
    return tuple(grads)


def _accumulated_grads(gradient, writes, rows, flow_grad):
    """The gradients of writes into a gradient array, whose writes to one slot add up:
    each addend's gradient is the slot's whole gradient. Several runs (and a scatter with
    repeated indices) ask for one slot: it is read once per pass and kept in ``rows``
    (slot -> row); every write into the array precedes, by its flow, every read of it."""
    def row(slot):
        value = rows.get(slot)
        if value is None:
            value = rows[slot] = gradient.read(slot)
        return value

    grads = []
    for kind, where, value in writes:
        if kind == WRITE:
            grad = row(where)
        elif kind == SCATTER:
            grad = joined(torch.stack, [row(slot) for slot in where.tolist()], "a gradient") if len(where) else None
        else:
            grad = joined(torch.cat, [row(slot) for slot in range(len(where))], "a gradient") if len(where) else None
        grads.append(_zeros(value, flow_grad) if grad is None else _on(grad, value))
    return tuple(grads)


def _zeros(value, flow_grad):
    """The gradient of an empty piece (nothing written, nothing to read back). With
    create_graph=True it joins the pass's graph through the flow's gradient, as a list
    model's zeros join it through their slice: a further order differentiates it to zeros
    rather than finding a constant that requires no grad."""
    if flow_grad is None or not flow_grad.requires_grad:
        return torch.zeros_like(value)
    return (flow_grad * 0).to(device=value.device, dtype=value.dtype).expand(value.shape).clone()


def _on(grad, value):
    return grad if grad.device == value.device else grad.to(value.device)


def _applier(function):
    """``function.apply`` without Function.apply's Python preamble (half the cost of a
    node): its argument binding serves setup_context, which these nodes do not define,
    and its unwrapping serves functorch, whose transforms the bridge refuses."""
    fast = super(Function, function).apply         # torch._C._FunctionBase.apply

    def apply(*args):
        if _functorch_active():
            raise unsupported_transform(args[2].handle)
        return fast(*args)
    return apply


_functorch_active = torch._C._are_functorch_transforms_active
_write_run = _applier(_WriteRun)
read_node = _applier(_Reader)


def materialize(state, ta, backend):
    """The state's flow after its pending writes: one node for all of them (none under
    no_grad, which would make a node that records nothing: they stay pending)."""
    if state.pending and torch.is_grad_enabled():
        with state_lock:                # (another thread's read may have made the node meanwhile)
            check_not_busy(state)       # (another thread's mark: one a fork left, the lock being held here)
            state.busy = _get_ident()
            try:
                _drop_half_made(state)
                pending = state.pending
                for position, (value, version) in enumerate(zip(pending, state.versions)):
                    if value._version != version:
                        raise _changed_after_write(ta, state, position)
                if pending:
                    flow = _write_run(state.flow, state, ta, backend, (state.kinds, state.wheres, pending), *pending)
                    # One statement without a call: an interrupt (during the node's making, say) leaves the
                    # writes pending, for the next read to make their node, or the node in place.
                    state.flow, state.pending, state.kinds, state.wheres, state.versions = flow, [], [], [], []
            finally:
                state.busy = None
    return state.flow


def check_not_busy(state):
    """Before a tracked op changes its array: refused where this thread is in the middle of
    recording one of the same array (a signal handler or a finaliser run there)."""
    busy = state.busy
    if busy is not None and busy == _get_ident():
        raise _reentered(state)


def record_write(state, value, kind, where, slots):
    """A tracked write's entry in its state's lists -> the state's count after it. The count and
    slots first, the value last: an interrupt among the appends leaves entries past the values,
    which the next write or read drops first, and reads of the slots refused as superseded rather
    than given a gradient that skips the value."""
    with state_lock:
        state.busy = _get_ident()
        try:
            count = state.count = state.count + 1
            if not state.internal:
                written_by = state.written_by
                for slot in slots:
                    written_by[slot] = count
            if len(state.kinds) != len(state.pending):      # (no call on the common path: a hot one)
                _drop_half_made(state)
            state.kinds.append(kind)
            state.wheres.append(where)
            state.versions.append(value._version)
            state.pending.append(value)
        finally:
            state.busy = None
    return count


def _drop_half_made(state):
    """The entries an interrupt (or a fork) left past the last value: they would pair the lists wrongly."""
    count = len(state.pending)
    if len(state.kinds) != count:
        del state.kinds[count:], state.wheres[count:], state.versions[count:]


def _reentered(state):
    return FailedPreconditionError(
        f"TensorArray {state.array[0].name}: an op of this array ran while this thread was recording another "
        f"op of it for autograd (from a signal handler or a finaliser): the record would break. Make the op "
        f"outside the handler, or on another array")


def _changed_after_write(ta, state, position):
    """The node would attach to the value's history after the change: a gradient of what the
    array does not hold (it holds the value as written). torch refuses the same for a saved tensor."""
    kind, where = state.kinds[position], state.wheres[position]
    what = f"written to slot {where}" if kind == WRITE else \
        f"{'scattered to slots' if kind == SCATTER else 'split into pieces of lengths'} {np.asarray(where).tolist()}"
    if is_storage(ta.handle):                # a mode tf2 list's storage: its slots are not the list's
        what = "written to it (mode 'tf2')"
    return InvalidArgumentError(
        f"TensorArray {ta.handle.name}: the tensor {what} was modified in place after the write (it, or another view "
        f"of its memory: torch counts the changes of all views of one tensor together, as for the tensors autograd "
        f"saves): the array holds it as written, but its gradient would be the modified tensor's. Write a copy "
        f"(value.clone()) of a tensor that changes later, or of a row of a buffer filled in place")


def tracked(state):
    """Whether a read of the state's array is a node: gradients flow and reach it."""
    return (state.pending or state.flow.requires_grad) and torch.is_grad_enabled()


def owned(kind, where):
    """What a read's backward needs, as the node's own: the caller's list, array or tensor
    of indices may change after the op (a loop counter advanced in place), and the gradient
    must go to the slots the op read. The op took them: they are valid integers."""
    if kind == READ:
        return int(where)
    if kind == GATHER and type(where) is not range:
        return np.array(host_ints(where, "indices"), np.int64)
    return where                                # a stack's range, a concat's fresh lengths


def read_value(ta, backend, kind, where):
    """(the value of a read of the library TensorArray ``ta`` as a torch tensor, what its
    backward needs: the index, the indices (a range for a stack) or the concat's lengths)."""
    with cuda_scope(backend):
        if kind == READ:
            return to_torch(ta.read(where), backend), where
        if kind == GATHER:
            if where is EVERY:                      # stack: every slot there is now
                value = ta.stack()
                return to_torch(value, backend), range(value.shape[0])
            return to_torch(ta.gather(where), backend), where
        value, lengths = raw_ops.TensorArrayConcatV3(ta.handle, ta.flow, ta.dtype,
                                                     element_shape_except0=except_first(ta.element_shape))
        return to_torch(value, backend), lengths
