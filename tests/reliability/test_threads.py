"""Thread safety (issue 6, reliability): many Python threads on one TensorArray.

Every op runs under its array's lock (storage.py) and the registry has its own
lock (registry.py), so concurrent callers must see exactly what some sequential
interleaving of their calls would give: no lost writes while a dynamic array
grows, one gradient array per (array, source), exact integer sums when gradient
writes aggregate, readers that only ever see written values.

No test may hang: every thread is joined with a deadline and a test fails when
a thread is still alive after it (threads are daemons, so a deadlocked one
cannot keep the process alive); barriers have timeouts; and faulthandler dumps
every stack and exits if a whole test outlives ``_HANG_LIMIT_S`` anyway.
The interpreter's switch interval is lowered during these tests so that
threads interleave between bytecodes far more often than by default.
"""

import faulthandler
import gc
import queue
import sys
import threading
import time

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry
from ta_conformance_util import CLOSED, assert_same, close, gather, grad, host, new, raises, read, \
    scatter, size, split, write

N_THREADS = 8
JOIN_TIMEOUT_S = 60          # per group of threads; the work itself takes well under a second
_HANG_LIMIT_S = 300          # last resort: faulthandler kills a test whose main thread hangs


@pytest.fixture(autouse=True)
def _no_hang_and_frequent_switches():
    faulthandler.dump_traceback_later(_HANG_LIMIT_S, exit=True)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)
        faulthandler.cancel_dump_traceback_later()


def run_threads(*targets, timeout=JOIN_TIMEOUT_S):
    """Run each target in its own daemon thread; fail if any is still alive after
    ``timeout`` seconds (a deadlock) and re-raise the first exception a thread raised."""
    failures = []

    def guarded(target):
        def run():
            try:
                target()
            except BaseException as error:  # noqa: BLE001 - reported in the main thread
                failures.append(error)
        return run

    threads = [threading.Thread(target=guarded(target), name=f"worker-{k}", daemon=True)
               for k, target in enumerate(targets)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    alive = [thread.name for thread in threads if thread.is_alive()]
    assert not alive, f"threads still running after {timeout} s (a deadlock?): {alive}"
    if failures:
        raise failures[0]


def each_thread(function, count=N_THREADS):
    """``count`` targets: function(0), function(1), ..."""
    return [lambda k=k: function(k) for k in range(count)]


def barrier(count=N_THREADS):
    return threading.Barrier(count, timeout=JOIN_TIMEOUT_S)


def element(index, shape, dtype):
    """A value unique to ``index``: index * 1000 + 0, 1, 2, ... in ``shape``."""
    count = int(np.prod(shape, dtype=np.int64))
    return (index * 1000 + np.arange(count)).astype(dtype).reshape(shape)


def baseline():
    gc.collect()        # garbage from earlier tests must not be collected in the middle of a count
    return gta.stats()


def stats_delta(before):
    after = gta.stats()
    return after["live_arrays"] - before["live_arrays"], after["bytes"] - before["bytes"]


# -- writes of disjoint indices to one growing array ------------------------------------------------------------
@pytest.mark.parametrize("order", ["ascending", "descending", "shuffled"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 5)], ids=["scalar", "vector", "matrix"])
def test_disjoint_writes_grow_a_dynamic_array_without_losing_any(backend, shape, order):
    per_thread = 300
    total = N_THREADS * per_thread
    handle, _ = new(0, "float64", dynamic_size=True, clear_after_read=False)
    start = barrier()

    def writer(k):
        indices = list(range(k, total, N_THREADS))
        if order == "descending":
            indices.reverse()
        elif order == "shuffled":
            np.random.default_rng(k).shuffle(indices)
        start.wait()
        for index in indices:
            write(handle, index, element(index, shape, np.float64))

    run_threads(*each_thread(writer))
    assert size(handle) == total
    expected = np.stack([element(i, shape, np.float64) for i in range(total)])
    assert_same(gather(handle, list(range(total)), "float64"), expected)
    for index in (0, total // 2, total - 1):
        assert_same(read(handle, index, "float64"), element(index, shape, np.float64))


@pytest.mark.parametrize("batch", [4, 32], ids=["slot-by-slot", "batched"])
def test_disjoint_scatters_grow_a_dynamic_array_without_losing_any(backend, batch):
    # Batches over storage's _FAST_BATCH (8) take the vectorised row scatter (a kernel on emulated/cupy).
    rounds = 20
    total = N_THREADS * rounds * batch
    handle, _ = new(0, "int64", dynamic_size=True, clear_after_read=False)
    start = barrier()

    def scatterer(k):
        mine = np.arange(k, total, N_THREADS)
        np.random.default_rng(k).shuffle(mine)
        start.wait()
        for chunk in mine.reshape(rounds, batch):
            scatter(handle, chunk, np.stack([element(int(i), (2,), np.int64) for i in chunk]))

    run_threads(*each_thread(scatterer))
    assert size(handle) == total
    assert_same(gather(handle, list(range(total)), "int64"), np.stack([element(i, (2,), np.int64)
                                                                       for i in range(total)]))


def test_disjoint_writes_through_one_shared_tensor_array_object(backend):
    per_thread = 200
    total = N_THREADS * per_thread
    ta = gta.TensorArray("int32", size=0, dynamic_size=True, clear_after_read=False)
    start = barrier()

    def writer(k):
        start.wait()
        for index in range(k, total, N_THREADS):
            ta.write(index, element(index, (2,), np.int32))

    run_threads(*each_thread(writer))
    assert int(host(ta.size())) == total
    assert ta.element_shape == (2,)
    assert_same(ta.stack(), np.stack([element(i, (2,), np.int32) for i in range(total)]))


def test_racing_writes_of_one_slot_have_exactly_one_winner(backend):
    for _ in range(20):
        handle, _ = new(1, "int32", clear_after_read=False)
        start = barrier()
        outcomes = [None] * N_THREADS

        def writer(k):
            start.wait()
            try:
                write(handle, 0, np.int32(k))
                outcomes[k] = "won"
            except errors.InvalidArgumentError as error:
                assert "because it has already been written to" in str(error), str(error)
                outcomes[k] = "lost"

        run_threads(*each_thread(writer))
        assert outcomes.count("won") == 1, outcomes
        assert int(host(read(handle, 0, "int32"))) == outcomes.index("won")


# -- one gradient array per (array, source) ---------------------------------------------------------------------
def test_concurrent_grad_requests_for_one_source_get_one_handle(backend):
    for _ in range(20):
        handle, _ = new(4, element_shape=[2])
        write(handle, 1, np.ones(2, np.float32))
        before = baseline()
        start = barrier()
        handles = [None] * N_THREADS

        def requester(k):
            start.wait()
            if k % 2:
                handles[k] = ro.TensorArrayGradV3(handle, 0.0, "gradients").grad_handle
            else:   # an existing grad array is returned as is, whatever the prepend shape
                handles[k] = ro.TensorArrayGradWithShape(handle, 0.0, [], "gradients").grad_handle

        run_threads(*each_thread(requester))
        assert all(h is handles[0] for h in handles), {id(h) for h in handles}
        assert handles[0].name == handle.name + "@gradients"
        assert stats_delta(before)[0] == 1
        # The one grad array has the forward's soft slot, and it aggregates.
        write(handles[0], 1, np.full(2, 3, np.float32))
        write(handles[0], 1, np.full(2, 4, np.float32))
        assert_same(read(handles[0], 1), np.full(2, 7, np.float32))
        assert_same(read(handles[0], 3), np.zeros(2, np.float32))
        close(handles[0])
        close(handle)


def test_concurrent_grad_requests_for_distinct_sources_get_distinct_arrays(backend):
    handle, _ = new(3, element_shape=[])
    before = baseline()
    start = barrier()
    handles = [None] * N_THREADS

    def requester(k):
        start.wait()
        for repeat in range(50):       # the same thread asks again and again: same handle
            got = grad(handle, f"gradients_{k}")
            assert handles[k] is None or got is handles[k]
            handles[k] = got

    run_threads(*each_thread(requester))
    assert len({id(h) for h in handles}) == N_THREADS
    assert sorted(h.name for h in handles) == sorted(f"{handle.name}@gradients_{k}" for k in range(N_THREADS))
    assert stats_delta(before)[0] == N_THREADS


def test_grad_creation_racing_dynamic_growth_stays_consistent(backend):
    # Whatever the interleaving: the grad array's size is the forward's size at its
    # creation, the forward never grows after it, and a write either succeeded
    # (then its index is below the final size) or failed as "not resizeable".
    for trial in range(5):
        handle, _ = new(0, dynamic_size=True, element_shape=[])
        start = barrier(N_THREADS + 1)
        succeeded = [[] for _ in range(N_THREADS)]
        grads = []

        def writer(k):
            start.wait()
            for index in range(k, 400, N_THREADS):
                try:
                    write(handle, index, np.float32(index))
                    succeeded[k].append(index)
                except errors.InvalidArgumentError as error:
                    assert "but array is not resizeable and size is: " in str(error), str(error)

        def grad_maker():
            start.wait()
            time.sleep(0.001 * trial)
            grads.append(grad(handle))

        run_threads(*each_thread(writer), grad_maker)
        final = size(handle)
        assert size(grads[0]) == final
        written = sorted(i for per in succeeded for i in per)
        assert all(i < final for i in written)
        with pytest.raises(errors.InvalidArgumentError):
            write(handle, final, np.float32(0))        # no longer resizeable
        values = host(gather(handle, written)) if written else np.zeros(0, np.float32)
        assert_same(values, np.array(written, np.float32))


def test_tapes_in_two_threads_never_share_a_gradient_array(backend, monkeypatch):
    """Each gradient() is a computation of its own (docs/guide.md): two tapes of two threads on one
    forward array pick their sources at once (both before either makes its gradient array) and
    must still pick two, or they add into one accumulator and close it under each other."""
    ta = gta.TensorArray("float64", size=2, clear_after_read=False, element_shape=[3])
    both_picked = barrier(2)
    mint = gta.GradientTape._mint_source

    def mint_then_wait(tape, *arguments):
        source = mint(tape, *arguments)
        both_picked.wait()
        return source
    monkeypatch.setattr(gta.GradientTape, "_mint_source", mint_then_wait)
    written = barrier(2)
    results, sources = [None, None], [None, None]

    def worker(k):
        x = np.full(3, k + 1.0)
        with gta.GradientTape() as tape:
            ta.write(k, x)
            written.wait()
            y = ta.stack()
        results[k] = host(tape.gradient(y, x))
        sources[k] = tape.sources_used

    run_threads(*each_thread(worker, 2))
    assert sources[0] != sources[1]
    for result in results:
        assert_same(result, np.ones(3))


# -- aggregation: concurrent gradient writes sum exactly ----------------------------------------------------------
@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_concurrent_aggregation_into_one_slot_sums_exactly(backend, dtype, mode):
    writes = 200
    handle, _ = new(3, dtype, element_shape=[4])
    g = grad(handle)
    start = barrier()

    def adder(k):
        with gta.accumulation(mode):        # context variables do not cross threads: set it here
            start.wait()
            for j in range(writes):
                write(g, 1, (np.arange(4) * (k + 1) + j).astype(dtype))

    run_threads(*each_thread(adder))
    expected = sum((np.arange(4) * (k + 1) + j) for k in range(N_THREADS) for j in range(writes)).astype(dtype)
    assert_same(read(g, 1, dtype), expected)
    assert_same(read(g, 0, dtype), np.zeros(4, dtype))


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
@pytest.mark.parametrize("dtype", ["int64", "int32"])
@pytest.mark.parametrize("batch", [6, 24], ids=["slot-by-slot", "batched"])
def test_concurrent_scatters_with_duplicates_sum_exactly(backend, dtype, mode, batch):
    slots, rounds = 5, 40
    handle, _ = new(slots, dtype, element_shape=[3])
    write(handle, 2, np.zeros(3, dtype))          # slot 2 of the grad array starts soft
    g = grad(handle)
    plans = []
    for k in range(N_THREADS):
        rng = np.random.default_rng(100 + k)
        plans.append([(rng.integers(0, slots, batch), rng.integers(-50, 50, (batch, 3)).astype(dtype))
                      for _ in range(rounds)])
    start = barrier()

    def scatterer(k):
        with gta.accumulation(mode):
            start.wait()
            for indices, values in plans[k]:
                scatter(g, indices, values)

    run_threads(*each_thread(scatterer))
    expected = np.zeros((slots, 3), dtype)
    for plan in plans:
        for indices, values in plan:
            np.add.at(expected, indices, values)
    assert_same(gather(g, list(range(slots)), dtype), expected)


def test_concurrent_write_scatter_and_split_aggregate_exactly(backend):
    slots = 4
    handle, _ = new(slots, "int64", element_shape=[1, 2])     # split pieces of length 1 are [1, 2]
    g = grad(handle)
    start = barrier()
    expected = np.zeros((slots, 1, 2), np.int64)
    lock = threading.Lock()

    def worker(k):
        rng = np.random.default_rng(k)
        start.wait()
        for j in range(60):
            op = (k + j) % 3
            if op == 0:
                index, value = int(rng.integers(slots)), rng.integers(-9, 9, (1, 2))
                write(g, index, value)
                indices, values = [index], value[None]
            elif op == 1:
                indices, values = rng.integers(0, slots, 10), rng.integers(-9, 9, (10, 1, 2))
                scatter(g, indices, values)
            else:   # one row per slot: a split into a grad array must match its size
                values = rng.integers(-9, 9, (slots, 2))
                split(g, values, [1] * slots)
                indices, values = np.arange(slots), values.reshape(slots, 1, 2)
            with lock:
                np.add.at(expected, np.asarray(indices), values)

    run_threads(*each_thread(worker))
    assert_same(gather(g, list(range(slots)), "int64"), expected)


def test_concurrent_float_aggregation_of_exact_values(backend):
    # Integers below 2**24 add exactly in float32 in any order: the sum must be exact.
    handle, _ = new(2, "float32", element_shape=[5])
    g = grad(handle)
    start = barrier()

    def adder(k):
        with gta.accumulation("atomic"):
            start.wait()
            for j in range(100):
                scatter(g, [0, 1, 0], np.full((3, 5), k + j, np.float32))

    run_threads(*each_thread(adder))
    total = sum(k + j for k in range(N_THREADS) for j in range(100))
    assert_same(gather(g, [0, 1]), np.array([[2 * total] * 5, [total] * 5], np.float32))


# -- readers and writers together ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_readers_see_exactly_what_writers_published(backend, dynamic):
    total = 1200
    writers, readers = N_THREADS // 2, N_THREADS // 2
    handle, _ = new(0 if dynamic else total, "float64", dynamic_size=dynamic, clear_after_read=False,
                    element_shape=[3])
    published = queue.Queue()
    seen = [[] for _ in range(readers)]
    start = barrier()

    def writer(k):
        start.wait()
        for index in range(k, total, writers):
            write(handle, index, element(index, (3,), np.float64))
            published.put(index)

    def reader(k):
        start.wait()
        sizes = []
        while True:
            index = published.get(timeout=JOIN_TIMEOUT_S)
            if index is None:
                break
            value = read(handle, index, "float64")
            assert_same(value, element(index, (3,), np.float64))
            seen[k].append((index, value))      # kept: checked again after all the growth
            if index % 7 == 0:
                assert_same(gather(handle, [index, index], "float64"),
                            np.stack([element(index, (3,), np.float64)] * 2))
            sizes.append(size(handle))
        assert sizes == sorted(sizes) or not dynamic  # a dynamic array's size never shrinks
        assert all(s >= 1 for s in sizes)

    def writers_then_stop():
        run_threads(*[lambda k=k: writer(k) for k in range(writers)])
        for _ in range(readers):
            published.put(None)

    run_threads(writers_then_stop, *[lambda k=k: reader(k) for k in range(readers)])
    got = sorted(index for per in seen for index, _ in per)
    assert got == list(range(total))
    for per in seen:
        for index, value in per:    # values read earlier did not change when the array grew
            assert_same(value, element(index, (3,), np.float64))
    assert size(handle) == total


def test_readers_of_a_clear_after_read_array_each_get_a_slot_once(backend):
    # Every slot is read by exactly one of the racing readers; the others get "cleared".
    total = 400
    handle, _ = new(total, "int64", element_shape=[])
    scatter(handle, np.arange(total), np.arange(total, dtype=np.int64) * 3)
    start = barrier()
    got = [dict() for _ in range(N_THREADS)]

    def reader(k):
        start.wait()
        for index in range(total):
            try:
                got[k][index] = int(host(read(handle, index, "int64")))
            except errors.InvalidArgumentError as error:
                assert "twice because it was cleared after a previous read" in str(error), str(error)

    run_threads(*each_thread(reader))
    for index in range(total):
        winners = [k for k in range(N_THREADS) if index in got[k]]
        assert len(winners) == 1, (index, winners)
        assert got[winners[0]][index] == 3 * index


def test_close_racing_writes_and_reads(backend):
    for _ in range(5):
        handle, _ = new(0, "float32", dynamic_size=True, clear_after_read=False, element_shape=[4])
        before = baseline()
        start = barrier(N_THREADS + 1)
        closed_text = CLOSED.format(name=handle.name)

        def worker(k):
            start.wait()
            for index in range(k, 4000, N_THREADS):
                try:
                    write(handle, index, np.full(4, index, np.float32))
                    if index % 3 == 0:
                        assert_same(read(handle, index), np.full(4, index, np.float32))
                except errors.InvalidArgumentError as error:
                    assert str(error) == closed_text, str(error)
                    return

        def closer():
            start.wait()
            time.sleep(0.002)
            close(handle)

        run_threads(*each_thread(worker), closer)
        for op in (lambda: write(handle, 0, np.zeros(4, np.float32)), lambda: read(handle, 0),
                   lambda: size(handle), lambda: gather(handle, [0])):
            with raises(errors.InvalidArgumentError, closed_text):
                op()
        assert stats_delta(before) == (-1, 0)       # closed: no longer live, its bytes released


@pytest.mark.parametrize("held", ["the tape's", "the forward array's"])
def test_a_gradient_computation_the_collector_finalises_under_a_lock_does_not_deadlock(held):
    """The collector may finalise a dropped computation's _Ending (kept in a cycle, as by a traceback
    its exception holds) at any allocation, also in a thread that holds the tape's lock (minting a
    source) or its forward array's (making a gradient array): ending it there would wait for that
    lock forever. It is ended by the next gradient computation instead."""
    import gpu_tensorarray as gta
    from gpu_tensorarray import tape as tape_module
    handle, flow = new(1)
    registry.grad(handle, "dropped")
    array = registry.lookup(handle)
    cycle = [tape_module._Ending([(array, "dropped")])]
    cycle.append(cycle)
    del cycle
    lock = tape_module._running_lock if held == "the tape's" else array._lock

    def collected_under_the_lock():
        with lock:
            gc.collect()

    run_threads(collected_under_the_lock, timeout=10)
    assert "dropped" in array.grads                  # not yet: no computation ran since
    x = np.ones(2)
    with gta.GradientTape() as tape:
        rows = gta.TensorArray("float64", size=1).write(0, x).stack()
    tape.gradient(rows, x)
    assert array.grads == {}


@pytest.mark.parametrize("setup", ["overwritten", "size-locked"])
def test_concurrent_reads_of_a_tf2_array_each_get_their_slot(backend, setup):
    """Reads change nothing a user sees, so no interleaving of them may fail or swap values. But
    a mode "tf2" read of an unwritten slot makes a zeros slot, first moving the values to a fresh
    storage where overwrites filled it or a gradient locked its size: a read racing the move
    must not take one storage's slot in the other."""
    expected = {0: [1.0, 2.0], 1: [3.0, 6.0]}
    sys.setswitchinterval(1e-6)
    for _ in range(100):
        x0, x1 = np.array(expected[0]), np.array(expected[1])
        if setup == "overwritten":
            ta = gta.TensorArray("float64", size=6, element_shape=[2], mode="tf2")
            for _ in range(14):
                ta = ta.write(1, np.full(2, -1.0)).write(0, np.full(2, -1.0))
            ta = ta.write(1, x1).write(0, x0)        # the next slot made moves the values
        else:
            with gta.GradientTape() as tape:
                ta = gta.TensorArray("float64", size=6, element_shape=[2], mode="tf2")
                ta = ta.write(1, x1).write(0, x0)    # logical 0 in physical 1
                y = ta.read(0)
            tape.gradient(y, x0)                     # TensorArrayGradV3 locks the storage's size
        start = barrier(3)
        reads = []

        def reader(k):
            start.wait()
            for index in ((2, 0, 1, 3), (0, 1, 4, 0), (1, 5, 0, 1))[k]:
                reads.append((index, host(ta.read(index)).tolist()))

        run_threads(*each_thread(reader, 3))
        for index, value in reads:
            assert value == expected.get(index, [0.0, 0.0]), (index, value)


# -- the torch bridge: one array's tracked writes and reads in several threads --------------------
@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_threads_reading_one_torch_array_with_pending_writes_each_get_its_gradient(backend, mode):
    """Two threads read an array whose tracked writes are not yet a node: one of them makes the
    node, the other reads through it (two nodes of one run, or one of mismatched lists, gave
    torch's "incorrect number of gradients" or a wrong gradient)."""
    torch = pytest.importorskip("torch")
    from gpu_tensorarray.torch import TensorArray as TorchTensorArray

    sys.setswitchinterval(1e-6)
    options = {"clear_after_read": False} if mode == "tf1" else {}
    for _ in range(100):
        x = torch.ones(4, 3, dtype=torch.float64, requires_grad=True)
        ta = TorchTensorArray(torch.float64, size=4, mode=mode, **options)
        for index in range(4):
            ta = ta.write(index, x[index] * 1.0)
        start, grads = barrier(2), {}

        def reader(k):
            start.wait()
            grads[k] = torch.autograd.grad(ta.read(k).sum(), [x], retain_graph=True)[0]

        run_threads(*each_thread(reader, 2))
        for k in (0, 1):
            expected = torch.zeros(4, 3, dtype=torch.float64)
            expected[k] = 1
            assert torch.equal(grads[k], expected), (k, grads[k])


def test_threads_writing_one_torch_array_keep_each_values_entry_whole(backend):
    """Tracked writes from two threads through one TensorArray: a thread switch in the middle of
    one write's bookkeeping (forced here, after its value's entry) must not pair that value with
    the other write's slot (each value's gradient is its own slot's)."""
    torch = pytest.importorskip("torch")
    from gpu_tensorarray.torch import TensorArray as TorchTensorArray

    class Pausing(list):
        """The pending values' list: the first thread stops after adding its value."""

        def append(self, value):
            super().append(value)
            if threading.current_thread().name == "first":
                second_may_write.set()
                time.sleep(0.05)

    for _ in range(5):
        x = torch.ones(2, 3, dtype=torch.float64, requires_grad=True)
        ta = TorchTensorArray(torch.float64, size=2)
        ta._state.pending = Pausing()
        second_may_write = threading.Event()

        def first():
            ta.write(0, x[0] * 1.0)

        def second():
            second_may_write.wait(10)
            ta.write(1, x[1] * 2.0)

        threads = [threading.Thread(target=first, name="first"), threading.Thread(target=second, name="second")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
        # The array after both writes: at its current flow (each thread's own result is superseded).
        current = TorchTensorArray(torch.float64, handle=ta.handle, flow=ta.flow)
        (current.stack() * torch.tensor([[1.0], [10.0]], dtype=torch.float64)).sum().backward()
        assert x.grad.tolist() == [[1.0] * 3, [20.0] * 3]


# -- the registry under concurrent creation, closing and garbage collection ---------------------------------------
def test_concurrent_creation_gives_unique_names_and_stats_stay_consistent(backend):
    before = baseline()
    per_thread = 150
    names = [[] for _ in range(N_THREADS)]
    kept = [[] for _ in range(N_THREADS)]
    start = barrier()

    def creator(k):
        start.wait()
        for j in range(per_thread):
            handle, flow = new(2, "float32", element_shape=[3], tensor_array_name=f"t{k % 2}")
            write(handle, 0, np.ones(3, np.float32), flow)
            names[k].append(handle.name)
            if j % 3 == 0:
                close(handle)
            elif j % 3 == 1:
                kept[k].append(handle)
            # else: dropped without close; the registry's weak references let it go
            if j % 10 == 0:
                stats = gta.stats()
                assert stats["live_arrays"] >= 0 and stats["bytes"] >= 0
                assert sum(e["arrays"] for e in stats["per_backend"].values()) == stats["live_arrays"]
            other = names[(k + 1) % N_THREADS][-1:]    # another thread's array, maybe gone
            for name in other:
                try:
                    ro.TensorArraySizeV3(name, 0.0)
                except (errors.NotFoundError, errors.InvalidArgumentError):
                    pass

    run_threads(*each_thread(creator))
    all_names = [name for per in names for name in per]
    assert len(set(all_names)) == len(all_names) == N_THREADS * per_thread
    gc.collect()
    live, _ = stats_delta(before)
    assert live == sum(len(per) for per in kept)
    for per in kept:
        for handle in per:
            assert registry.lookup(handle.name) is registry.lookup(handle)
            close(handle)
    gc.collect()
    assert stats_delta(before) == (0, 0)
