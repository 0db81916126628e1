"""D. Forward and backward of a T=1000 loop through the GradientTape (skipped until
gpu_tensorarray.GradientTape exists); the memory of a dynamic_size array grown one
write at a time (extra_info: peak over final data, host bytes per element; target
< 2x and < 64 B); and the machine's copy bandwidth, the limit for the other rows."""

import pytest

from benchrows import bench_row, rows


@pytest.mark.parametrize("row", rows(lambda row: row.op in ("tape", "memory", "copy")))
def test_tape_memory_copy(benchmark, backend, row):
    bench_row(benchmark, backend, row, rounds=5)
