"""Every device operation of an array runs with the array's device current, and
its device work is ordered across streams (docs/architecture.md, "Devices and streams").

Without a GPU: a backend double whose arrays live on a simulated device 1 and
record every element operation (indexing, ufuncs, NumPy functions, copies) made
while another simulated device is current. Device 0 is current outside, so any
array work outside the array's lock or a backend primitive shows. Its lock is the
library's own DeviceScope, so the stream rule is tested on the real code with fake
streams and events; the cupy backend's device adapter is tested on a fake CuPy.
With two GPUs: an array on cuda:1 while cuda:0 is current, against NumPy.
"""

import contextlib
import threading

import numpy as np
import pytest

import gpu_tensorarray as gta
import gpu_tensorarray.tf2 as tf
from gpu_tensorarray import raw_ops
from gpu_tensorarray.backends import device
from gpu_tensorarray.backends.device_guard import DeviceScope
from gpu_tensorarray.backends.numpy import NumpyBackend
from gpu_tensorarray.registry import registry
from ta_conformance_util import cuda_devices
from test_backend_choice import fake_cupy, with_cupy  # noqa: F401 (a fixture)

F32 = np.dtype("float32")


# -- a simulated CUDA runtime ------------------------------------------------------------------

class Runtime:
    """The current device and stream, per thread as CUDA's are, and what happened."""

    def __init__(self):
        self._local = threading.local()
        self.violations = []        # element operations made while another device was current
        self.log = []               # ("wait", stream, event) / ("record", stream, event)

    @property
    def current(self):
        return getattr(self._local, "device", 0)

    @current.setter
    def current(self, index):
        self._local.device = index

    @property
    def stream(self):
        return getattr(self._local, "stream", DEFAULT_STREAM)

    @contextlib.contextmanager
    def on(self, stream):
        saved = self.stream
        self._local.stream = stream
        try:
            yield
        finally:
            self._local.stream = saved


class Stream:
    def __init__(self, name, per_thread=False):
        self.name, self.per_thread = name, per_thread

    def wait_event(self, event):
        event.runtime.log.append(("wait", self.name, event.recorded_on))

    def __repr__(self):
        return f"Stream({self.name})"


DEFAULT_STREAM = Stream("default", per_thread=True)     # CUDA's per-thread default stream


class Event:
    def __init__(self, runtime, device_index):
        self.runtime, self.device_index, self.recorded_on = runtime, device_index, None

    def record(self, stream):
        assert self.runtime.current == self.device_index, "an event is recorded on its own device"
        self.recorded_on = stream.name
        self.runtime.log.append(("record", stream.name))


class SimulatedDevice:
    """The device API DeviceScope takes, over the simulated runtime."""

    def __init__(self, runtime, index):
        self.runtime, self.index = runtime, index

    def activate(self):
        previous = self.runtime.current
        self.runtime.current = self.index
        return previous

    def restore(self, previous):
        self.runtime.current = previous

    def current_stream(self):
        return self.runtime.stream

    def per_thread(self, stream):
        return stream.per_thread

    def new_event(self):
        return Event(self.runtime, self.index)

    def synchronize(self):
        self.runtime.log.append(("synchronize", self.index))


class DeviceArray(np.ndarray):
    """A NumPy array on a simulated device: element work while another is current is a violation."""

    device_index = None
    runtime = None

    def __array_finalize__(self, obj):
        self.device_index = getattr(obj, "device_index", None)
        self.runtime = getattr(obj, "runtime", None)

    def _check(self, what):
        if self.runtime is not None and self.runtime.current != self.device_index:
            self.runtime.violations.append(f"{what} on device {self.device_index} while "
                                           f"device {self.runtime.current} is current")

    def __getitem__(self, key):
        self._check("indexing")
        return super().__getitem__(key)

    def __setitem__(self, key, value):
        self._check("assignment")
        if isinstance(value, DeviceArray) and value.device_index != self.device_index:
            self.runtime.violations.append(f"a value on device {value.device_index} stored into device "
                                           f"{self.device_index} memory")
        super().__setitem__(key, value)

    def copy(self, order="C"):
        self._check("copy")
        return super().copy(order)

    def astype(self, *args, **kwargs):
        self._check("astype")
        return super().astype(*args, **kwargs)

    def fill(self, value):
        self._check("fill")
        super().fill(value)

    def take(self, *args, **kwargs):
        self._check("take")
        return super().take(*args, **kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        outputs = kwargs.get("out", ())
        on_device = [x for x in inputs + tuple(outputs) if isinstance(x, DeviceArray)]
        on_device[0]._check(f"np.{ufunc.__name__}.{method}")
        plain = tuple(x.view(np.ndarray) if isinstance(x, DeviceArray) else x for x in inputs)
        if outputs:
            kwargs["out"] = tuple(x.view(np.ndarray) if isinstance(x, DeviceArray) else x for x in outputs)
        result = getattr(ufunc, method)(*plain, **kwargs)
        if outputs:
            return outputs[0] if len(outputs) == 1 else outputs
        if isinstance(result, np.ndarray):
            result = result.view(DeviceArray)
            result.device_index, result.runtime = self.device_index, self.runtime
        return result

    def __array_function__(self, func, types, args, kwargs):
        self._check(f"np.{func.__name__}")
        return super().__array_function__(func, types, args, kwargs)


class DeviceDouble(NumpyBackend):
    """A NumPy backend on simulated device ``index``: like the cupy backend, each primitive
    makes its device current, and an array's device step is a DeviceScope over it."""

    name = "device-double"
    array_type = DeviceArray
    native_type = None                # as the cupy backend's: a value may live on another device

    def __init__(self, runtime, index=1):
        super().__init__(device=f"sim:{index}")
        self.runtime, self.index = runtime, index
        self._simulated = SimulatedDevice(runtime, index)

    @contextlib.contextmanager
    def _scope(self):
        previous = self._simulated.activate()
        try:
            yield
        finally:
            self._simulated.restore(previous)

    def _on_device(self, array):
        array = array.view(DeviceArray)
        array.device_index, array.runtime = self.index, self.runtime
        return array

    def array_device(self):
        return DeviceScope(self._simulated)

    def array_hold(self, step):
        return step.hold

    def allocate(self, make, nbytes, what, host=False):
        with self._scope():
            made = super().allocate(make, nbytes, what, host)
        return made if host or not isinstance(made, np.ndarray) else self._on_device(made)

    def from_host(self, host_array):
        with self._scope():
            return self._on_device(np.array(host_array))

    def from_foreign(self, value):
        return None

    def asarray(self, value, dtype=None):
        if isinstance(value, DeviceArray) and value.device_index != self.index:
            return self.from_host(value.view(np.ndarray))      # a copy onto this device, as CuPy's
        return super().asarray(value, dtype)

    def to_numpy(self, array):
        with self._scope():
            return np.array(array.view(np.ndarray) if isinstance(array, DeviceArray) else array)

    def copy(self, array):
        with self._scope():
            return self._on_device(np.array(array.view(np.ndarray)))

    def readonly(self, array):
        return _CopyingIndexer(self, array)

    def _on_device_call(self, run):
        """A prepared primitive run with the device current, as the cupy adapter's are."""
        def call(*args):
            with self._scope():
                result = run(*args)
            return self._on_device(result) if isinstance(result, np.ndarray) else result
        return call

    def prepare_take_rows(self, indices, row_shape, dtype):
        with self._scope():
            return self._on_device_call(super().prepare_take_rows(indices, row_shape, dtype))

    def prepare_put_rows(self, indices, rows, dtype):
        with self._scope():
            return self._on_device_call(super().prepare_put_rows(indices, rows, dtype))

    def prepare_add_rows(self, indices, rows, n_destinations, dtype, mode=None, guard=None):
        with self._scope():
            return self._on_device_call(super().prepare_add_rows(indices, rows, n_destinations, dtype, mode, guard))

    def prepare_concatenate(self, shapes, dtype):
        with self._scope():
            return self._on_device_call(super().prepare_concatenate(shapes, dtype))


class _CopyingIndexer:
    """As the cupy backend's readonly(): what indexing gives is a copy, made on the device."""

    def __init__(self, backend, array):
        self._backend, self._array = backend, array

    def __getitem__(self, key):
        with self._backend._scope():
            return self._array[key].copy()


@pytest.fixture
def runtime():
    return Runtime()


@pytest.fixture
def double(runtime):
    backend = DeviceDouble(runtime)
    with device(backend):
        yield backend
    assert runtime.current == 0, "the caller's device is restored"
    assert runtime.violations == [], "\n".join(runtime.violations[:10])


def host(value):
    """A returned value as NumPy, read on its device (as CuPy's get() does)."""
    assert isinstance(value, DeviceArray) and value.device_index == 1, f"{type(value)} not on device 1"
    return np.array(value.view(np.ndarray))


def rows(count, *shape, start=0.0):
    return (np.arange(count * int(np.prod(shape, dtype=int)), dtype=F32) + start).reshape((count,) + shape)


# -- (a) no element work outside the array's device ----------------------------------------------

def test_the_double_detects_work_outside_the_device(runtime):
    # The double's check itself: element work on a device-1 array with device 0 current is caught.
    array = DeviceDouble(runtime).zeros((3,), F32)
    array[0] = 1
    _ = array + array
    np.concatenate([array, array])
    assert len(runtime.violations) == 3


def test_raw_op_family(double):
    values = rows(6, 2, 3)
    handle, flow = raw_ops.TensorArrayV3(6, F32, element_shape=(2, 3), clear_after_read=False)
    flow = raw_ops.TensorArrayWriteV3(handle, 0, values[0], flow)
    flow = raw_ops.TensorArrayScatterV3(handle, [5, 1, 3], values[[5, 1, 3]], flow)
    flow = raw_ops.TensorArrayWriteV3(handle, 2, values[2], flow)
    flow = raw_ops.TensorArrayWriteV3(handle, 4, values[4], flow)
    np.testing.assert_array_equal(host(raw_ops.TensorArrayReadV3(handle, 3, flow, F32)), values[3])
    np.testing.assert_array_equal(host(raw_ops.TensorArrayGatherV3(handle, [4, 0, 4], flow, F32)), values[[4, 0, 4]])
    np.testing.assert_array_equal(host(raw_ops.TensorArrayGatherV3(handle, range(6), flow, F32)), values)  # stack
    value, lengths = raw_ops.TensorArrayConcatV3(handle, flow, F32)
    np.testing.assert_array_equal(host(value), values.reshape(12, 3))
    # Lengths and size live in host memory, as TensorFlow's (HostMemory): NumPy, never the device.
    assert type(lengths) is np.ndarray and lengths.tolist() == [2] * 6
    size = raw_ops.TensorArraySizeV3(handle, flow)
    assert type(size) is np.ndarray and size.dtype == np.int32 and int(size) == 6
    raw_ops.TensorArrayCloseV3(handle)

    split, flow = raw_ops.TensorArrayV3(3, F32, clear_after_read=False)
    flow = raw_ops.TensorArraySplitV3(split, values.reshape(12, 3)[:9], [2, 3, 4], flow)
    np.testing.assert_array_equal(host(raw_ops.TensorArrayReadV3(split, 1, flow, F32)), values.reshape(12, 3)[2:5])
    value, _ = raw_ops.TensorArrayConcatV3(split, flow, F32)
    np.testing.assert_array_equal(host(value), values.reshape(12, 3)[:9])


def test_growth_of_a_dynamic_array(double):
    handle, flow = raw_ops.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
    values = rows(40, 3)
    for index in range(40):                       # the slab grows (a copy) several times
        flow = raw_ops.TensorArrayWriteV3(handle, index, values[index], flow)
    flow = raw_ops.TensorArrayScatterV3(handle, list(range(40, 100)), rows(60, 3, start=500), flow)
    expected = np.concatenate([values, rows(60, 3, start=500)])
    np.testing.assert_array_equal(host(raw_ops.TensorArrayGatherV3(handle, range(100), flow, F32)), expected)


def test_ragged_layout(double):
    handle, flow = raw_ops.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
    pieces = [rows(2, 3), rows(4, 3, start=10), rows(1, 3, start=30)]
    for index, piece in enumerate(pieces):        # the second shape widens the layout to ragged
        flow = raw_ops.TensorArrayWriteV3(handle, index, piece, flow)
    value, lengths = raw_ops.TensorArrayConcatV3(handle, flow, F32)
    np.testing.assert_array_equal(host(value), np.concatenate(pieces))
    np.testing.assert_array_equal(host(raw_ops.TensorArrayReadV3(handle, 1, flow, F32)), pieces[1])
    np.testing.assert_array_equal(host(raw_ops.TensorArrayGatherV3(handle, [2, 2], flow, F32)), [pieces[2]] * 2)
    flow = raw_ops.TensorArrayWriteV3(handle, 5, rows(2, 3), flow)   # out of order: concat copies
    flow = raw_ops.TensorArrayWriteV3(handle, 4, rows(3, 3), flow)
    flow = raw_ops.TensorArrayWriteV3(handle, 3, rows(1, 3), flow)
    value, _ = raw_ops.TensorArrayConcatV3(handle, flow, F32)
    np.testing.assert_array_equal(host(value), np.concatenate(pieces + [rows(1, 3), rows(3, 3), rows(2, 3)]))


def test_gradient_arrays_aggregate_fill_and_materialize(double):
    forward, flow = raw_ops.TensorArrayV3(12, F32, element_shape=(2,))
    flow = raw_ops.TensorArrayScatterV3(forward, list(range(12)), rows(12, 2), flow)
    grad, gflow = raw_ops.TensorArrayGradV3(forward, flow, "gradients")
    indices = [0, 3, 3, 5, 7, 8, 9, 10, 11, 0]     # more than a batch of 8: the vector path (fill, scatter-add)
    updates = rows(10, 2, start=1)
    gflow = raw_ops.TensorArrayScatterV3(grad, indices, updates, gflow)
    gflow = raw_ops.TensorArrayWriteV3(grad, 5, np.ones(2, F32), gflow)
    expected = np.zeros((12, 2), F32)
    np.add.at(expected, indices, updates)
    expected[5] += 1
    for index in (0, 3, 5, 1):                     # slot 1: never written, a soft zero row
        np.testing.assert_array_equal(host(raw_ops.TensorArrayReadV3(grad, index, gflow, F32)), expected[index])

    ragged, flow = raw_ops.TensorArrayV3(3, F32)
    flow = raw_ops.TensorArraySplitV3(ragged, rows(6, 2), [1, 2, 3], flow)
    rgrad, rflow = raw_ops.TensorArrayGradWithShape(ragged, flow, [4], "gradients_1")
    rflow = raw_ops.TensorArrayWriteV3(rgrad, 1, np.ones((4, 2, 2), F32), rflow)
    rflow = raw_ops.TensorArrayWriteV3(rgrad, 1, np.ones((4, 2, 2), F32), rflow)      # aggregated
    np.testing.assert_array_equal(host(raw_ops.TensorArrayReadV3(rgrad, 1, rflow, F32)), np.full((4, 2, 2), 2, F32))
    np.testing.assert_array_equal(host(raw_ops.TensorArrayReadV3(rgrad, 2, rflow, F32)), np.zeros((4, 3, 2), F32))


def test_the_tape(double):
    x = rows(4, 3)
    with gta.GradientTape() as tape:
        ta = gta.TensorArray(F32, size=4, clear_after_read=False).unstack(x)
        y = ta.read(1)
        z = ta.stack()
        w = ta.read(1)
    dx = tape.gradient([y, z, w], x)               # ones, accumulated on the device
    expected = np.ones((4, 3), F32)
    expected[1] += 2
    np.testing.assert_array_equal(host(dx), expected)

    with gta.GradientTape() as tape:
        value = rows(2, 2)
        unused = rows(2, 2)
        tc = gta.TensorArray(F32, size=4).scatter([0, 1], value).scatter([2, 3], unused)
        out = tc.read(0)
    given = np.full(2, 5, F32)
    dvalue, dunused = tape.gradient(out, [value, unused], output_gradients=given, unconnected_gradients="zero")
    np.testing.assert_array_equal(host(dvalue), [[5, 5], [0, 0]])
    np.testing.assert_array_equal(host(dunused), np.zeros((2, 2), F32))


def test_the_tf2_class(double):
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    for index in range(5):
        ta = ta.write(index, np.full(3, index, F32))
    np.testing.assert_array_equal(host(ta.stack()), np.repeat(np.arange(5, dtype=F32), 3).reshape(5, 3))
    np.testing.assert_array_equal(host(ta.gather([4, 0])), [[4] * 3, [0] * 3])
    ta = ta.unstack(rows(2, 3))
    np.testing.assert_array_equal(host(ta.read(1)), rows(2, 3)[1])
    gap = tf.TensorArray(tf.float32, size=3, element_shape=(2,)).write(2, np.ones(2, F32))
    np.testing.assert_array_equal(host(gap.stack()), [[0, 0], [0, 0], [1, 1]])   # unwritten: zeros
    np.testing.assert_array_equal(host(gap.concat()), [0, 0, 0, 0, 1, 1])


def test_a_value_from_another_device_is_copied_onto_the_arrays(double, runtime):
    value = DeviceDouble(runtime, index=0).from_host(np.arange(3, dtype=F32))
    handle, flow = raw_ops.TensorArrayV3(3, F32, clear_after_read=False)
    flow = raw_ops.TensorArrayWriteV3(handle, 0, value, flow)          # the first write
    flow = raw_ops.TensorArrayWriteV3(handle, 1, value, flow)          # the fast path
    flow = raw_ops.TensorArrayScatterV3(handle, [2], value.reshape(1, 3), flow)
    stacked = raw_ops.TensorArrayGatherV3(handle, range(3), flow, F32)
    np.testing.assert_array_equal(host(stacked), np.tile(np.arange(3, dtype=F32), (3, 1)))


# -- (b) the stream rule ---------------------------------------------------------------------------

def test_ops_from_one_stream_never_wait(double, runtime):
    array = registry.lookup(raw_ops.TensorArrayV3(2, F32)[0])
    array.write(0, np.ones(2, F32))
    array.read(0, F32)
    assert [entry[0] for entry in runtime.log] == ["record", "record"]


def test_an_op_from_another_stream_waits_on_the_last_ops_event(double, runtime):
    array = registry.lookup(raw_ops.TensorArrayV3(3, F32)[0])
    a, b = Stream("A"), Stream("B")
    with runtime.on(a):
        array.write(0, np.ones(2, F32))
    with runtime.on(b):
        array.write(1, np.ones(2, F32))
        array.read(1, F32)
    with runtime.on(a):
        array.read(0, F32)
    # Once two streams have used the array, each op's exit also makes the other wait on
    # its event: memory the op freed may go back to the other stream's pool.
    assert runtime.log == [("record", "A"),
                           ("wait", "B", "A"), ("record", "B"), ("wait", "A", "B"),
                           ("record", "B"), ("wait", "A", "B"),
                           ("wait", "A", "B"), ("record", "A"), ("wait", "B", "A")]


def test_one_stream_handle_from_two_threads_waits(double, runtime):
    # A per-thread default stream is one handle for a stream per thread.
    array = registry.lookup(raw_ops.TensorArrayV3(2, F32)[0])
    array.write(0, np.ones(2, F32))
    worker = threading.Thread(target=array.write, args=(1, np.ones(2, F32)))
    worker.start()
    worker.join()
    # Its exit cannot name the first thread's stream: it waits for the device instead.
    assert runtime.log == [("record", "default"), ("wait", "default", "default"), ("record", "default"),
                           ("synchronize", 1)]


def test_a_failing_op_still_releases_the_array_and_the_device(double, runtime):
    array = registry.lookup(raw_ops.TensorArrayV3(1, F32)[0])
    with pytest.raises(gta.errors.InvalidArgumentError):
        array.write(3, np.ones(2, F32))
    assert runtime.current == 0
    array.write(0, np.ones(2, F32))                # the lock is free again


def test_cpu_backends_keep_a_plain_lock():
    lock_type = type(threading.Lock())
    assert type(gta.backends.get_backend("cpu").array_lock()) is lock_type
    assert type(gta.backends.get_backend("cpu").array_device()) is lock_type     # C-level: no Python call


class _FakeCudaRuntime:
    """The part of CuPy's runtime and stream API the cupy backend's device adapter uses."""

    def __init__(self):
        self.device = 0
        self.calls = []

    def getDevice(self):
        return self.device

    def setDevice(self, index):
        self.calls.append(("setDevice", index))
        self.device = index


def test_the_cupy_backends_lock_enters_its_device_and_records_events(monkeypatch, with_cupy):  # noqa: F811
    cupy = with_cupy(fake_cupy(monkeypatch, devices=2))
    fake = _FakeCudaRuntime()
    stream = Stream("torch")
    events = []

    class CudaEvent:
        def __init__(self, disable_timing=False):
            assert disable_timing, "events are for ordering only"
            self.device = fake.device
            events.append(self)

        def record(self, on):
            fake.calls.append(("record", on.name, self.device))

    for name in ("getDevice", "setDevice"):
        setattr(cupy.cuda.runtime, name, getattr(fake, name))
    cupy.cuda.get_current_stream = lambda: stream
    cupy.cuda.Event = CudaEvent
    from gpu_tensorarray.backends.cupy import CupyBackend

    backend = CupyBackend(1)
    assert type(backend.array_lock()) is type(threading.Lock())      # C-level: an interrupt cannot keep it
    lock = backend.array_device()
    with lock:
        assert fake.device == 1
    with lock:
        pass
    assert fake.device == 0
    assert fake.calls == [("setDevice", 1), ("record", "torch", 1), ("setDevice", 0),
                          ("setDevice", 1), ("record", "torch", 1), ("setDevice", 0)]
    assert len(events) == 1, "one event per array, recorded again after each op"


# -- (c) two GPUs ----------------------------------------------------------------------------------

def _two_gpus():
    return cuda_devices() >= 2


@pytest.mark.skipif(not _two_gpus(), reason="needs CuPy and two CUDA devices")
def test_an_array_on_cuda_1_while_cuda_0_is_current():
    import cupy
    values = np.arange(24, dtype=np.float32).reshape(6, 4)
    with cupy.cuda.Device(0), device("cuda:1"):
        handle, flow = raw_ops.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
        on_device_0 = cupy.asarray(values)
        for index in range(6):              # odd rows come from device 0: copied across
            row = on_device_0[index] if index % 2 else values[index]
            flow = raw_ops.TensorArrayWriteV3(handle, index, row, flow)
        read = raw_ops.TensorArrayReadV3(handle, 2, flow, F32)
        stacked = raw_ops.TensorArrayGatherV3(handle, range(6), flow, F32)
        grad, gflow = raw_ops.TensorArrayGradV3(handle, flow, "gradients")
        gflow = raw_ops.TensorArrayScatterV3(grad, [1, 1, 4], values[:3], gflow)
        summed = raw_ops.TensorArrayReadV3(grad, 1, gflow, F32)
        x = cupy.asarray(values)
        with gta.GradientTape() as tape:
            y = gta.TensorArray(F32, size=6).unstack(x).read(3)
        dx = tape.gradient(y, x)
        assert cupy.cuda.runtime.getDevice() == 0
    for value in (read, stacked, summed, dx):
        assert value.device.id == 1
    np.testing.assert_array_equal(read.get(), values[2])
    np.testing.assert_array_equal(stacked.get(), values)
    np.testing.assert_array_equal(summed.get(), values[0] + values[1])
    expected = np.zeros_like(values)
    expected[3] = 1
    np.testing.assert_array_equal(dx.get(), expected)


@pytest.mark.skipif(not _two_gpus(), reason="needs CuPy and two CUDA devices")
def test_indices_on_another_device_are_copied_there():
    """Indices, lengths and a size given as CuPy arrays of cuda:1, with cuda:0 and a stream of
    its own current: CuPy's get() copies on the current device's current stream, and makes a
    strided array contiguous inside ``with stream:``, which refuses another device's stream
    (RuntimeError). Each is read with its own device current, on that device's stream."""
    import cupy
    values = np.arange(24, dtype=np.float32).reshape(6, 4)
    with cupy.cuda.Device(1):
        indices = cupy.arange(6)[::2]                    # [0, 2, 4], strided
        lengths = cupy.asarray([2, 4])
        size = cupy.asarray(2)
    with cupy.cuda.Device(0), cupy.cuda.Stream(non_blocking=True), device("cuda:0"):
        handle, flow = raw_ops.TensorArrayV3(6, F32, clear_after_read=False)
        flow = raw_ops.TensorArrayScatterV3(handle, range(6), values, flow)
        gathered = raw_ops.TensorArrayGatherV3(handle, indices, flow, F32)
        pieces = gta.TensorArray(F32, size=size, infer_shape=False).split(values, lengths)
        assert pieces.size() == 2
        second = pieces.read(1)
        on_host = gta.to_numpy(indices)
    np.testing.assert_array_equal(gathered.get(), values[[0, 2, 4]])
    np.testing.assert_array_equal(second.get(), values[2:])
    np.testing.assert_array_equal(on_host, [0, 2, 4])


@pytest.mark.skipif(not _two_gpus(), reason="needs CuPy and two CUDA devices")
def test_the_backend_of_a_value_is_its_devices():
    """backend_of (the tape's zeros, gradcheck's perturbations) gives a CuPy value's own device's
    backend, whichever was loaded first: it gave the first loaded cupy backend, and the math
    done there met another device's arrays."""
    import cupy
    from gpu_tensorarray.backends import backend_of, get_backend
    get_backend("cuda:1")
    with cupy.cuda.Device(0):
        on_0 = cupy.ones(2)
    with cupy.cuda.Device(1):
        on_1 = cupy.ones(2)
    assert backend_of(on_0).device == "cuda:0" and backend_of(on_1).device == "cuda:1"
