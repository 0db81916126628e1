"""The CuPy stand-in (tests/cupy_standin.py) refuses what CuPy 14.2 on a GPU refuses, and
records the device ordering the cupy backend relies on: the stream rule of an array's
device step (device_guard.DeviceScope) and the current-device rule, seen in its log.

Runs where the stand-in is CuPy; on a GPU the real CuPy is in use and this module skips.
"""

import json
import pathlib
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.backends import kernel_sources

cupy = sys.modules.get("cupy")
if not getattr(cupy, "STANDIN", False):
    pytest.skip("these test the CuPy stand-in (a real GPU is in use)", allow_module_level=True)

F32 = np.float32


@pytest.fixture(autouse=True)
def fresh():
    cupy.reset()
    yield
    cupy.reset()


# -- CuPy's names ------------------------------------------------------------------------------------

_CUDA_MODULES = ("cupy.cuda", "cupy.cuda.runtime", "cupy.cuda.driver", "cupy.cuda.memory")


def test_the_standins_cuda_modules_name_only_what_cupys_own_do():
    """A name the stand-in gives and CuPy's Python modules lack (one CuPy declares in C only, as
    runtime.errorMemoryAllocation) would pass here and fail on a GPU. CuPy imports without one:
    its modules are asked in a process of their own, where no stand-in is installed."""
    script = ("import json, operator\ntry:\n    import cupy\nexcept ImportError:\n    raise SystemExit(3)\n"
              f"print(json.dumps({{name: dir(operator.attrgetter(name[5:])(cupy)) for name in {_CUDA_MODULES!r}}}))")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                         cwd=pathlib.Path(__file__).resolve().parents[2])
    if run.returncode == 3:
        pytest.skip("CuPy is not installed (CI installs it)")
    assert run.returncode == 0, run.stderr
    real = json.loads(run.stdout.strip().splitlines()[-1])
    for name in _CUDA_MODULES:
        ours = sys.modules[name]
        extra = [attribute for attribute, value in vars(ours).items()
                 if not attribute.startswith("_") and not isinstance(value, types.ModuleType)
                 and attribute not in real[name]]
        assert extra == [], (name, extra)


# -- CuPy's semantics where they differ from NumPy's ----------------------------------------------

def test_device_arrays_do_not_convert_implicitly_and_host_reads_synchronise():
    array = cupy.arange(4, dtype=F32)
    with pytest.raises(TypeError, match="Implicit conversion"):
        np.asarray(array)
    assert not hasattr(array.flags, "writeable")
    with cupy.counting() as delta:
        assert array.get().tolist() == [0, 1, 2, 3]
        assert int(array[2]) == 2 and float(array[1]) == 1.0 and bool(array[3]) and array[0].item() == 0
    assert delta()["syncs"] == 5


@pytest.mark.parametrize("dtype", [object, "U1", "datetime64[s]", ">f4", np.dtype((np.float32, 2))], ids=str)
def test_dtypes_cupy_cannot_hold_are_refused_as_cupy_refuses_them(dtype):
    # cupy/_core/_dtype.pyx, check_supported_dtype: ValueError("Unsupported dtype ...").
    with pytest.raises(ValueError, match="Unsupported dtype"):
        cupy.empty(2, dtype=dtype)


def test_negative_extents_and_device_arrays_as_indices_are_refused_as_cupy_refuses_them():
    with pytest.raises(ValueError, match="Negative dimensions are not allowed"):
        cupy.zeros((2, -1), F32)
    with pytest.raises(TypeError):
        range(cupy.asarray(np.int64(3)))           # CuPy's ndarray has no __index__ (core.pyx)
    assert int(cupy.asarray(np.int64(3))) == 3 and format(cupy.arange(2, dtype=F32)) == "[0. 1.]"


def test_get_of_a_strided_array_copies_it_on_its_device_first():
    # cupy/_core/core.pyx, get: _internal_ascontiguousarray under the array's device, then the
    # copy to the host: a pool allocation there, which a full device refuses.
    with cupy.cuda.Device(1):
        strided = cupy.arange(8, dtype=F32)[::2]
    with cupy.recording() as log:
        assert strided.get().tolist() == [0, 2, 4, 6]
    assert ("launch", 1, "null", "copy") in log and any(entry[:2] == ("alloc", 1) for entry in log), log

    def full(size):
        raise cupy.cuda.memory.OutOfMemoryError(size, 0, 0)
    with cupy.cuda.using_allocator(full), pytest.raises(cupy.cuda.memory.OutOfMemoryError):
        strided.get()
    contiguous = cupy.arange(4, dtype=F32)
    with cupy.cuda.using_allocator(full):
        assert contiguous.get().tolist() == [0, 1, 2, 3]         # copied as it is: no allocation


def test_fill_with_zero_is_a_memset_that_drops_the_sign():
    array = cupy.empty((3,), F32)
    array.fill(-0.0)
    assert not np.signbit(array.get()).any()
    array[...] = -0.0                     # a basic-index assignment of a scalar is fill() too
    assert not np.signbit(array.get()).any()
    array[...] = cupy.asarray(np.full(3, -0.0, F32))     # a device array is copied: the sign stays
    assert np.signbit(array.get()).all()
    with pytest.raises(ValueError, match="non-scalar"):
        array[...] = np.ones(3, F32)      # host arrays are refused (CuPy gh-2079)


def test_a_host_index_array_is_uploaded_before_it_indexes():
    # _routines_indexing.pyx, _prepare_slice_list: a list or NumPy array index becomes a device
    # array (core.array: an allocation and an upload); an integer or a slice stays a view's.
    array = cupy.zeros((4, 2), F32)
    rows = cupy.ones((2, 2), F32)
    with cupy.counting() as delta:
        array[np.array([1, 3])] = rows
        array[[0]] = rows[:1]
    assert (delta()["uploads"], delta()["allocations"]) == (2, 2)
    assert array.get()[:, 0].tolist() == [1, 1, 0, 1]
    assert array[[]].shape == (0, 2)                   # an empty list indexes as int32
    def full(size):                                     # a full device's allocator
        raise cupy.cuda.memory.OutOfMemoryError(size, 0, 0)
    with cupy.cuda.using_allocator(full):
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            array[np.array([2])] = rows[:1]
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
            array[np.array([2])] = 0                    # the indices, then the zero (a 0-d upload)
        array[2:3] = 0                                  # a slice's zero: a memset, no allocation
        array[2] = rows[0]                              # a memcpy


def test_dlpack_refuses_a_host_producer_and_exports_to_the_host_only_as_a_copy():
    with pytest.raises(TypeError, match="CPU arrays cannot be directly imported"):
        cupy.from_dlpack(np.arange(3))
    array = cupy.arange(3, dtype=F32)
    assert cupy.from_dlpack(array) is array
    with pytest.raises(ValueError, match="without copy"):
        array.__dlpack__(dl_device=(1, 0), copy=False)
    assert np.from_dlpack(_Host(array)).tolist() == [0, 1, 2]


class _Host:
    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(dl_device=(1, 0), copy=True)

    def __dlpack_device__(self):
        return (1, 0)


def test_the_pool_limit_raises_cupys_out_of_memory_error():
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()      # a cached free block is reused whatever the limit, as in CuPy's pool
    pool.set_limit(size=1024)
    with pytest.raises(cupy.cuda.memory.OutOfMemoryError):
        cupy.empty((1024,), F32)
    assert isinstance(cupy.cuda.memory.OutOfMemoryError(1, 0), MemoryError)


def test_work_on_another_devices_array_fails_without_peer_access():
    with cupy.cuda.Device(1):
        on_1 = cupy.arange(3, dtype=F32)
    with pytest.raises(ValueError, match="Peer access is unavailable"):
        on_1 + 1
    with cupy.cuda.Device(1):
        assert (on_1 + 1).get().tolist() == [1, 2, 3]
    copied = on_1.copy()                  # ndarray.copy: into the current device
    assert copied.device.id == 0


def test_memcpys_cross_devices_as_cudas_do_and_kernels_do_not():
    # memory.pyx, copy_from_device_async: cudaMemcpyAsync (cudaMemcpyDefault) on the given or
    # current stream, which under unified addressing copies between any two devices, peer
    # access or not. _routines_indexing.pyx, _scatter_op: a device value of the target's shape,
    # strides and dtype into a C-contiguous basic-indexed target is that memcpy, wherever the
    # two live; anything else is elementwise_copy, a kernel over arrays of the current device.
    with cupy.cuda.Device(1):
        on_1 = cupy.arange(6, dtype=F32).reshape(2, 3)
    on_0 = cupy.zeros((2, 3), F32)
    with cupy.recording() as log, cupy.counting() as delta:
        on_0.data.copy_from_device_async(on_1.data, 12)               # the first row
        on_0[1] = on_1[1]
        with cupy.cuda.Device(1):
            on_1[0] = on_0[1]                                          # into device 1's memory
    assert on_0.get().tolist() == [[0, 1, 2], [3, 4, 5]] and on_1.get().tolist() == [[3, 4, 5], [3, 4, 5]]
    assert [entry[:2] for entry in log] == [("copy", 0), ("copy", 0), ("copy", 1)] and delta()["launches"] == 0
    with pytest.raises(ValueError, match="Peer access is unavailable"):
        on_0[:, :2] = on_1[:, :2]                 # a strided target: a kernel
    with pytest.raises(ValueError, match="Peer access is unavailable"):
        cupy.zeros((2, 3), np.float64)[...] = on_1          # a cast: a kernel
    with pytest.raises(ValueError, match="Peer access is unavailable"):
        on_0[np.array([0])] = on_1[:1]            # integer indices: a kernel
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="ILLEGAL_ADDRESS"):
        _kernel()((1,), (32,), (on_0, on_1, cupy.asarray(np.array([0], np.int64)), np.int64(1), np.int64(3)))


def test_a_strided_copy_from_another_device_is_made_contiguous_there_first():
    # core.pyx, copy(): astype(order, copy=False) with the array's device current (its pool,
    # a kernel on its current stream), then a memcpy on the current device's stream.
    with cupy.cuda.Device(1):
        strided = cupy.arange(8, dtype=F32)[::2]
        fortran = cupy.arange(6, dtype=F32).reshape(3, 2).T           # F-contiguous
        stream = cupy.cuda.Stream(non_blocking=True)
        stream.use()
    with cupy.recording() as log:
        copied = strided.copy()
    assert copied.device.id == 0 and copied.get().tolist() == [0, 2, 4, 6]
    assert [entry[:3] for entry in log if entry[0] in ("alloc", "launch", "copy")] == [
        ("alloc", 1, stream.name), ("launch", 1, stream.name), ("alloc", 0, "null"), ("copy", 0, "null")]
    with cupy.counting() as delta:
        kept = fortran.copy(order="K")                                 # already in order K: a memcpy only
    assert kept.flags.f_contiguous and delta()["launches"] == 0
    np.testing.assert_array_equal(kept.get(), np.arange(6, dtype=F32).reshape(3, 2).T)
    with pytest.raises(NotImplementedError, match="non-contiguous"):
        strided.copy(order="K")                                        # K: the array itself, strided


def test_asarray_copies_another_devices_array_onto_the_current_one():
    # from_data.py, asarray (copy=None) -> core.pyx, _array_from_cupy_ndarray.
    with cupy.cuda.Device(1):
        on_1 = cupy.arange(4, dtype=F32)
        strided_on_1 = cupy.arange(8, dtype=F32)[::2]
    on_0 = cupy.arange(4, dtype=F32)
    with cupy.recording() as log:
        copied = cupy.asarray(on_1)
    assert copied is not on_1 and copied.device.id == 0 and copied.get().tolist() == [0, 1, 2, 3]
    assert [entry[:2] for entry in log if entry[0] in ("launch", "copy")] == [("copy", 0)]
    with cupy.recording() as log:
        cast = cupy.asarray(on_1, dtype=np.float64)           # copied, then cast on the current device
    assert cast.device.id == 0 and cast.dtype == np.float64
    assert [entry[:2] for entry in log if entry[0] in ("launch", "copy")] == [("copy", 0), ("launch", 0)]
    with pytest.raises(NotImplementedError, match="non-contiguous"):
        cupy.asarray(strided_on_1)                            # order K: copy() cannot stage it
    assert cupy.asarray(on_0) is on_0
    assert cupy.asarray(on_0, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="Unable to avoid copy"):
        cupy.array(on_0, dtype=np.float64, copy=False)
    assert cupy.ascontiguousarray(on_1) is on_1               # no asarray in it: nothing to copy


def test_one_device_object_entered_by_two_threads_restores_each_threads_device():
    # device.pyx, _ThreadLocalStack: the saved devices are a stack per thread, so threads
    # sharing one Device object (as the backend's self._device is) get their own back.
    device_0 = cupy.cuda.Device(0)
    a_inside, b_inside, a_left = threading.Event(), threading.Event(), threading.Event()
    after = {}

    def a():                                # from device 1: inside first, out first
        cupy.cuda.runtime.setDevice(1)
        with device_0:
            a_inside.set()
            b_inside.wait(10)
        after["a"] = cupy.cuda.runtime.getDevice()
        a_left.set()

    def b():                                # from device 0: enters while a is inside
        cupy.cuda.runtime.setDevice(0)
        a_inside.wait(10)
        with device_0:
            b_inside.set()
            a_left.wait(10)
        after["b"] = cupy.cuda.runtime.getDevice()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert after == {"a": 1, "b": 0}


def test_a_stream_is_entered_or_used_only_on_its_device():
    # stream.pyx, check_stream_device_match (in __enter__ and use): RuntimeError, nothing changed.
    with cupy.cuda.Device(1):
        on_1 = cupy.cuda.Stream(non_blocking=True)
    with pytest.raises(RuntimeError, match=r"created on \(1\) does not match with the current device \(0\)"):
        with on_1:
            pass
    with pytest.raises(RuntimeError, match="does not match"):
        on_1.use()
    assert cupy.cuda.get_current_stream(1) == cupy.cuda.Stream.null
    with cupy.cuda.Device(1), on_1:
        assert cupy.cuda.get_current_stream() == on_1
    assert cupy.cuda.get_current_stream(1) == cupy.cuda.Stream.null
    assert cupy.cuda.Stream.null.device_id == cupy.cuda.Stream.ptds.device_id == -1


def test_a_stream_exit_pops_the_device_recorded_at_entry():
    # stream.pyx, _ThreadLocal.push_stream records the device; pop_stream pops that device's
    # stack, whichever device is current, and set_current_stream puts the stream now on top
    # there on its device (a default stream's, -1: the current device).
    ptds = cupy.cuda.Stream.ptds
    on_0 = cupy.cuda.Stream(non_blocking=True)
    ptds.__enter__()                                    # on device 0
    cupy.cuda.runtime.setDevice(1)
    ptds.__exit__(None, None, None)                     # device 0's stack: the null stream again
    assert cupy.cuda.get_current_stream(1) == cupy.cuda.Stream.null
    assert cupy.cuda.get_current_stream(0) == ptds     # CuPy sets the null stream on device 1, current
    cupy.cuda.runtime.setDevice(0)
    with on_0:
        assert cupy.cuda.get_current_stream() == on_0
    assert cupy.cuda.get_current_stream() == cupy.cuda.Stream.null     # the top of device 0's stack


def test_an_op_under_a_wrapped_external_stream_runs_on_the_stream_it_wraps():
    # Stream.from_external (stream.pyx) wraps the handle: the log names the wrapped stream.
    made = cupy.cuda.Stream(non_blocking=True)

    class Foreign:
        def __cuda_stream__(self):
            return (0, made.ptr)

    with gta.device("cuda"):
        handle, flow = ro.TensorArrayV3(2, F32, element_shape=(2,))
        with cupy.recording() as log:
            with cupy.cuda.Stream.from_external(Foreign()):
                ro.TensorArrayWriteV3(handle, 0, np.ones(2, F32), flow)
    assert {stream for kind, _, stream, _ in log if kind in ("launch", "record", "copy")} == {made.name}, log


def _kernel():
    name = kernel_sources.name_expression("gather_rows", "float32")
    module = cupy.RawModule(code=kernel_sources.module_source(), options=("--std=c++17",),
                            name_expressions=kernel_sources.name_expressions())
    return module.get_function(name)


def test_a_launch_runs_the_kernels_cpu_build_under_cupys_rules():
    kernel = _kernel()
    src = cupy.asarray(np.arange(12, dtype=F32).reshape(4, 3))
    out = cupy.empty((2, 3), F32)
    indices = cupy.asarray(np.array([3, 1], np.int64))
    with cupy.counting() as delta:
        kernel((1,), (256,), (out, src, indices, np.int64(2), np.int64(3)))
    assert delta()["launches"] == 1
    np.testing.assert_array_equal(out.get(), np.arange(12, dtype=F32).reshape(4, 3)[[3, 1]])
    with pytest.raises(TypeError, match="grid"):
        kernel([1], (256,), (out, src, indices, np.int64(2), np.int64(3)))
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="INVALID_VALUE"):
        kernel((1,), (2048,), (out, src, indices, np.int64(2), np.int64(3)))
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="takes 5 arguments"):
        kernel((1,), (256,), (out, src, indices, np.int64(2)))
    with pytest.raises(cupy.cuda.driver.CUDADriverError, match="argument 3"):
        kernel((1,), (256,), (out, src, indices, np.int32(2), np.int64(3)))
    with pytest.raises(TypeError, match="numpy.ndarray of shape"):
        kernel((1,), (256,), (out, np.zeros((4, 3), F32), indices, np.int64(2), np.int64(3)))


# -- the ordering the cupy backend relies on ------------------------------------------------------

def test_an_op_from_another_stream_waits_for_the_arrays_last_event():
    with gta.device("cuda"):
        handle, flow = ro.TensorArrayV3(4, F32, element_shape=(2,))
        a, b = cupy.cuda.Stream(), cupy.cuda.Stream()
        with cupy.recording() as log:
            with a:
                ro.TensorArrayWriteV3(handle, 0, np.ones(2, F32), flow)
            with b:
                ro.TensorArrayScatterV3(handle, np.arange(1, 4, dtype=np.int32), np.ones((3, 2), F32), flow)
    ordered = [(kind, stream, detail) for kind, _, stream, detail in log if kind in ("launch", "record", "wait")]
    first_on_b = next(i for i, entry in enumerate(ordered) if entry[:2] == ("launch", b.name))
    assert ("record", a.name, None) in ordered[:first_on_b]
    assert ("wait", b.name, a.name) in ordered[:first_on_b], ordered
    assert ordered[-2:] == [("record", b.name, None), ("wait", a.name, b.name)]   # a: after b's op


def test_an_array_on_device_1_does_its_work_there():
    with gta.device("cuda:1"):
        handle, flow = ro.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
        with cupy.recording() as log:
            for index in range(20):                 # the slab regrows on device 1
                flow = ro.TensorArrayWriteV3(handle, index, np.full(2, index, F32), flow)
            stacked = ro.TensorArrayGatherV3(handle, np.arange(20, dtype=np.int32), flow, F32)
    assert cupy.cuda.runtime.getDevice() == 0
    assert stacked.device.id == 1
    assert {device for kind, device, _, _ in log if kind in ("launch", "alloc")} == {1}
    np.testing.assert_array_equal(stacked.get(), np.repeat(np.arange(20, dtype=F32), 2).reshape(20, 2))


def test_a_compile_failure_names_what_is_missing_and_the_command_that_brings_it():
    from gpu_tensorarray.backends import cupy as cupy_backend
    header = cupy_backend._compiler_advice('catastrophic error: cannot open source file "cuda_fp16.h"')
    assert "cuda_fp16.h" in header and cupy_backend.INSTALL_HEADERS in header
    assert cupy_backend.INSTALL_COMPILER not in header          # NVRTC ran: not the command that brings it
    nvrtc = cupy_backend._compiler_advice("CuPy failed to load libnvrtc.so.12")
    assert cupy_backend.INSTALL_COMPILER in nvrtc


def test_the_torch_bridges_stream_scope_wraps_torchs_stream_without_a_warning(monkeypatch):
    """gpu_tensorarray.torch runs CuPy work on torch's current stream through
    Stream.from_external (ExternalStream warns from CuPy 14 on): with a CUDA torch (here
    its stream query stands in), work inside the scope is logged on the stream it wraps."""
    import warnings

    from gpu_tensorarray.testing import import_torch

    import_torch()
    from gpu_tensorarray.torch import crossing

    made = cupy.cuda.Stream(non_blocking=True)
    monkeypatch.setattr(crossing, "torch_has_cuda", lambda: True)
    monkeypatch.setattr(crossing, "_current_raw_stream", lambda index: made.ptr)
    monkeypatch.setattr(crossing, "_external_streams", {})
    with gta.device("cuda"):
        handle, flow = ro.TensorArrayV3(2, F32, element_shape=(2,))
        with warnings.catch_warnings(), cupy.recording() as log:
            warnings.simplefilter("error")
            with crossing.cuda_scope_for_index(0):
                ro.TensorArrayWriteV3(handle, 0, np.ones(2, F32), flow)
    assert {stream for kind, _, stream, _ in log if kind in ("launch", "record", "copy")} == {made.name}, log
