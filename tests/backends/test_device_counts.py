"""What each op costs the device, counted by the CuPy stand-in (tests/cupy_standin.py):
kernel launches, device-to-host synchronisations and pool allocations per op in steady
state. TensorFlow keeps a TensorArray's size, lengths and indices in host memory
(HostMemory in tensor_array_ops.cc), so no op waits for the device: every sync count is
zero. The table is a ceiling: a test fails when a count grows (lower it when one falls).

Runs on the stand-in (no GPU), whose counters are asserted, and on a GPU, where CuPy's own
instruments count instead: a counting allocator over its memory pool, and
cupyx.allow_synchronize(False), which raises at any synchronisation. Launches are the
stand-in's alone. So a GPU run checks the stand-in's allocation and sync counts.
"""

import contextlib
import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops as ro

cupy = sys.modules.get("cupy")
STANDIN = getattr(cupy, "STANDIN", False)
if cupy is None or not (STANDIN or "cupy" in gta.available_backends()):
    pytest.skip("neither CuPy with a GPU nor the CuPy stand-in is in use", allow_module_level=True)


@contextlib.contextmanager
def counting(syncs_allowed=False):
    """-> delta(): {"launches", "syncs", "allocations"} during the block. On a GPU,
    "launches" is None, and "syncs" is 0 (a sync raises) or, where ``syncs_allowed``, None."""
    if STANDIN:
        with cupy.counting() as delta:
            yield delta
        return
    import cupyx

    pool, allocations = cupy.get_default_memory_pool(), [0]

    def malloc(nbytes):
        allocations[0] += 1
        return pool.malloc(nbytes)
    cupy.cuda.set_allocator(malloc)
    try:
        with contextlib.nullcontext() if syncs_allowed else cupyx.allow_synchronize(False):
            yield lambda: {"launches": None, "syncs": None if syncs_allowed else 0, "allocations": allocations[0]}
    finally:
        cupy.cuda.set_allocator(pool.malloc)

F32 = np.float32
ROWS = np.arange(64, dtype=F32).reshape(16, 4)
INDICES = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], np.int32)

# op -> (launches, syncs, allocations). A write uploads its value (one allocation) and
# copies it into the slab; a read copies its row (CuPy has no read-only views); a gather
# or scatter uploads its indices; a scatter-add packs its grouping into one upload. A
# copy between arrays of one layout is a memcpy, no kernel (_routines_indexing.pyx, _scatter_op).
CEILINGS = {
    "create": (0, 0, 0),
    "write": (0, 0, 1),
    "read": (0, 0, 1),
    "gather": (1, 0, 2),
    "scatter": (1, 0, 2),
    "stack": (1, 0, 2),
    "concat": (0, 0, 1),
    "size": (0, 0, 0),
    "split": (2, 0, 3),
    "grad": (0, 0, 0),
    "grad scatter-add": (1, 0, 2),
    "close": (0, 0, 0),
}


def _filled(size=16, clear_after_read=False):
    handle, flow = ro.TensorArrayV3(size, F32, element_shape=(4,), clear_after_read=clear_after_read)
    return handle, ro.TensorArrayScatterV3(handle, np.arange(size, dtype=np.int32), ROWS[:size], flow)


def _gradient():
    handle, flow = _filled()
    grad, gflow = ro.TensorArrayGradV3(handle, flow, "gradients")
    ro.TensorArrayScatterV3(grad, np.arange(16, dtype=np.int32), ROWS, gflow)
    return grad, gflow


def _one_written():
    handle, flow = ro.TensorArrayV3(16, F32, element_shape=(4,))
    return handle, ro.TensorArrayWriteV3(handle, 0, ROWS[0], flow)


# op -> (setup, op of what setup made)
OPS = {
    "create": (lambda: None, lambda _: ro.TensorArrayV3(16, F32, element_shape=(4,))),
    "write": (_one_written, lambda a: ro.TensorArrayWriteV3(a[0], 1, ROWS[1], a[1])),
    "read": (_filled, lambda a: ro.TensorArrayReadV3(a[0], 3, a[1], F32)),
    "gather": (_filled, lambda a: ro.TensorArrayGatherV3(a[0], INDICES, a[1], F32)),
    "scatter": (_one_written, lambda a: ro.TensorArrayScatterV3(a[0], np.arange(1, 11, dtype=np.int32),
                                                                ROWS[:10], a[1])),
    "stack": (_filled, lambda a: ro.TensorArrayGatherV3(a[0], np.arange(16, dtype=np.int32), a[1], F32)),
    "concat": (_filled, lambda a: ro.TensorArrayConcatV3(a[0], a[1], F32)),
    "size": (_filled, lambda a: ro.TensorArraySizeV3(a[0], a[1])),
    "split": (lambda: ro.TensorArrayV3(4, F32),
              lambda a: ro.TensorArraySplitV3(a[0], ROWS.reshape(-1)[:16], np.array([4, 4, 4, 4]), a[1])),
    "grad": (_filled, lambda a: ro.TensorArrayGradV3(a[0], a[1], "gradients")),
    "grad scatter-add": (_gradient, lambda a: ro.TensorArrayScatterV3(a[0], INDICES, ROWS[:10], a[1])),
    "close": (_filled, lambda a: ro.TensorArrayCloseV3(a[0])),
}


@pytest.fixture
def on_cuda():
    with gta.device("cuda"):
        _filled()                       # the kernels compiled, the backend's zero flow made
        yield


@pytest.mark.parametrize("op", sorted(OPS))
def test_an_op_costs_at_most_its_ceiling(on_cuda, op):
    setup, run = OPS[op]
    made = setup()
    with counting() as delta:
        run(made)
    counted = delta()
    measured = (counted["launches"], counted["syncs"], counted["allocations"])
    assert measured[1] == 0, f"{op} synchronised with the device {measured[1]} times"
    assert all(m is None or m <= c for m, c in zip(measured, CEILINGS[op])), \
        f"{op}: (launches, syncs, allocations) {measured} exceed {CEILINGS[op]}"


def test_size_and_concat_lengths_are_host_values(on_cuda):
    handle, flow = _filled()
    with counting() as delta:
        size = ro.TensorArraySizeV3(handle, flow)
        _, lengths = ro.TensorArrayConcatV3(handle, flow, F32)
        assert int(size) == 16 and lengths.tolist() == [4] * 16
    assert type(size) is np.ndarray and type(lengths) is np.ndarray
    assert delta()["syncs"] == 0


def test_device_indices_cost_one_sync_at_most(on_cuda):
    # A device index vector must come to the host (the checks run there): one transfer.
    handle, flow = _filled()
    with gta.device("cuda"):
        indices = cupy.asarray(INDICES)
    with counting(syncs_allowed=True) as delta:
        ro.TensorArrayGatherV3(handle, indices, flow, F32)
    assert delta()["syncs"] is None or delta()["syncs"] <= 1


def test_an_rnn_loop_costs_the_same_per_step(on_cuda):
    """examples/rnn.py forward and backward: allocations grow linearly in T (a constant
    per step: the cell's arithmetic, a read, a write), and only the loss reads the device."""
    import os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        import rnn
    finally:
        sys.path.pop(0)
    backend = gta.get_backend("cuda")
    totals = {}
    for steps in (128, 256):
        W, U, b, X, V = rnn.init_params(8, 4, steps, np.float32, 0, backend)
        with counting(syncs_allowed=True) as forward:
            _, cache = rnn.forward(W, U, b, X, V, backend)
        with counting() as backward:
            rnn.backward(W, U, b, cache)
        rnn.release(cache)
        totals[steps] = forward(), backward()
    for phase, per_step_allocations in ((0, 11), (1, 5)):
        added = totals[256][phase]["allocations"] - totals[128][phase]["allocations"]
        assert added <= per_step_allocations * 128, (phase, totals)
    assert totals[256][0]["syncs"] in (None, 0, 1) and totals[256][1]["syncs"] == 0, totals
