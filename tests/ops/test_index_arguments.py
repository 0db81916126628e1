"""Integer index arguments: exactly Python ints and NumPy's integer types (dtype kind "i"
or "u"), as TensorFlow converts them to int32. np.timedelta64 subclasses
np.signedinteger and np.bool_ is a number to NumPy, but neither is an index."""

import numpy as np
import pytest

from gpu_tensorarray import errors, to_numpy
from gpu_tensorarray import raw_ops as ro

INT_TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.intc, np.longlong]


def _array(size=4):
    handle, flow = ro.TensorArrayV3(size=size, dtype="float32", element_shape=[2], clear_after_read=False)
    return handle, flow


@pytest.mark.parametrize("int_type", INT_TYPES)
def test_every_numpy_integer_scalar_is_an_index(backend, int_type):
    handle, flow = _array()
    for index in range(4):
        ro.TensorArrayWriteV3(handle=handle, index=int_type(index), value=np.full(2, index, np.float32), flow_in=flow)
    for index in range(4):       # read back through Python ints: the reference
        value = ro.TensorArrayReadV3(handle=handle, index=int_type(index), flow_in=flow, dtype="float32")
        assert np.array_equal(to_numpy(value), np.full(2, index, np.float32))
        assert type(ro.TensorArrayReadV3(handle=handle, index=index, flow_in=flow, dtype="float32")) is type(value)


@pytest.mark.parametrize("bad", [np.timedelta64(1), np.timedelta64(1, "s"), np.bool_(True), True, np.float32(1),
                                 np.datetime64(1, "s")], ids=repr)
def test_timedeltas_bools_and_floats_are_no_index(backend, bad):
    handle, flow = _array()
    with pytest.raises(errors.InvalidArgumentError, match="index must be int32 values"):
        ro.TensorArrayWriteV3(handle=handle, index=bad, value=np.ones(2, np.float32), flow_in=flow)
    with pytest.raises(errors.InvalidArgumentError, match="index must be int32 values"):
        ro.TensorArrayReadV3(handle=handle, index=bad, flow_in=flow, dtype="float32")
    assert ro.TensorArraySizeV3(handle=handle, flow_in=flow) == 4


def test_out_of_int32_numpy_scalars_are_refused_with_their_value(backend):
    handle, flow = _array()
    with pytest.raises(errors.InvalidArgumentError, match="index value 2147483648 does not fit in int32"):
        ro.TensorArrayWriteV3(handle=handle, index=np.int64(2**31), value=np.ones(2, np.float32), flow_in=flow)
    with pytest.raises(errors.InvalidArgumentError, match="index value 4294967295 does not fit in int32"):
        ro.TensorArrayReadV3(handle=handle, index=np.uint32(2**32 - 1), flow_in=flow, dtype="float32")


def test_a_timedelta_among_large_ints_is_no_integer(backend):
    """NumPy makes an object array of [2**70, timedelta]: its leaves are not all integers,
    so the error is the dtype's, not a range error about 2**70 (the timedelta counted as one)."""
    handle, flow = _array()
    with pytest.raises(errors.InvalidArgumentError, match="indices must be int32 values, but got dtype object"):
        ro.TensorArrayGatherV3(handle=handle, indices=[2**70, np.timedelta64(1)], flow_in=flow, dtype="float32")
    with pytest.raises(errors.InvalidArgumentError, match=f"indices value {2**70} does not fit in int32"):
        ro.TensorArrayGatherV3(handle=handle, indices=[2**70, np.int64(1)], flow_in=flow, dtype="float32")


@pytest.mark.parametrize("bad", [np.array([True, False]), np.array([1, 2], "m8[s]"), [True, False]], ids=repr)
def test_bool_and_timedelta_index_vectors_are_refused(backend, bad):
    handle, flow = _array()
    with pytest.raises(errors.InvalidArgumentError, match="indices must be int32 values"):
        ro.TensorArrayScatterV3(handle=handle, indices=bad, value=np.ones((2, 2), np.float32), flow_in=flow)
    with pytest.raises(errors.InvalidArgumentError, match="indices must be int32 values"):
        ro.TensorArrayGatherV3(handle=handle, indices=bad, flow_in=flow, dtype="float32")
