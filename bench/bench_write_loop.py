"""A. A 1000-step write loop of (64,) float32 elements through raw_ops and the
class, reads of them, and their stack. Targets (numpy backend): raw write and
read under 2 us per call, the class under 3 us, stack under 5 us."""

import pytest

from benchrows import bench_row, rows
from gpu_tensorarray.benchmarks import SIZES

LOOP = SIZES["write_loop"]


@pytest.mark.parametrize("row", rows(lambda row: row.op in ("write", "read")))
def test_write_read_loop(benchmark, backend, row):
    bench_row(benchmark, backend, row)


@pytest.mark.parametrize("row", rows(lambda row: row.op == "stack" and row.params["width"] == LOOP["width"]))
def test_stack_after_write_loop(benchmark, backend, row):
    bench_row(benchmark, backend, row, rounds=50)
