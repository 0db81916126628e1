"""A CPU stand-in for CuPy 14.2: the GPU path, run where no GPU is (a test double).

``install()`` puts it in ``sys.modules["cupy"]`` when the real CuPy sees no CUDA
device (tests/conftest.py calls it first thing), so the cupy backend, unmodified,
runs the project's ``[cupy]`` tests here. Where a GPU is usable the real CuPy stays.

What it is: device arrays over NumPy memory with CuPy's semantics where they differ
from NumPy's, RawModule/RawKernel launches that run the kernels' CPU build (the
emulated backend's, through ``cpu_kernel``) under CuPy's launch rules, CuPy's memory
pool (cached, split and merged chunks per stream, a limit) and allocator hooks, two
devices with a current device per thread, streams and events that
record their ordering, and counters: kernel launches, device-to-host synchronisations,
allocations. Each modelled behaviour names the CuPy 14.2 source it follows (paths in
the cupy/cupy repository). Anything CuPy would refuse, the stand-in refuses too: it is
never more lenient than a GPU, so a test that passes here cannot rely on NumPy.

Stricter than most GPUs on purpose: there is no peer access between the two devices
(CuPy then raises ValueError for a kernel on another device's array; memcpys between
them still work, as CUDA's do under unified addressing), and a launch
whose arguments do not match the kernel's C signature fails (on a GPU it reads the
wrong bytes: undefined behaviour).
"""

import builtins
import contextlib
import ctypes
import functools
import gc
import os
import sys
import threading
import types
import warnings
import weakref

import numpy as np

__version__ = "14.2.0"
STANDIN = True                      # what tests ask to know they run on the stand-in

DEVICE_COUNT = 2
COMPUTE_CAPABILITY = "90"           # an H100's, as cupy.cuda.Device reports it
DEVICE_MEMORY = 16 << 30            # each device's total memory (memGetInfo)
# Fresh allocations hold this byte, as reused pool memory holds stale values:
# code that reads memory it never wrote sees NaNs and -1s, never zeros.
POISON = 0xFF

# NumPy's scalar types under CuPy's names (cupy/__init__.py re-exports NumPy's).
for _name in ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128", "intp", "dtype"):
    globals()[_name] = getattr(np, _name)
newaxis = None


# -- counters and the ordering log ------------------------------------------------------------

class Counters:
    """What the device did: kernel launches (RawKernel and the elementwise work CuPy
    runs as kernels), synchronisations (a device-to-host read: get(), int(), float(),
    bool(), item(), tolist(), repr(), asnumpy(); a stream, event or device synchronize),
    allocations from the pool and host-to-device copies."""

    FIELDS = ("launches", "syncs", "allocations", "allocated_bytes", "uploads")

    def __init__(self):
        self.reset()

    def reset(self):
        for field in self.FIELDS:
            setattr(self, field, 0)

    def snapshot(self):
        return {field: getattr(self, field) for field in self.FIELDS}


counters = Counters()
# ("launch" | "copy" | "alloc" | "free" | "record" | "wait" | "sync", device, stream name, detail)
order_log = []
_recording = [False]


@contextlib.contextmanager
def recording():
    """The ordering log, filled only inside (the whole suite would fill memory)."""
    del order_log[:]
    _recording[0] = True
    try:
        yield order_log
    finally:
        _recording[0] = False


def _note(kind, device, stream, detail=None):
    if _recording[0]:
        order_log.append((kind, device, None if stream is None else stream.name, detail))


@contextlib.contextmanager
def counting():
    """Counters over the block: ``with counting() as delta: ...; delta()`` -> dict."""
    before = counters.snapshot()
    yield lambda: {field: counters.snapshot()[field] - before[field] for field in Counters.FIELDS}


# -- errors ---------------------------------------------------------------------------------------

# cupy_backends/cuda/api/runtime.pyx's status codes (CUDA's cudaError_t) and their
# cudaGetErrorName / cudaGetErrorString, for the errors the stand-in raises.
errorMemoryAllocation = 2
errorInitializationError = 3
errorInvalidDevice = 101
errorInvalidResourceHandle = 400
_ERROR_TEXTS = {
    errorMemoryAllocation: ("cudaErrorMemoryAllocation", "out of memory"),
    errorInitializationError: ("cudaErrorInitializationError", "initialization error"),
    errorInvalidDevice: ("cudaErrorInvalidDevice", "invalid device ordinal"),
    errorInvalidResourceHandle: ("cudaErrorInvalidResourceHandle", "invalid resource handle"),
}


class CUDARuntimeError(RuntimeError):
    """cupy_backends/cuda/api/runtime.pyx: CUDARuntimeError(status), its text the status's name
    and string (and, here, why the stand-in raised it)."""

    def __init__(self, status, why=""):
        self.status = status
        name, text = _ERROR_TEXTS[status]
        super().__init__(f"{name}: {text}{why}")


class CUDADriverError(RuntimeError):
    """cupy_backends/cuda/api/driver.pyx: CUDADriverError(status)."""


class OutOfMemoryError(MemoryError):
    """cupy/cuda/memory.pyx: OutOfMemoryError(size, total, limit), a MemoryError."""

    def __init__(self, size, total, limit=0):
        self._size, self._total, self._limit = size, total, limit
        if limit == 0:
            text = f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes)."
        else:
            text = (f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes, "
                    f"limit set to: {limit:,} bytes).")
        super().__init__(text)


# -- devices: a current device per thread ---------------------------------------------------------

_thread = threading.local()


_forked = False


def _after_fork_in_child():
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _current_device():
    # A child that fork made after its parent used CUDA cannot use CUDA: every runtime
    # call fails (CUDA's documented fork limitation; CuPy raises the runtime's error).
    if _forked:
        raise CUDARuntimeError(errorInitializationError)
    return getattr(_thread, "device", 0)


def _check_ordinal(index):
    if not 0 <= index < DEVICE_COUNT:
        raise CUDARuntimeError(errorInvalidDevice)


def _set_device(index):
    index = int(index)
    _check_ordinal(index)
    _thread.device = index


def _synchronize_device(index):
    counters.syncs += 1
    _note("sync", index, None, "device")


def _device_stack():
    """cupy/cuda/device.pyx, _ThreadLocalStack: the devices ``with Device(...)`` saved, one
    stack per thread (not per Device object: one object may be entered by many threads)."""
    stack = _thread.__dict__.get("device_stack")
    if stack is None:
        stack = _thread.device_stack = []
    return stack


class Device:
    """cupy/cuda/device.pyx: ``with Device(i):`` makes i current and restores the
    previous device on exit (a stack per thread); ``id``, ``compute_capability``."""

    def __init__(self, device=None):
        if device is None:
            device = _current_device()
        elif isinstance(device, Device):
            device = device.id
        _check_ordinal(int(device))
        self.id = int(device)

    compute_capability = COMPUTE_CAPABILITY

    def __enter__(self):
        # device.pyx, Device.__enter__/__exit__: the current device pushed on the thread's stack.
        _device_stack().append(_current_device())
        _set_device(self.id)
        return self

    def __exit__(self, *exc_info):
        _set_device(_device_stack().pop())
        return False

    def use(self):
        _set_device(self.id)

    def synchronize(self):
        _synchronize_device(self.id)

    @property
    def mem_info(self):
        return _pools[self.id].free_and_total()

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    def __hash__(self):
        return hash(("Device", self.id))

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


# -- streams and events -------------------------------------------------------------------------

class _BaseStream:
    """cupy/cuda/stream.pyx, _BaseStream: a stream handle ``ptr`` and the device it was
    made on, ``device_id`` (-1 for the default streams: whichever device is current);
    compared and hashed by handle. ``with stream:`` makes it its device's current stream
    for this thread; ``name`` names it in the ordering log (the legacy default stream
    "null"; the per-thread default stream the calling thread's own, ``ptds:<thread name>``)."""

    def __init__(self, ptr, device_id):
        self.ptr, self.device_id = ptr, device_id

    @property
    def name(self):
        if self.ptr == _STREAM_PER_THREAD:
            return f"ptds:{threading.current_thread().name}"
        if self.ptr in (0, _STREAM_LEGACY):
            return "null"
        return f"stream{self.ptr}"

    def __enter__(self):
        # stream.pyx, _BaseStream.__enter__: check_stream_device_match (a stream of another
        # device than the current one: RuntimeError), then _ThreadLocal.push_stream: pushed
        # on its device's stream stack, that device recorded on the thread's device stack.
        device = _check_stream_device_match(self.device_id)
        local = _thread_streams()
        local.stacks[device].append(self)
        local.devices.append(device)
        _set_current_stream(local, self)
        return self

    def __exit__(self, *exc_info):
        # stream.pyx, _ThreadLocal.pop_stream: the device recorded at entry (whichever device
        # is current now) pops its stack; the stream now on top becomes current (a default
        # one, of device -1, on the current device: set_current_stream).
        local = _thread_streams()
        stack = local.stacks[local.devices.pop()]
        stack.pop()
        _set_current_stream(local, stack[-1])
        return False

    def use(self):
        # stream.pyx, _BaseStream.use: check_stream_device_match, then set_current_stream
        # (the ``with`` stacks stay as they are).
        _check_stream_device_match(self.device_id)
        _set_current_stream(_thread_streams(), self)
        return self

    def __cuda_stream__(self):
        return (0, self.ptr)

    def synchronize(self):
        counters.syncs += 1
        _note("sync", _current_device(), self, "stream")

    def wait_event(self, event):
        _note("wait", _current_device(), self, event.recorded_on)

    def record(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, _BaseStream) and other.ptr == self.ptr

    def __hash__(self):
        return self.ptr

    def __repr__(self):
        return f"<{type(self).__name__} {self.name} (device {self.device_id})>"


class Stream(_BaseStream):
    """cupy/cuda/stream.pyx: a stream belongs to the device current when it is made;
    ``Stream.null`` is the default (legacy) stream of whichever device is current, one
    stream for every thread; ``Stream.ptds`` is CUDA's per-thread default stream
    (``ptds=True``, handle ``runtime.streamPerThread``): one handle naming each calling
    thread's own stream. Both have device_id -1."""

    _numbers = iter(range(3, 1 << 62))  # 0, 1, 2: the default streams' handles (null, legacy, per-thread)

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        if null or ptds:
            super().__init__(0 if null else _STREAM_PER_THREAD, -1)
        else:
            super().__init__(next(Stream._numbers), _current_device())
        self._foreign_stream_ref = None

    @classmethod
    def from_external(cls, obj):
        """stream.pyx, Stream.from_external (CuPy 14): a Stream over the handle of ``obj``'s
        ``__cuda_stream__()`` -> (0, handle), of device -1 (whichever is current), keeping
        ``obj`` alive. It names the stream it wraps in the ordering log."""
        try:
            version, stream_ptr = obj.__cuda_stream__()
        except AttributeError as error:
            raise TypeError(f"Object of type {type(obj).__name__} does not implement the CUDA stream protocol "
                            "(__cuda_stream__ method)") from error
        except (TypeError, ValueError) as error:
            raise TypeError("__cuda_stream__() must return a 2-tuple of (version, stream_ptr)") from error
        if not isinstance(version, int) or not isinstance(stream_ptr, int):
            raise TypeError(f"__cuda_stream__() must return (int, int), got "
                            f"({type(version).__name__}, {type(stream_ptr).__name__})")
        if version != 0:
            raise TypeError(f"__cuda_stream__() returned unsupported version {version}, only version 0 is supported")
        stream = cls.__new__(cls)
        _BaseStream.__init__(stream, stream_ptr, -1)
        stream._foreign_stream_ref = obj
        return stream


class ExternalStream(_BaseStream):
    """stream.pyx, ExternalStream(ptr, device_id=-1): a stream CuPy does not manage,
    deprecated in CuPy 14 (its __init__ warns DeprecationWarning: Stream.from_external)."""

    def __init__(self, ptr, device_id=-1):
        warnings.warn("ExternalStream is deprecated. Use Stream.from_external() instead to interoperate with "
                      "external streams that implement the CUDA stream protocol.", DeprecationWarning, stacklevel=2)
        super().__init__(ptr, device_id)


_STREAM_LEGACY = 1          # cupy_backends/cuda/api/runtime.pyx: streamLegacy (cudaStreamLegacy)
_STREAM_PER_THREAD = 2      # cupy_backends/cuda/api/runtime.pyx: streamPerThread (cudaStreamPerThread)
Stream.null = Stream(null=True)
Stream.ptds = Stream(ptds=True)


def _check_stream_device_match(device_id):
    """stream.pyx, check_stream_device_match: the stream's device (-1: the current one),
    which must be the current device."""
    current = _current_device()
    if device_id == -1:
        device_id = current
    if device_id != current:
        raise RuntimeError(f"The device that the stream is created on ({device_id}) does not match with the "
                           f"current device ({current})")
    return device_id


class _ThreadStreams:
    """stream.pyx, _ThreadLocal: this thread's current stream per device, its ``with``
    stack per device (the default stream at the bottom) and the devices its entered
    streams were pushed for."""

    __slots__ = ("current", "stacks", "devices")

    def __init__(self):
        self.current = [Stream.null] * DEVICE_COUNT
        self.stacks = [[Stream.null] for _ in range(DEVICE_COUNT)]
        self.devices = []


def _thread_streams():
    streams = _thread.__dict__.get("streams")
    if streams is None:
        streams = _thread.streams = _ThreadStreams()
    return streams


def _set_current_stream(local, stream):
    # stream.pyx, _ThreadLocal.set_current_stream: a stream of device -1 goes to the current device.
    local.current[_current_device() if stream.device_id == -1 else stream.device_id] = stream


def get_current_stream(device_id=-1):
    """cupy/cuda/stream.pyx, ``cpdef get_current_stream(int device_id=-1)``: the thread's
    current stream of a device (-1: the current device's; the null stream until one is made
    current there). Any other id indexes _ThreadLocal's list of per-device streams, as
    Python indexes a list (Cython's default wraparound and boundscheck): -2 is the last
    device, an id past either end IndexError."""
    device_id = _c_int(device_id)
    if device_id == -1:
        device_id = _current_device()
    return _thread_streams().current[device_id]


def _c_int(value):
    """A Python argument converted to a C ``int`` as Cython does: through ``__int__`` (a float
    is truncated), TypeError for what has none (None among them), OverflowError outside int32."""
    if not isinstance(value, int):
        convert = getattr(type(value), "__int__", None)
        if convert is None:
            raise TypeError("an integer is required")
        value = convert(value)
    if not -2**31 <= value < 2**31:
        raise OverflowError("value too large to convert to int")
    return int(value)


class Event:
    """cupy/cuda/stream.pyx: an event of the device current when it is made; recording
    it on a stream while another device is current fails (cudaEventRecord's
    cudaErrorInvalidResourceHandle)."""

    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.device_id = _current_device()
        self.recorded_on = None

    def record(self, stream=None):
        stream = get_current_stream() if stream is None else stream
        if _current_device() != self.device_id:
            raise CUDARuntimeError(errorInvalidResourceHandle, f" (an event of device {self.device_id} recorded "
                                                               f"while device {_current_device()} is current)")
        if stream.device_id not in (-1, self.device_id):
            # cudaEventRecord: an event and a stream of two devices fail, whichever is current.
            raise CUDARuntimeError(errorInvalidResourceHandle, f" (an event of device {self.device_id} recorded "
                                                               f"on a stream of device {stream.device_id})")
        self.recorded_on = stream.name
        _note("record", self.device_id, stream, None)

    def synchronize(self):
        counters.syncs += 1
        _note("sync", self.device_id, None, "event")

    @property
    def done(self):
        return True


# -- the memory pool --------------------------------------------------------------------------------

class _Chunk:
    """memory.pyx, _Chunk: ``size`` bytes at ``offset`` of one device allocation (``root``);
    ``prev``/``next`` link the pieces a split made of it."""

    __slots__ = ("root", "offset", "size", "arena", "prev", "next", "__weakref__")

    def __init__(self, root, offset, size, arena):
        self.root, self.offset, self.size, self.arena = root, offset, size, arena
        self.prev = self.next = None

    def split(self, size):
        """The rest past ``size`` as a chunk of its own (None when nothing is left)."""
        if self.size == size:
            return None
        rest = _Chunk(self.root, self.offset + size, self.size - size, self.arena)
        rest.prev, rest.next = self, self.next
        if self.next is not None:
            self.next.prev = rest
        self.next, self.size = rest, size
        return rest

    def merge_next(self):
        following = self.next
        self.size += following.size
        self.next = following.next
        if self.next is not None:
            self.next.prev = self


class MemoryPool:
    """cupy/cuda/memory.pyx's MemoryPool (SingleDeviceMemoryPool), per device. Sizes round
    up to 512 bytes. A freed chunk stays in the pool, in the arena of the stream that
    allocated it (``free`` inserts it into ``chunk.arena``; one arena a stream, one a thread
    for the per-thread default stream), merged with free neighbours of its split: the next
    allocation on that stream takes the best-fitting free chunk at once, ordered after
    nothing on other streams, and splits off the rest. ``free_all_blocks`` releases the free
    chunks that are not split. ``total_bytes`` counts what the pool holds, used or free; an
    allocation that finds no free chunk must fit under ``set_limit``'s limit with it
    (_try_malloc: else free_all_blocks, then gc.collect and free_all_blocks again, then
    OutOfMemoryError(size, total, limit)). The log names the arena's stream for each free."""

    def __init__(self, device_id):
        self.device_id = device_id
        self._limit = 0                 # 0: none but the device's memory
        self._used = 0
        self._total = 0
        self._arenas = {}               # stream name -> its free chunks
        self._pending = []              # chunks freed while the lock was held (add_pending_free_atomic)
        self._lock = threading.Lock()
        self._in_use_lock = threading.Lock()      # the atomic _in_use_bytes (no allocation inside)

    def set_limit(self, size=None, fraction=None):
        self._limit = int(DEVICE_MEMORY * fraction) if fraction is not None else int(size or 0)

    def get_limit(self):
        return self._limit

    def used_bytes(self):
        return self._used

    def total_bytes(self):
        return self._total

    def free_all_blocks(self, stream=None):
        with self._lock:
            self._release_unsplit(None if stream is None else stream.name)

    def _release_unsplit(self, name=None):
        """_Arena.free_all, the lock held: the free chunks that are not split go (of one
        stream's arena, or of all where ``name`` is None)."""
        self._commit_pending()
        for name in list(self._arenas) if name is None else [name]:
            free = self._arenas.get(name, [])
            kept = [chunk for chunk in free if chunk.prev is not None or chunk.next is not None]
            self._total -= sum(chunk.size for chunk in free) - sum(chunk.size for chunk in kept)
            free[:] = kept

    def free_and_total(self):
        return DEVICE_MEMORY - self._total, DEVICE_MEMORY

    def malloc(self, size):
        """memory.pyx, MemoryPool.malloc(size) -> MemoryPointer on the current stream."""
        nbytes = -(-int(size) // 512) * 512
        stream = get_current_stream()
        if nbytes == 0:
            return _pointer(np.empty(0, np.uint8), self.device_id, stream, 0)
        with self._lock:
            self._commit_pending()
            free = self._arenas.setdefault(stream.name, [])
            fitting = [chunk for chunk in free if chunk.size >= nbytes]
            if fitting:
                chunk = min(fitting, key=lambda candidate: candidate.size)
                free.remove(chunk)
                rest = chunk.split(nbytes)
                if rest is not None:
                    free.append(rest)
            else:
                chunk = _Chunk(self._device_malloc(nbytes), 0, nbytes, stream.name)
            with self._in_use_lock:
                self._used += nbytes
        memory = np.frombuffer(memoryview(chunk.root)[chunk.offset:chunk.offset + nbytes], np.uint8)
        memory[...] = POISON
        pointer = _pointer(memory, self.device_id, stream, int(size))
        weakref.finalize(memory, self._free, chunk, int(size))      # when the last view of it goes
        return pointer

    def _device_malloc(self, nbytes):
        """_try_malloc, the lock held: room under the limit, then the device's memory (cudaMalloc)."""
        for attempt in range(3):
            limit = self._limit or 2**64
            if self._total + nbytes <= limit and self._total + nbytes <= DEVICE_MEMORY:
                try:
                    root = np.empty(nbytes, np.uint8)
                except MemoryError:         # cudaMalloc's errorMemoryAllocation: the same retries
                    pass
                else:
                    self._total += nbytes
                    return root
            if attempt == 1:
                gc.collect()
            self._release_unsplit()
        raise OutOfMemoryError(nbytes, self._total, self._limit)

    def _free(self, chunk, size):
        # memory.pyx, free: back into the arena when the lock is free, else onto the pending
        # list (add_pending_free_atomic), which the next allocation or free_all_blocks commits.
        # Here always the list: a finalizer runs in any thread, and an interrupt between a
        # lock's acquire and its try would leave it held (CuPy's Cython has no such moment).
        with self._in_use_lock:
            self._used -= chunk.size
        self._pending.append(chunk)
        if _recording[0]:
            order_log.append(("free", self.device_id, chunk.arena, size))

    def _commit_pending(self):
        while self._pending:
            chunk = self._pending.pop()
            free = self._arenas.setdefault(chunk.arena, [])
            while chunk.next is not None and chunk.next in free:       # _Arena.try_merge_chunk
                free.remove(chunk.next)
                chunk.merge_next()
            while chunk.prev is not None and chunk.prev in free:
                free.remove(chunk.prev)
                chunk = chunk.prev
                chunk.merge_next()
            free.append(chunk)


_pools = [MemoryPool(index) for index in range(DEVICE_COUNT)]


class _DefaultPool:
    """memory.pyx, MemoryPool: one object for every device, each call served by the pool of
    the device current at that call (a limit set under device 1 limits device 1)."""

    def __getattr__(self, name):
        return getattr(_pools[_current_device()], name)


_default_pool = _DefaultPool()


def get_default_memory_pool():
    """cupy/__init__.py: the one default pool (its calls go to the current device's)."""
    return _default_pool


def _pointer(memory, device_id, stream, size):
    """An allocation of ``size`` bytes (``memory``: the host bytes standing for it), noted."""
    counters.allocations += 1
    counters.allocated_bytes += size
    _note("alloc", device_id, stream, size)
    return MemoryPointer(memory.ctypes.data, device_id, memory)


def _malloc(size):
    """memory.pyx, _malloc: an allocation without the pool (``set_allocator(None)``): Memory(size),
    whose cudaMalloc failing is runtime.malloc's CUDARuntimeError(errorMemoryAllocation), which
    only the pools turn into OutOfMemoryError."""
    nbytes = int(size)
    try:
        if nbytes > DEVICE_MEMORY:
            raise MemoryError
        memory = np.full(nbytes, POISON, np.uint8)
    except (MemoryError, ValueError):
        raise CUDARuntimeError(errorMemoryAllocation) from None
    return _pointer(memory, _current_device(), get_current_stream(), nbytes)


_global_allocator = [lambda size: get_default_memory_pool().malloc(size)]    # cupy/__init__.py's default
_thread_allocator = threading.local()


def set_allocator(allocator=None):
    """memory.pyx, set_allocator: the allocator of every thread outside ``using_allocator``."""
    if getattr(_thread_allocator, "allocator", None) is not None:
        raise ValueError("Can't change the global allocator inside `using_allocator` context manager")
    _global_allocator[0] = _malloc if allocator is None else allocator


def get_allocator():
    """memory.pyx, get_allocator: this thread's ``using_allocator`` one, else the global one."""
    return getattr(_thread_allocator, "allocator", None) or _global_allocator[0]


@contextlib.contextmanager
def using_allocator(allocator=None):
    """cupy/cuda/__init__.py, using_allocator: a thread-local allocator inside the block."""
    previous = getattr(_thread_allocator, "allocator", None)
    _thread_allocator.allocator = _malloc if allocator is None else allocator
    try:
        yield
    finally:
        _thread_allocator.allocator = previous


def alloc(size):
    """memory.pyx, alloc: calls the current allocator."""
    return get_allocator()(size)


# cupy/_core/_dtype.pyx: the type characters CuPy always takes.
_TYPE_CHARS = "?bhilqBHILQefdFD"
# cupy/_core/_scalar.pyx registers ml_dtypes' bfloat16 only beside NumPy >= 2.1.2.
_BFLOAT16 = None
if np.lib.NumpyVersion(np.__version__) >= "2.1.2":
    try:
        import ml_dtypes
        _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
    except ImportError:
        pass


def _supported(dtype):
    """cupy/_core/_dtype.pyx, check_supported_dtype (the ndarray constructor's, with no memptr)."""
    if dtype.byteorder == ">":
        raise ValueError(f"Unsupported dtype {dtype} with big-endian byte-order")
    if dtype.char in _TYPE_CHARS or dtype == _BFLOAT16:
        return
    if dtype.type is np.void and dtype.subdtype is None and dtype.itemsize and not dtype.hasobject:
        return                                       # structured bytes CuPy holds, not computes with
    raise ValueError(f"Unsupported dtype {dtype}")


def _allocate(shape, dtype, fill=POISON, order="C", strides=None):
    """A fresh allocation of ``shape`` on the current device, through its pool, in C or
    Fortran ``order`` (or with ``strides``, a dense layout of another axis order)."""
    dtype = np.dtype(dtype)
    shape = tuple(int(extent) for extent in shape)
    if len(shape) > 64:                              # core.pyx, the ndarray constructor: MAX_NDIM
        raise ValueError(f"maximum supported dimension for an ndarray is 64, found {len(shape)}")
    if any(extent < 0 for extent in shape):
        raise ValueError("Negative dimensions are not allowed")
    _supported(dtype)
    count = 1
    for extent in shape:
        count *= extent
    nbytes = count * dtype.itemsize
    if any(extent >= 2**63 for extent in shape):
        raise OverflowError("Python int too large to convert to C ssize_t")    # core.pyx's shape_t
    if count == 0:
        try:
            np.empty(shape, dtype)
        except ValueError:
            # CuPy allocates nothing and accepts the shape; its get() then fails
            # (ValueError, see get). The stand-in cannot hold such an array.
            raise NotImplementedError(f"the CuPy stand-in cannot model an empty array of shape {shape}, which "
                                      f"CuPy accepts and NumPy cannot hold") from None
    device = _current_device()
    pointer = get_allocator()(nbytes)                    # core.pyx: memory.alloc(size)
    root = getattr(pointer, "memory", None)
    if not isinstance(root, np.ndarray) or root.size < nbytes or pointer.device_id != device:
        raise NotImplementedError("the CuPy stand-in models allocators that return what a pool's "
                                  "malloc or cupy.cuda.alloc returned on the current device")
    if fill != POISON:
        root.fill(fill)
    if strides is not None and count:
        data = np.lib.stride_tricks.as_strided(root[:nbytes].view(dtype), shape, strides)
    else:
        data = root[:nbytes].view(dtype).reshape(shape, order="F" if order in ("F", "f") else "C")
    return ndarray._wrap(data, device)


# -- the array ------------------------------------------------------------------------------------

class MemoryPointer:
    """cupy/cuda/memory.pyx: where an array's data is (``ptr``, ``device_id``); one an
    allocator returned holds its memory (``memory``, the host bytes standing for it)."""

    __slots__ = ("ptr", "device_id", "memory")

    def __init__(self, ptr, device_id, memory=None):
        self.ptr, self.device_id, self.memory = ptr, device_id, memory

    def copy_from_device_async(self, src, size, stream=None):
        # memory.pyx: _enable_peer_access (none here: nothing to enable), then cudaMemcpyAsync
        # with cudaMemcpyDefault on the given or current stream, no kernel. Under unified
        # addressing CUDA copies between any two devices (through the host without peer
        # access), and a copy may be queued on a stream of any device.
        if size > 0:
            self._note_copy(stream)
            ctypes.memmove(self.ptr, src.ptr, size)

    def _note_copy(self, stream=None):
        stream = get_current_stream() if stream is None else stream
        device = _current_device() if stream.device_id == -1 else stream.device_id
        _note("copy", device, stream, "device to device")


class Flags:
    """cupy/_core/flags.pyx: c_contiguous, f_contiguous, owndata, and no ``writeable``
    (CuPy has no read-only arrays)."""

    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, array, owndata):
        self.c_contiguous = array.flags.c_contiguous
        self.f_contiguous = array.flags.f_contiguous
        self.owndata = owndata

    def __getitem__(self, name):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[name]


def _host_value(value, device):
    """An operand as NumPy for elementwise work on ``device``: device arrays must be
    there (cupy/_core/_kernel.pyx, _check_peer_access: no peer access here), scalars
    pass, NumPy arrays are refused as CuPy's ufuncs refuse them."""
    if isinstance(value, ndarray):
        _check_peer_access(value, device)
        return value._a
    if isinstance(value, np.ndarray) and value.ndim:
        raise TypeError(f"Unsupported type {type(value)}")
    if isinstance(value, (np.generic, np.ndarray, int, float, complex, bool)):
        return value
    raise TypeError(f"Unsupported type {type(value)}")


def _memset(contiguous):
    """Every byte zero, as cudaMemsetAsync writes them."""
    contiguous.reshape(-1).view(np.uint8)[...] = 0


def _check_peer_access(array, device):
    """cupy/_core/_kernel.pyx, _check_peer_access, on a machine without peer access."""
    if array._device != device:
        raise ValueError(f"The device where the array resides ({array._device}) is different from the "
                         f"current device ({device}). Peer access is unavailable between these devices.")


def _launched(what):
    counters.launches += 1
    _note("launch", _current_device(), get_current_stream(), what)


def _result(host, what):
    """A new device array on the current device holding ``host`` (what a kernel made, into
    memory allocated before it ran)."""
    if not isinstance(host, np.ndarray):
        host = np.asarray(host)
    out = _allocate(host.shape, host.dtype)
    _launched(what)
    out._a[...] = host
    return out


def _sync(what):
    counters.syncs += 1
    _note("sync", _current_device(), get_current_stream(), what)


class ndarray:
    """cupy/_core/core.pyx's ndarray over NumPy memory on one device."""

    __slots__ = ("_a", "_device", "_base", "__weakref__")
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        made = _allocate(shape if isinstance(shape, tuple) else (shape,), dtype, order=order)
        self._a, self._device, self._base = made._a, made._device, None

    @classmethod
    def _wrap(cls, data, device, base=None):
        array = object.__new__(cls)
        array._a, array._device, array._base = data, device, base
        return array

    def _view(self, data):
        # core.pyx: a view's base is the array owning the memory.
        return ndarray._wrap(data, self._device, self if self._base is None else self._base)

    # -- attributes ----------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: Flags(self._a, self._base is None))
    device = property(lambda self: Device(self._device))
    data = property(lambda self: MemoryPointer(self._a.ctypes.data, self._device))
    T = property(lambda self: self._view(self._a.T))

    @property
    def base(self):
        return self._base

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.dtype.str, "descr": self.dtype.descr,
                "data": (self._a.ctypes.data, False), "version": 3,
                "strides": None if self._a.flags.c_contiguous else self.strides}

    # -- host reads: each one synchronises (cupy/_core/core.pyx: get, item, __int__ ...) --------
    def get(self, stream=None, order="C", out=None, blocking=True):
        # core.pyx, get: the copy runs on ``stream``, else on the current device's current
        # stream (taken before the array's device is made current for the copy: a stream of
        # another device when that is current), and waits for it.
        stream = get_current_stream() if stream is None else stream
        if out is not None:
            _note("sync", self._device, stream, "get")
            counters.syncs += 1
            out[...] = self._a
            return out
        if self.size == 0:
            # core.pyx, get: an empty array comes back as numpy.ndarray(shape), which
            # refuses a shape whose extents multiply past NumPy's limit (ValueError).
            return np.ndarray(self.shape, dtype=self.dtype)
        if order == "C" and not self._a.flags.c_contiguous:
            # core.pyx, get: a C-contiguous copy made first on the array's device (its pool, a
            # kernel), as _internal_ascontiguousarray, inside ``with stream:``, which refuses a
            # stream of another device (check_stream_device_match: RuntimeError); it can find
            # the device full.
            device = _current_device()
            _set_device(self._device)
            try:
                with stream:
                    ascontiguousarray(self)
            finally:
                _set_device(device)
        counters.syncs += 1
        _note("sync", self._device, stream, "get")
        return np.array(self._a, order=order)

    def item(self):
        _sync("item")
        return self._a.item()

    def tolist(self):
        _sync("tolist")
        return self._a.tolist()

    def __int__(self):
        _sync("int")
        return int(self._a)

    def __float__(self):
        _sync("float")
        return float(self._a)

    def __complex__(self):
        _sync("complex")
        return complex(self._a)

    def __bool__(self):
        _sync("bool")
        return bool(self._a)

    def __repr__(self):
        _sync("repr")
        return repr(self._a).replace("array(", "array(", 1)

    def __str__(self):
        _sync("str")
        return str(self._a)

    def __format__(self, spec):
        # cupy/_core/core.pyx: format(self.get(), format_spec). (CuPy defines no __index__:
        # a device array is no index, as range() or a slice would take it.)
        _sync("format")
        return format(self._a, spec)

    def __array__(self, dtype=None, copy=None):
        # cupy/_core/core.pyx, ndarray.__array__.
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[index] for index in range(len(self)))

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    # -- DLPack (cupy/_core/core.pyx __dlpack__, cupy/_core/dlpack.pyx) --------------------------
    def __dlpack_device__(self):
        return (2, self._device)               # kDLCUDA

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is None or tuple(dl_device) == self.__dlpack_device__():
            if copy is True:
                raise BufferError("copy=True only supported for copy to CPU.")
            return _DeviceCapsule(self)         # only a CUDA consumer (from_dlpack here) reads it
        if tuple(dl_device) == (1, 0):
            if copy is False:
                raise ValueError("GPU memory cannot be exported to CPU without copy.")
            return self.get().__dlpack__(max_version=max_version)
        raise BufferError("unsupported device requested.")

    # -- views and copies -------------------------------------------------------------------------
    def _key(self, key):
        """An index key as NumPy's (_routines_indexing.pyx, _prepare_slice_list): a list or a
        NumPy array is uploaded first (core.array, an allocation; an empty list as int32), and
        device index arrays must be on this array's device."""
        if isinstance(key, tuple):
            return tuple(self._key(part) for part in key)
        if isinstance(key, (list, np.ndarray)):
            key = _upload(key, np.int32 if isinstance(key, list) and np.size(key) == 0 else None)
        if isinstance(key, ndarray):
            _check_peer_access(key, self._device)
            return key._a
        return key

    def _wrapped(self, key):
        """An advanced key's integer index arrays wrapped around their axis (core.pyx,
        __getitem__/__setitem__: "NumPy handles them by raising an error, but CuPy wraps
        around them"); keys with None or Ellipsis as they are."""
        parts = key if isinstance(key, tuple) else (key,)
        if any(part is None or part is Ellipsis for part in parts) or len(parts) > self._a.ndim:
            return key
        parts = tuple(np.mod(part, self._a.shape[axis]) if isinstance(part, np.ndarray) and part.dtype.kind in "iu"
                      and self._a.shape[axis] else part for axis, part in enumerate(parts))
        return parts if isinstance(key, tuple) else parts[0]

    @staticmethod
    def _is_basic(key):
        parts = key if isinstance(key, tuple) else (key,)
        return all(part is None or part is Ellipsis or isinstance(part, (slice, int, np.integer))
                   for part in parts)

    def __getitem__(self, key):
        key = self._key(key)
        if self._is_basic(key):
            # A view; indexing every axis gives a 0-d array, never a scalar (as CuPy).
            return self._view(self._a[(key if isinstance(key, tuple) else (key,)) + (Ellipsis,)]
                              if Ellipsis not in (key if isinstance(key, tuple) else (key,)) else self._a[key])
        _check_peer_access(self, _current_device())
        return _result(self._a[self._wrapped(key)], "take")

    def __setitem__(self, key, value):
        # cupy/_core/_routines_indexing.pyx, _scatter_op (op "update").
        key = self._key(key)
        if self._is_basic(key):
            target = self[key]
            if not isinstance(value, ndarray):
                # A value that is not a device array goes to fill() (host arrays refused,
                # gh-2079; zero is a memset).
                target.fill(value)
                return
            if target.shape == value.shape and target.strides == value.strides:
                if target._a.ctypes.data == value._a.ctypes.data:
                    return                  # the same memory
                if target._a.flags.c_contiguous and target.dtype == value.dtype:
                    # One memcpy (copy_from_device_async), whichever devices hold the two. The
                    # bytes move by an assignment, the last step, not by a call: CuPy's is C code,
                    # which no interrupt splits, and CPython delivers one when a call returns.
                    if value.nbytes:
                        target.data._note_copy()
                        target._a[...] = value._a
                    return
            # elementwise_copy: a kernel on the current device, over arrays there.
            _check_peer_access(target, _current_device())
            _check_peer_access(value, _current_device())
            _launched("copy")
            target._a[...] = value._a
            return
        _check_peer_access(self, _current_device())
        if not isinstance(value, ndarray):
            # _routines_indexing.pyx, _scatter_op_single: core.array(value, dtype=a.dtype),
            # a host-to-device copy, or for a scalar a fill() (zero: a memset, -0.0 lost).
            value = array(value, dtype=self.dtype)
        _check_peer_access(value, self._device)
        _launched("copy")
        self._a[self._wrapped(key)] = value._a

    def fill(self, value):
        # cupy/_core/core.pyx, ndarray.fill: a zero value of a contiguous array is a memset,
        # so -0.0 becomes +0.0 (every bit cleared).
        _check_peer_access(self, _current_device())
        value = np.asarray(value.get() if isinstance(value, ndarray) else value, dtype=self.dtype)
        if value.shape != ():
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        _launched("fill")
        if value == 0 and self._a.flags.c_contiguous:
            _memset(self._a)
        else:
            self._a[...] = value

    def copy(self, order="C"):
        # cupy/_core/core.pyx, ndarray.copy: into the current device, from any device. On the
        # array's device, an elementwise copy (astype). From another device: first, with that
        # device current (runtime.setDevice), astype(order=order, copy=False), which is the
        # array itself when already in that order, else a copy made there (its pool, a kernel on
        # its current stream); then a cudaMemcpyAsync of that on the current device's current
        # stream (MemoryPointer.copy_from_device_async), ordered after nothing on the other's.
        device = _current_device()
        if self.size == 0 or self._device == device:
            return self._astype(self.dtype, order=order, copy=True)
        _set_device(self._device)
        try:
            staged = self._astype(self.dtype, order=order, copy=None)
        finally:
            _set_device(device)
        flags = staged._a.flags
        if not (flags.c_contiguous or flags.f_contiguous):
            raise NotImplementedError("CuPy cannot copy non-contiguous array between devices.")
        out = _allocate(staged.shape, staged.dtype, order="C" if flags.c_contiguous else "F")
        _note("copy", device, get_current_stream(), "device to device")
        out._a[...] = staged._a
        return out

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        # cupy/_core/core.pyx, ndarray.astype: copy=False is _astype's copy=None.
        if casting is not None:
            raise TypeError("casting is not supported yet")
        if subok is not None:
            raise TypeError("subok is not supported yet")
        return self._astype(dtype, order, copy=True if copy else None)

    def _astype(self, dtype, order="K", copy=True):
        # cupy/_core/core.pyx, _ndarray_base._astype: the array itself when no cast is needed,
        # ``copy`` is not True and the array is laid out in ``order`` already; copy=False then
        # raises where a copy is needed (copy=None copies). The copy: a new array in ``order``
        # on the current device, filled by an elementwise kernel (none for an empty array).
        dtype = np.dtype(dtype)
        order = "K" if order is None else order.upper()
        c_order, f_order = self._a.flags.c_contiguous, self._a.flags.f_contiguous
        if dtype == self.dtype and not copy and (order == "K" or order == "A" and (c_order or f_order)
                                                 or order == "C" and c_order or order == "F" and f_order):
            return self
        if copy is False:
            raise ValueError("Unable to avoid copy while creating an array as requested.")
        if self.size:
            _check_peer_access(self, _current_device())
        host = self._a.astype(dtype, order=order)
        out = _allocate(host.shape, dtype, strides=host.strides)
        if self.size:
            _launched("copy" if dtype == self.dtype else "astype")
            out._a[...] = host
        return out

    def view(self, dtype=None):
        return self._view(self._a if dtype is None else self._a.view(dtype))

    def reshape(self, *shape, order="C"):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        reshaped = self._a.reshape(shape, order=order)
        if np.shares_memory(reshaped, self._a) or not self.size:
            return self._view(reshaped)
        return _result(reshaped, "copy")

    def ravel(self, order="C"):
        return self.reshape(-1, order=order)

    def flatten(self, order="C"):
        return self.copy().reshape(-1)

    def squeeze(self, axis=None):
        return self._view(self._a.squeeze(axis))

    def transpose(self, *axes):
        return self._view(self._a.transpose(*axes))

    def swapaxes(self, a, b):
        return self._view(self._a.swapaxes(a, b))

    def __deepcopy__(self, memo):
        with Device(self._device):
            return self.copy()

    def __reduce__(self):
        return (array, (self.get(),))

    # -- elementwise work: one kernel each (cupy/_core/_kernel.pyx) --------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        device = _current_device()
        out = kwargs.pop("out", None)
        host_inputs = [_host_value(value, device) for value in inputs]
        if out is not None:
            targets = out if isinstance(out, tuple) else (out,)
            for target in targets:
                if not isinstance(target, ndarray):
                    raise TypeError(f"Output must be a cupy.ndarray, got {type(target)}")
                _check_peer_access(target, device)
            _launched(ufunc.__name__)
            result = getattr(ufunc, method)(*host_inputs, out=tuple(t._a for t in targets), **kwargs)
            return out
        result = getattr(ufunc, method)(*host_inputs, **kwargs)
        if isinstance(result, tuple):
            return tuple(_result(part, ufunc.__name__) for part in result)
        return _result(result, ufunc.__name__)

    def __array_function__(self, func, types_, args, kwargs):
        # cupy/_core/core.pyx, __array_function__: CuPy's function of that name, else
        # NotImplemented (NumPy then raises TypeError).
        implementation = _FUNCTIONS.get(func.__name__)
        if implementation is None:
            return NotImplemented
        return implementation(*args, **kwargs)

    def _reduce(self, name, axis=None, dtype=None, out=None, keepdims=False):
        _check_peer_access(self, _current_device())
        result = getattr(np, name)(self._a, axis=axis, keepdims=keepdims,
                                   **({"dtype": dtype} if dtype is not None else {}))
        return _result(result, name)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._reduce("sum", axis, dtype, out, keepdims)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        return self._reduce("mean", axis, dtype, out, keepdims)

    def any(self, axis=None, out=None, keepdims=False):
        return self._reduce("any", axis, None, out, keepdims)

    def all(self, axis=None, out=None, keepdims=False):
        return self._reduce("all", axis, None, out, keepdims)

    def max(self, axis=None, out=None, keepdims=False):
        return self._reduce("max", axis, None, out, keepdims)

    def min(self, axis=None, out=None, keepdims=False):
        return self._reduce("min", axis, None, out, keepdims)


def _operator(ufunc, reflected=False):
    def method(self, other):
        if not isinstance(other, (ndarray, np.generic, int, float, complex, bool)) and not (
                isinstance(other, np.ndarray) and other.ndim == 0):
            if isinstance(other, np.ndarray):
                raise TypeError(f"Unsupported type {type(other)}")
            return NotImplemented
        return ufunc(other, self) if reflected else ufunc(self, other)
    return method


def _inplace(ufunc):
    def method(self, other):
        ufunc(self, other, out=self)
        return self
    return method


for _name, _ufunc in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                      ("floordiv", np.floor_divide), ("mod", np.remainder), ("pow", np.power),
                      ("and", np.bitwise_and), ("or", np.bitwise_or),
                      ("xor", np.bitwise_xor), ("matmul", np.matmul)):
    setattr(ndarray, f"__{_name}__", _operator(_ufunc))
    setattr(ndarray, f"__r{_name}__", _operator(_ufunc, reflected=True))
    setattr(ndarray, f"__i{_name}__", _inplace(_ufunc))
for _name, _ufunc in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                      ("gt", np.greater), ("ge", np.greater_equal)):
    setattr(ndarray, f"__{_name}__", _operator(_ufunc))
ndarray.__neg__ = lambda self: np.negative(self)
ndarray.__pos__ = lambda self: np.positive(self)
ndarray.__abs__ = lambda self: np.absolute(self)
ndarray.__invert__ = lambda self: np.invert(self)
ndarray.__module__ = "cupy"
ndarray.__qualname__ = ndarray.__name__ = "ndarray"


class _DeviceCapsule:
    """A CUDA DLPack capsule: only CuPy (from_dlpack here) can consume it, as only a
    CUDA-aware consumer can read a real one."""

    def __init__(self, array):
        self.array = array


# -- creation ------------------------------------------------------------------------------------

def empty(shape, dtype=float, order="C"):
    return _allocate(shape if isinstance(shape, (tuple, list)) else (shape,), dtype, order=order)


def zeros(shape, dtype=float, order="C"):
    # cupy/_creation/basic.py, zeros: a memset of a fresh allocation.
    out = empty(shape, dtype, order)
    _launched("memset")
    _memset(out._a)
    return out


def ones(shape, dtype=float, order="C"):
    return full(shape, 1, dtype)


def full(shape, fill_value, dtype=None, order="C"):
    dtype = np.asarray(fill_value).dtype if dtype is None else dtype
    out = empty(shape, dtype)
    out.fill(fill_value)
    return out


def empty_like(a, dtype=None, order="K", subok=None, shape=None):
    return empty(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def zeros_like(a, dtype=None, order="K", subok=None, shape=None):
    return zeros(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def ones_like(a, dtype=None, order="K", subok=None, shape=None):
    return ones(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def full_like(a, fill_value, dtype=None, order="K", subok=None, shape=None):
    return full(a.shape if shape is None else shape, fill_value, a.dtype if dtype is None else dtype)


def _upload(obj, dtype=None, order="K", ndmin=0):
    """A host-to-device copy onto the current device. core.pyx, _array_default: order "K"
    (or "A") keeps a NumPy array's Fortran order (``flags.fnc``); anything else is C. The
    host value is numpy.array(obj, dtype, copy=None, ndmin=ndmin), so a 0-d value given
    ``ndmin`` is copied, not filled."""
    if order in ("K", "k", "A", "a"):
        order = "F" if isinstance(obj, np.ndarray) and obj.flags.fnc else "C"
    host = np.array(obj, dtype=dtype, copy=None, ndmin=ndmin)
    if host.dtype.hasobject:
        raise ValueError("Unsupported dtype object")
    if host.ndim == 0:
        # cupy/_core/core.pyx, _array_default: a 0-d value is no copy but a fill(),
        # so a zero is a memset and -0.0 arrives as +0.0.
        out = _allocate((), host.dtype)
        out.fill(host)
        return out
    counters.uploads += 1
    out = _allocate(host.shape, host.dtype, order=order)
    out._a[...] = host
    _note("copy", _current_device(), get_current_stream(), "host to device")
    return out


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, blocking=False):
    """cupy/_creation/from_data.py and core.pyx's array(): a device array (another
    device's is copied onto the current one); anything else goes through NumPy. ``ndmin``
    prepends ones to the shape. ``copy`` is read for device arrays only: a host value is
    always copied, copy=False included, with no NumPy 2 ValueError (core.pyx, _array_default:
    only _try_skip_h2d_copy reads it, and it maps host memory only under CUPY_ENABLE_UMP=1,
    off by default and not modelled)."""
    if subok:
        raise NotImplementedError            # core.pyx, array: subok is not supported
    if isinstance(obj, ndarray):
        # core.pyx, _array_from_cupy_ndarray: on the current device, _astype(dtype, order, copy);
        # another device's array is copied onto the current one (src.copy(order), whatever
        # ``copy`` says) and cast there.
        order = "K" if order is None else order
        dtype = obj.dtype if dtype is None else dtype
        if obj._device == _current_device():
            made = obj._astype(dtype, order=order, copy=copy)
        else:
            made = obj.copy(order=order)._astype(dtype, copy=None)
        if ndmin > made.ndim and made is obj:
            made = made.view()               # the ones go on a view: ``obj`` keeps its shape
        return _prepend_ones(made, ndmin)
    if isinstance(obj, (list, tuple)) and any(isinstance(part, ndarray) for part in obj):
        # core.pyx, _array_from_nested_sequence: ndmin pads the joined shape (a reshape of a new array).
        return _prepend_ones(stack([asarray(part, dtype) for part in obj]), ndmin)
    return _upload(obj, dtype, "K" if order is None else order, ndmin)


def _prepend_ones(made, ndmin):
    """core.pyx, _array_from_cupy_ndarray: ``a.shape = (1,) * (ndmin - ndim) + a.shape``, in place."""
    if ndmin > made.ndim:
        made._a = made._a.reshape((1,) * (ndmin - made.ndim) + made.shape)
    return made


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    # cupy/_creation/from_data.py, asarray: core.array(a, dtype, copy, order): a device array
    # of the current device is itself when no cast or reordering is needed; another device's
    # is copied onto the current one.
    return array(a, dtype, copy, order, blocking=blocking)


def ascontiguousarray(a, dtype=None):
    # cupy/_core/core.pyx, ascontiguousarray(_ndarray_base a, dtype): a device array only; one
    # that is C-contiguous already is itself, raveled when 0-d; else a new array (of shape
    # (1,) for a 0-d one) filled by an elementwise kernel on the current device.
    if not isinstance(a, ndarray):
        raise TypeError(f"Argument 'a' has incorrect type (expected cupy._core.core._ndarray_base, "
                        f"got {type(a).__name__})")
    dtype = a.dtype if dtype is None else np.dtype(dtype)
    if dtype == a.dtype and a._a.flags.c_contiguous:
        return a._view(a._a.reshape(1)) if a.ndim == 0 else a
    _check_peer_access(a, _current_device())
    return _result(np.ascontiguousarray(a._a, dtype).reshape((1,) if a.ndim == 0 else a.shape), "copy")


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    """cupy/_core/core.pyx's asnumpy: get() of a device array (a synchronisation)."""
    if isinstance(a, ndarray):
        return a.get(stream=stream, order=order, out=out)
    if hasattr(a, "__cuda_array_interface__"):
        raise TypeError("a foreign device array: not modelled by the stand-in")
    return np.asarray(a, order=order)


def arange(start, stop=None, step=1, dtype=None):
    return _upload(np.arange(start, stop, step, dtype) if stop is not None else np.arange(start, dtype=dtype))


def _device_operands(arrays):
    device = _current_device()
    host = []
    for value in arrays:
        if not isinstance(value, ndarray):
            raise TypeError(f"Only cupy arrays can be concatenated (got {type(value)})")
        _check_peer_access(value, device)
        host.append(value._a)
    return host


def concatenate(tup, axis=0, out=None, dtype=None, casting="same_kind"):
    host = _device_operands(tup)
    if out is not None:
        _check_peer_access(out, _current_device())
        _upload_concatenate_tables(tup, axis, out.dtype)
        _launched("concatenate")
        np.concatenate(host, axis=axis, out=out._a, dtype=dtype, casting=casting)
        return out
    joined = np.concatenate(host, axis=axis, dtype=dtype, casting=casting)
    made = _allocate(joined.shape, joined.dtype)
    _upload_concatenate_tables(tup, axis, joined.dtype)
    _launched("concatenate")
    made._a[...] = joined
    return made


def _upload_concatenate_tables(arrays, axis, dtype):
    """cupy/_core/_routines_manipulation.pyx, _concatenate: more than 8 arrays, all of the
    output's dtype and under 2 MiB each on average, are joined by one kernel that reads a
    table of their addresses, uploaded (core.array(ptrs): a pool allocation) after the
    output exists; pieces of unequal extent along ``axis`` or not C-contiguous also upload
    their offsets and strides (_concatenate_single_kernel). Fewer or larger arrays are
    copied one by one, uploading nothing."""
    arrays = list(arrays)
    if len(arrays) <= 8 or any(array.dtype != dtype for array in arrays):
        return
    if sum(array.size for array in arrays) * np.dtype(dtype).itemsize >= 2 * 1024 * 1024 * len(arrays):
        return
    _upload(np.zeros(len(arrays), np.int64))                             # ptrs
    extent = sum(array.shape[axis] for array in arrays) // len(arrays)
    if not all(array._a.flags.c_contiguous and array.shape[axis] == extent for array in arrays):
        _upload(np.zeros(len(arrays), np.int64))                         # cum_sizes
        _upload(np.zeros((len(arrays), arrays[0].ndim), np.int64))       # x_strides


def stack(tup, axis=0, out=None, dtype=None):
    host = _device_operands(tup)
    return _result(np.stack(host, axis=axis, dtype=dtype), "stack")


def array_equal(a1, a2, equal_nan=False):
    device = _current_device()
    return _result(np.array_equal(_host_value(a1, device), _host_value(a2, device), equal_nan=equal_nan),
                   "array_equal")


def get_array_module(*args):
    return sys.modules[__name__] if any(isinstance(arg, ndarray) for arg in args) else np


def from_dlpack(x, *, device=None, copy=None):
    """cupy/_core/dlpack.pyx, from_dlpack: a CUDA producer's tensor, zero-copy; a CPU
    producer is refused with TypeError (CuPy 14)."""
    if not hasattr(x, "__dlpack_device__"):
        if isinstance(x, _DeviceCapsule):
            return x.array
        raise TypeError("the stand-in reads only its own DLPack capsules")
    device_type, device_id = x.__dlpack_device__()
    if device is not None:
        raise NotImplementedError("from_dlpack() does not support device yet.")
    if device_type == 2:                         # kDLCUDA: the producer's device's current stream handed over
        previous = _current_device()
        try:
            _set_device(device_id)
            capsule = x.__dlpack__(stream=get_current_stream().ptr or 1, max_version=(1, 0), copy=copy)
        finally:
            _set_device(previous)
        if not isinstance(capsule, _DeviceCapsule):
            raise TypeError("the stand-in reads only its own CUDA DLPack capsules")
        return capsule.array
    if device_type == 1:                         # kDLCPU
        raise TypeError("CPU arrays cannot be directly imported to CuPy. "
                        "Use `cupy.array(numpy.from_dlpack(input))` instead.")
    raise TypeError(f"Unsupported array type: {device_type}")


def _ufunc(ufunc):
    """cupy's ufunc of the same name (cupy/_core/_kernel.pyx): device arrays and scalars only."""
    def call(*args, **kwargs):
        if not any(isinstance(arg, ndarray) for arg in args):
            args = tuple(_upload(arg) if isinstance(arg, (list, tuple, np.ndarray)) and np.ndim(arg) else arg
                         for arg in args)
            if not any(isinstance(arg, ndarray) for arg in args):
                return _result(ufunc(*args, **kwargs), ufunc.__name__)
        return ufunc(*args, **kwargs)       # through ndarray.__array_ufunc__
    call.__name__ = ufunc.__name__
    return call


for _name in ("add", "subtract", "multiply", "divide", "true_divide", "negative", "absolute", "abs", "square",
              "sqrt", "exp", "log", "tanh", "sin", "cos", "maximum", "minimum", "matmul", "equal", "not_equal",
              "less", "greater", "isnan", "isfinite", "signbit", "logical_and", "logical_or", "logical_not"):
    globals()[_name] = _ufunc(getattr(np, _name))


_FUNCTIONS = {name: globals()[name] for name in (
    "concatenate", "stack", "empty_like", "zeros_like", "ones_like", "full_like", "array_equal",
    "ascontiguousarray")}


# -- kernels: RawModule, RawKernel (cupy/_core/raw.pyx, cupy/cuda/function.pyx) --------------------

def cpu_kernel(kernel, dtype):
    """The kernel's CPU build: a function of (blocks, threads, kernelParams). The one
    place the stand-in asks the emulated backend for it."""
    from gpu_tensorarray.backends import emulated
    return emulated._library().function(kernel, dtype)


@functools.cache
def _instantiations():
    from gpu_tensorarray.backends import kernel_sources
    return {kernel_sources.name_expression(kernel, dtype): (kernel, dtype)
            for kernel, dtype in kernel_sources.instantiations()}


def _nvrtc_compile(code, options, name_expressions):
    """Compile through the real CuPy's NVRTC path (cupy/_core/raw.pyx's RawModule calls
    cupy._core.core.compile_with_cache so), for the stand-in device's architecture: the
    source and the name expressions must be what a GPU would accept. Returns the
    lowered names. Raises as CuPy does where NVRTC is missing."""
    real = _real_cupy()
    if not real:
        raise RuntimeError("CuPy failed to load libnvrtc.so.12 (the stand-in compiles through the real CuPy, "
                           "which is not installed)")
    from cupy_backends.cuda.api import runtime as real_runtime  # noqa: F401 (loads CuPy's runtime)
    compiler, function, core = real["compiler"], real["function"], real["core"]

    class Captured(function.Module):
        def load(self, image):
            self.image = image

        def _set_mapping(self, mapping):
            super()._set_mapping(mapping)
            self.lowered = dict(mapping)

    saved = compiler._get_arch_for_options_for_nvrtc, function.Module
    compiler._get_arch_for_options_for_nvrtc = lambda arch=None: (f"-arch=sm_{COMPUTE_CAPABILITY}", "cubin")
    function.Module = Captured
    standin = {name: sys.modules[name] for name in real["modules"]}
    sys.modules.update(real["modules"])      # CuPy's compiler imports cupy as it runs
    try:
        module = core.compile_with_cache(code, tuple(options), COMPUTE_CAPABILITY, prepend_cupy_headers=False,
                                         backend="nvrtc", name_expressions=tuple(name_expressions))
    finally:
        sys.modules.update(standin)
        compiler._get_arch_for_options_for_nvrtc, function.Module = saved
    return module.lowered


_compile_lock = threading.Lock()


class RawModule:
    """cupy/_core/raw.pyx: RawModule(code=, options=, name_expressions=); compile();
    get_function(name expression) -> RawKernel."""

    def __init__(self, code=None, path=None, options=(), backend="nvrtc", translate_cucomplex=False, *,
                 enable_cooperative_groups=False, name_expressions=None, jitify=False):
        if not isinstance(options, tuple):     # raw.pyx types it: ``tuple options=()``
            raise TypeError(f"Argument 'options' has incorrect type (expected tuple, got {type(options).__name__})")
        self.code, self.options = code, options
        self.name_expressions = tuple(name_expressions or ())
        self._lowered = None

    def compile(self, log_stream=None):
        with _compile_lock:
            if self._lowered is None:
                self._lowered = _nvrtc_compile(self.code, self.options, self.name_expressions)

    def get_function(self, name):
        if not isinstance(name, str):
            raise TypeError(f"Argument 'name' has incorrect type (expected str, got {type(name).__name__})")
        self.compile()
        if name not in self._lowered:
            raise CUDADriverError("CUDA_ERROR_NOT_FOUND: named symbol not found")
        return RawKernel(name)


class RawKernel:
    """One instantiation; ``kernel(grid, block, args, shared_mem=0)`` launches it on the
    current stream under cupy/cuda/function.pyx's rules."""

    def __init__(self, name_expression):
        self.name = name_expression
        self._kernel, self._dtype = _instantiations()[name_expression]
        self._cpu = None

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None, enable_cooperative_groups=False):
        # Function.__call__(tuple grid, tuple block, args, size_t shared_mem=0, ...)
        for label, value in (("grid", grid), ("block", block)):
            if not isinstance(value, tuple):
                raise TypeError(f"Argument '{label}' has incorrect type (expected tuple, got {type(value).__name__})")
        if shared_mem < 0:
            raise OverflowError("can't convert negative value to size_t")
        grid = tuple(max(1, int(extent)) for extent in (grid + (1, 1))[:3])
        block = tuple(max(1, int(extent)) for extent in (block + (1, 1))[:3])
        _check_geometry(grid, block, shared_mem)
        device = _current_device()
        values = [_kernel_argument(arg, device) for arg in args]
        self._check_signature(values)
        if grid[1:] != (1, 1) or block[1:] != (1, 1):
            raise NotImplementedError("the kernels' CPU build runs one-dimensional launches only")
        if self._cpu is None:
            self._cpu = cpu_kernel(self._kernel, self._dtype)
        counters.launches += 1
        _note("launch", device, get_current_stream() if stream is None else stream, self.name)
        params = (ctypes.c_void_p * len(values))(*(value.ctypes.data for value, _ in values))
        self._cpu(grid[0], block[0], params)

    def _check_signature(self, values):
        """cuLaunchKernel reads the kernel's own parameter sizes from kernelParams: a
        wrong count or a wrong-sized value is undefined behaviour on a GPU; here it fails."""
        from gpu_tensorarray import dtypes
        from gpu_tensorarray.backends import kernel_sources
        parameters = kernel_sources.signature(self._kernel).parameters
        if len(values) != len(parameters):
            raise CUDADriverError(f"CUDA_ERROR_INVALID_VALUE (stand-in): {self.name} takes {len(parameters)} "
                                  f"arguments, {len(values)} were passed")
        type_argument = dtypes.c_type(self._dtype)
        for position, (parameter, (value, kind)) in enumerate(zip(parameters, values)):
            if parameter.pointer:
                wrong = kind != "pointer"
            else:
                expected = type_argument if parameter.type == kernel_sources.TEMPLATE_PARAMETER else parameter.type
                wrong = kind == "pointer" or dtypes.c_type(value.dtype) != expected
            if wrong:
                raise CUDADriverError(f"CUDA_ERROR_ILLEGAL_ADDRESS (stand-in): {self.name} argument {position} "
                                      f"({parameter.name}) is {parameter.c_type(type_argument)}, got "
                                      f"{'a pointer' if kind == 'pointer' else value.dtype}")


def _check_geometry(grid, block, shared_mem):
    """cuLaunchKernel's limits on an sm_90 device (CUDA_ERROR_INVALID_VALUE past them)."""
    threads = block[0] * block[1] * block[2]
    if (threads > 1024 or block[0] > 1024 or block[1] > 1024 or block[2] > 64
            or grid[0] > 2 ** 31 - 1 or grid[1] > 65535 or grid[2] > 65535 or shared_mem > 48 * 1024):
        raise CUDADriverError(f"CUDA_ERROR_INVALID_VALUE: invalid argument (grid {grid}, block {block}, "
                              f"shared memory {shared_mem})")


def _kernel_argument(arg, device):
    """(NumPy array holding the value, "pointer" | "value"): cupy/cuda/function.pyx's
    _pointer rules: a device array is its data pointer (on another device: no peer
    access, an illegal address); a NumPy array of size one by value, larger ones are
    refused; anything else is a scalar as NumPy types it (_scalar.CScalar)."""
    if arg is None:
        return np.array([0], np.uintp), "pointer"
    if isinstance(arg, ndarray):
        if arg._device != device:
            raise CUDADriverError(f"CUDA_ERROR_ILLEGAL_ADDRESS (stand-in): an array of device {arg._device} "
                                  f"passed to a kernel on device {device}")
        return np.array([arg._a.ctypes.data], np.uintp), "pointer"
    if isinstance(arg, np.ndarray):
        if arg.size != 1:
            raise TypeError(f"You are trying to pass a numpy.ndarray of shape {arg.shape} as a kernel parameter. "
                            "Only numpy.ndarrays of size one can be passed by value. If you meant to pass a "
                            "pointer to __global__ memory, you need to pass a cupy.ndarray instead.")
        return np.ascontiguousarray(arg.reshape(1)), "value"
    if isinstance(arg, (np.generic, builtins.bool, int, float, complex)):
        return np.array([arg]), "value"
    raise TypeError(f"Unsupported type {type(arg)}")


# -- cupy.cuda and its modules ----------------------------------------------------------------------

def _real_cupy():
    """The real CuPy's compiler modules (loaded before the stand-in took its name)."""
    return _REAL


_REAL = {}


def _module(name, **attributes):
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    return module


runtime = _module(
    # Not errorMemoryAllocation and the other status codes: CuPy declares them in C only (runtime.pxd).
    "cupy.cuda.runtime", CUDARuntimeError=CUDARuntimeError,
    getDeviceCount=lambda: DEVICE_COUNT, getDevice=_current_device, setDevice=_set_device,
    memGetInfo=lambda: _pools[_current_device()].free_and_total(),
    deviceSynchronize=lambda: _synchronize_device(_current_device()), is_hip=False,
    streamLegacy=_STREAM_LEGACY, streamPerThread=_STREAM_PER_THREAD)
driver = _module("cupy.cuda.driver", CUDADriverError=CUDADriverError)
memory = _module("cupy.cuda.memory", OutOfMemoryError=OutOfMemoryError, MemoryPool=MemoryPool,
                 MemoryPointer=MemoryPointer, alloc=alloc, set_allocator=set_allocator,
                 get_allocator=get_allocator)
cuda = _module("cupy.cuda", Device=Device, Stream=Stream, ExternalStream=ExternalStream, Event=Event,
               runtime=runtime, driver=driver, memory=memory, get_current_stream=get_current_stream,
               MemoryPool=MemoryPool, alloc=alloc, set_allocator=set_allocator, get_allocator=get_allocator,
               using_allocator=using_allocator, is_available=lambda: True)


def _cuda_getattr(name):
    # The real compiler modules, for tests that compile through CuPy's NVRTC path.
    if name in ("compiler", "function", "nvrtc"):
        return _REAL[name]
    raise AttributeError(f"module 'cupy.cuda' has no attribute {name!r} (not modelled by the stand-in)")


cuda.__getattr__ = _cuda_getattr


def __getattr__(name):
    # CuPy's own compiler code imports cupy as it runs and reads private modules of it
    # (cupy._environment, cupy._util): those come from the real CuPy. Public names the
    # stand-in lacks stay missing, so the backend cannot use an unmodelled API.
    real = _REAL.get("modules", {}).get("cupy")
    if name.startswith("_") and not name.startswith("__") and real is not None:
        return getattr(real, name)
    raise AttributeError(f"module 'cupy' has no attribute {name!r} (not modelled by the CuPy stand-in)")


def reset():
    """Counters to zero, both pools' limits off, device 0 and the null stream current."""
    counters.reset()
    for pool in _pools:
        pool.set_limit(size=0)
    _thread.device = 0
    _thread.__dict__.pop("streams", None)


def real_cupy_sees_a_device():
    """Whether the installed CuPy (if any) has a usable CUDA device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # ImportError, CUDARuntimeError (no driver, no device)
        return False


def install():
    """The stand-in as ``cupy`` for this process, unless the real CuPy sees a GPU.
    Returns the module now called ``cupy``. The real CuPy's NVRTC modules stay
    reachable (cupy.cuda.compiler, .function, .nvrtc, and cupy._core), so compile
    tests and the stand-in's RawModule use the real NVRTC."""
    if real_cupy_sees_a_device():
        return sys.modules["cupy"]
    this = sys.modules[__name__]
    if sys.modules.get("cupy") is this:
        return this
    try:
        from cupy._core import core
        from cupy.cuda import compiler, function, nvrtc
        _REAL.update(core=core, compiler=compiler, function=function, nvrtc=nvrtc)
    except Exception:  # no CuPy installed: RawModule.compile then fails as without NVRTC
        pass
    replaced = {"cupy": this, "cupy.cuda": cuda, "cupy.cuda.runtime": runtime, "cupy.cuda.driver": driver,
                "cupy.cuda.memory": memory}
    if _REAL:
        _REAL["modules"] = {name: sys.modules[name] for name in replaced if name in sys.modules}
    this.cuda = cuda
    sys.modules.update(replaced)
    # The real CuPy leaves cupyx as a lazy module, which would import the stand-in as cupy.
    for name in [name for name in sys.modules if name == "cupyx" or name.startswith("cupyx.")]:
        del sys.modules[name]
    sys.modules["cupyx"] = _module("cupyx")
    return this
