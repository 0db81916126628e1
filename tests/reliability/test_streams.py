"""Memory an op frees while other streams use the array, and values from another device
(issue 22).

CuPy's pool is stream-ordered: a freed block goes back to the arena of the stream that
allocated it, and the next allocation on that stream may reuse it at once, ordered after
nothing on other streams (cupy/cuda/memory.pyx). So when an op on stream B drops a slab
that stream A allocated (a regrowth copies out of it on B first; a close, a widening),
A must wait on B's work before the block is back in A's pool. The device step
(backends/device_guard.py) makes every other stream that used the array wait on the
event recorded at the end of each op, holds what the op dropped until then, and waits
for the whole device where a stream cannot be named (another thread's per-thread default
stream).

Checked on the CuPy stand-in's recorded ordering (tests/cupy_standin.py: allocations,
frees with the allocating stream, records, waits, synchronisations), and the device step's
interrupt safety over a fake device. On a real GPU the stand-in is not CuPy and the
recorded-ordering tests skip.
"""

import sys
import threading
import weakref

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.backends.device_guard import DeviceScope
from gpu_tensorarray.layouts import FIRST_SLAB_BYTES
from interrupt_util import Interrupt

cupy = sys.modules.get("cupy")
on_standin = pytest.mark.skipif(not getattr(cupy, "STANDIN", False),
                                reason="the ordering log is the CuPy stand-in's (a real GPU is in use)")
F32 = np.float32
# A dynamic array's first slab of rows of 3 float32: a write at FIRST_ROWS regrows it.
FIRST_ROWS = FIRST_SLAB_BYTES // 12
FIRST_SLAB = FIRST_ROWS * 12


@pytest.fixture
def standin():
    cupy.reset()
    with gta.device("cuda"):
        yield
    cupy.reset()


def _write(handle, index, count, flow):
    return ro.TensorArrayWriteV3(handle, index, np.full(count, index, F32), flow)


def _frees(log, stream, nbytes):
    """Positions of the frees of ``nbytes`` into ``stream``'s pool (allocated there)."""
    return [i for i, (kind, _, name, size) in enumerate(log) if kind == "free" and name == stream and size == nbytes]


def _ordered_before_free(log, free, stream, op_stream):
    """Whether ``stream`` waits on the event recorded at the end of the op on ``op_stream``
    before the free at ``free`` (the log covers that op alone: its record is that
    stream's last before the free, and there is none when the free came first)."""
    records = [i for i, (kind, _, name, _) in enumerate(log[:free]) if kind == "record" and name == op_stream]
    if not records:
        return False
    record = records[-1]
    return any(entry[0] == "wait" and entry[2] == stream and entry[3] == op_stream for entry in log[record:free])


# -- (a) a regrowth on another stream; (b) a close there -------------------------------------------

def _scatter(handle, index, count, flow):
    return ro.TensorArrayScatterV3(handle, np.array([index], np.int32), np.full((1, count), index, F32), flow)


# case -> (writes on stream A as (index, elements), the op on B and its (index, elements),
# the bytes of A's buffer that op drops)
GROWTH = {
    "uniform slab regrown": ([(0, 3)], _write, (FIRST_ROWS, 3), FIRST_SLAB),  # the first slab doubles
    "widened to ragged": ([(0, 3), (1, 3)], _scatter, (2, 5), FIRST_SLAB),   # the first slab goes
    "ragged buffer regrown": ([(0, 3), (1, 5)], _write, (2, 7), 8 * 4),      # flat: 8 elements -> 16
}


@on_standin
@pytest.mark.parametrize("case", list(GROWTH))
def test_a_buffer_dropped_on_another_stream_is_freed_after_its_stream_waits(standin, case):
    on_a, op, (index, count), nbytes = GROWTH[case]
    handle, flow = ro.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    with a:
        for i, n in on_a:
            flow = _write(handle, i, n, flow)
    with cupy.recording() as log, b:
        flow = op(handle, index, count, flow)
    frees = _frees(log, a.name, nbytes)
    assert len(frees) == 1, log                 # allocated on a: back to a's pool
    assert _ordered_before_free(log, frees[0], a.name, b.name), log
    with a:
        for i, n in on_a + [(index, count)]:
            np.testing.assert_array_equal(ro.TensorArrayReadV3(handle, i, flow, F32).get(), np.full(n, i, F32))


@on_standin
def test_a_close_on_another_stream_frees_the_slab_after_its_stream_waits(standin):
    handle, flow = ro.TensorArrayV3(4, F32, element_shape=(3,))
    a, b = cupy.cuda.Stream(non_blocking=True), cupy.cuda.Stream(non_blocking=True)
    with a:
        _write(handle, 0, 3, flow)              # the slab (4 rows) is allocated on a
    with cupy.recording() as log, b:
        ro.TensorArrayCloseV3(handle)
    frees = _frees(log, a.name, 4 * 12)
    assert len(frees) == 1, log
    assert _ordered_before_free(log, frees[0], a.name, b.name), log


# -- (c) one stream: nothing more than before --------------------------------------------------------

@on_standin
def test_one_stream_adds_no_wait_no_synchronisation_and_holds_nothing(standin):
    # From one origin each op records the array's event once, and what it frees goes at
    # once: back to its own stream's pool, ordered after its work there.
    handle, flow = ro.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
    a = cupy.cuda.Stream(non_blocking=True)
    with a:
        flow = _write(handle, 0, 3, flow)
        with cupy.recording() as log:
            flow = _write(handle, FIRST_ROWS, 3, flow)  # regrows
            flow = _write(handle, 2, 5, flow)           # widens
            ro.TensorArrayReadV3(handle, 0, flow, F32)
            ro.TensorArrayCloseV3(handle)
    kinds = [entry[0] for entry in log]
    assert "wait" not in kinds and "sync" not in kinds, log
    assert kinds.count("record") == 4, log
    dropped = _frees(log, a.name, FIRST_SLAB)[0]        # the first slab, during the regrowing write
    assert dropped < kinds.index("record"), log

    scope = DeviceScope(_FakeDevice())
    with scope:
        buffer = _Buffer()
        gone = weakref.finalize(buffer, lambda: None)
        scope.hold(buffer)
        del buffer
        assert not gone.alive, "from one origin, hold keeps nothing"


# -- (d) another thread's per-thread default stream ------------------------------------------------

@on_standin
@pytest.mark.parametrize("op", ["regrowth", "close"])
def test_another_threads_per_thread_stream_is_ordered_by_a_device_synchronise(standin, op):
    # The per-thread default stream's handle names the calling thread's own stream: the
    # worker cannot make the main thread's wait, so it waits for the device instead.
    ptds = cupy.cuda.Stream.ptds
    handle, flow = ro.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
    with ptds:
        flow = _write(handle, 0, 3, flow)               # the slab, allocated on the main thread's
        main = ptds.name
    failures = []

    def worker():
        try:
            with ptds:
                if op == "regrowth":
                    _write(handle, FIRST_ROWS, 3, flow)
                else:
                    ro.TensorArrayCloseV3(handle)
        except BaseException as error:  # noqa: BLE001 - reported below
            failures.append(error)

    with cupy.recording() as log:
        thread = threading.Thread(target=worker, name="worker")
        thread.start()
        thread.join(60)
    assert not thread.is_alive() and not failures, failures
    frees = _frees(log, main, FIRST_SLAB)
    assert len(frees) == 1, log
    assert ("sync", 0, None, "device") in log[:frees[0]], log
    assert not any(entry[0] == "wait" and entry[2] == main for entry in log), "no thread can name another's"


@on_standin
def test_the_legacy_default_stream_is_one_stream_for_every_thread(standin):
    # The null stream is the same stream from any thread: no wait, no synchronisation.
    handle, flow = ro.TensorArrayV3(0, F32, dynamic_size=True, clear_after_read=False)
    flow = _write(handle, 0, 3, flow)
    with cupy.recording() as log:
        thread = threading.Thread(target=_write, args=(handle, 1, 3, flow))
        thread.start()
        thread.join(60)
    kinds = [entry[0] for entry in log]
    assert "sync" not in kinds and kinds.count("wait") == 1, log     # the op's entry wait only


# -- a value from another device ---------------------------------------------------------------------

@on_standin
def test_a_value_from_another_device_is_copied_after_its_devices_stream(standin):
    # The value is ready in the order of its device's current stream; the copy onto the
    # array's device runs on that device's stream, after a wait on the value's.
    handle, flow = ro.TensorArrayV3(2, F32, element_shape=(4,))
    with cupy.cuda.Device(1):
        with cupy.cuda.Stream(non_blocking=True) as producer:
            value = cupy.arange(4, dtype=F32)
            with cupy.recording() as log:
                ro.TensorArrayWriteV3(handle, 0, value, flow)
    record = log.index(("record", 1, producer.name, None))
    wait = next(i for i, entry in enumerate(log) if entry[:2] == ("wait", 0) and entry[3] == producer.name)
    # A contiguous value crosses by a memcpy on device 0's stream (core.pyx's copy()), no kernel.
    copy = log.index(("copy", 0, "null", "device to device"))
    assert record < wait < copy, log
    assert not [entry for entry in log if entry[:2] == ("launch", 1)], log
    assert gta.to_numpy(ro.TensorArrayReadV3(handle, 0, flow, F32)).tolist() == [0, 1, 2, 3]


@on_standin
def test_a_strided_value_from_another_device_is_made_contiguous_there_before_its_event(standin):
    # CuPy copies a non-contiguous array across devices by first making a C-contiguous copy
    # on its device (a kernel on that device's current stream), then a memcpy on this one's:
    # the event this device's stream waits on is recorded after that kernel, or the memcpy
    # could read the staging buffer before it is written.
    handle, flow = ro.TensorArrayV3(2, F32, element_shape=(4,))
    with cupy.cuda.Device(1):
        with cupy.cuda.Stream(non_blocking=True) as producer:
            value = cupy.arange(8, dtype=F32)[::2]
            with cupy.recording() as log:
                ro.TensorArrayWriteV3(handle, 0, value, flow)
    stage = log.index(("launch", 1, producer.name, "copy"))
    record = log.index(("record", 1, producer.name, None))
    wait = next(i for i, entry in enumerate(log) if entry[:2] == ("wait", 0) and entry[3] == producer.name)
    copy = log.index(("copy", 0, "null", "device to device"))
    assert stage < record < wait < copy, log
    assert ("alloc", 1, producer.name, 16) in log[:stage], log        # the staging buffer: device 1's pool
    assert gta.to_numpy(ro.TensorArrayReadV3(handle, 0, flow, F32)).tolist() == [0, 2, 4, 6]


@on_standin
@pytest.mark.parametrize("strided", [False, True])
def test_a_value_from_another_device_is_not_reused_before_the_copy_out_of_it(standin, strided):
    # The memcpy is queued on this device's stream. The value's own stream must wait for it:
    # its owner may change the value there next, and a staged copy, dropped when the op returns,
    # goes back to that stream's pool arena (CuPy frees with no event), for its next allocation.
    handle, flow = ro.TensorArrayV3(2, F32, element_shape=(4,))
    with cupy.cuda.Device(1):
        with cupy.cuda.Stream(non_blocking=True) as producer:
            value = cupy.arange(8, dtype=F32)[::2] if strided else cupy.arange(4, dtype=F32)
            with cupy.recording() as log:
                ro.TensorArrayWriteV3(handle, 0, value, flow)
    copy = log.index(("copy", 0, "null", "device to device"))
    done = next(i for i, entry in enumerate(log) if entry[:3] == ("record", 0, "null") and i > copy)
    wait = next(i for i, entry in enumerate(log) if entry[:3] == ("wait", 1, producer.name) and i > done)
    assert log[wait][3] == "null", log
    assert gta.to_numpy(ro.TensorArrayReadV3(handle, 0, flow, F32)).tolist() == ([0, 2, 4, 6] if strided else
                                                                                  [0, 1, 2, 3])


@on_standin
def test_a_strided_value_from_a_full_device_fails_as_resource_exhausted(standin):
    handle, flow = ro.TensorArrayV3(2, F32, element_shape=(4,))
    flow = ro.TensorArrayWriteV3(handle, 1, np.ones(4, F32), flow)
    with cupy.cuda.Device(1):
        value = cupy.arange(8, dtype=F32)[::2]
    allocate = cupy.cuda.get_allocator()

    def device_1_full(size):
        # A pool limit would not do: the pool's cached chunks serve allocations under it.
        if cupy.cuda.runtime.getDevice() == 1:
            raise cupy.cuda.memory.OutOfMemoryError(size, 0, 0)
        return allocate(size)
    with cupy.cuda.using_allocator(device_1_full), \
            pytest.raises(gta.errors.ResourceExhaustedError, match="cuda:1"):
        ro.TensorArrayWriteV3(handle, 0, value, flow)
    assert gta.to_numpy(ro.TensorArrayReadV3(handle, 1, flow, F32)).tolist() == [1, 1, 1, 1]


# -- interrupts: what an op held goes only once other streams are ordered ---------------------------

class _Buffer:
    pass


class _Stream:
    def __init__(self, device, name):
        self.device, self.name = device, name

    def wait_event(self, event):
        self.device.log.append(("wait", self.name, event.recorded_on))


class _Event:
    recorded_on = None

    def __init__(self, device):
        self.device = device

    def record(self, stream):
        self.recorded_on = stream.name
        self.device.log.append(("record", stream.name))


class _FakeDevice:
    """Two streams of one device, and what happened to them."""

    def __init__(self):
        self.log = []
        self.a, self.b = _Stream(self, "a"), _Stream(self, "b")
        self.stream = self.a

    def activate(self):
        return None

    def restore(self, token):
        pass

    def current_stream(self):
        return self.stream

    def per_thread(self, stream):
        return False

    def new_event(self):
        return _Event(self)

    def synchronize(self):
        self.log.append(("synchronize",))


def test_an_interrupt_anywhere_in_the_device_step_frees_held_memory_only_once_ordered():
    at = 0
    while True:
        at += 1
        device = _FakeDevice()
        lock, scope = threading.Lock(), DeviceScope(device)
        with lock, scope:
            pass                                        # an op on a: a's memory
        box = [_Buffer()]
        weakref.finalize(box[0], device.log.append, ("free",))

        def op():
            with lock, scope:
                device.log.append(("op",))
                scope.hold(box[0])                      # as a layout does, before dropping it
                del box[0]

        device.stream = device.b
        interrupt = Interrupt(at)
        finished = not interrupt.run(op)
        assert not lock.locked(), interrupt.where
        if box:
            continue                                    # interrupted before the op dropped it
        if ("free",) not in device.log:
            with lock, scope:                           # still held: the next op's exit lets it go
                pass
        log = device.log
        assert ("free",) in log, (interrupt.where, log)
        free, start = log.index(("free",)), log.index(("op",))
        ordered = ("synchronize",) in log[start:free] or any(
            entry == ("wait", "a", "b") and ("record", "b") in log[start:i] for i, entry in enumerate(log[:free]))
        assert ordered, (interrupt.where, log)
        if finished:
            break
    assert at > 5
