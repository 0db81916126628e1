"""B. Gradient-array scatter-add: S=1024 rows, E in {1, 64, 4096}, n in {S, 4S},
uniform and 90%-to-one-index, deterministic and atomic; the op users see (a second
TensorArrayScatterV3 into a gradient array) and the backend's add_rows primitive,
against np.add.at, torch index_add_ and tf.tensor_scatter_nd_add. Targets (numpy
backend): deterministic >= 6x np.add.at at E >= 64, >= 2x at E = 1, >= 0.25x the
copy bandwidth at E = 4096."""

import pytest

from benchrows import bench_row, rows


@pytest.mark.parametrize("row", rows(lambda row: row.op == "scatter_add"))
def test_grad_scatter_add(benchmark, backend, row):
    bench_row(benchmark, backend, row, rounds=10)
