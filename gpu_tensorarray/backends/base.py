"""The primitives every backend provides, and nothing more.

Storage code talks to arrays only through these primitives and through the
ndarray protocol that NumPy and CuPy share (``.shape``, ``.dtype``, slicing,
``.reshape``). Host-side index arrays (int64 NumPy vectors) describe rows;
they never live on the device, so no primitive synchronises to read them.
"""

import copy
import threading

import numpy as np

from .. import conversion
from ..errors import OpError, ResourceExhaustedError, allocation_over_limit
from ..host import flags_all_equal, host_memory_limit
from .arrays import cupy_to_host

__all__ = ["Backend", "guarded", "cupy_values"]

_FLOAT32 = np.dtype("float32")


class Backend:
    """Base class. Subclasses set ``name`` and implement the primitives below."""

    name = "abstract"
    #: The ndarray type this backend stores; values of it are taken as they are.
    array_type = None

    def __init__(self, device="cpu"):
        self.device = device

    @property
    def native_type(self):
        """The type a write stores without a conversion call: ``array_type`` where every
        value of it lives where this backend's arrays do; None on a backend with several
        devices (a value of its type may live on another one: ``asarray`` moves it)."""
        return self.array_type

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} on {self.device}>"

    def _missing(self, primitive):
        return NotImplementedError(f"backend {self.name!r} does not implement {primitive}()")

    #: Whether ``readonly`` gives copies (a GPU: no read-only arrays): layouts then
    #: allocate a returned value's memory while an op prepares, not after it commits.
    values_are_copies = False

    def with_copied_values(self):
        """This backend, with ``values_are_copies``: every value a read returns is a fresh array
        of the caller's own, allocated before the read marks its slots. For arrays whose values
        go where no view can stay read-only (torch tensors): a copy made after the read would
        find a full memory with the slot already read. Itself where values are copies already."""
        if self.values_are_copies:
            return self
        variant = self.__dict__.get("_copied_values")
        if variant is None:         # (two threads may each make one: either serves)
            variant = copy.copy(self)
            variant.values_are_copies = True
            self._copied_values = variant
        return variant

    #: What the library raises when an allocation fails (the backend's own OOM class added).
    out_of_memory_errors = (MemoryError,)

    def holds(self, array):
        """Whether ``array`` (of ``array_type``) lives where this backend's arrays do (a device
        backend's: on its device)."""
        return True

    def out_of_memory(self, error):
        """Whether ``error``, raised by an allocation, says that memory ran out."""
        return isinstance(error, self.out_of_memory_errors)

    #: None where a child process made by fork can use this backend's arrays (memory it
    #: inherits), else why it cannot (a sentence).
    unusable_after_fork = None

    # -- allocation: one door ------------------------------------------------------------
    def allocate(self, make, nbytes, what, host=False):
        """``make()``, which allocates ``nbytes`` (device memory; host memory when
        ``host``). Every allocation an op makes goes through here, before the op
        changes anything: a request over the limit fails at once, and running out of
        memory during ``make()`` fails the same way, ResourceExhaustedError naming
        ``what`` (a text, or a function making it: made only for the error). Tests make
        this fail to show that a failed op changes nothing."""
        if nbytes > _ALWAYS_TRIED:
            limit = self.host_memory_limit() if host else self.memory_limit()
            if nbytes > limit:
                raise allocation_over_limit(_text(what), nbytes, limit, self.name,
                                            "the host" if host else self.device)
        try:
            return make()
        except OpError:
            raise                       # an op's own error from inside ``make`` (a plan's checks)
        except Exception as error:
            if not self.out_of_memory(error):
                raise
            raise ResourceExhaustedError(f"OOM when allocating {_text(what)} ({nbytes} bytes) on "
                                         f"{'the host' if host else self.device}: {error}") from None

    def empty(self, shape, dtype):
        """An uninitialised array (through ``allocate``)."""
        raise self._missing("empty")

    def zeros(self, shape, dtype):
        """A zero-filled array (through ``allocate``)."""
        raise self._missing("zeros")

    def contiguous(self, array, dtype):
        """``array`` as a C-contiguous array of ``dtype``: itself when it is one, else a
        copy (through ``allocate``): a broadcast view may need far more than it holds."""
        raise self._missing("contiguous")

    def from_host(self, host_array):
        """A backend array holding a copy of (or, on the CPU, the same) NumPy array."""
        raise self._missing("from_host")

    def from_foreign(self, value):
        """A backend array from another library's array (CuPy, DLPack producers), or None."""
        raise self._missing("from_foreign")

    def to_numpy(self, array):
        """A NumPy array with the same values (a device-to-host copy on GPUs)."""
        raise self._missing("to_numpy")

    def readonly(self, array):
        """A stand-in for a fresh allocation that layouts index to make returned values:
        what indexing gives can never be written through into ``array`` nor exported
        writable (a view that cannot be made writable, or a copy). Called once per
        allocation, so reads cost what indexing costs."""
        raise self._missing("readonly")

    def memory_limit(self):
        """Bytes one allocation may take at most; larger requests fail before allocating."""
        raise self._missing("memory_limit")

    def host_memory_limit(self):
        """The same for host memory (slot flags): physical memory, or the process's
        address-space limit where that is lower."""
        return host_memory_limit()

    def synchronize(self):
        """Wait until queued device work is done (a no-op on the CPU)."""

    def array_lock(self):
        """The lock every operation of one array runs under (storage.py): a C-level
        lock, which an interrupt cannot leave held."""
        return threading.Lock()

    def array_device(self):
        """What every operation of one array enters inside its lock (storage.py). A
        device backend's makes the array's device current and orders the array's work
        across streams (device_guard.DeviceScope); on the CPU, a C-level no-op: a lock
        of the array's own that nothing else takes, so an op makes no Python call for it."""
        return threading.Lock()

    def array_hold(self, step):
        """-> ``hold(*buffers)`` for the ops of an array whose device step is ``step``
        (``array_device()``'s): the device memory an op drops (a regrown slab, a replaced
        layout) is handed to it before it goes, and kept until the op's work is ordered
        before any reuse of that memory (device_guard.DeviceScope.hold). On the CPU
        memory is freed in program order: it keeps nothing."""
        return _hold_nothing

    def copy(self, array):
        """A new array with ``array``'s values, on this backend's device."""
        raise self._missing("copy")

    # -- row primitives (indices: host int64 vectors) -------------------------------------
    # Each ``prepare_*`` makes every allocation its operation needs and returns a function
    # of the destination (or source) array that does the operation without allocating:
    # storage prepares, then changes the array, so running out of memory changes nothing.
    def prepare_take_rows(self, indices, row_shape, dtype):
        """-> ``take(src)``: ``src[indices]`` (rows of ``row_shape``) into a new array (gather)."""
        raise self._missing("prepare_take_rows")

    def prepare_put_rows(self, indices, rows, dtype):
        """-> ``put(dst)``: ``dst[indices[k]] = rows[k]``; the indices are distinct (scatter)."""
        raise self._missing("prepare_put_rows")

    def prepare_add_rows(self, indices, rows, n_destinations, dtype, mode=None, guard=None):
        """-> ``add(dst)``: ``dst[indices[k]] += rows[k]`` for k in order, duplicates allowed
        (scatter-add), ``dst`` having ``n_destinations`` rows of ``dtype``.

        ``mode`` is "deterministic" (each destination sums its rows in arrival order:
        bitwise equal to TensorFlow's sequential adds, subnormals flushed) or "atomic" (any order);
        None: the active mode (accumulation.py). ``guard``: None, or (flags, value) with
        host flag bytes per destination: ``add`` then adds only if the flag of every
        destination in ``indices`` is ``value``, and answers whether it did (storage's
        "every target slot holds a value", checked where the add reads the indices anyway).
        Indices outside the flags are refused too; the guard is checked before anything
        is allocated, so a refused add allocates nothing."""
        raise self._missing("prepare_add_rows")

    def prepare_concatenate(self, shapes, dtype):
        """-> ``join(arrays)``: arrays of ``shapes`` joined along axis 0 into a new array."""
        raise self._missing("prepare_concatenate")

    def take_rows(self, src, indices):
        return self.prepare_take_rows(indices, src.shape[1:], src.dtype)(src)

    def put_rows(self, dst, indices, rows):
        self.prepare_put_rows(indices, rows, dst.dtype)(dst)

    def add_rows(self, dst, indices, rows, mode=None):
        self.prepare_add_rows(indices, rows, len(dst), dst.dtype, mode)(dst)

    def concatenate(self, arrays):
        return self.prepare_concatenate([array.shape for array in arrays], arrays[0].dtype)(arrays)

    # -- entry points for storage: TensorFlow's rules live in conversion.py and errors.py ---
    def asarray(self, value, dtype=None):
        """A caller's value as a backend array (conversion.to_tensor); ``dtype``, the
        array's it is for, words the error for values no TensorFlow dtype holds."""
        if type(value) is self.array_type:
            return value
        return conversion.to_tensor(self, value, dtype)

    def flow(self, flow_in=0.0, owner=None):
        """A float32 0-d array for ``flow_in`` (conversion.to_flow; ``owner``, a handle, named in its errors)."""
        if type(flow_in) is self.array_type and flow_in.dtype is _FLOAT32 and not flow_in.shape:
            return flow_in                      # the common case, without a call
        return conversion.to_flow(self, flow_in, owner)

    def is_flow(self, value):
        """Whether ``value`` is a flow as ``flow`` makes them (``flow(value)`` is ``value``)."""
        return type(value) is self.array_type and value.dtype is _FLOAT32 and not value.shape

    def check_allocation(self, nbytes, what):
        """ResourceExhaustedError naming ``what`` (as ``allocate``'s) before allocating more
        than ``memory_limit()`` (a request ``allocate`` sends straight to the allocator
        passes: its failure is the same error)."""
        if nbytes <= _ALWAYS_TRIED:
            return
        limit = self.memory_limit()
        if nbytes > limit:
            raise allocation_over_limit(_text(what), nbytes, limit, self.name, self.device)


# Requests up to this many bytes go straight to the allocator (whose failure is the same
# ResourceExhaustedError): asking for the limit, a system call, costs more than they do.
_ALWAYS_TRIED = 1 << 24


def _text(what):
    return what() if callable(what) else what


def guarded(guard, indices, prepare):
    """``prepare()``, a backend's prepared add, under ``guard`` (Backend.prepare_add_rows),
    checked on the host before anything is prepared (so indices outside the flags never
    reach the preparation): a refusal prepares nothing and its add answers False; an add
    that passed answers True."""
    if guard is None:
        return prepare()
    if not flags_all_equal(guard[0], indices, guard[1]):
        return _refused
    add = prepare()

    def add_and_answer(dst):
        add(dst)
        return True
    return add_and_answer


def _refused(dst):
    return False


def _hold_nothing(*buffers):
    pass


def cupy_values(array):
    """A CuPy array's values on the host (arrays.cupy_to_host), memory running out for the copy
    raised as ResourceExhaustedError."""
    try:
        return cupy_to_host(array)
    except MemoryError as error:
        raise ResourceExhaustedError(str(error)) from None
