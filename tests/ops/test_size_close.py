"""TensorArraySizeV3 and TensorArrayCloseV3: docs/semantics.md §2.8, §2.9."""

import numpy as np
import pytest

from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from ta_conformance_util import (
    CLOSED, assert_same, close, concat, f32, gather, grad, grad_with_shape, host, new, raises, read, scatter,
    size, split, write,
)


def test_size_is_an_int32_scalar_in_host_memory(backend):
    # TensorFlow's TensorArraySizeV3 output is HostMemory: reading it never waits for a device.
    handle, flow = new(3)
    result = ro.TensorArraySizeV3(handle, flow)
    assert type(result) is np.ndarray
    assert result.dtype == np.int32 and result.shape == ()
    assert int(host(result)) == 3


def test_size_follows_dynamic_growth(backend):
    handle, _ = new(0, dynamic_size=True)
    assert size(handle) == 0
    write(handle, 2, f32(1))
    assert size(handle) == 3
    scatter(handle, [6], f32([1]))
    assert size(handle) == 7
    write(handle, 4, f32(1))
    assert size(handle) == 7


def test_size_of_a_dynamic_array_after_split(backend):
    handle, _ = new(0, dynamic_size=True)
    split(handle, f32([1, 2, 3]), [1, 1, 1])
    assert size(handle) == 3


def test_size_of_a_missing_array(backend):
    with pytest.raises(errors.NotFoundError):
        size("no-such-array")


def test_size_of_a_closed_array(backend):
    handle, _ = new(3)
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        size(handle)


def test_close_returns_nothing_and_closing_twice_is_fine(backend):
    # TF tests 30 and 32 (testCloseTensorArray, testWriteCloseTensorArray).
    handle, _ = new(3, tensor_array_name="foo")
    write(handle, 0, f32([[4.0, 5.0]]))
    write(handle, 1, f32([3.0]))
    assert ro.TensorArrayCloseV3(handle) is None
    assert ro.TensorArrayCloseV3(handle) is None


def test_close_a_missing_array(backend):
    with pytest.raises(errors.NotFoundError):
        close("no-such-array")


def test_close_a_handle_of_the_wrong_type(backend):
    with raises(errors.InvalidArgumentError, "Trying to access a handle's resource using the wrong type."):
        close(3.5)


@pytest.mark.parametrize("op", [
    lambda h: write(h, 0, f32([1])),
    lambda h: read(h, 0),
    lambda h: gather(h, [0]),
    lambda h: scatter(h, [0], f32([[1]])),
    lambda h: split(h, f32([[1], [2]]), [1, 1]),
    lambda h: concat(h),
    lambda h: size(h),
    lambda h: grad(h),
    lambda h: grad_with_shape(h, [3]),
], ids=["write", "read", "gather", "scatter", "split", "concat", "size", "grad", "grad_with_shape"])
def test_every_op_but_close_fails_on_a_closed_array(backend, op):
    handle, _ = new(2, element_shape=[1])
    write(handle, 1, f32([7]))
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        op(handle)


def test_closing_the_forward_array_leaves_its_grad_array_open(backend):
    forward, _ = new(2, element_shape=[2])
    g = grad(forward)
    close(forward)
    write(g, 0, f32([1, 2]))
    assert_same(read(g, 0), f32([1, 2]))
    assert size(g) == 2


def test_closing_the_grad_array_leaves_the_forward_array_open(backend):
    forward, _ = new(2, element_shape=[2])
    g = grad(forward)
    close(g)
    write(forward, 0, f32([1, 2]))
    assert_same(read(forward, 0), f32([1, 2]))
    with raises(errors.InvalidArgumentError, CLOSED.format(name=g.name)):
        read(g, 0)


def test_closing_one_array_leaves_others_alone(backend):
    first, _ = new(1)
    second, _ = new(1)
    write(second, 0, f32(2))
    close(first)
    assert_same(read(second, 0), f32(2))
