"""What CuPy 14.2 does that the cupy backend must work around, each found on a GPU (an
H200) after the stand-in had passed the suite: the stand-in's model, checked where it
matters. The same bodies run against the real CuPy where a GPU is usable and against
the stand-in elsewhere, so a GPU run shows at once where the stand-in is wrong.
"""

import dis
import gc
import os
import sys
import warnings
import weakref

import numpy as np
import pytest

import gpu_tensorarray as gta

cupy = sys.modules.get("cupy")
if cupy is None or not (getattr(cupy, "STANDIN", False) or "cupy" in gta.available_backends()):
    pytest.skip("neither CuPy with a GPU nor the CuPy stand-in is in use", allow_module_level=True)

STANDIN = getattr(cupy, "STANDIN", False)
F32 = np.float32


def test_a_0d_upload_is_a_fill_and_drops_the_sign_of_zero():
    # core.pyx, _array_default: a 0-d host value is written by fill(), a memset for zero.
    assert not np.signbit(cupy.asarray(np.float32(-0.0)).get())
    assert np.signbit(cupy.asarray(np.full(1, -0.0, F32)).get()).all()       # 1-d: copied, sign kept


def test_a_scalar_scattered_by_integer_indices_drops_the_sign_of_zero():
    # _routines_indexing.pyx, _scatter_op_single: core.array(value), the 0-d upload above.
    array = cupy.ones(4, F32)
    array[np.array([1, 2])] = np.float32(-0.0)
    assert np.signbit(array.get()).tolist() == [False, False, False, False]
    array[np.array([1, 2])] = cupy.asarray(np.full(2, -0.0, F32))               # rows: the sign stays
    assert np.signbit(array.get()).tolist() == [False, True, True, False]


def test_an_upload_keeps_a_fortran_ordered_arrays_order():
    # core.pyx, _array_default: order "K" (asarray's) makes a NumPy array with flags.fnc a
    # Fortran-ordered device array; anything else, a strided view included, is C-ordered.
    host = np.arange(12, dtype=F32).reshape(3, 4)
    fortran = cupy.asarray(np.asfortranarray(host))
    assert fortran.flags.f_contiguous and not fortran.flags.c_contiguous
    assert np.array_equal(fortran.get(), host)
    assert cupy.array(host, order="F").flags.f_contiguous and not cupy.array(host, order="F").flags.c_contiguous
    for value in (host, host[:, ::2], host.T[::2]):
        uploaded = cupy.asarray(value)
        assert uploaded.flags.c_contiguous and np.array_equal(uploaded.get(), value)
    assert cupy.ascontiguousarray(fortran).flags.c_contiguous


@pytest.mark.skipif(os.environ.get("CUPY_ENABLE_UMP", "0") != "0", reason="CuPy maps host memory under UMP")
def test_a_host_array_is_copied_even_with_copy_false():
    # core.pyx, _array_default: ``copy`` is read only by _try_skip_h2d_copy, which maps host
    # memory only under CUPY_ENABLE_UMP=1; otherwise a host array is uploaded whatever ``copy``
    # says: no NumPy 2 ValueError for copy=False.
    host = np.arange(4, dtype=F32)
    uploads = [cupy.array(host, copy=False), cupy.asarray(host, copy=False), cupy.array(host, copy=None)]
    host[0] = 9
    for uploaded in uploads:
        assert uploaded.get().tolist() == [0, 1, 2, 3]


def test_ndmin_prepends_ones_and_leaves_a_device_array_as_it_was():
    # core.pyx: a host value is numpy.array(..., ndmin=ndmin) before the upload (so a 0-d value
    # given ndmin is copied, not filled: the sign of zero stays); a device array gets the ones
    # in place on what _astype gave, a view when that is the array itself (_array_from_cupy_ndarray).
    host = np.arange(12, dtype=F32).reshape(3, 4)
    assert cupy.array(host, ndmin=4).shape == (1, 1, 3, 4)
    assert cupy.array(host, ndmin=1).shape == (3, 4)
    fortran = cupy.array(np.asfortranarray(host), ndmin=3)
    assert fortran.shape == (1, 3, 4) and fortran.flags.f_contiguous and not fortran.flags.c_contiguous
    zero = cupy.array(np.float32(-0.0), ndmin=1)
    assert zero.shape == (1,) and np.signbit(zero.get()).all()
    device = cupy.asarray(host)
    view = cupy.array(device, copy=False, ndmin=3)
    assert view.shape == (1, 3, 4) and device.shape == (3, 4) and view is not device
    view[0, 0, 0] = 7                                      # the same memory
    assert float(device[0, 0]) == 7
    copied = cupy.array(device, ndmin=3)
    copied[0, 0, 1] = 8
    assert copied.shape == (1, 3, 4) and float(device[0, 1]) == 1
    assert cupy.array(device, dtype=np.float64, ndmin=3).shape == (1, 3, 4)
    assert cupy.array([device[0], device[1]], ndmin=3).shape == (1, 2, 4)


def test_ascontiguousarray_makes_a_0d_array_1d():
    # core.pyx, ascontiguousarray: a 0-d array comes back raveled, shape (1,), copied or not;
    # its argument must be a device array. The backend's contiguous() keeps the shape.
    zero_d = cupy.asarray(np.full(1, 3, F32)).reshape(())
    assert cupy.ascontiguousarray(zero_d).shape == (1,)
    assert cupy.ascontiguousarray(zero_d, dtype=np.float64).shape == (1,)
    with pytest.raises(TypeError):
        cupy.ascontiguousarray(np.ones(3, F32))
    backend = gta.backends.get_backend("cupy")
    with cupy.cuda.Device(int(backend.device.rpartition(":")[2])):
        value = cupy.asarray(np.full(1, 3, np.int32)).reshape(())
    cast = backend.contiguous(value, np.dtype(F32))
    assert cast.shape == () and cast.dtype == F32 and cast.get() == 3


class _Foreign:
    """Another library's stream under the CUDA stream protocol."""

    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


def test_external_streams_come_through_the_cuda_stream_protocol():
    # stream.pyx: ExternalStream warns DeprecationWarning from CuPy 14 on; Stream.from_external
    # reads obj.__cuda_stream__() -> (0, handle), keeps device -1 and a reference to obj.
    made = cupy.cuda.Stream(non_blocking=True)
    with pytest.warns(DeprecationWarning, match=r"Stream\.from_external"):
        external = cupy.cuda.ExternalStream(made.ptr, 0)
    assert external == made and external.device_id == 0 and not isinstance(external, cupy.cuda.Stream)
    foreign = _Foreign((0, made.ptr))
    kept = weakref.ref(foreign)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wrapped = cupy.cuda.Stream.from_external(foreign)
    del foreign
    gc.collect()
    assert kept() is not None                                  # the wrapper holds it
    assert isinstance(wrapped, cupy.cuda.Stream) and wrapped == made and wrapped.device_id == -1
    with cupy.cuda.Device(0), wrapped:                         # device -1: the current one
        assert cupy.cuda.get_current_stream() == made
    for answer in ((1, made.ptr), (0, "x"), None):
        with pytest.raises(TypeError, match="__cuda_stream__"):
            cupy.cuda.Stream.from_external(_Foreign(answer))
    with pytest.raises(TypeError, match="CUDA stream protocol"):
        cupy.cuda.Stream.from_external(object())


# The instructions after which CPython delivers a pending interrupt, besides a function's start
# (a "call" trace event): a call's return and a loop's jump back.
_DELIVERY_POINTS = {"CALL", "CALL_KW", "CALL_FUNCTION_EX", "PRECALL", "CALL_FUNCTION", "CALL_METHOD",
                    "CALL_FUNCTION_KW", "JUMP_BACKWARD", "JUMP_ABSOLUTE"}


def test_a_row_assignment_gives_an_interrupt_no_moment_after_the_row_changes():
    # storage.write's fast path (slab[index] = value, then the flags, no call between) relies
    # on it: an interrupt lands before the row changes or after the whole assignment.
    # _routines_indexing.pyx, _scatter_op: the index goes through numpy.isscalar
    # (_prepare_slice_list), then a row of the same layout is one device-to-device memcpy from
    # Cython, with no Python code after it. Every instruction of Python code run inside the
    # assignment is traced, with whether the row has changed yet.
    slab = cupy.zeros((4, 3), F32)
    row = cupy.asarray(np.arange(1, 4, dtype=F32))
    names, events = {}, []

    def opname(frame):
        code = frame.f_code
        if code not in names:
            names[code] = {instruction.offset: instruction.opname for instruction in dis.get_instructions(code)}
        return names[code].get(frame.f_lasti, "?")

    def trace(frame, event, arg):
        frame.f_trace_opcodes = True
        if event in ("call", "opcode"):
            what = "call" if event == "call" else opname(frame)
            events.append((f"{frame.f_code.co_name}:{what}", bool(slab[2].get().any())))
        return trace
    previous = sys.gettrace()                  # coverage's tracer, under CI: put back after
    sys.settrace(trace)
    try:
        slab[2] = row
    finally:
        sys.settrace(previous)
    assert slab[2].get().tolist() == [1, 2, 3]
    first = next((at for at, (_, changed) in enumerate(events) if changed), len(events))
    during = events[first - 1][0].partition(":")[2] if 0 < first < len(events) else None
    after = [what for what, _ in events[first:] if what.partition(":")[2] in _DELIVERY_POINTS | {"call"}]
    assert during not in _DELIVERY_POINTS and not after, (during, after, events[max(0, first - 3):])


def test_get_current_stream_takes_a_c_int_device_id():
    # stream.pyx, cpdef get_current_stream(int device_id=-1): Cython converts the argument to
    # a C int first (None refused), -1 is the current device, and any other id indexes the
    # thread's list of per-device streams as Python does (wraparound and bounds checked).
    get = cupy.cuda.get_current_stream
    count = cupy.cuda.runtime.getDeviceCount()
    last = count - 1
    with cupy.cuda.Device(last):
        before = get()
        made = cupy.cuda.Stream(non_blocking=True)
        made.use()
    try:
        for bad in (None, "0", 1j):
            with pytest.raises(TypeError, match="an integer is required"):
                get(bad)
        for big in (2**31, -2**31 - 1):
            with pytest.raises(OverflowError):
                get(big)
        with cupy.cuda.Device(last):
            assert get(-1) == get() == made
        assert get(np.int64(last)) == get(last + 0.9) == made                 # __int__
        with cupy.cuda.Device(0):
            assert get(-count) == get(0)                # device 0's, by wraparound when count > 1
        for outside in (count, -count - 1):
            with pytest.raises(IndexError):
                get(outside)
    finally:
        with cupy.cuda.Device(last):
            before.use()


def test_the_pool_keeps_freed_chunks_and_splits_them():
    # memory.pyx, SingleDeviceMemoryPool: sizes round up to 512 bytes; a freed chunk stays in
    # the pool (total_bytes) for the next allocation on its stream, which splits off the rest;
    # free_all_blocks releases only chunks that are not split, and a split-off rest serves an
    # allocation a limit at total_bytes() would refuse. A test that fills the pool to a limit
    # therefore leaves room: a full device is an allocator that refuses (using_allocator).
    gc.collect()
    pool = cupy.get_default_memory_pool()
    with cupy.cuda.Stream(non_blocking=True):                  # an arena of its own
        pool.free_all_blocks()
        used, total = pool.used_bytes(), pool.total_bytes()
        first = cupy.empty(1000, np.uint8)
        assert (pool.used_bytes() - used, pool.total_bytes() - total) == (1024, 1024)
        del first
        assert (pool.used_bytes() - used, pool.total_bytes() - total) == (0, 1024)
        small = cupy.empty(100, np.uint8)                      # 512 of the 1024: a split
        pool.free_all_blocks()
        assert (pool.used_bytes() - used, pool.total_bytes() - total) == (512, 1024)
        pool.set_limit(size=pool.total_bytes())
        try:
            rest = cupy.empty(100, np.uint8)                   # the split-off 512 bytes
            with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
                cupy.empty(100, np.uint8)
        finally:
            pool.set_limit(size=0)
        del small, rest                                        # merged again: one chunk, released
        pool.free_all_blocks()
        assert (pool.used_bytes() - used, pool.total_bytes() - total) == (0, 0)


def test_an_allocator_serves_every_allocation_of_its_thread():
    # cupy/cuda/__init__.py, using_allocator: a thread-local allocator, called with the size
    # of every array's memory (memory.alloc); set_allocator inside it raises ValueError.
    sizes, allocate = [], cupy.cuda.get_allocator()

    def counting(size):
        sizes.append(size)
        return allocate(size)
    with cupy.cuda.using_allocator(counting):
        assert cupy.cuda.get_allocator() is counting
        cupy.empty((3, 4), F32)
        cupy.asarray(np.arange(5, dtype=np.int64))
        with pytest.raises(ValueError, match="using_allocator"):
            cupy.cuda.set_allocator(counting)
    assert sizes == [48, 40] and cupy.cuda.get_allocator() is allocate


def test_an_empty_array_numpy_cannot_hold_comes_back_with_an_error():
    # CuPy allocates nothing for it; get() builds it as numpy.ndarray(shape), which refuses.
    if STANDIN:
        with pytest.raises(NotImplementedError, match="cannot model"):
            cupy.zeros((0, 2**40, 2**40), F32)
        return
    array = cupy.zeros((0, 2**40, 2**40), F32)
    with pytest.raises(ValueError, match="too big"):
        array.get()


def test_a_device_to_device_memcpy_copies_the_bytes():
    source = cupy.asarray(np.arange(6, dtype=F32).reshape(2, 3))
    target = cupy.empty((3,), F32)
    target.data.copy_from_device_async(source[1].data, source[1].nbytes)
    assert target.get().tolist() == [3, 4, 5]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_cuda_does_not_work_in_a_child_made_by_fork():
    cupy.arange(3).sum().get()                      # CUDA is initialised here
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            cupy.arange(3).sum().get()
        except Exception as error:      # noqa: BLE001  (CuPy's CUDARuntimeError, whichever module)
            code = 0 if "initialization error" in str(error).lower() else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_integer_array_indices_out_of_bounds_wrap_around():
    # core.pyx, __getitem__/__setitem__: "NumPy handles them by raising an error, but CuPy
    # wraps around them".
    array = cupy.asarray(np.arange(4, dtype=F32))
    assert array[np.array([1, 5, -6])].get().tolist() == [1, 1, 2]
    array[np.array([6])] = cupy.asarray(np.array([9], F32))
    assert array.get().tolist() == [0, 1, 9, 3]


def _two_devices():
    if cupy.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two CUDA devices")


def test_the_default_pool_serves_the_device_current_at_each_call():
    # memory.pyx, MemoryPool: one object for every device; set_limit and used_bytes act on the
    # pool of the device current when they are called, not when the pool was asked for.
    _two_devices()
    pool = cupy.get_default_memory_pool()
    with cupy.cuda.Device(1):
        assert cupy.get_default_memory_pool() is pool
        pool.set_limit(size=1024)
        try:
            assert pool.get_limit() == 1024
            with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
                cupy.empty((1 << 20,), F32)
        finally:
            pool.set_limit(size=0)
    assert pool.get_limit() == 0


def test_an_event_recorded_on_another_devices_stream_fails():
    # cudaEventRecord: an event and a stream of two devices are an error, whichever is current.
    _two_devices()
    with cupy.cuda.Device(1):
        stream = cupy.cuda.Stream()
    event = cupy.cuda.Event()                       # device 0's
    with pytest.raises(cupy.cuda.runtime.CUDARuntimeError):
        event.record(stream)


def test_constructors_refuse_what_cupys_refuse():
    # raw.pyx types RawModule's options as a tuple; stream.pyx's Stream takes no name.
    with pytest.raises(TypeError):
        cupy.RawModule(code="extern \"C\" __global__ void k() {}", options=["-std=c++17"])
    with pytest.raises(TypeError):
        cupy.cuda.Stream(name="mine")
