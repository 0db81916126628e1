"""TensorArrayV3, TensorArrayWriteV3 and TensorArrayReadV3: docs/semantics.md §1.1-§1.4, §2.1-§2.3.

Every error path with TensorFlow's class and wording, and the order of the checks:
where two checks fail at once the earlier one in TensorFlow's kernel must win.
"""

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.layouts import FIRST_SLAB_BYTES
from ta_conformance_util import (
    ALL_DTYPES, ALREADY_READ, ALREADY_WRITTEN, CLEARED, CLOSED, INCOMPATIBLE, NOT_FULLY_DEFINED, READ_BOUNDS,
    READ_DTYPE, TF_NAME, WRITE_BOUNDS, WRITE_DTYPE, assert_same, close, f32, gather, host, name_number, new, raises,
    read, sample, size, write,
)

SHAPES = [(), (3,), (2, 3, 4)]


# -- §2.1 TensorArrayV3 -----------------------------------------------------------------------------
def test_create_returns_a_handle_and_a_zero_float32_flow(backend):
    handle, flow = new(3)
    assert isinstance(flow, backend.array_type)
    assert flow.dtype == np.float32 and flow.shape == ()
    assert float(host(flow)) == 0.0
    assert size(handle) == 3


@pytest.mark.parametrize("bad_size, shape_text", [([1], "[1]"), (np.array([[2, 3]], np.int32), "[1,2]")])
def test_create_size_must_be_scalar(backend, bad_size, shape_text):
    with raises(errors.InvalidArgumentError, f"TensorArray size must be scalar, but had shape: {shape_text}"):
        new(bad_size)


@pytest.mark.parametrize("bad_size", [-1, -100, np.int32(-5)])
def test_create_negative_size(backend, bad_size):
    with raises(errors.InvalidArgumentError, "Size should be >= 0."):
        new(bad_size)


def test_create_size_checks_scalar_before_sign(backend):
    with raises(errors.InvalidArgumentError, "TensorArray size must be scalar, but had shape: [1]"):
        new([-1])


def test_create_size_zero_is_allowed(backend):
    handle, _ = new(0)
    assert size(handle) == 0
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=0, size=0)):
        read(handle, 0)


def test_create_accepts_size_as_numpy_scalar_or_0d_array(backend):
    assert size(new(np.int32(4))[0]) == 4
    assert size(new(np.array(5, np.int64))[0]) == 5


# -- §1.1 names -------------------------------------------------------------------------------------
def test_default_name_is_TensorArrayV3_counter(backend):
    first, _ = new(1)
    second, _ = new(1)
    a = name_number(first.name, "TensorArrayV3")
    b = name_number(second.name, "TensorArrayV3")
    assert b == a + 1


def test_none_for_an_attribute_is_its_default(backend):
    """As TensorFlow's op builder takes None (tf.raw_ops and tf.function alike): no dynamic size,
    reads that clear, the default name (these were InvalidArgumentError)."""
    handle, flow = ro.TensorArrayV3(size=1, dtype="float32", dynamic_size=None, clear_after_read=None,
                                    identical_element_shapes=None, tensor_array_name=None)
    assert handle.name.startswith("TensorArrayV3_")
    flow = ro.TensorArrayWriteV3(handle=handle, index=0, value=np.ones(2, np.float32), flow_in=flow)
    with pytest.raises(errors.InvalidArgumentError, match="not resizeable"):
        ro.TensorArrayWriteV3(handle=handle, index=1, value=np.ones(2, np.float32), flow_in=flow)
    ro.TensorArrayReadV3(handle=handle, index=0, flow_in=flow, dtype="float32")
    with pytest.raises(errors.InvalidArgumentError, match="twice"):
        ro.TensorArrayReadV3(handle=handle, index=0, flow_in=flow, dtype="float32")
    ro.TensorArrayCloseV3(handle=handle)


def test_tensor_array_name_is_the_base_and_the_counter_is_process_wide(backend):
    first, _ = new(1, tensor_array_name="foo")
    second, _ = new(1)
    third, _ = new(1, tensor_array_name="bar")
    n = name_number(first.name, "foo")
    assert name_number(second.name, "TensorArrayV3") == n + 1
    assert name_number(third.name, "bar") == n + 2


def test_failed_size_checks_do_not_consume_a_counter_value(backend):
    first, _ = new(1, tensor_array_name="foo")
    with pytest.raises(errors.InvalidArgumentError):
        new(-1, tensor_array_name="foo")
    with pytest.raises(errors.InvalidArgumentError):
        new([2], tensor_array_name="foo")
    second, _ = new(1, tensor_array_name="foo")
    assert name_number(second.name, "foo") == name_number(first.name, "foo") + 1


def test_unique_name_appears_in_messages(backend):
    handle, _ = new(2, tensor_array_name="foo")
    n = name_number(handle.name, "foo")
    with raises(errors.InvalidArgumentError, f"TensorArray foo_{n}: Tried to write to index 2 but array is not "
                                             f"resizeable and size is: 2"):
        write(handle, 2, f32(1))


def test_two_arrays_do_not_interfere(backend):
    # TF test 23 (testMultiTensorArray) on raw ops.
    h1, _ = new(1, tensor_array_name="foo")
    h2, _ = new(1, tensor_array_name="foo")
    write(h1, 0, f32(4.0))
    write(h2, 0, f32(5.0))
    assert float(host(read(h1, 0))) + float(host(read(h2, 0))) == 9.0


# -- §2.2 / §2.3 round trips ------------------------------------------------------------------------
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_write_read_round_trip(backend, dtype, shape):
    rng = np.random.default_rng(1)
    values = [sample(rng, dtype, shape) for _ in range(3)]
    handle, flow = new(3, dtype)
    for index in (2, 0, 1):
        write(handle, index, values[index], flow)
    for index in range(3):
        assert_same(read(handle, index, dtype, flow), values[index])


def test_write_keeps_a_copy_of_python_lists_with_tf_dtypes(backend):
    # Python floats are float32, Python ints int32 (what tf.constant makes of them).
    handle, _ = new(2)
    write(handle, 0, [[1.5, 2.5]])
    assert_same(read(handle, 0), f32([[1.5, 2.5]]))
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="float", value="int32")):
        write(handle, 1, [1, 2])


# What NumPy holds only as objects is TensorFlow's conversion error ("Can't convert Python sequence with
# out-of-range integer to Tensor.", "Attempt to convert a value (None) ..."), never a write error naming
# the "string" NumPy's object dtype stands for.
OBJECT_VALUES = [
    (-(2**63) - 1, "Cannot convert -9223372036854775809 to a tensor: -9223372036854775809 does not fit in int64"),
    ([1, -(2**63) - 1], "Cannot convert [1, -9223372036854775809] to a tensor: -9223372036854775809 does not fit"),
    (2**64, "Cannot convert 18446744073709551616 to a tensor: 18446744073709551616 does not fit in int64"),
    (2**63, "Cannot convert 9223372036854775808 to a tensor: 9223372036854775808 does not fit in int64"),
    # NumPy makes float64 of these (an int past int64 beside a smaller one): still integers
    ([0, 2**63], "Cannot convert [0, 9223372036854775808] to a tensor: 9223372036854775808 does not fit in int64"),
    ([[-1], [2**63]], "Cannot convert [[-1], [9223372036854775808]] to a tensor: 9223372036854775808 does not fit"),
    ([np.uint64(2**63), -1], "Cannot convert [np.uint64(9223372036854775808), -1] to a tensor: 9223372036854775808 "
                             "does not fit in int64"),
    ([1, None], "Cannot convert value [1, None] to a tensor: element 1 (in row-major order) is None of type NoneType"),
    ([[1.5], [None]], "Cannot convert value [[1.5], [None]] to a tensor: element 1 (in row-major order) is None"),
]
OBJECT_IDS = ["below-int64", "list-below-int64", "2**64", "2**63", "list-2**63", "nested-2**63", "np.uint64-2**63",
              "None-in-list", "nested-None"]


@pytest.mark.parametrize("dtype", ["float32", "int64", "bool"])
@pytest.mark.parametrize("value, text", OBJECT_VALUES, ids=OBJECT_IDS)
def test_values_numpy_holds_only_as_objects_are_conversion_errors(backend, dtype, value, text):
    handle, flow = new(2, dtype)
    with raises(errors.InvalidArgumentError, text) as caught:
        write(handle, 0, value, flow)
    message = str(caught.value)
    assert handle.name in message and "trying to write dtype" not in message, message
    with raises(errors.InvalidArgumentError, "Cannot convert ") as caught:
        ro.TensorArrayScatterV3(handle, [0], [value], flow)
    assert "trying to write dtype" not in str(caught.value), str(caught.value)
    with raises(errors.InvalidArgumentError, f"TensorArray {handle.name}: Could not read from TensorArray index 0."):
        read(handle, 0, dtype)      # nothing was written (an unwritten slot of unknown shape)


# Integers NumPy holds in no one integer dtype (int64 beside uint64 scalars) and makes float64 of:
# TensorFlow reads integers, int32 or int64 by their range (tf.convert_to_tensor, TensorFlow 2.21),
# exactly, also where float64 would round them.
@pytest.mark.parametrize("value, dtype", [
    ([np.int64(0), np.uint64(1)], "int32"), ([np.uint64(1), 1], "int32"), ([[np.uint64(3)], [-1]], "int32"),
    ([2**62 + 1, np.uint64(1)], "int64"),
], ids=["int64-uint64", "uint64-int", "nested", "past-float64"])
def test_integer_lists_numpy_makes_floats_of_stay_integers(backend, value, dtype):
    handle, flow = new(1, dtype)
    write(handle, 0, value, flow)
    assert_same(read(handle, 0, dtype), np.array([int(v) for v in np.ravel(np.array(value, object))],
                                                  dtype).reshape(np.shape(value)))
    handle, flow = new(1, "float32")
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="float", value=dtype)):
        write(handle, 0, value, flow)


# TensorFlow's conversion without a dtype (a raw op's value) refuses bools beside numbers ("Can't convert
# Python sequence with mixed types to Tensor."), where NumPy makes numbers of them; with the array's dtype
# (the class) it converts them.
@pytest.mark.parametrize("value", [[True, 1.0], [True, 1], [[1], [np.bool_(False)]], [False, 1j], [True] + [2.5] * 40],
                         ids=["float", "int", "nested", "complex", "long"])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_bools_beside_numbers_are_a_conversion_error(backend, value, dtype):
    handle, flow = new(1, dtype)
    with raises(errors.InvalidArgumentError, "Cannot convert value [") as caught:
        write(handle, 0, value, flow)
    assert "to a tensor: it mixes bools and numbers" in str(caught.value)
    kinds = set(map(type, value))
    if dtype != "bool" and complex not in kinds and not (dtype == "int32" and float in kinds):   # (refused)
        ta = gta.TensorArray(dtype, size=1).write(0, value)
        assert_same(ta.read(0), np.array(value).astype(dtype))


def test_integer_lists_numpy_makes_floats_of_convert_to_the_classs_integer_dtype(backend):
    ta = gta.TensorArray("int32", size=1).write(0, [np.int64(0), np.uint64(1)])
    assert_same(ta.read(0), np.array([0, 1], np.int32))
    ta = gta.TensorArray("int64", size=1).write(0, [2**62 + 1, np.uint64(1)])
    assert_same(ta.read(0), np.array([2**62 + 1, 1], np.int64))
    with raises(errors.InvalidArgumentError, "Cannot convert value [1099511627776, np.uint64(1)] to int32: out of"):
        gta.TensorArray("int32", size=1).write(0, [2**40, np.uint64(1)])
    # An unsigned dtype takes what fits it, past int64 too (TensorFlow does), and refuses the rest.
    ta = gta.TensorArray("uint64", size=2).write(0, [0, 2**63]).write(1, [np.int64(5), np.uint64(2**64 - 1)])
    assert_same(ta.stack(), np.array([[0, 2**63], [5, 2**64 - 1]], np.uint64))
    with raises(errors.InvalidArgumentError, "Cannot convert value [-1, 2] to uint64: out of range"):
        gta.TensorArray("uint64", size=1).write(0, [-1, 2])
    # A float dtype takes them as TensorFlow's conversion does, rounded.
    ta = gta.TensorArray("float32", size=1).write(0, [0, 2**63])
    assert_same(ta.read(0), np.array([0, 2**63], np.float32))


def test_indices_numpy_makes_floats_of_are_integers(backend):
    handle, flow = new(2)
    ro.TensorArrayScatterV3(handle, [np.int64(0), np.uint64(1)], f32([1.0, 2.0]), flow)
    assert_same(ro.TensorArrayGatherV3(handle, [np.uint64(1), 0], flow, "float32"), f32([2.0, 1.0]))
    with raises(errors.InvalidArgumentError, "indices value 9223372036854775808 does not fit in int32"):
        ro.TensorArrayGatherV3(handle, [0, 2**63], flow, "float32")


def test_the_lowest_int64_still_converts(backend):
    handle, flow = new(1, "int64")
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="int64", value="int32")):
        write(handle, 0, [1, 2], flow)
    write(handle, 0, -(2**63), flow)
    assert_same(read(handle, 0, "int64"), np.int64(-(2**63)))


# TensorFlow keeps float16 for lists of np.float16 scalars, eager and in tf.function alike; every
# other mix (np.float64 lists, [np.float16, 2.0]) is float32 in tf.function, so float32 here.
@pytest.mark.parametrize("value, dtype", [
    ([np.float16(1.0), np.float16(2.0)], "float16"), ([[np.float16(1.0)], (np.float16(2.0),)], "float16"),
    ([np.float16(1.0), 2.0], "float32"), ([2.0, np.float16(1.0)], "float32"),
    ([np.float16(1.0), np.float32(2.0)], "float32"), ([np.float16(1.0), np.int8(2)], "float32"),
    ([np.float64(1.0), np.float64(2.0)], "float32"), ([np.int32(1), np.int32(2)], "int32"),
    ([np.int64(1), np.int64(2)], "int32"),
], ids=["f16", "f16-nested", "f16-float", "float-f16", "f16-f32", "f16-i8", "f64", "i32", "i64"])
def test_lists_of_numpy_scalars_take_tensorflows_dtype(backend, value, dtype):
    handle, flow = new(1, dtype)
    write(handle, 0, value, flow)
    assert_same(read(handle, 0, dtype), np.asarray(value).astype(dtype))


def test_elements_of_different_shapes_without_identical_shapes(backend):
    # TF test 1 (testTensorArrayWriteRead) on raw ops.
    handle, _ = new(3, tensor_array_name="foo")
    write(handle, 0, f32([[4.0, 5.0]]))
    write(handle, 1, f32([[1.0]]))
    write(handle, 2, f32(-3.0))
    assert_same(read(handle, 0), f32([[4.0, 5.0]]))
    assert_same(read(handle, 1), f32([[1.0]]))
    assert_same(read(handle, 2), f32(-3.0))


def test_zero_element_values_round_trip(backend):
    handle, _ = new(3)
    empty = np.zeros((0, 1), np.float32)
    for index in range(3):
        write(handle, index, empty)
    assert_same(gather(handle, [0, 1, 2]), np.zeros((3, 0, 1), np.float32))


# -- §2.2 write: errors and their order -----------------------------------------------------------------
def test_write_index_must_be_scalar(backend):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, "TensorArray index must be scalar, but had shape: [1]"):
        write(handle, [1], f32(1))
    with raises(errors.InvalidArgumentError, "TensorArray index must be scalar, but had shape: [2,1]"):
        write(handle, np.array([[0], [1]], np.int32), f32(1))


def test_write_index_rank_is_checked_before_the_handle(backend):
    with raises(errors.InvalidArgumentError, "TensorArray index must be scalar, but had shape: [1]"):
        write("no-such-array", [0], f32(1))


def test_write_to_a_missing_array_is_not_found(backend):
    with pytest.raises(errors.NotFoundError):
        write("no-such-array", 0, f32(1))


def test_write_with_a_handle_of_the_wrong_type(backend):
    with raises(errors.InvalidArgumentError, "Trying to access a handle's resource using the wrong type."):
        write(42, 0, f32(1))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_write_wrong_dtype(backend, dtype):
    other = "int32" if dtype != "int32" else "float32"
    handle, _ = new(2, dtype)
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array=TF_NAME[dtype], value=TF_NAME[other])):
        write(handle, 0, np.zeros((2,), other))


def test_write_wrong_dtype_is_reported_before_closed(backend):
    handle, _ = new(2)
    close(handle)
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="float", value="int32")):
        write(handle, 0, np.int32(1))
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="float", value="double")):
        write(handle, 99, np.float64(1))


def test_write_to_closed_array(backend):
    handle, _ = new(2)
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        write(handle, 0, f32(1))


def test_write_closed_is_reported_before_bounds(backend):
    handle, _ = new(2)
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        write(handle, 5, f32(1))
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        write(handle, -1, f32(1))


def test_write_past_the_end_of_a_static_array(backend):
    # TF test 15.
    handle, _ = new(3, tensor_array_name="foo")
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=handle.name, index=3, size=3)):
        write(handle, 3, f32(3.0))


@pytest.mark.parametrize("dynamic", [False, True])
def test_write_negative_index_has_the_not_resizeable_text_even_when_dynamic(backend, dynamic):
    handle, _ = new(0 if dynamic else 3, dynamic_size=dynamic)
    with raises(errors.InvalidArgumentError,
                WRITE_BOUNDS.format(name=handle.name, index=-1, size=0 if dynamic else 3)):
        write(handle, -1, f32(3.0))


def test_write_bounds_are_checked_before_shape(backend):
    handle, _ = new(3, element_shape=[2])
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=handle.name, index=7, size=3)):
        write(handle, 7, f32([1, 2, 3]))


@pytest.mark.parametrize("element_shape, value_shape, value_text, shape_text", [
    ([2], (3,), "[3]", "[2]"),
    ([None, 2], (2,), "[2]", "[?,2]"),
    ([None, 2], (4, 3), "[4,3]", "[?,2]"),
    ([], (1,), "[1]", "[]"),
    ([2], (), "[]", "[2]"),
    ([2, 3], (3, 2), "[3,2]", "[2,3]"),
])
def test_write_incompatible_shape(backend, element_shape, value_shape, value_text, shape_text):
    handle, _ = new(3, element_shape=element_shape)
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=1, value=value_text,
                                                                 shape=shape_text)):
        write(handle, 1, np.ones(value_shape, np.float32))


def test_write_compatible_partial_shapes(backend):
    handle, _ = new(3, element_shape=[None, 2])
    write(handle, 0, np.ones((4, 2), np.float32))
    write(handle, 1, np.ones((1, 2), np.float32))        # not identical: nothing captured
    assert_same(read(handle, 1), np.ones((1, 2), np.float32))


def test_write_shape_is_checked_before_already_read(backend):
    handle, _ = new(2, element_shape=[2])
    write(handle, 0, f32([1, 2]))
    read(handle, 0)
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=0, value="[3]",
                                                                 shape="[2]")):
        write(handle, 0, f32([1, 2, 3]))


def test_write_shape_is_checked_before_already_written(backend):
    handle, _ = new(2, element_shape=[2])
    write(handle, 0, f32([1, 2]))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=0, value="[3]",
                                                                 shape="[2]")):
        write(handle, 0, f32([1, 2, 3]))


@pytest.mark.parametrize("clear_after_read", [True, False])
def test_write_already_read_is_reported_before_already_written(backend, clear_after_read):
    handle, _ = new(2, clear_after_read=clear_after_read)
    write(handle, 0, f32(1))
    read(handle, 0)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=handle.name, index=0)):
        write(handle, 0, f32(2))


def test_write_twice(backend):
    # TF test 17.
    handle, _ = new(3, tensor_array_name="foo")
    write(handle, 2, f32(3.0))
    with raises(errors.InvalidArgumentError, ALREADY_WRITTEN.format(name=handle.name, index=2)):
        write(handle, 2, f32(3.0))
    assert_same(read(handle, 2), f32(3.0))


# -- §1.4 identical element shapes --------------------------------------------------------------------
def test_identical_shapes_capture_the_first_written_shape(backend):
    handle, _ = new(3, identical_element_shapes=True)
    write(handle, 0, np.ones((2, 3), np.float32))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=1, value="[3]",
                                                                 shape="[2,3]")):
        write(handle, 1, f32([1, 2, 3]))
    # The captured shape is fully defined: unwritten slots read as zeros of it.
    assert_same(read(handle, 2), np.zeros((2, 3), np.float32))


def test_identical_shapes_replace_a_partial_shape(backend):
    handle, _ = new(3, element_shape=[None, 3], identical_element_shapes=True)
    write(handle, 0, np.ones((5, 3), np.float32))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=1, value="[4,3]",
                                                                 shape="[5,3]")):
        write(handle, 1, np.ones((4, 3), np.float32))


def test_without_identical_shapes_writes_never_change_the_element_shape(backend):
    handle, _ = new(3, element_shape=[None, 3])
    write(handle, 0, np.ones((5, 3), np.float32))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=handle.name, index=2, shape="[?,3]")):
        read(handle, 2)
    write(handle, 1, np.ones((4, 3), np.float32))


def test_identical_shapes_inferred_shape_fills_zeros(backend):
    # TF test 7 (testTensorArrayReadOrPackNotAllValuesAvailableInferShapeFillsZeros), read part.
    handle, _ = new(3, identical_element_shapes=True)
    write(handle, 1, f32([[4.0, 5.0]]))
    assert_same(read(handle, 0), f32([[0.0, 0.0]]))


# -- §2.3 read: errors and their order ----------------------------------------------------------------
def test_read_index_must_be_scalar(backend):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, "TensorArray index must be scalar, but had shape: [1]"):
        read(handle, [0])
    with raises(errors.InvalidArgumentError, "TensorArray index must be scalar, but had shape: [1]"):
        read("no-such-array", [0])


def test_read_from_a_missing_array_is_not_found(backend):
    with pytest.raises(errors.NotFoundError):
        read("no-such-array", 0)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_read_wrong_dtype(backend, dtype):
    requested = "float64" if dtype != "float64" else "int8"
    handle, _ = new(2, dtype)
    write(handle, 0, np.zeros((), dtype))
    with raises(errors.InvalidArgumentError, READ_DTYPE.format(array=TF_NAME[dtype], requested=TF_NAME[requested])):
        read(handle, 0, requested)
    assert_same(read(handle, 0, dtype), np.zeros((), dtype))      # the failed read did not clear


def test_read_wrong_dtype_text_of_tf_test_16(backend):
    handle, _ = new(3, tensor_array_name="foo")
    write(handle, 0, f32([[4.0, 5.0]]))
    with raises(errors.InvalidArgumentError, "TensorArray dtype is float but Op requested dtype double."):
        read(handle, 0, "float64")


def test_read_wrong_dtype_is_reported_before_closed(backend):
    handle, _ = new(2)
    close(handle)
    with raises(errors.InvalidArgumentError, READ_DTYPE.format(array="float", requested="int32")):
        read(handle, 0, "int32")


def test_read_closed_is_reported_before_bounds(backend):
    handle, _ = new(2)
    write(handle, 0, f32(1))
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        read(handle, 0)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        read(handle, 9)


@pytest.mark.parametrize("index", [3, 4, 100, -1, -7])
def test_read_out_of_bounds_has_no_name_prefix(backend, index):
    # TF test 16: "Tried to read from index 3 but array size is: 3", and "index -1".
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=index, size=3)):
        read(handle, index)


def test_read_negative_index_on_a_dynamic_array(backend):
    handle, _ = new(0, dynamic_size=True)
    write(handle, 1, f32(1))
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=-1, size=2)):
        read(handle, -1)
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=2, size=2)):
        read(handle, 2)


def test_read_bounds_are_checked_before_missing_value(backend):
    handle, _ = new(3)          # unknown element shape: a missing-value read would fail too
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=5, size=3)):
        read(handle, 5)


@pytest.mark.parametrize("element_shape, text", [(None, "<unknown>"), ([None, 2], "[?,2]"), ([3, None], "[3,?]")])
def test_read_unwritten_slot_with_unknown_element_shape(backend, element_shape, text):
    handle, _ = new(3, element_shape=element_shape)
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=handle.name, index=1, shape=text)):
        read(handle, 1)
    # Nothing happened to the slot: it can still be written and read.
    value = np.ones((3, 2), np.float32)
    write(handle, 1, value)
    assert_same(read(handle, 1), value)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_read_unwritten_slot_with_full_element_shape_gives_zeros(backend, dtype):
    handle, _ = new(3, dtype, element_shape=[2, 3])
    assert_same(read(handle, 1, dtype), np.zeros((2, 3), dtype))


def test_read_unwritten_scalar_slot(backend):
    handle, _ = new(2, "int64", element_shape=[])
    assert_same(read(handle, 0, "int64"), np.zeros((), np.int64))


def test_zero_read_marks_the_slot_read_and_cleared(backend):
    handle, _ = new(3, element_shape=[2])
    assert_same(read(handle, 0), np.zeros((2,), np.float32))
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=handle.name, index=0)):
        write(handle, 0, f32([1, 2]))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=handle.name, index=0)):
        read(handle, 0)


def test_zero_read_without_clear_after_read_repeats(backend):
    handle, _ = new(3, element_shape=[2], clear_after_read=False)
    for _ in range(3):
        assert_same(read(handle, 0), np.zeros((2,), np.float32))
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=handle.name, index=0)):
        write(handle, 0, f32([1, 2]))


def test_read_twice_is_cleared(backend):
    # TF test 26 (testTensorArrayReadTwice), first half, on raw ops.
    handle, _ = new(2, tensor_array_name="foo")
    write(handle, 0, f32([1.0, -1.0]))
    assert_same(read(handle, 0), f32([1.0, -1.0]))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=handle.name, index=0)):
        read(handle, 0)


def test_read_twice_without_clear_after_read(backend):
    handle, _ = new(2, clear_after_read=False)
    value = f32([1.0, -1.0])
    write(handle, 0, value)
    for _ in range(3):
        assert_same(read(handle, 0), value)


def test_read_value_is_not_affected_by_later_changes_to_the_input(backend):
    handle, _ = new(2, clear_after_read=False)
    value = f32([1.0, 2.0])
    write(handle, 0, value)
    value[:] = 7
    assert_same(read(handle, 0), f32([1.0, 2.0]))


# -- dynamic_size growth ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, shape", [("float32", (3,)), ("int64", ()), ("bool", (2, 2)), ("complex64", (2,))])
def test_dynamic_growth_one_write_at_a_time(backend, dtype, shape):
    rng = np.random.default_rng(7)
    count = 1500
    values = [sample(rng, dtype, shape) for _ in range(count)]
    handle, _ = new(0, dtype, dynamic_size=True)
    for index, value in enumerate(values):
        write(handle, index, value)
        if index in (0, 1, 2, 3, 4, 7, 8, 9, 31, 32, 33, 255, 256, 257, 1023, 1024, 1025):
            assert size(handle) == index + 1
    assert size(handle) == count
    assert_same(gather(handle, np.arange(count), dtype), np.stack(values))


def test_a_loop_of_small_writes_allocates_a_dynamic_array_once(backend):
    # Its first slab has room for FIRST_SLAB_BYTES of rows; a slab that doubled from one
    # row would have been reallocated at every power of two.
    row = 64
    rows = FIRST_SLAB_BYTES // (row * 4)
    handle, _ = new(0, "float32", dynamic_size=True)
    held = set()
    for index in range(rows):
        write(handle, index, f32(np.full(row, index)))
        held.add(handle.array.nbytes)
    assert held == {FIRST_SLAB_BYTES}
    write(handle, rows, f32(np.full(row, rows)))               # one past: it doubles
    assert handle.array.nbytes == 2 * FIRST_SLAB_BYTES
    assert_same(gather(handle, np.arange(rows + 1), "float32"),
                np.repeat(np.arange(rows + 1, dtype=np.float32)[:, None], row, axis=1))


def test_dynamic_growth_in_scattered_order(backend):
    rng = np.random.default_rng(8)
    count = 1100
    order = rng.permutation(count)
    values = {int(i): sample(rng, "float64", (2,)) for i in order}
    handle, _ = new(0, "float64", dynamic_size=True)
    expected_size = 0
    for index in order.tolist():
        write(handle, index, values[index])
        expected_size = max(expected_size, index + 1)
        assert size(handle) == expected_size
    reference = np.stack([values[i] for i in range(count)])
    assert_same(gather(handle, np.arange(count), "float64"), reference)


def test_dynamic_write_far_past_the_end_leaves_unwritten_slots(backend):
    handle, _ = new(1, dynamic_size=True)
    write(handle, 10, f32([1, 2]))
    assert size(handle) == 11
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=handle.name, index=5, shape="<unknown>")):
        read(handle, 5)
    write(handle, 5, f32([3, 4, 5]))
    assert_same(read(handle, 5), f32([3, 4, 5]))


def test_dynamic_identical_array_reads_unwritten_slots_as_zeros(backend):
    handle, _ = new(0, dynamic_size=True, identical_element_shapes=True)
    write(handle, 3, f32([1, 2]))
    assert_same(gather(handle, [0, 1, 2, 3]), f32([[0, 0], [0, 0], [0, 0], [1, 2]]))


def test_index_as_numpy_scalar_types(backend):
    handle, _ = new(4)
    write(handle, np.int64(0), f32(1))
    write(handle, np.int32(1), f32(2))
    write(handle, np.uint8(2), f32(3))
    write(handle, np.array(3, np.int16), f32(4))
    assert_same(gather(handle, [0, 1, 2, 3]), f32([1, 2, 3, 4]))


def test_read_via_raw_op_keyword_names(backend):
    handle, flow = ro.TensorArrayV3(size=2, dtype="float32", element_shape=[2], dynamic_size=False,
                                    clear_after_read=True, identical_element_shapes=False,
                                    tensor_array_name="kw", name="ignored")
    flow = ro.TensorArrayWriteV3(handle=handle, index=0, value=f32([1, 2]), flow_in=flow, name="ignored")
    assert_same(ro.TensorArrayReadV3(handle=handle, index=0, flow_in=flow, dtype="float32", name="ignored"),
                f32([1, 2]))


# -- elements of differing shapes, and value isolation ---------------------------------------------------
def test_write_shapes_alternating(backend):
    handle, _ = new(5)
    values = [f32([1, 2]), f32([1, 2, 3]), f32([5, 6]), f32(7), f32([8, 9])]
    for index, value in enumerate(values):
        write(handle, index, value)
    for index, value in enumerate(values):
        assert_same(read(handle, index), value)


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]], ids=str)
def test_write_mixed_shapes_in_any_order(backend, order):
    shapes = [(2,), (3,), (2,), (1, 2)]
    values = {i: np.full(shapes[i], i + 1, np.float32) for i in range(4)}
    handle, _ = new(4, clear_after_read=False)
    for index in order:
        write(handle, index, values[index])
    for index in range(4):
        assert_same(read(handle, index), values[index])


@pytest.mark.parametrize("ragged", [False, True])
def test_written_values_are_copied(backend, ragged):
    handle, _ = new(3, clear_after_read=False)
    if ragged:
        write(handle, 2, f32([1, 2, 3]))
    value = f32([1.0, 2.0])
    write(handle, 0, value)
    value[:] = 7
    assert_same(read(handle, 0), f32([1.0, 2.0]))


def test_read_results_cannot_corrupt_the_array(backend):
    handle, _ = new(2, clear_after_read=False)
    write(handle, 0, f32([1.0, 2.0]))
    result = read(handle, 0)
    try:
        result[...] = 9
    except (ValueError, TypeError):
        pass
    assert_same(read(handle, 0), f32([1.0, 2.0]))
