"""A failed op changes nothing, also when memory runs out (issue 6, reliability).

Every allocation an op makes goes through one door, ``Backend.allocate``. Here a
test double of that door counts the allocations of one op and then, for each k,
runs the op again on a fresh, identical array with the k-th allocation failing as
NumPy fails (MemoryError inside the allocation). Each time the op must raise
ResourceExhaustedError (never a bare MemoryError) and leave its array bitwise as it
was: every slot's state, shape and value bytes, read through the public face
(``size``, ``element_shape``, ``slot_state``), which never clears a slot. The undo of a
change an interrupt stops runs where no allocation may fail: it must allocate nothing. A
read whose result fails as it is made, after its soft slots got their zeros, takes them back.

The last tests: creating 2**31-1 slots checks the flags' allocation before making it; a
gradient array's gather past its end peaks near what was admitted; closing a forward
array releases its gradient arrays; and under a real address-space limit (RLIMIT_AS),
an op whose host temporaries (the plans of its checks, index vectors, flag masks) find
no memory raises ResourceExhaustedError and changes nothing.
"""

import gc
import importlib.util
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry
from hostile_util import snapshot as public_snapshot
from op_cases import OP_CASES
from ta_conformance_util import cuda_devices, f32, gather, grad, host, new, read, scatter, size, write


def snapshot(handle):
    """The public snapshot (hostile_util.snapshot: attributes and every slot's flags, shape
    and value bytes) and the bytes the array holds."""
    return public_snapshot(handle) + (registry.lookup(handle).nbytes,)


class FailingDoor:
    """Stands in for ``backend.allocate``: counts calls, and makes call number ``fail_at``
    (1-based; None: none) fail inside the allocation, with NumPy's MemoryError."""

    def __init__(self, backend, fail_at=None):
        self.real = backend.allocate
        self.fail_at = fail_at
        self.calls = []

    def __call__(self, make, nbytes, what, host=False):
        self.calls.append(what() if callable(what) else what)
        if len(self.calls) == self.fail_at:
            def make():
                raise MemoryError(f"injected: {self.calls[-1]}")
        return self.real(make, nbytes, what, host)


def run_with_door(backend, monkeypatch, call, fail_at=None):
    door = FailingDoor(backend, fail_at)
    with monkeypatch.context() as patch:
        patch.setattr(backend, "allocate", door)
        try:
            call()
        except errors.ResourceExhaustedError as error:
            return door, error
    return door, None


@pytest.mark.parametrize("name", list(OP_CASES))
def test_every_failing_allocation_changes_nothing(backend, monkeypatch, name):
    build = OP_CASES[name]
    handles, op = build()
    counted, error = run_with_door(backend, monkeypatch, op)
    assert error is None, f"the op failed without an injected failure: {error}"
    if name.startswith("string-"):
        assert counted.calls, "the op allocated nothing through the door: this case tests nothing"
    for k in range(1, len(counted.calls) + 1):
        handles, op = build()
        before = [snapshot(handle) for handle in handles]
        live = gta.stats()["live_arrays"]
        door, error = run_with_door(backend, monkeypatch, op, fail_at=k)
        assert error is not None, f"allocation {k} ({counted.calls[k - 1]}) failed, yet the op succeeded"
        assert "OOM" in str(error) and "injected" in str(error), error
        assert "host memory ran out" not in str(error), error        # the door's own words, once
        after = [snapshot(handle) for handle in handles]
        assert after == before, f"{name}: failing allocation {k} of {len(counted.calls)} " \
                                f"({counted.calls[k - 1]}) changed the array"
        gc.collect()
        assert gta.stats()["live_arrays"] <= live, "a failed op left an array behind"


def _ragged_reads():
    """(handle, a read of more than 8 of its slots that joins them) on a ragged array, whose
    join is one ``concatenate``: slots 0-9 hold (128,) float32 rows (512 bytes, a pool
    block each) and slot 10 a (256,) row; ``concat`` finds slots 0-10 out of order in storage
    (written last to first)."""
    handle, _ = new(11, "float32", element_shape=None)
    for index in reversed(range(11)):
        write(handle, index, np.full(256 if index == 10 else 128, index, np.float32))
    return handle, {"gather": lambda: gather(handle, list(range(10))),
                    "concat": lambda: ro.TensorArrayConcatV3(handle=handle, flow_in=0.0, dtype=np.float32)}


def _refused(size):
    """An allocator (``cupy.cuda.using_allocator``) of a full device: CuPy's pool past its limit."""
    import cupy
    raise cupy.cuda.memory.OutOfMemoryError(size, 0, 0)


def _refused_without_pool(size):
    """The same without CuPy's pool (``cupy.cuda.set_allocator(None)``): cudaMalloc's own error."""
    import cupy
    raise cupy.cuda.runtime.CUDARuntimeError(2)        # cudaErrorMemoryAllocation (CuPy names it in C only)


REFUSALS = {"pool": _refused, "no_pool": _refused_without_pool}


def _full_after(nbytes, refuse=_refused):
    """An allocator of a device that holds one more allocation of ``nbytes`` (an op's result)
    and nothing after it. Filling CuPy's pool up to a limit would not do: the free pieces of
    its split blocks outlive ``free_all_blocks`` and serve small allocations."""
    import cupy
    allocate, made = cupy.cuda.get_allocator(), [False]

    def allocator(size):
        if made[0]:
            refuse(size)
        made[0] = size == nbytes
        return allocate(size)
    return allocator


@pytest.mark.parametrize("refusal", list(REFUSALS))
def test_a_full_device_is_resource_exhausted_and_changes_nothing(backend, refusal):
    """Every allocation of an op refused by the device, with CuPy's pool (OutOfMemoryError) or
    without it (cudaMalloc's CUDARuntimeError): ResourceExhaustedError naming the array."""
    if backend.name != "cupy":
        pytest.skip("the device's allocator: the cupy backend")
    import cupy
    handle, flow = new(1, "float32", element_shape=[256], dynamic_size=True)
    flow = write(handle, 0, f32(np.ones(256)), flow)
    # Values and flow on the device already: what the ops allocate is the grown slab, and
    # the scatter's upload of its host indices.
    value, rows = backend.asarray(f32(np.full(256, 2.0))), backend.asarray(f32(np.full((2, 256), 3.0)))
    before = snapshot(handle)
    with cupy.cuda.using_allocator(REFUSALS[refusal]):
        for op in (lambda: write(handle, 40, value, flow), lambda: scatter(handle, np.array([50, 60]), rows, flow)):
            with pytest.raises(errors.ResourceExhaustedError, match="OOM") as raised:
                op()
            assert handle.name in str(raised.value) and "host memory" not in str(raised.value), raised.value
    assert snapshot(handle) == before


@pytest.mark.parametrize("refusal", list(REFUSALS))
@pytest.mark.parametrize("op", ["gather", "concat"])
def test_a_device_temporary_that_finds_no_memory_changes_nothing(backend, op, refusal):
    """A read's result is made before its slots are marked read: CuPy's concatenate of more
    than 8 small pieces uploads a table of their addresses, a pool allocation of its own
    (not through the door), which a full device refuses. The read then raises
    ResourceExhaustedError naming the array and leaves every slot as it was."""
    if backend.name != "cupy":
        pytest.skip("the device pool's own temporaries: the cupy backend")
    import cupy
    handle, reads = _ragged_reads()
    before = snapshot(handle)
    result_bytes = 4 * (10 * 128 if op == "gather" else 10 * 128 + 256)
    # The result fits; CuPy's table does not.
    with cupy.cuda.using_allocator(_full_after(result_bytes, REFUSALS[refusal])):
        with pytest.raises(errors.ResourceExhaustedError, match=handle.name) as raised:
            reads[op]()
    assert "OOM when" in str(raised.value) and "host memory" not in str(raised.value), raised.value
    assert snapshot(handle) == before
    value = host(reads[op]()[0] if op == "concat" else reads[op]())
    rows = [np.full(256 if index == 10 else 128, index, np.float32) for index in range(11 if op == "concat" else 10)]
    assert np.array_equal(value, np.concatenate(rows) if op == "concat" else np.stack(rows))


def _no_memory_left(backend, monkeypatch):
    """From now on every allocation fails: the door's, and on the cupy backend the device's
    own (CuPy's uploads of index arrays and scalars do not go through the door). The caller
    puts CuPy's allocator back (``cupy.cuda.set_allocator``)."""
    def refused(make, nbytes, what, host=False):
        raise errors.ResourceExhaustedError("injected: no memory left")
    monkeypatch.setattr(backend, "allocate", refused)
    if backend.name == "cupy":
        import cupy
        cupy.cuda.set_allocator(_refused)


def test_an_interrupted_write_is_undone_with_no_memory_left(backend, monkeypatch):
    """A change that an interrupt stops is undone after the op allocated everything it
    needs, where nothing may be allocated any more: rows stored into slots without a value
    go back to zeros by memsets (on a GPU ``slab[indices] = 0`` uploads the indices and the
    zero, and a full device would leave the rows changed and raise OutOfMemoryError)."""
    handle, _ = new(8, "float32", element_shape=[4])
    write(handle, 0, f32(np.ones(4)))                    # the slab exists: the scatter stores into it
    before = snapshot(handle)
    real = backend.prepare_put_rows
    slots = [5, 2, 3, 7]
    with monkeypatch.context() as patch:
        def interrupted(indices, rows, dtype):
            put = real(indices, rows, dtype)

            def put_then_interrupt(dst):
                put(dst)                                 # the rows land, then the interrupt
                _no_memory_left(backend, patch)
                raise KeyboardInterrupt("injected after the rows were stored")
            return put_then_interrupt

        patch.setattr(backend, "prepare_put_rows", interrupted)
        allocator = sys.modules["cupy"].cuda.get_allocator() if backend.name == "cupy" else None
        try:
            with pytest.raises(KeyboardInterrupt, match="injected"):
                scatter(handle, slots, f32(np.full((4, 4), 3)))
        finally:
            if allocator is not None:
                sys.modules["cupy"].cuda.set_allocator(allocator)
    assert snapshot(handle) == before
    for slot in slots:                                   # unwritten slots of a known shape read as zeros
        assert host(read(handle, slot)).tolist() == [0, 0, 0, 0], slot


def _soft_gradient(layout):
    """A gradient array of 20 slots that read as zeros: soft (written in its forward array: a
    shape, no value), uniform ((3,) each) or ragged (even slots (3,), odd (2,)); or unwritten
    ("unwritten": the forward array's element shape (3,), its layout's row shape not yet set)."""
    if layout == "unwritten":
        forward, _ = new(20, "float32", element_shape=[3])
        return forward, grad(forward)
    forward, _ = new(20, "float32", element_shape=None)
    for index in range(20):
        write(forward, index, f32(np.full(2 if layout == "ragged" and index % 2 else 3, index)))
    return forward, grad(forward)


def _layout_state(handle):
    """What a read's undo puts back besides the slots' flags: a uniform layout's row shape, a
    ragged one's end, offsets and shapes, and the bytes either holds (a buffer grown for the
    soft zeros goes)."""
    layout = registry.lookup(handle)._layout
    return (type(layout).__name__, getattr(layout, "row_shape", None), getattr(layout, "end", None),
            dict(getattr(layout, "offsets", {})), dict(getattr(layout, "shapes", {})), layout.nbytes)


@pytest.mark.parametrize("layout", ["uniform", "ragged", "unwritten"])
@pytest.mark.parametrize("op", ["read", "gather"])
def test_a_failed_result_undoes_the_soft_zeros_of_its_reads(backend, monkeypatch, layout, op):
    """storage._commit_reads gives the soft slots it reads their zeros, then makes the result,
    then marks the reads: a result that fails as it is made (here its allocation, refused by
    the door inside ``result()``; on a GPU, a join's own temporaries) undoes the zeros, and the
    array is as before, slot by slot."""
    _, g = _soft_gradient(layout)
    slots = [0, 4, 6, 10, 12, 14, 16, 18, 2, 8]          # more than 8: a ragged gather joins 10 pieces
    reads = {"read": lambda: read(g, 6), "gather": lambda: gather(g, slots)}
    before, layout_before = public_snapshot(g), _layout_state(g)
    layout_class = type(registry.lookup(g)._layout)

    def failing(prepare):
        def prepared(self, *args):
            made = prepare(self, *args)

            def result():
                def refused():
                    raise MemoryError("injected: the result")
                backend.allocate(refused, 64, "the result")
                return made()
            return result
        return prepared

    with monkeypatch.context() as patch:
        for name in ("prepare_row", "prepare_take"):
            patch.setattr(layout_class, name, failing(getattr(layout_class, name)))
        with pytest.raises(errors.ResourceExhaustedError, match="injected") as raised:
            reads[op]()
    assert g.name in str(raised.value), raised.value
    assert public_snapshot(g) == before
    assert _layout_state(g) == layout_before
    value = host(reads[op]())                            # as if nothing had happened: zeros
    assert value.shape == ((3,) if op == "read" else (10, 3)) and not value.any()


def test_a_gradients_join_that_finds_no_device_memory_undoes_its_soft_zeros(backend, monkeypatch):
    """The same on the device itself: CuPy's join of more than 8 pieces uploads a table of
    their addresses (a pool allocation, not through the door) after the soft zeros are made;
    with the pool full then, the gather fails and leaves every slot as it was."""
    if backend.name != "cupy":
        pytest.skip("the device pool's own temporaries: the cupy backend")
    import cupy
    _, g = _soft_gradient("ragged")
    before, layout_before = public_snapshot(g), _layout_state(g)
    real = backend.prepare_concatenate

    def full_when_joining(shapes, dtype):
        join = real(shapes, dtype)

        def joined(arrays):
            with cupy.cuda.using_allocator(_refused):       # the op allocated all it asked for: no room for the table
                return join(arrays)
        return joined

    with monkeypatch.context() as patch:
        patch.setattr(backend, "prepare_concatenate", full_when_joining)
        with pytest.raises(errors.ResourceExhaustedError, match=g.name) as raised:
            gather(g, list(range(0, 20, 2)))
        assert "OOM when joining 10 pieces" in str(raised.value), raised.value
    assert public_snapshot(g) == before
    assert _layout_state(g) == layout_before
    assert not host(gather(g, list(range(0, 20, 2)))).any()


@pytest.mark.parametrize("how", ["raw_gather", "gather", "scatter", "split"])
def test_strided_device_indices_on_a_full_device_are_resource_exhausted_and_change_nothing(backend, how):
    """CuPy's get() of a strided array first copies it on its device (core.pyx): indices or
    lengths given as such an array need device memory before the op, and a full device is the
    op's ResourceExhaustedError, never CuPy's own error."""
    if backend.name != "cupy":
        pytest.skip("device index arrays: the cupy backend")
    import cupy
    values = np.arange(8, dtype=np.float32).reshape(4, 2)
    ta = gta.TensorArray("float32", size=4, clear_after_read=False).unstack(values)
    target = ta if how in ("raw_gather", "gather") else \
        gta.TensorArray("float32", size=2 if how == "split" else 4, infer_shape=False)
    before = public_snapshot(target.handle)
    strided = cupy.asarray(np.array([1, 9, 1, 9], np.int64))[::2]     # [1, 1]
    call = {"raw_gather": lambda: ro.TensorArrayGatherV3(handle=ta.handle, indices=strided, flow_in=ta.flow,
                                                          dtype=np.float32),
            "gather": lambda: ta.gather(strided),
            "scatter": lambda: target.scatter(strided[:1], np.ones((1, 2), np.float32)),
            "split": lambda: target.split(np.ones(2, np.float32), strided)}[how]
    with cupy.cuda.using_allocator(_refused), pytest.raises(errors.ResourceExhaustedError, match="cuda:0"):
        call()
    assert public_snapshot(target.handle) == before
    result = call()                          # the same op, with room now
    if "gather" in how:
        assert host(result).tolist() == [[2.0, 3.0], [2.0, 3.0]]


def test_create_allocates_through_the_door(backend, monkeypatch):
    counted, error = run_with_door(backend, monkeypatch, lambda: new(5, "float32", element_shape=[2]))
    assert error is None and len(counted.calls) == 1, counted.calls      # the flags; the slab comes later
    gc.collect()
    live = gta.stats()["live_arrays"]
    door, error = run_with_door(backend, monkeypatch, lambda: new(5, "float32", element_shape=[2]), fail_at=1)
    assert isinstance(error, errors.ResourceExhaustedError) and "flags" in str(error), error
    gc.collect()
    assert gta.stats()["live_arrays"] == live


# -- the broadcast view of the issue: 4 MB standing for more than the device holds ---------------
def _rows_over_memory(backend):
    """Rows of 2**20 float32 (4 MiB each) whose contiguous copy is over the device's
    memory: at least 39 GiB, and twice the memory where there is more."""
    return max(10_000, 2 * backend.memory_limit() // (4 << 20))


def test_scatter_of_a_huge_broadcast_view_into_a_grad_array(backend):
    forward, _ = new(4, "float32", element_shape=[2**20])
    g = grad(forward)
    write(g, 0, f32(np.ones(2**20)))
    rows = _rows_over_memory(backend)
    value = np.broadcast_to(np.float32(1), (rows, 2**20))
    before = snapshot(g)
    started = time.perf_counter()
    with pytest.raises(errors.ResourceExhaustedError, match="OOM"):
        scatter(g, np.zeros(rows, np.int64), value)
    assert time.perf_counter() - started < 1.0
    assert snapshot(g) == before
    assert (host(read(g, 0)) == 1).all()


def test_forward_scatter_of_a_huge_broadcast_view(backend):
    handle, _ = new(1, "float32", dynamic_size=True)
    rows = _rows_over_memory(backend)
    value = np.broadcast_to(np.float32(1), (rows, 2**20))
    before = snapshot(handle)
    with pytest.raises(errors.ResourceExhaustedError, match="OOM"):
        scatter(handle, np.arange(rows), value)
    assert snapshot(handle) == before


@pytest.mark.parametrize("dynamic_size", [True, False])
def test_the_class_s_unstack_of_a_huge_broadcast_view_is_the_op_s_error(backend, dynamic_size):
    # 2**44 rows of no elements hold 4 bytes: the class lists no indices for them (a bare
    # MemoryError escaped); the op refuses indices past int32, as TensorFlow's are.
    ta = gta.TensorArray("float32", size=0 if dynamic_size else 3, dynamic_size=dynamic_size)
    before = snapshot(ta.handle)
    with pytest.raises(errors.InvalidArgumentError, match="indices value 17592186044415 does not fit in int32"):
        ta.unstack(np.broadcast_to(np.float32(1), (2**44, 0)))
    assert snapshot(ta.handle) == before


def test_a_gradients_seed_goes_through_the_door(backend, monkeypatch):
    # The ones a target's gradient starts from are allocated through the door: no memory for
    # them is ResourceExhaustedError, and the next computation works.
    x = np.ones((2, 3), np.float32)
    with gta.GradientTape(persistent=True) as tape:
        target = gta.TensorArray("float32", size=2).unstack(x).gather([0, 1])
    door, error = run_with_door(backend, monkeypatch, lambda: tape.gradient(target, x), fail_at=1)
    assert error is not None and door.calls[0] == "tensor of shape [2, 3]", door.calls
    assert host(tape.gradient(target, x)).tolist() == np.ones((2, 3)).tolist()


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_no_host_memory_to_convert_a_python_list_is_resource_exhausted(backend, monkeypatch, mode):
    # The class converts a Python list to the array's dtype (dtypes.python_value_as) itself.
    from gpu_tensorarray import dtypes

    from ta_conformance_util import NumpyWithoutMemory

    ta = gta.TensorArray("float32", size=3, mode=mode)
    monkeypatch.setattr(dtypes, "np", NumpyWithoutMemory("asarray"))
    with pytest.raises(errors.ResourceExhaustedError, match=r"OOM when converting \[1.0, 2.0\] to float on the host"):
        ta.write(0, [1.0, 2.0])
    monkeypatch.undo()
    assert host(ta.write(0, [1.0, 2.0]).read(0)).tolist() == [1.0, 2.0]


class _ArrayLike:
    """A value NumPy reads through ``__array__`` (no DLPack, not a Python value)."""

    def __array__(self, dtype=None, copy=None):
        return np.ones(2, np.float32)


@pytest.mark.parametrize("module, op", [
    ("host", lambda ta: ta.scatter([0, 1], np.ones((2, 2), np.float32))),
    ("host", lambda ta: ta.gather([0, 1])),
    ("conversion", lambda ta: ta.write(2, _ArrayLike())),
])
def test_no_host_memory_to_convert_an_argument_is_resource_exhausted(backend, monkeypatch, module, op):
    # NumPy's MemoryError while a caller's list becomes an array is the host's fault, not the
    # argument's: ResourceExhaustedError (it was InvalidArgumentError "must be int32 values").
    import importlib

    ta = gta.TensorArray("float32", size=3, clear_after_read=False).unstack(np.ones((2, 2), np.float32))
    before = snapshot(ta.handle)

    def no_memory(value, *args, **kwargs):
        raise MemoryError("Unable to allocate 8.00 GiB for an array")
    monkeypatch.setattr(importlib.import_module(f"gpu_tensorarray.{module}"), "as_host_array", no_memory)
    with pytest.raises(errors.ResourceExhaustedError, match="OOM when converting .* on the host: MemoryError"):
        op(ta)
    assert snapshot(ta.handle) == before


# -- the three "also"s ---------------------------------------------------------------------------
def test_int32_max_slots_check_the_flags_before_allocating_them(backend, monkeypatch):
    # A 2 GiB flag buffer over a 1 GiB host limit: refused at once, nothing zero-filled.
    monkeypatch.setattr(backend, "host_memory_limit", lambda: 1 << 30)
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(errors.ResourceExhaustedError, match="flags") as caught:
            new(2**31 - 1, "float32")
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(2**31 - 1) in str(caught.value) and "limit" in str(caught.value), caught.value
    assert elapsed < 0.5 and peak < 1 << 20, (elapsed, peak)


def test_grad_gather_past_its_end_peaks_near_what_it_admitted(backend, monkeypatch):
    forward, _ = new(2, "float32", element_shape=[4])
    g = grad(forward)
    last = 1 << 20
    admitted = []
    real = backend.allocate

    def counting(make, nbytes, what, host=False):
        admitted.append(nbytes)
        return real(make, nbytes, what, host)

    monkeypatch.setattr(backend, "allocate", counting)
    indices = np.arange(2, last + 1)
    gc.collect()
    tracemalloc.start()
    try:
        value = gather(g, indices)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert host(value).shape == (last - 1, 4) and not host(value).any()
    assert size(g) == last + 1
    total = sum(admitted)
    assert total >= (last + 1) * 16, admitted         # at least the slab it grew to
    assert peak <= 1.5 * total, f"peak {peak} bytes for {total} admitted ({admitted})"


def test_closing_a_forward_array_releases_its_gradient_arrays(backend):
    forward, _ = new(3, "float32", element_shape=[1 << 16])
    for index in range(3):
        write(forward, index, f32(np.ones(1 << 16)))
    g = grad(forward)
    write(g, 0, f32(np.ones(1 << 16)))
    gc.collect()
    before = gta.stats()
    grad_name = g.name
    del g
    ro.TensorArrayCloseV3(forward)            # the closed handle stays referenced: ``forward``
    gc.collect()
    after = gta.stats()
    assert after["bytes"] <= before["bytes"] - 2 * 3 * 4 * (1 << 16), (before, after)
    with pytest.raises(errors.NotFoundError):
        registry.lookup(grad_name)
    assert forward.array.closed


_UNDER_A_MEMORY_LIMIT = textwrap.dedent("""
    import resource
    import numpy as np
    from gpu_tensorarray import errors, raw_ops as ro
    N = 1_000_000

    def vmsize():
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize"))

    big, flow = ro.TensorArrayV3(size=N, dtype=np.float32, element_shape=[1])
    ro.TensorArraySplitV3(big, np.arange(N, dtype=np.float32), np.ones(N, np.int64), flow)
    grad, gflow = ro.TensorArrayGradV3(big, flow, "gradients")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    for op in (lambda: ro.TensorArrayConcatV3(big, flow, np.float32),
               lambda: ro.TensorArrayScatterV3(grad, np.arange(N), np.ones((N, 1), np.float32), gflow)):
        resource.setrlimit(resource.RLIMIT_AS, (vmsize() + (4 << 20), hard))   # 4 MiB more: no room for plans
        try:
            op()
            print("no error")
        except errors.ResourceExhaustedError as error:
            print("ResourceExhaustedError", "host memory ran out" in str(error))
        except BaseException as error:
            print(type(error).__name__)
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    state = big.array.slot_state(0)
    print(state.read, state.cleared, grad.array.slot_state(0).value is None)
    value, lengths = ro.TensorArrayConcatV3(big, flow, np.float32)      # as if nothing had happened
    print(value[:3].tolist(), int(lengths.sum()))
""")


_TF2_UNDER_A_MEMORY_LIMIT = textwrap.dedent("""
    import resource, sys
    import numpy as np
    import gpu_tensorarray as gta
    from gpu_tensorarray import errors
    HUGE = 2**31 - 1

    def vmsize():
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize"))

    classes = [("library", gta.TensorArray, lambda shape: np.ones(shape, np.float32), np.float32)]
    if sys.argv[1] == "torch":
        import torch
        from gpu_tensorarray.torch import TensorArray
        classes.append(("torch", TensorArray, lambda shape: torch.ones(shape), torch.float32))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    for name, cls, ones, dtype in classes:
        ta = cls(dtype, size=0, dynamic_size=True, mode="tf2").write(0, ones(2))
        for op in (lambda: cls(dtype, size=HUGE, mode="tf2"), lambda: ta.write(HUGE, ones(2)),
                   lambda: ta.scatter([1, HUGE], ones((2, 2)))):
            resource.setrlimit(resource.RLIMIT_AS, (vmsize() + (64 << 20), hard))
            try:
                op()
                print(name, "no error")
            except errors.ResourceExhaustedError as error:
                print(name, "ResourceExhaustedError", "mode 'tf2'" in str(error))
            except BaseException as error:
                print(name, type(error).__name__)
            finally:
                resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        print(name, int(ta.size()), np.asarray(ta.stack()).tolist())     # as if nothing had happened
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status and limits RLIMIT_AS")
def test_a_tf2_list_grown_past_host_memory_is_resource_exhausted_and_unchanged():
    """A huge size or index of a dynamic mode-tf2 list needs a slot table of that many entries."""
    torch = "torch" if importlib.util.find_spec("torch") else "no-torch"
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gta.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
               GPU_TENSORARRAY_BACKEND="numpy")
    done = subprocess.run([sys.executable, "-c", _TF2_UNDER_A_MEMORY_LIMIT, torch], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    expected = []
    for name in ["library"] + (["torch"] if torch == "torch" else []):
        expected += [f"{name} ResourceExhaustedError True"] * 3 + [f"{name} 1 [[1.0, 1.0]]"]
    assert done.stdout.split("\n")[:-1] == expected, done.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status and limits RLIMIT_AS")
def test_host_temporaries_out_of_memory_are_resource_exhausted_and_change_nothing():
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(gta.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
               GPU_TENSORARRAY_BACKEND="numpy")
    done = subprocess.run([sys.executable, "-c", _UNDER_A_MEMORY_LIMIT], capture_output=True, text=True, timeout=120,
                          env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[:4] == ["ResourceExhaustedError True", "ResourceExhaustedError True",
                                             "False False True", "[0.0, 1.0, 2.0] 1000000"], done.stdout


@pytest.mark.skipif(cuda_devices() < 2, reason="needs CuPy (or its stand-in) with two devices")
@pytest.mark.parametrize("refusal", list(REFUSALS))
def test_device_copies_that_find_no_memory_are_resource_exhausted(refusal):
    """A value of cuda:1 written into an array of cuda:0, and a strided value of a device read
    to the host (written into a numpy-backend array, or gta.to_numpy), while the device is full:
    ResourceExhaustedError (naming the array where there is one), with CuPy's pool or without."""
    import cupy
    with cupy.cuda.Device(1):
        other = cupy.ones(4, cupy.float32)
    strided = cupy.arange(8, dtype=cupy.float32)[::2]
    with gta.device("cuda:0"):
        on_device, flow = new(2, "float32")          # the flow already on the device: the write uploads nothing
    with gta.device("numpy"):
        on_host, _ = new(2, "float32")
    calls = {on_device.name: lambda: write(on_device, 0, other, flow), on_host.name: lambda: write(on_host, 0, strided),
             "to_numpy": lambda: gta.to_numpy(strided)}
    with cupy.cuda.using_allocator(REFUSALS[refusal]):
        for name, call in calls.items():
            with pytest.raises(errors.ResourceExhaustedError, match="OOM") as raised:
                call()
            assert name == "to_numpy" or name in str(raised.value), raised.value
