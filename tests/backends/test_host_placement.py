"""Where the host backends put their arrays: large ones start on a page (a view into
a buffer a page longer), small ones and object arrays where NumPy puts them. A
scatter-add into storage that starts 16 bytes into a page, as NumPy's own large
buffers do, was measured 1.2-1.3x slower (docs/performance.md)."""

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops
from gpu_tensorarray.backends import get_backend
from gpu_tensorarray.backends.numpy import PAGE_ALIGNED_BYTES

PAGE = 4096
HOST_BACKENDS = ("numpy", "emulated")
LARGE = [("float32", (1024, 4096)), ("float64", (8195,)), ("int8", (PAGE_ALIGNED_BYTES,)),
         ("complex64", (3, 2731)), ("bool", (70000,)), ("float16", (PAGE_ALIGNED_BYTES // 2, 1))]


def _address(array):
    return array.__array_interface__["data"][0]


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("allocation", ("empty", "zeros"))
@pytest.mark.parametrize("dtype,shape", LARGE)
def test_large_arrays_start_on_a_page_and_lie_inside_their_buffer(name, allocation, dtype, shape):
    array = getattr(get_backend(name), allocation)(shape, np.dtype(dtype))
    assert _address(array) % PAGE == 0
    assert (array.shape, array.dtype) == (shape, np.dtype(dtype))
    assert array.flags.c_contiguous and array.flags.writeable
    assert array.nbytes == int(np.prod(shape)) * np.dtype(dtype).itemsize
    buffer = array.base
    assert _address(buffer) <= _address(array)
    assert _address(array) + array.nbytes <= _address(buffer) + buffer.nbytes
    if allocation == "zeros":
        assert not array.any()
    array[...] = 1
    assert array.all()


@pytest.mark.parametrize("name", HOST_BACKENDS)
@pytest.mark.parametrize("allocation", ("empty", "zeros"))
@pytest.mark.parametrize("shape,dtype", [((PAGE_ALIGNED_BYTES // 4 - 1,), "float32"), ((0, 4096), "float32"),
                                         ((3,), "int64"), ((PAGE_ALIGNED_BYTES,), "object")])
def test_small_and_object_arrays_are_numpys_own(name, allocation, shape, dtype):
    array = getattr(get_backend(name), allocation)(shape, np.dtype(dtype))
    assert array.base is None
    assert (array.shape, array.dtype) == (shape, np.dtype(dtype))


@pytest.mark.parametrize("name", HOST_BACKENDS)
def test_a_gradient_arrays_rows_start_on_pages_and_sum_like_np_add_at(name):
    """The storage a scatter-add lands in, through the ops users call: every 16 KiB row
    starts on a page, and the sums into it are still bitwise np.add.at's."""
    rows, width = 16, 4096
    rng = np.random.default_rng(7)
    indices = np.concatenate([np.full(40, 3), rng.integers(0, rows, 24)])
    rng.shuffle(indices)
    values = rng.standard_normal((len(indices), width), dtype=np.float32)
    with gta.device(name):
        handle, flow = raw_ops.TensorArrayV3(size=rows, dtype="float32", element_shape=[width])
        grad, grad_flow = raw_ops.TensorArrayGradV3(handle, flow, "gradients")
        grad_flow = raw_ops.TensorArrayScatterV3(grad, indices, values, grad_flow)
        grad_flow = raw_ops.TensorArrayScatterV3(grad, indices, values, grad_flow)
        read = [raw_ops.TensorArrayReadV3(grad, row, grad_flow, "float32") for row in np.unique(indices)]
    assert all(_address(row) % PAGE == 0 for row in read)
    expected = np.zeros((rows, width), np.float32)
    np.add.at(expected, indices, values)
    np.add.at(expected, indices, values)
    np.testing.assert_array_equal(np.stack(read), expected[np.unique(indices)], strict=True)
