"""What each op costs the device, counted by the CuPy stand-in (tests/cupy_standin.py):
kernel launches, device-to-host synchronisations and pool allocations per op in steady
state. TensorFlow keeps a TensorArray's size, lengths and indices in host memory
(HostMemory in tensor_array_ops.cc), so no op waits for the device: every sync count is
zero. The table is a ceiling: a test fails when a count grows (lower it when one falls).

Runs where the stand-in is CuPy (no GPU): its counters are what is asserted. On a GPU
the real CuPy has none, and this module skips.
"""

import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops as ro

cupy = sys.modules.get("cupy")
if not getattr(cupy, "STANDIN", False):
    pytest.skip("the counters are the CuPy stand-in's (a real GPU is in use)", allow_module_level=True)

F32 = np.float32
ROWS = np.arange(64, dtype=F32).reshape(16, 4)
INDICES = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], np.int32)

# op -> (launches, syncs, allocations). A write uploads its value (one allocation) and
# copies it into the slab; a read copies its row (CuPy has no read-only views); a gather
# or scatter uploads its indices; a scatter-add packs its grouping into one upload.
CEILINGS = {
    "create": (0, 0, 0),
    "write": (1, 0, 1),
    "read": (1, 0, 1),
    "gather": (1, 0, 2),
    "scatter": (1, 0, 2),
    "stack": (1, 0, 2),
    "concat": (1, 0, 1),
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
def on_standin():
    with gta.device("cuda"):
        _filled()                       # the kernels compiled, the backend's zero flow made
        yield


@pytest.mark.parametrize("op", sorted(OPS))
def test_an_op_costs_at_most_its_ceiling(on_standin, op):
    setup, run = OPS[op]
    made = setup()
    with cupy.counting() as delta:
        run(made)
    counted = delta()
    measured = (counted["launches"], counted["syncs"], counted["allocations"])
    assert measured[1] == 0, f"{op} synchronised with the device {measured[1]} times"
    assert all(m <= c for m, c in zip(measured, CEILINGS[op])), \
        f"{op}: (launches, syncs, allocations) {measured} exceed {CEILINGS[op]}"


def test_size_and_concat_lengths_are_host_values(on_standin):
    handle, flow = _filled()
    with cupy.counting() as delta:
        size = ro.TensorArraySizeV3(handle, flow)
        _, lengths = ro.TensorArrayConcatV3(handle, flow, F32)
        assert int(size) == 16 and lengths.tolist() == [4] * 16
    assert type(size) is np.ndarray and type(lengths) is np.ndarray
    assert delta()["syncs"] == 0


def test_device_indices_cost_one_sync_at_most(on_standin):
    # A device index vector must come to the host (the checks run there): one transfer.
    handle, flow = _filled()
    with gta.device("cuda"):
        indices = cupy.asarray(INDICES)
    with cupy.counting() as delta:
        ro.TensorArrayGatherV3(handle, indices, flow, F32)
    assert delta()["syncs"] <= 1


def test_an_rnn_loop_costs_the_same_per_step(on_standin):
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
        with cupy.counting() as forward:
            _, cache = rnn.forward(W, U, b, X, V, backend)
        with cupy.counting() as backward:
            rnn.backward(W, U, b, cache)
        rnn.release(cache)
        totals[steps] = forward(), backward()
    for phase, per_step_allocations in ((0, 11), (1, 5)):
        added = totals[256][phase]["allocations"] - totals[128][phase]["allocations"]
        assert added <= per_step_allocations * 128, (phase, totals)
    assert totals[256][0]["syncs"] <= 1 and totals[256][1]["syncs"] == 0, totals
