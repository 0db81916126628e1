"""Benchmark cases shared by ``python -m gpu_tensorarray bench`` and the
pytest-benchmark suite in bench/: one table of sizes, one setup factory per
operation. A factory takes the backend and the case's parameters and returns
``(run, units)``: ``run()`` does the timed work once (ending with a device
synchronize) and ``units`` is how many calls it makes, for per-call figures.
"""

import numpy as np

from . import raw_ops
from .tensor_array import TensorArray

__all__ = ["SIZES", "write_loop_raw", "read_loop_raw", "write_loop_class", "stack_written"]

# One table of sizes for every runner.
SIZES = {
    "write_loop": {"steps": 1000, "width": 64},
    "stack": {"counts": (1000, 100000), "width": 1024},
}


def _written_array(backend, steps, width):
    value = backend.asarray(np.arange(width, dtype=np.float32))
    handle, flow = raw_ops.TensorArrayV3(steps, "float32", element_shape=(width,))
    for index in range(steps):
        flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)
    return handle, flow


def write_loop_raw(backend, steps, width):
    """``steps`` TensorArrayWriteV3 calls of (width,) float32 into a fresh array."""
    value = backend.asarray(np.ones(width, np.float32))

    def run():
        handle, flow = raw_ops.TensorArrayV3(steps, "float32", element_shape=(width,))
        for index in range(steps):
            flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)
        raw_ops.TensorArrayCloseV3(handle)
        backend.synchronize()

    return run, steps


def read_loop_raw(backend, steps, width):
    """``steps`` TensorArrayReadV3 calls on a written array (clear_after_read=False)."""
    value = backend.asarray(np.ones(width, np.float32))
    handle, flow = raw_ops.TensorArrayV3(steps, "float32", element_shape=(width,), clear_after_read=False)
    for index in range(steps):
        flow = raw_ops.TensorArrayWriteV3(handle, index, value, flow)

    def run():
        for index in range(steps):
            raw_ops.TensorArrayReadV3(handle, index, flow, "float32")
        backend.synchronize()

    return run, steps


def write_loop_class(backend, steps, width):
    """``steps`` TensorArray.write calls, then one stack."""
    value = backend.asarray(np.ones(width, np.float32))

    def run():
        ta = TensorArray("float32", size=steps, element_shape=(width,))
        for index in range(steps):
            ta = ta.write(index, value)
        ta.stack()
        ta.close()
        backend.synchronize()

    return run, steps


def stack_written(backend, count, width):
    """Stack of a fully written array: ``setup()`` writes a fresh one, ``run`` stacks it."""
    state = {}

    def setup():
        state["handle"], state["flow"] = _written_array(backend, count, width)

    def run():
        raw_ops.TensorArrayGatherV3(state["handle"], range(count), state["flow"], "float32")
        backend.synchronize()

    return setup, run
