"""gpu_tensorarray.TensorArray's class API with torch tensors in and out, and autograd.

Each method runs the library's op (gpu_tensorarray.TensorArray, TF1 V3 rules) and
records it for autograd (autograd.py) when gradients flow; values cross by
crossing.py. ``flow`` is a torch scalar here: it is what orders the gradient ops.
"""

import inspect
import weakref

import numpy as np
import torch

from .. import device as _device
from .. import get_backend as _get_backend
from .. import modes, raw_ops
from ..errors import InvalidArgumentError, about
from ..host import host_ints
from ..registry import deep_copy_refused
from ..tensor_array import TensorArray as _LibraryTensorArray
from .autograd import (CONCAT, EVERY, GATHER, READ, SCATTER, SPLIT, WRITE, ZERO_FLOW, ArrayState, check_current,
                       check_not_busy, materialize, read_node, read_value, record_write, register_wrapper, tracked)
from .crossing import (as_dtype, cuda_scope, host_copy, host_value, refuse_tangent, refuse_tracing, to_backend,
                       torch_dtype, torch_has_cuda)
from .tf2 import TF2TensorArray, register_storage_class

__all__ = ["TensorArray"]

_new = object.__new__
_raw_read = raw_ops.TensorArrayReadV3
_is_grad_enabled = torch.is_grad_enabled
# Inside a dual level (forward-mode AD) the level is >= 0: a value written then may carry a tangent.
_forward_ad = torch.autograd.forward_ad
# Handle -> the state its torch TensorArrays share, while one lives: TensorArray(handle=...,
# flow=...) at the array's current flow continues that chain (the superseded-read check sees it).
# Filled when ``handle`` is first asked for (the only way to such a wrapper), not at creation.
_states = weakref.WeakValueDictionary()


class TensorArray:
    """A TensorArray whose values are torch tensors, differentiable by torch autograd.

    Same constructor and methods as ``gpu_tensorarray.TensorArray``; ``dtype`` may be a
    torch dtype (``torch.float32``) or any spelling the library accepts, and ``device``
    ("cpu", "cuda:1", a torch.device, or "emulated") picks where the array lives (default:
    the active ``gpu_tensorarray.device``). read/gather/stack/concat return tensors on
    that device (a CUDA array's on torch's current stream); write/scatter/unstack/split
    take tensors (or anything the library takes) and pass gradients to them, at any
    order (create_graph=True). ``mode="tf2"`` gives TensorFlow 2's rules (tf2.py).
    """

    # _state: shared by every TensorArray of the array (autograd.ArrayState); _n: the
    # state's count of tracked writes when this one was made (superseded-read check).
    __slots__ = ("_ta", "_backend", "_state", "_n", "_host", "__weakref__")

    def __new__(cls, *args, mode=None, **kwargs):
        refuse_tracing()
        if cls is TensorArray and modes.resolve(mode) == "tf2":     # as the library class: mode, else the default
            array = _new(TF2TensorArray)         # not a subclass: Python will not call its __init__
            array.__init__(*args, **kwargs)
            return array
        return _new(cls)

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None, tensor_array_name=None,
                 handle=None, flow=None, infer_shape=True, element_shape=None,
                 colocate_with_first_write_call=True, name=None, device=None, mode=None):
        library_flow = None if flow is None else 0.0     # the library's flow orders nothing here: ours does
        arguments = (as_dtype(dtype), size, dynamic_size, clear_after_read, tensor_array_name, handle, library_flow,
                     infer_shape, element_shape, colocate_with_first_write_call, name)
        # Values read come out as copies made before the read marks its slots (a torch tensor
        # cannot be a read-only view), so a read that finds no memory for one reads nothing.
        backend = _get_backend(None if device is None else str(device)).with_copied_values()
        with _device(backend), cuda_scope(backend):       # a CUDA array is allocated on torch's stream
            self._ta = _LibraryTensorArray(*arguments, mode="tf1")
        self._backend = self._ta.handle.array.backend
        self._host = _shares_numpy(self._backend, self._ta.dtype)
        if handle is not None:
            state = _states.get(self._ta.handle)
            if state is not None and flow is state.flow:
                # Where that flow was made: before the writes still pending (none, after ta.flow).
                self._state, self._n = state, state.count - len(state.pending)
                return
            if state is not None and state.handed is not None and flow is state.handed[0]():
                self._state, self._n = state, state.handed[1]
                return
        # At another flow (one a later write passed, or none of a torch TensorArray's): a chain of
        # its own, as TF1 reads from that flow; its reads are not checked against the array's writes.
        self._state = ArrayState(self._ta.handle, "", self._ta.flow,
                                 flow if isinstance(flow, torch.Tensor) else ZERO_FLOW)
        self._n = 0

    def _next(self, ta, n):
        result = _new(TensorArray)
        result._ta, result._backend, result._state, result._n, result._host = \
            ta, self._backend, self._state, n, self._host
        return result

    @staticmethod
    def _wrap(forward, handle, state, library=None):
        """A gradient array's torch TensorArray, for the gradient rules (autograd.py);
        ``library``: its library TensorArray, when an earlier rule of the pass made one."""
        result = _new(TensorArray)
        if library is None:
            # As TensorFlow's gradient functions, which wrap the handle afresh for each rule: no element
            # shape of the user's TensorArrays, none inferred from one rule's gradients for the next
            # (the gradient array's own shapes, copied from its forward array's, are what it checks).
            library = _LibraryTensorArray(forward.dtype, handle=handle, flow=state.array[2], infer_shape=False,
                                          mode="tf1")
        result._ta, result._backend, result._state, result._n = library, handle.array.backend, state, 0
        result._host = _shares_numpy(result._backend, library.dtype)
        return result

    # -- properties ----------------------------------------------------------------------------
    @property
    def handle(self):
        handle = self._ta.handle
        _states.setdefault(handle, self._state)     # the first chain asked for stays the one shared
        return handle

    @property
    def flow(self):
        """A torch float32 scalar: carries the ordering of gradient ops, not a value."""
        state = self._state
        flow = materialize(state, self._ta, self._backend)
        if flow is ZERO_FLOW:
            # The array's own from now on: a caller's in-place change must not reach other arrays.
            flow = state.flow = torch.zeros((), dtype=torch.float32)
        if state.pending:
            # Under no_grad the tracked writes stay pending and the state's flow is the one
            # before them: this TensorArray's place after them gets a flow of its own, which
            # TensorArray(handle=..., flow=...) recognises.
            flow = flow.detach()
            state.handed = (weakref.ref(flow), self._n)
        return flow

    @property
    def dtype(self):
        return torch_dtype(self._ta.dtype)

    @property
    def dynamic_size(self):
        return self._ta.dynamic_size

    @property
    def element_shape(self):
        return self._ta.element_shape

    @property
    def device(self):
        """The torch device of the values read out."""
        if self._backend.name == "cupy" and torch_has_cuda():
            return torch.device(self._backend.device)
        return torch.device("cpu")

    def __copy__(self):
        return self.identity()

    def __deepcopy__(self, memo):
        raise deep_copy_refused(self._ta.handle.name)

    def __repr__(self):
        return (f"<gpu_tensorarray.torch.TensorArray {self._ta.handle.name!r} dtype={self.dtype} "
                f"backend={self._backend.name}>")

    # -- ops -------------------------------------------------------------------------------------
    def identity(self):
        return self._next(self._ta, self._n)

    def grad(self, source, flow=None, name=None):
        """The gradient array for ``source`` (TensorArrayGradV3), as a torch TensorArray."""
        if flow is not None:     # checked first: a refused one must leave no gradient array, and the size unlocked
            flow = _checked_flow(flow, self._ta.handle)
        with cuda_scope(self._backend):
            ta = self._ta.grad(source)
        result = self._next(ta, 0)
        result._state = ArrayState(ta.handle, "", ta.flow, self.flow if flow is None else flow)
        return result

    def _read(self, kind, where, method, slots=None):
        """``slots``: a function listing the slots read, for the superseded-read check
        (None: every slot)."""
        state = self._state
        if not tracked(state):
            return read_value(self._ta, self._backend, kind, where)[0]
        if self._n < state.count and not state.internal:
            check_current(self, state, self._n, None if slots is None else slots(), method)
        ta, backend = self._ta, self._backend
        return read_node(materialize(state, ta, backend), state, ta, backend, kind, where)

    def read(self, index, name=None):
        state = self._state
        if self._host and not state.pending and not (state.flow.requires_grad and _is_grad_enabled()):
            # The common untracked read on the CPU, in as few calls as it takes (the
            # library class's read is this raw op; its slots, not its properties).
            ta = self._ta
            value = _raw_read(ta._handle, index if type(index) is int else host_value(index), ta._flow, ta._dtype)
            if type(value) is not np.ndarray or not value.flags.writeable:
                # A view of storage (an array the library made, wrapped by handle): torch has no
                # read-only tensors. Arrays made here read copies (with_copied_values).
                value = host_copy(value, "a value read")
            return torch.from_numpy(value)
        index = host_value(index)
        return self._read(READ, index, "read", lambda: (_slot(index),))

    def gather(self, indices, name=None):
        indices = host_value(indices)
        return self._read(GATHER, indices, "gather", lambda: _slots(indices))

    def stack(self, name=None):
        """Every element stacked along a new first axis."""
        return self._read(GATHER, EVERY, "stack")

    def concat(self, name=None):
        return self._read(CONCAT, None, "concat")

    def _track(self, kind, value, where):
        """The state's count after a write of ``value`` (done): a pending tracked write when it
        needs a gradient. ``where()`` -> (what its backward needs, the slots it wrote), asked
        only then (a gradient rule's scatter of a plain tensor skips it)."""
        state = self._state
        if isinstance(value, torch.Tensor) and value.requires_grad and _is_grad_enabled():
            where, slots = where()
            return record_write(state, value, kind, where, slots)
        return state.count

    def write(self, index, value, name=None):
        if _forward_ad._current_level >= 0:
            refuse_tangent(value, self._ta.handle)
        if self._state.busy is not None:
            check_not_busy(self._state)
        if type(index) is not int:
            index = host_value(index)
        ta = self._ta
        if self._host:
            if type(value) is torch.Tensor:
                try:
                    array = value.numpy(force=True)      # to_backend's common case, inline
                except (RuntimeError, TypeError):
                    array = to_backend(value, self._backend, ta.handle)
            else:
                array = to_backend(value, self._backend, ta.handle)
            known = ta._shape_cell[0]
            if type(array) is np.ndarray and known is not None and None not in known:
                # The library class's write, less what a known shape leaves it to do:
                # its flow orders nothing here (ours does), so its object stays.
                try:
                    raw_ops.TensorArrayWriteV3(ta._handle, index, array, ta._flow)
                    refused = False
                except InvalidArgumentError:
                    refused = True
                if refused:
                    # The op changed nothing; the class's own checks come first (a wrong shape
                    # before a wrong index, as TF1's Python layer): its error, as the class raises
                    # it (outside the except clause: the op's error is not its context).
                    ta = ta.write(index, array)
            else:
                ta = ta.write(index, array)
        else:
            with cuda_scope(self._backend):
                ta = ta.write(index, to_backend(value, self._backend, ta.handle))
        state = self._state
        # isinstance: a subclass (nn.Parameter) is tracked too; type() first, the common case's cheap test.
        if (type(value) is torch.Tensor or isinstance(value, torch.Tensor)) and value.requires_grad \
                and _is_grad_enabled():
            if type(index) is not int:
                index = int(index)                   # the op took it: a scalar integer
            count = record_write(state, value, WRITE, index, (index,))
        else:
            count = state.count
        result = _new(TensorArray)
        result._ta, result._backend, result._state, result._n, result._host = \
            ta, self._backend, state, count, self._host
        return result

    def scatter(self, indices, value, name=None):
        if _forward_ad._current_level >= 0:
            refuse_tangent(value, self._ta.handle)
        check_not_busy(self._state)
        indices = host_value(indices)
        backend = self._backend
        with cuda_scope(backend):
            ta = self._ta.scatter(indices, to_backend(value, backend, self._ta.handle))
        return self._next(ta, self._track(SCATTER, value, lambda: _indices_and_slots(indices)))

    def unstack(self, value, name=None):
        if _forward_ad._current_level >= 0:
            refuse_tangent(value, self._ta.handle)
        check_not_busy(self._state)
        backend = self._backend
        with cuda_scope(backend):
            ta = self._ta.unstack(to_backend(value, backend, self._ta.handle))
        count = _shape(value)[0]
        return self._next(ta, self._track(SCATTER, value, lambda: (np.arange(count, dtype=np.int64), range(count))))

    def split(self, value, lengths, name=None):
        if _forward_ad._current_level >= 0:
            refuse_tangent(value, self._ta.handle)
        check_not_busy(self._state)
        lengths = host_value(lengths)
        backend = self._backend
        with cuda_scope(backend):
            ta = self._ta.split(to_backend(value, backend, self._ta.handle), lengths)
        return self._next(ta, self._track(SPLIT, value, lambda: _lengths_and_slots(lengths)))

    def size(self, name=None):
        """The number of elements, as a CPU int32 scalar (TensorFlow keeps it in host memory)."""
        ta = self._ta
        if self._host:                  # a dynamic loop's condition: no CUDA scope to enter
            return torch.from_numpy(raw_ops.TensorArraySizeV3(ta._handle, ta._flow))
        with cuda_scope(self._backend):     # the raw op's int32 array is fresh and on the host
            return torch.from_numpy(raw_ops.TensorArraySizeV3(ta._handle, ta._flow))

    def close(self, name=None):
        self._ta.close()


register_wrapper(TensorArray._wrap)
register_storage_class(TensorArray)
# help() and editors show the constructor's arguments, not those of __new__, which passes them on.
TensorArray.__signature__ = inspect.signature(TensorArray.__init__).replace(
    parameters=list(inspect.signature(TensorArray.__init__).parameters.values())[1:])


def _shares_numpy(backend, dtype):
    """Whether the array's values are NumPy arrays that torch shares (the CPU fast paths): on a CPU
    backend, of a dtype torch's NumPy import knows (not bfloat16, which crosses as its bits)."""
    return backend.name != "cupy" and torch_dtype(dtype) is not torch.bfloat16


def _checked_flow(flow, handle):
    """A flow given to ``grad``: a float scalar tensor as it is, anything else checked as the library
    checks a flow (its error names the array) and made one."""
    if isinstance(flow, torch.Tensor):
        if flow.dim() or not flow.is_floating_point():
            raise InvalidArgumentError(f"flow must be a float scalar tensor (a TensorArray's flow), got a "
                                       f"{flow.dtype} tensor of shape {list(flow.shape)}{about(handle)}")
        return flow
    return torch.tensor(float(handle.array.backend.to_numpy(handle.array.backend.flow(flow, handle))))


def _indices_and_slots(indices):
    # A copy (np.array): the caller's indices may change after the op, its gradient may not.
    where = np.array(host_ints(indices, "indices"), np.int64).reshape(-1)
    return where, where.tolist()


def _lengths_and_slots(lengths):
    where = np.array(host_ints(lengths, "lengths"), np.int64).reshape(-1)
    return where, range(len(where))


def _slot(index):
    """The slot a read names, for the superseded-read check (None: the op reports a bad index)."""
    try:
        return int(index)
    except (TypeError, ValueError):
        return None


def _slots(indices):
    try:
        return np.asarray(indices, np.int64).reshape(-1).tolist()
    except (TypeError, ValueError, OverflowError):
        return ()


def _shape(value):
    return tuple(value.shape) if isinstance(value, torch.Tensor) else np.shape(value)
