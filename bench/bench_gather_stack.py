"""C. Gather of 512 random rows of a written (4096, 1024) float32 array (target:
>= 0.8x np.take's throughput), and the stack of 1000 and of 100000 written (1024,)
elements (target: < 5 us: a view; the setup writes a fresh array every round)."""

import pytest

from benchrows import bench_row, rows
from gpu_tensorarray.benchmarks import SIZES


@pytest.mark.parametrize("row", rows(lambda row: row.op == "gather"))
def test_gather(benchmark, backend, row):
    bench_row(benchmark, backend, row)


@pytest.mark.parametrize("row", rows(lambda row: row.op == "stack" and row.params["width"] == SIZES["stack"]["width"]))
def test_stack_fully_written(benchmark, backend, row):
    bench_row(benchmark, backend, row, rounds=20 if row.params["count"] <= 1000 else 5)
