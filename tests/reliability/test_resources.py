"""Resources (issue 6, reliability): close releases an array's storage, the
registry's statistics (``gpu_tensorarray.stats()``) account for every open array
and its bytes, arrays dropped without close are released through the registry's
weak references, and long create/write/close loops grow neither memory nor the
registry.

Statistics are process-wide and other tests may leave arrays alive (pytest keeps
failed tests' tracebacks), so in-process checks compare against a baseline taken
at the start of the test; the absolute "zero live arrays" check runs in a fresh
interpreter.
"""

import gc
import os
import subprocess
import sys
import textwrap
import tracemalloc
import weakref

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import dtypes, errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry
from ta_conformance_util import CLOSED, assert_same, close, grad, new, raises, read, scatter, size, split, write

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gta.__file__)))


def baseline():
    gc.collect()
    return gta.stats()


def delta(before):
    """(live arrays, bytes) now minus ``before``, overall and for each backend."""
    after = gta.stats()
    per_backend = {}
    for name in set(before["per_backend"]) | set(after["per_backend"]):
        old = before["per_backend"].get(name, {"arrays": 0, "bytes": 0})
        new_ = after["per_backend"].get(name, {"arrays": 0, "bytes": 0})
        change = (new_["arrays"] - old["arrays"], new_["bytes"] - old["bytes"])
        if change != (0, 0):
            per_backend[name] = change
    return after["live_arrays"] - before["live_arrays"], after["bytes"] - before["bytes"], per_backend


def registry_sizes():
    return len(registry._by_name)


# -- close releases storage ------------------------------------------------------------------------------------
def test_stats_have_the_documented_form(backend):
    stats = gta.stats()
    assert set(stats) == {"live_arrays", "bytes", "per_backend"}
    assert stats["live_arrays"] == sum(entry["arrays"] for entry in stats["per_backend"].values())
    assert stats["bytes"] == sum(entry["bytes"] for entry in stats["per_backend"].values())
    for entry in stats["per_backend"].values():
        assert set(entry) == {"arrays", "bytes"}


def test_close_releases_a_slab(backend):
    before = baseline()
    handle, _ = new(10, "float64", element_shape=[3, 4])
    assert delta(before)[:2] == (1, 0)          # nothing allocated before the first write
    write(handle, 0, np.ones((3, 4)))
    live, nbytes, per_backend = delta(before)
    assert live == 1 and nbytes >= 10 * 3 * 4 * 8
    assert per_backend == {backend.name: (1, nbytes)}
    close(handle)
    assert delta(before) == (0, 0, {})
    close(handle)                               # closing twice changes nothing
    assert delta(before) == (0, 0, {})


def test_close_releases_a_dynamic_array_grown_many_times(backend):
    before = baseline()
    handle, _ = new(0, "int32", dynamic_size=True)
    for index in range(1000):
        write(handle, index, np.full(8, index, np.int32))
    live, nbytes, _ = delta(before)
    assert live == 1 and nbytes >= 1000 * 8 * 4
    close(handle)
    assert delta(before) == (0, 0, {})


def test_close_releases_a_ragged_array(backend):
    before = baseline()
    handle, _ = new(3, "float32")
    split(handle, np.arange(10, dtype=np.float32), [2, 3, 5])      # pieces of different shapes
    live, nbytes, _ = delta(before)
    assert live == 1 and nbytes >= 10 * 4
    close(handle)
    assert delta(before) == (0, 0, {})


def test_grad_arrays_are_counted_separately(backend):
    before = baseline()
    forward, _ = new(4, "float32", element_shape=[5])
    scatter(forward, [0, 1, 2, 3], np.ones((4, 5), np.float32))
    forward_bytes = delta(before)[1]
    g1 = grad(forward, "gradients")
    g2 = grad(forward, "gradients_1")
    assert grad(forward, "gradients") is g1
    assert delta(before)[0] == 3
    scatter(g1, [0, 0, 3], np.ones((3, 5), np.float32))
    live, nbytes, _ = delta(before)
    grad_bytes = nbytes - forward_bytes
    assert live == 3 and grad_bytes >= 4 * 5 * 4
    close(forward)                              # a forward's grad arrays stay open (docs/semantics.md §2.9)
    assert delta(before)[:2] == (2, grad_bytes)
    assert_same(read(g1, 0), np.full(5, 2, np.float32))
    close(g1)
    close(g2)
    assert delta(before) == (0, 0, {})


def test_closing_a_grad_array_leaves_the_forward_counted(backend):
    before = baseline()
    forward, _ = new(2, "float64", element_shape=[3])
    write(forward, 0, np.ones(3))
    forward_bytes = delta(before)[1]
    g = grad(forward)
    write(g, 0, np.ones(3))
    close(g)
    assert delta(before)[:2] == (1, forward_bytes)
    close(forward)
    assert delta(before) == (0, 0, {})


def test_failed_ops_leave_stats_unchanged(backend):
    before = baseline()
    handle, _ = new(2, "float32", element_shape=[3])
    write(handle, 0, np.ones(3, np.float32))
    after_write = delta(before)
    for op in (lambda: write(handle, 0, np.ones(3, np.float32)), lambda: write(handle, 5, np.ones(3, np.float32)),
               lambda: write(handle, 1, np.ones(4, np.float32)), lambda: scatter(handle, [1, 1], np.ones((2, 3))),
               lambda: read(handle, 7), lambda: new(-1)):
        with pytest.raises(errors.OpError):
            op()
        assert delta(before) == after_write
    close(handle)
    assert delta(before) == (0, 0, {})


_FRESH_INTERPRETER = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, sys.argv[2])
    import cupy_standin; cupy_standin.install()      # the cupy the suite runs on (tests/conftest.py)
    import numpy as np
    import gpu_tensorarray as gta
    from gpu_tensorarray import raw_ops as ro

    assert gta.stats() == {"live_arrays": 0, "bytes": 0, "per_backend": {}}, gta.stats()
    with gta.device(sys.argv[1]):
        handles = []
        h, f = ro.TensorArrayV3(3, "float32", element_shape=[2])
        ro.TensorArrayScatterV3(h, [0, 1, 2], np.ones((3, 2), np.float32), f)
        handles += [h, ro.TensorArrayGradV3(h, f, "gradients").grad_handle,
                    ro.TensorArrayGradWithShape(h, f, [4], "other").grad_handle]
        ro.TensorArrayWriteV3(handles[1], 0, np.ones(2, np.float32), f)
        d, f = ro.TensorArrayV3(0, "int64", dynamic_size=True)
        for i in range(100):
            ro.TensorArrayWriteV3(d, i, np.arange(i % 3 + 1), f)      # ragged
        handles.append(d)
        ta = gta.TensorArray("float64", size=2).write(0, [1.0]).write(1, [2.0])
        handles.append(ta.handle)
        stats = gta.stats()
        assert stats["live_arrays"] == 5 and stats["bytes"] > 0, stats
        assert set(stats["per_backend"]) == {gta.get_backend().name}, stats
        for h in handles:
            ro.TensorArrayCloseV3(h)
        assert gta.stats() == {"live_arrays": 0, "bytes": 0, "per_backend": {}}, gta.stats()
        del h, d, ta
        handles.clear()
        gc.collect()
        assert gta.stats() == {"live_arrays": 0, "bytes": 0, "per_backend": {}}, gta.stats()
    print("ok")
""")


def test_stats_are_zero_after_everything_is_closed_in_a_fresh_interpreter(backend):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-c", _FRESH_INTERPRETER, backend.name,
                           os.path.dirname(os.path.dirname(os.path.abspath(__file__)))], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


# -- arrays dropped without close --------------------------------------------------------------------------------
def test_an_array_dropped_without_close_is_released(backend):
    before = baseline()
    sizes = registry_sizes()
    handle, _ = new(5, "float32", element_shape=[100])
    write(handle, 0, np.ones(100, np.float32))
    name = handle.name
    storage = weakref.ref(registry.lookup(handle))
    assert delta(before)[0] == 1
    assert registry.lookup(name) is storage()
    del handle
    gc.collect()
    assert storage() is None
    assert delta(before) == (0, 0, {})
    assert registry_sizes() == sizes
    with pytest.raises(errors.NotFoundError):
        size(name)


def test_a_closed_array_is_found_by_name_until_dropped(backend):
    handle, _ = new(1)
    name = handle.name
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=name)):
        size(name)          # TF: the resource stays registered after close
    del handle
    gc.collect()
    with pytest.raises(errors.NotFoundError):
        size(name)


def test_arrays_in_reference_cycles_are_released_by_the_collector(backend):
    before = baseline()
    storages = []
    for _ in range(10):
        handle, _ = new(2, "float64", element_shape=[10])
        write(handle, 1, np.ones(10))
        cycle = {"handle": handle}
        cycle["self"] = cycle
        storages.append(weakref.ref(registry.lookup(handle)))
    del handle, cycle
    gc.collect()
    assert all(ref() is None for ref in storages)
    assert delta(before) == (0, 0, {})


def test_grad_arrays_live_as_long_as_their_forward_or_their_handle(backend):
    before = baseline()
    forward, _ = new(3, "float32", element_shape=[2])
    g = grad(forward)
    grad_storage = weakref.ref(registry.lookup(g))
    forward_storage = weakref.ref(registry.lookup(forward))
    del g
    gc.collect()
    assert grad_storage() is not None           # the forward array keeps its grad arrays
    assert grad(forward).name == forward.name + "@gradients"
    kept = grad(forward, "kept")
    del forward
    gc.collect()
    assert forward_storage() is None and grad_storage() is None
    assert delta(before)[:2] == (1, 0)          # only the grad array still referenced
    write(kept, 0, np.ones(2, np.float32))
    assert_same(read(kept, 0), np.ones(2, np.float32))
    del kept
    gc.collect()
    assert delta(before) == (0, 0, {})


def test_tensor_array_objects_dropped_without_close_are_released(backend):
    before = baseline()
    for _ in range(50):
        ta = gta.TensorArray("float32", size=0, dynamic_size=True)
        for index in range(5):
            ta = ta.write(index, [1.0, 2.0])
        _ = ta.stack()
        _ = ta.grad("gradients")
    del ta, _
    gc.collect()
    assert delta(before) == (0, 0, {})


# -- long loops do not grow memory or the registry ---------------------------------------------------------------
# numpy: 100000 cycles (about 7 us each untraced). Under tracemalloc a cycle costs about
# four times as much, so memory is traced over the last cycles only; Python objects are
# counted (sys.getallocatedblocks) over the whole run.
CYCLES = {"numpy": 100_000, "emulated": 20_000, "cupy": 20_000}


def _assert_no_growth(cycle, total, traced=6_000, traced_warmup=1_000):
    """Run ``cycle`` ``total`` times; the last ``traced`` under tracemalloc (after
    ``traced_warmup`` traced cycles) may grow traced memory by noise only."""
    value = np.arange(4, dtype=np.float32)
    for _ in range(1_000):                      # warm-up: caches, kernels, lazy imports
        cycle(value)
    gc.collect()
    blocks = sys.getallocatedblocks()
    sizes = registry_sizes()
    cache = len(dtypes.CACHE)
    before = gta.stats()
    for _ in range(total - traced_warmup - traced):
        cycle(value)
    tracemalloc.start()
    try:
        for _ in range(traced_warmup):
            cycle(value)
        gc.collect()
        traced_before = tracemalloc.get_traced_memory()[0]
        for _ in range(traced):
            cycle(value)
        gc.collect()
        traced_growth = tracemalloc.get_traced_memory()[0] - traced_before
    finally:
        tracemalloc.stop()
    gc.collect()
    assert traced_growth < 32 * 1024, f"{traced_growth} bytes more after {traced} cycles"
    assert sys.getallocatedblocks() - blocks < 500, (blocks, sys.getallocatedblocks())
    assert registry_sizes() == sizes
    assert len(dtypes.CACHE) == cache
    assert gta.stats() == before


def test_create_write_close_cycles_do_not_grow_memory_or_the_registry(backend):
    def cycle(value):
        handle, flow = ro.TensorArrayV3(2, "float32", element_shape=[4])
        ro.TensorArrayWriteV3(handle, 0, value, flow)
        ro.TensorArrayReadV3(handle, 0, flow, "float32")
        ro.TensorArrayCloseV3(handle)

    _assert_no_growth(cycle, CYCLES[backend.name])


def test_cycles_of_every_op_and_of_failing_ops_do_not_grow_memory(backend):
    rows = np.ones((3, 4), np.float32)

    def cycle(value):
        handle, flow = ro.TensorArrayV3(0, "float32", dynamic_size=True, clear_after_read=False)
        ro.TensorArrayScatterV3(handle, [2, 0, 1], rows, flow)
        ro.TensorArrayGatherV3(handle, [0, 2], flow, "float32")
        g = ro.TensorArrayGradV3(handle, flow, "gradients").grad_handle
        ro.TensorArrayWriteV3(g, 1, value, flow)
        ro.TensorArrayWriteV3(g, 1, value, flow)
        try:
            ro.TensorArrayWriteV3(handle, 0, value, flow)         # already written: an error every cycle
        except errors.InvalidArgumentError:
            pass
        try:
            ro.TensorArrayReadV3(handle, 2**40, flow, "float32")
        except errors.InvalidArgumentError:
            pass
        s, sf = ro.TensorArrayV3(2, "float32")
        ro.TensorArraySplitV3(s, value, [1, 3], sf)
        ro.TensorArrayConcatV3(s, sf, "float32")
        ro.TensorArrayCloseV3(g)
        ro.TensorArrayCloseV3(handle)
        # ``s`` is dropped without close

    # About ten times the work of a plain cycle (and kernel launches on emulated).
    _assert_no_growth(cycle, CYCLES[backend.name] // 25, traced=1_000, traced_warmup=200)


# -- repeated gradient computations hold nothing (issue 24) ----------------------------------------
def test_repeated_tape_gradients_leave_no_gradient_arrays_behind(backend):
    """Each tape.gradient() is its own computation with its own gradient array; it ends
    closed and gone from the forward array's ``grads``, so the bookkeeping is flat."""
    with gta.GradientTape(persistent=True) as tape:
        handle, flow = ro.TensorArrayV3(3, "float32", element_shape=[2], clear_after_read=False)
        x = np.arange(6, dtype=np.float32).reshape(3, 2)
        ro.TensorArrayScatterV3(handle, [0, 1, 2], x, flow)
        y = ro.TensorArrayGatherV3(handle, [2, 0, 2], flow, "float32")
    forward = registry.lookup(handle)
    expected = np.array([[1, 1], [0, 0], [2, 2]], np.float32)      # a Python count of the gathers
    before = baseline()
    sizes = registry_sizes()
    for _ in range(300):
        assert_same(tape.gradient(y, x), expected)
        assert dict(forward.grads) == {}
    gc.collect()
    assert delta(before)[:2] == (0, 0)
    assert registry_sizes() == sizes


def test_end_gradient_closes_and_forgets_but_close_keeps_tensorflows_answer(backend):
    handle, flow = ro.TensorArrayV3(2, "float32", element_shape=[2])
    forward = registry.lookup(handle)
    closed = grad(handle, "gradients")
    close(closed)
    assert grad(handle, "gradients") is closed              # TensorFlow returns it, closed
    with raises(errors.InvalidArgumentError, CLOSED.format(name=closed.name)):
        write(closed, 0, np.ones(2, np.float32))
    ended = grad(handle, "gradients_1")
    registry.end_gradient(forward, "gradients_1")
    assert ended.array.closed and "gradients_1" not in forward.grads
    fresh = grad(handle, "gradients_1")                      # a later computation of that name starts afresh
    assert fresh is not ended and not fresh.array.closed
