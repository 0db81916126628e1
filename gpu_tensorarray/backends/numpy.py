"""The CPU backend: NumPy arrays, NumPy operations. What CI and GPU-less users run."""

import ctypes
import sys
import weakref

import numpy as np

from .. import dtypes
from ..host import element_count, host_memory_limit
from .arrays import is_cupy_array, torch_bits_resolved
from .base import Backend, cupy_values
from .scatter_add import prepare_add_rows_sequential

__all__ = ["NumpyBackend", "PAGE_ALIGNED_BYTES", "ReadOnlyArray", "torch_bfloat16_on_host"]


class ReadOnlyArray(np.ndarray):
    """The type of the values NumPy-backed arrays return: views of their storage that
    no one can make writable, because each one's base chain ends at a read-only
    memoryview (NumPy refuses ``writeable = True`` then).

    DLPack consumers get a copy: torch imports NumPy's read-only DLPack 1.0 capsule
    as a writable tensor (an in-place op would change the array), and JAX asks for a
    pre-1.0 capsule, which NumPy refuses to make of a read-only array. A writable
    instance (a copy the caller made) is not storage and exports as it is.
    """

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.flags.writeable:
            return super().__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        if copy is False:
            raise BufferError("A TensorArray's value is a read-only view of its storage: it exports by DLPack "
                              "only as a copy (copy=None or True)")
        return np.array(self).__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device)

    def copy(self, order="C"):
        # A copy is the caller's own array, not storage: a plain, writable ndarray.
        return np.array(self, order=order, subok=False)

    def __array_wrap__(self, array, context=None, return_scalar=False):
        # Arithmetic on a value gives the caller a plain array (or scalar) of its own.
        return array[()] if return_scalar else array


class NumpyBackend(Backend):
    name = "numpy"
    array_type = np.ndarray
    # ValueError: more bytes than an address space holds.
    out_of_memory_errors = (MemoryError, ValueError)

    def empty(self, shape, dtype):
        return self.allocate(lambda: _page_aligned(np.empty, shape, dtype), _nbytes(shape, dtype),
                             lambda: _tensor(shape))

    def zeros(self, shape, dtype):
        return self.allocate(lambda: _page_aligned(np.zeros, shape, dtype), _nbytes(shape, dtype),
                             lambda: _tensor(shape))

    def contiguous(self, array, dtype):
        if array.dtype == dtype and array.flags.c_contiguous:
            return array
        # np.array, not np.ascontiguousarray: that makes a 0-d array 1-d.
        return self.allocate(lambda: np.array(array, dtype, order="C"), _nbytes(array.shape, dtype),
                             f"a contiguous copy of a value of shape {list(array.shape)}")

    def from_host(self, host_array):
        return host_array

    def from_foreign(self, value):
        if is_cupy_array(value):
            return cupy_values(value)
        if hasattr(value, "__dlpack__"):
            value = torch_bits_resolved(value)
            try:
                return np.from_dlpack(value)
            except (TypeError, RuntimeError, BufferError):
                return _host_copy(value)
        return None

    def to_numpy(self, array):
        return np.asarray(array)

    def copy(self, array):
        return np.array(array)

    def readonly(self, array):
        # Called once per allocation (a contiguous array): reads index the result, at the
        # cost of indexing the array itself.
        if self.values_are_copies:          # (with_copied_values)
            return _Copies(array)
        return _readonly_root(array).reshape(array.shape).view(ReadOnlyArray)

    def memory_limit(self):
        return host_memory_limit()

    def prepare_take_rows(self, indices, row_shape, dtype):
        out = self.empty((len(indices),) + tuple(row_shape), dtype)

        def take(src):
            # mode="clip": the indices are checked, and "raise" would buffer the whole output.
            return np.take(src, indices, axis=0, out=out, mode="clip")
        return take

    def prepare_put_rows(self, indices, rows, dtype):
        def put(dst):
            dst[indices] = rows         # NumPy broadcasts a view's rows without copying them
        return put

    def prepare_add_rows(self, indices, rows, n_destinations, dtype, mode=None, guard=None):
        # Both modes get the sequential sum: "atomic" allows any order, this is one.
        return prepare_add_rows_sequential(self, indices, rows, n_destinations, dtype, guard)

    def prepare_concatenate(self, shapes, dtype):
        out = self.empty((sum(shape[0] for shape in shapes),) + tuple(shapes[0][1:]), dtype)

        def join(arrays):
            return np.concatenate(arrays, axis=0, out=out)
        return join


class _Copies:
    """An allocation's stand-in for a read-only view where values are copies: indexing copies
    (NumPy's MemoryError, should it find no memory, is the op's ResourceExhaustedError)."""

    __slots__ = ("_array",)

    def __init__(self, array):
        self._array = array

    def __getitem__(self, key):
        return np.array(self._array[key])


def _host_copy(value):
    """A DLPack producer's tensor that NumPy cannot import (a GPU tensor, or a dtype
    NumPy's DLPack lacks), through its host copy."""
    if not hasattr(value, "cpu"):
        return None
    bfloat16 = torch_bfloat16_on_host(value)
    return np.asarray(value.cpu()) if bfloat16 is None else bfloat16


def torch_bfloat16_on_host(value):
    """A torch bfloat16 tensor as a NumPy (ml_dtypes) bfloat16 array on the host, else
    None. Through its int16 bits: neither NumPy's DLPack nor torch's .numpy() knows bfloat16."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor) or value.dtype != torch.bfloat16:
        return None
    return value.detach().cpu().view(torch.int16).numpy().view(dtypes.bfloat16())


# A memoryview over raw memory, read-only (PyBUF_READ) and with no object behind it:
# NumPy cannot set WRITEABLE back on arrays over it, and its ``obj`` (None) leads no
# one to the writable storage, as memoryview(storage).toreadonly()'s would.
_memory_view = ctypes.pythonapi.PyMemoryView_FromMemory
_memory_view.restype = ctypes.py_object
_memory_view.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t, ctypes.c_int)
_PYBUF_READ = 0x100
# Storage kept alive while views over its memory live: a weak reference to NumPy's own
# memoryview (the base every view of the root leads to) -> the storage. The reference's
# callback is the dict's own pop: no Python code runs when the last view goes, so no
# interrupt can land there and keep the storage for good.
_kept = {}


class _Keeper(weakref.ref):
    """Its own key in _kept: hashed by identity (a memoryview's hash would read its bytes)."""

    __slots__ = ()
    __hash__ = object.__hash__
    __eq__ = object.__eq__


def _address(array):
    """Where ``array``'s (contiguous) memory starts: through ctypes' buffer import, which
    takes a writable, non-empty array (``array.ctypes`` builds a Python object each time)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError):
        return array.ctypes.data


def _readonly_root(array):
    """A 1-D array over ``array``'s (contiguous) memory that can never be made writable."""
    root = np.frombuffer(_memory_view(_address(array), array.nbytes, _PYBUF_READ), array.dtype)
    # One statement: an interrupt before the store drops the reference before root, so it never calls back.
    _kept[_Keeper(root.base, _kept.pop)] = array
    return root


# Arrays of this many bytes or more start on a page: a view into a buffer a page longer
# (at most 1/16 more memory). NumPy's own large buffers start 16 bytes into a page (glibc's
# header before mmapped memory), where half of a float32 row's 32-byte stores straddle two
# cache lines. A cache line is not enough either: 64 bytes into a page, a destination row
# lies 48 bytes ahead of a NumPy source row in the same 4 KiB window, and the CPU, which
# compares only the low 12 address bits, holds source loads behind the stores they seem to
# overlap ("4K aliasing"). From a page start the destination lies behind such a source.
# A gradient array's scatter-add at E=4096 with a hot index: 1.2-1.3x faster for it.
_PAGE = 4096
PAGE_ALIGNED_BYTES = 16 * _PAGE


def _page_aligned(make, shape, dtype):
    """``make(shape, dtype)`` (np.empty or np.zeros), starting on a page when it is large."""
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    if nbytes < PAGE_ALIGNED_BYTES or dtype.hasobject:
        return make(shape, dtype)
    buffer = make(nbytes + _PAGE, np.uint8)
    start = -buffer.__array_interface__["data"][0] % _PAGE
    return buffer[start:start + nbytes].view(dtype).reshape(shape)


def _nbytes(shape, dtype):
    return element_count(shape) * (dtype.itemsize if type(dtype) is not type else np.dtype(dtype).itemsize)


def _tensor(shape):
    return f"tensor of shape {list(shape)}"
