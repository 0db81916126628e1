"""Every dtype through every op, element shapes of every rank, size 0, and hostile
inputs (which must raise gpu_tensorarray.errors classes, never anything else)."""

import numpy as np
import pytest

from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from ta_conformance_util import (
    ALL_DTYPES, assert_same, close, concat, f32, gather, grad, host, new, raises, read, sample, scatter, size, split,
    write,
)

ELEMENT_SHAPES = [(), (1,), (4,), (2, 3), (2, 1, 3)]
ZERO_SIZE_GATHER = ("TensorArray has size zero, but element shape {shape} is not fully defined. Currently only "
                    "static shapes are supported when packing zero-size TensorArrays.")
ZERO_SIZE_CONCAT = ("TensorArray has size zero, but element_shape_except0 {shape} is not fully defined. Currently "
                    "only static shapes are supported when concatenating zero-size TensorArrays.")


# -- every dtype through every op ----------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", ELEMENT_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_write_then_gather(backend, dtype, shape):
    rng = np.random.default_rng(0)
    values = [sample(rng, dtype, shape) for _ in range(5)]
    handle, _ = new(5, dtype, clear_after_read=False)
    for index in (4, 2, 0, 1, 3):
        write(handle, index, values[index])
    assert_same(gather(handle, [0, 1, 2, 3, 4], dtype), np.stack(values))
    assert_same(gather(handle, [3, 3, 0], dtype), np.stack([values[3], values[3], values[0]]))
    for index in range(5):
        assert_same(read(handle, index, dtype), values[index])


@pytest.mark.parametrize("count", [1, 5, 20])
@pytest.mark.parametrize("shape", ELEMENT_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_scatter_then_read(backend, dtype, shape, count):
    rng = np.random.default_rng(count)
    total = count + 2
    indices = rng.permutation(total)[:count]
    value = sample(rng, dtype, (count,) + shape)
    handle, _ = new(total, dtype)
    scatter(handle, indices, value)
    for k, index in enumerate(indices.tolist()):
        assert_same(read(handle, index, dtype), value[k])


@pytest.mark.parametrize("lengths", [[1, 1, 1], [2, 0, 3], [0, 0, 0], [3] * 12], ids=str)
@pytest.mark.parametrize("rest", [(), (2,), (3, 2)], ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_split_then_concat(backend, dtype, rest, lengths):
    rng = np.random.default_rng(len(lengths))
    value = sample(rng, dtype, (sum(lengths),) + rest)
    handle, _ = new(len(lengths), dtype, clear_after_read=False)
    split(handle, value, lengths)
    result, result_lengths = concat(handle, dtype, element_shape_except0=list(rest))
    reference, start = [], 0
    for length in lengths:
        reference.append(value[start:start + length])
        start += length
    assert_same(result, np.concatenate(reference))
    assert_same(result_lengths, np.array(lengths, np.int64))
    for index, piece in enumerate(reference):
        assert_same(read(handle, index, dtype), piece)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concat_of_written_elements_of_different_lengths(backend, dtype):
    rng = np.random.default_rng(3)
    values = [sample(rng, dtype, (n, 2)) for n in (3, 0, 1, 4)]
    handle, _ = new(4, dtype)
    for index, value in enumerate(values):
        write(handle, index, value)
    result, lengths = concat(handle, dtype)
    assert_same(result, np.concatenate(values))
    assert_same(lengths, np.array([3, 0, 1, 4], np.int64))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_zero_fill_of_every_op(backend, dtype):
    handle, _ = new(4, dtype, element_shape=[2, 2], clear_after_read=False)
    one = np.ones((2, 2), dtype)
    write(handle, 1, one)
    assert_same(read(handle, 0, dtype), np.zeros((2, 2), dtype))
    assert_same(gather(handle, [0, 1, 2], dtype), np.stack([np.zeros((2, 2), dtype), one, np.zeros((2, 2), dtype)]))
    expected = np.concatenate([np.zeros((2, 2), dtype), one, np.zeros((2, 2), dtype), np.zeros((2, 2), dtype)])
    assert_same(concat(handle, dtype).value, expected)


# -- size 0 --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("element_shape", [[], [3], [2, 3], [0, 4]], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int8", "complex128", "bool"])
def test_size_zero_keeps_the_rank_of_a_full_element_shape(backend, dtype, element_shape):
    handle, _ = new(0, dtype, element_shape=element_shape)
    assert_same(gather(handle, [], dtype, element_shape=element_shape), np.zeros([0] + element_shape, dtype))
    if element_shape:
        except0 = element_shape[1:]
        value, lengths = concat(handle, dtype, element_shape_except0=except0)
        assert_same(value, np.zeros([0] + except0, dtype))
        assert_same(lengths, np.zeros((0,), np.int64))


def test_size_zero_with_unknown_shapes_is_unimplemented(backend):
    handle, _ = new(0, dynamic_size=True)
    with raises(errors.UnimplementedError, ZERO_SIZE_GATHER.format(shape="<unknown>")):
        gather(handle, [])
    with raises(errors.UnimplementedError, ZERO_SIZE_CONCAT.format(shape="<unknown>")):
        concat(handle)
    with raises(errors.UnimplementedError, ZERO_SIZE_GATHER.format(shape="[?,3]")):
        gather(handle, [], element_shape=[None, 3])


def test_size_zero_after_an_empty_split(backend):
    handle, _ = new(0)
    split(handle, np.zeros((0, 3), np.float32), [])
    value, lengths = concat(handle, element_shape_except0=[3])
    assert_same(value, np.zeros((0, 3), np.float32))
    assert_same(lengths, np.zeros((0,), np.int64))


# -- hostile inputs -----------------------------------------------------------------------------------------
HOSTILE_INDICES = [1.5, np.float32(1), None, "0", b"0", True, np.bool_(False), 2**31, -(2**31) - 1, 2**63, 2**70,
                   object(), [1, 2], complex(1, 0)]
HOSTILE_INDEX_IDS = ["float", "np.float32", "None", "str", "bytes", "bool", "np.bool_", "2**31", "-2**31-1", "2**63",
                     "2**70", "object", "list", "complex"]


@pytest.mark.parametrize("bad", HOSTILE_INDICES, ids=HOSTILE_INDEX_IDS)
def test_hostile_write_and_read_index(backend, bad):
    handle, _ = new(3, element_shape=[])
    with pytest.raises(errors.OpError):
        write(handle, bad, f32(1))
    with pytest.raises(errors.OpError):
        read(handle, bad)
    assert size(handle) == 3
    write(handle, 1, f32(1))              # the array is intact
    assert_same(read(handle, 1), f32(1))


HOSTILE_VECTORS = [[0.5], [0, 1.5], ["a"], [None], [0, None], [2**31], [-(2**31) - 1], [2**64], [[0], [1, 2]],
                   "01", np.array([0.0]), np.array([True]), [object()]]
HOSTILE_VECTOR_IDS = ["float", "mixed-float", "str", "None", "mixed-None", "2**31", "-2**31-1", "2**64", "ragged",
                      "string", "float-array", "bool-array", "object"]


@pytest.mark.parametrize("bad", HOSTILE_VECTORS, ids=HOSTILE_VECTOR_IDS)
def test_hostile_gather_and_scatter_indices(backend, bad):
    handle, _ = new(3, element_shape=[])
    with pytest.raises(errors.OpError):
        gather(handle, bad)
    with pytest.raises(errors.OpError):
        scatter(handle, bad, f32([1.0]))
    assert_same(gather(handle, [0, 1, 2]), f32([0, 0, 0]))     # nothing was read or written


@pytest.mark.parametrize("bad", [[1.5, 1.5], ["1", "2"], [None, None], [2**64, 0], "12", [[1], [1, 1]],
                                 np.array([1.0, 2.0]), [object(), object()]],
                         ids=["float", "str", "None", "2**64", "string", "ragged", "float-array", "object"])
def test_hostile_split_lengths(backend, bad):
    handle, _ = new(2)
    with pytest.raises(errors.OpError):
        split(handle, f32([1, 2, 3]), bad)
    split(handle, f32([1, 2, 3]), [1, 2])


@pytest.mark.parametrize("bad", [1.5, None, "3", 2**31, 2**40, -(2**31) - 1, object(), complex(3, 0), True],
                         ids=["float", "None", "str", "2**31", "2**40", "-2**31-1", "object", "complex", "bool"])
def test_hostile_size(backend, bad):
    with pytest.raises(errors.OpError):
        new(bad)


# "string" and np.dtype("O") name tf.string (tests/ops/test_strings.py); "object", "U" and str do not.
@pytest.mark.parametrize("bad", ["foo", "float8_e4m3fn", "object", "datetime64", "U", 42, object(),
                                 np.dtype("M8[s]"), str, "float128"],
                         ids=["foo", "float8_e4m3fn", "object", "datetime64", "U", "42", "instance",
                              "np-datetime", "str-type", "float128"])
def test_hostile_dtype_names(backend, bad):
    with pytest.raises(errors.OpError):
        new(1, bad)
    handle, _ = new(1, element_shape=[])
    with pytest.raises(errors.OpError):
        read(handle, 0, bad)
    with pytest.raises(errors.OpError):
        gather(handle, [0], bad)
    with pytest.raises(errors.OpError):
        concat(handle, bad)


# TensorFlow's DataType numbers (tensorflow/core/framework/types.proto), which tf.as_dtype looks up
# in a dict: any value equal to the number, with its hash, names that dtype (tests/tf_parity checks
# every number against TensorFlow itself).
@pytest.mark.parametrize("spec, expected", [(1, "float32"), (np.int8(1), "float32"), (1.0, "float32"),
                                            (True, "float32"), (3, "int32"), (np.int64(9), "int64"),
                                            (19, "float16"), (23, "uint64"), (np.float64(2.5), "float64")],
                         ids=["1", "np.int8(1)", "1.0", "True", "3", "np.int64(9)", "19", "23", "np.float64(2.5)"])
def test_tensorflow_datatype_numbers(backend, spec, expected):
    handle, flow = new(2, spec, element_shape=[], clear_after_read=False)
    write(handle, 0, np.ones((), expected), flow)
    assert_same(read(handle, 0, spec), np.ones((), expected))
    assert_same(gather(handle, [0], spec), np.ones(1, expected))


@pytest.mark.parametrize("spec, name", [(11, "qint8"), (20, "resource"), (21, "variant"), (101, "float32_ref"),
                                        (107, "string_ref"), ("quint16", "quint16")])
def test_tensorflow_datatypes_no_array_holds(backend, spec, name):
    with pytest.raises(errors.InvalidArgumentError, match=rf"^Unsupported dtype {spec!r} \(TensorFlow's {name}"):
        new(1, spec)


@pytest.mark.parametrize("bad", [[-1], [2, -3], [1.5], ["a"], "abc", True, [None, -2], [object()], [2**70]],
                         ids=["-1", "2,-3", "float", "str-dim", "str", "bool", "None,-2", "object", "huge"])
def test_hostile_element_shapes(backend, bad):
    with pytest.raises(errors.OpError):
        new(1, element_shape=bad)
    handle, _ = new(1)
    write(handle, 0, f32([1.0]))
    with pytest.raises(errors.OpError):
        gather(handle, [0], element_shape=bad)
    with pytest.raises(errors.OpError):
        concat(handle, element_shape_except0=bad)
    assert_same(read(handle, 0), f32([1.0]))       # nothing was read


# TensorShape(n) is [n]: TensorFlow takes an integer element_shape as a vector's (eager and in graphs).
@pytest.mark.parametrize("spec", [3, np.int64(3), np.array(3)], ids=["int", "np-int64", "0-d-array"])
def test_an_integer_element_shape_means_a_vector_of_that_length(backend, spec):
    handle, _ = new(2, element_shape=spec, clear_after_read=False)
    assert_same(read(handle, 0), f32([0.0, 0.0, 0.0]))
    write(handle, 1, f32([1.0, 2.0, 3.0]))
    assert_same(gather(handle, [1, 0], element_shape=spec), f32([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]))
    other, _ = new(1)
    write(other, 0, f32([[1.0, 2.0, 3.0]]))
    assert_same(concat(other, element_shape_except0=spec).value, f32([[1.0, 2.0, 3.0]]))
    with raises(errors.InvalidArgumentError, "PartialTensorShape: Incompatible shapes during merge: [3] vs. [2]"):
        gather(handle, [1], element_shape=2)


@pytest.mark.parametrize("spec", [[2, 3], 3], ids=["vector", "0-d"])
def test_an_element_shape_in_the_backends_own_array_is_taken_on_every_backend(backend, spec):
    """A shape held in the backend's array (a CuPy array on cupy, whose 0-d arrays are no integers)
    is read on the host, as indices given so are."""
    shape = backend.from_host(np.array(spec, np.int32))
    handle, _ = new(1, element_shape=shape, clear_after_read=False)
    expected = np.zeros([2, 3] if isinstance(spec, list) else [3], np.float32)
    assert_same(read(handle, 0), expected)
    assert_same(gather(handle, [0], element_shape=shape), expected[None])


@pytest.mark.parametrize("bad", [True, False, np.bool_(True)], ids=["True", "False", "np-bool"])
def test_a_bool_element_shape_is_refused(backend, bad):
    with raises(errors.InvalidArgumentError, "element_shape must be None, an integer or a sequence of dimensions"):
        new(1, element_shape=bad)
    handle, _ = new(1)
    with raises(errors.InvalidArgumentError, "element_shape must be None, an integer or a sequence of dimensions"):
        gather(handle, [0], element_shape=bad)


# TensorFlow's IsValidShape: the known dimensions, multiplied in order up to the first unknown one.
TOO_LARGE = "Shape {} is too large (more than 2**63 - 1 entries)"


@pytest.mark.parametrize("shape, text", [
    ([2**62, 4], "[4611686018427387904,4]"), ((2**62, 4), "[4611686018427387904,4]"),
    ([2**62, 4, None], "[4611686018427387904,4,?]"), ([2**62, 4, 0], "[4611686018427387904,4,0]"),
    ([3, 2**62], "[3,4611686018427387904]"), ([2**31, 2**31, 4], "[2147483648,2147483648,4]"),
    ([2**63 - 1, 2, None], "[9223372036854775807,2,?]"), ([2**64], "[18446744073709551616]"),
], ids=["2**62x4", "tuple", "then-unknown", "then-zero", "3x2**62", "2**31x2**31x4", "int64max-x-2", "2**64"])
def test_element_shapes_past_int64_entries_are_invalid(backend, shape, text):
    with raises(errors.InvalidArgumentError, TOO_LARGE.format(text)):
        new(2, element_shape=shape)
    handle, _ = new(2, element_shape=[2])
    write(handle, 0, f32([1.0, 2.0]))
    with raises(errors.InvalidArgumentError, TOO_LARGE.format(text)) as caught:
        gather(handle, [0], element_shape=shape)
    assert handle.name in str(caught.value)
    with raises(errors.InvalidArgumentError, TOO_LARGE.format(text)):
        concat(handle, element_shape_except0=shape)
    assert_same(read(handle, 0), f32([1.0, 2.0]))       # nothing was read


@pytest.mark.parametrize("shape", [[None, 2**62, 4], [2**62, None, 4], [0, 2**62, 4], [2**62, 0, 4], [2**63 - 1]],
                         ids=["unknown-first", "unknown-between", "zero-first", "zero-between", "int64max"])
def test_element_shapes_within_int64_entries_are_valid(backend, shape):
    handle, _ = new(0, element_shape=shape)
    assert size(handle) == 0


def test_a_valid_element_shape_too_big_for_memory_stays_resource_exhausted(backend):
    with raises(errors.ResourceExhaustedError, "OOM"):
        new(3, element_shape=[2**62])
    with raises(errors.ResourceExhaustedError, "OOM"):
        new(3, "float64", element_shape=[2**31, 2**31])


@pytest.mark.parametrize("bad", [42, None, 3.5, object(), np.zeros(2), [1, 2], b"\xff\xfe", ("a", "b")],
                         ids=["int", "None", "float", "object", "ndarray", "list", "bytes", "tuple"])
def test_hostile_handles(backend, bad):
    for op in (lambda: write(bad, 0, f32(1)), lambda: read(bad, 0), lambda: gather(bad, [0]),
               lambda: scatter(bad, [0], f32([1])), lambda: split(bad, f32([1]), [1]), lambda: concat(bad),
               lambda: size(bad), lambda: close(bad), lambda: grad(bad),
               lambda: ro.TensorArrayGradWithShape(bad, 0.0, [1], "s")):
        with pytest.raises(errors.OpError):
            op()


@pytest.mark.parametrize("name", ["no-such-array", "TensorArrayV3_999999999", ""])
def test_missing_array_names_are_not_found(backend, name):
    for op in (lambda: write(name, 0, f32(1)), lambda: read(name, 0), lambda: gather(name, [0]),
               lambda: scatter(name, [0], f32([1])), lambda: split(name, f32([1]), [1]), lambda: concat(name),
               lambda: size(name), lambda: close(name), lambda: grad(name)):
        with pytest.raises(errors.NotFoundError):
            op()


@pytest.mark.parametrize("bad", ["abc", [[1], [1, 2]], np.array(["a"]), np.array([1, 2], dtype=object),
                                 np.array(["2020-01-01"], dtype="datetime64[D]"), object(), None, {"a": 1},
                                 np.zeros(2, np.longdouble) if np.dtype(np.longdouble).itemsize > 8 else "x"],
                         ids=["str", "ragged", "unicode-array", "object-array", "datetime", "object", "None", "dict",
                              "longdouble"])
def test_hostile_values(backend, bad):
    handle, _ = new(2)
    with pytest.raises(errors.OpError):
        write(handle, 0, bad)
    with pytest.raises(errors.OpError):
        scatter(handle, [0], bad)
    with pytest.raises(errors.OpError):
        split(handle, bad, [1, 1])
    write(handle, 0, f32(1))
    assert_same(read(handle, 0), f32(1))


@pytest.mark.parametrize("bad", ["abc", [1.0, 2.0], object()], ids=["str", "vector", "object"])
def test_hostile_flow_in(backend, bad):
    handle, _ = new(3)
    for op in (lambda: write(handle, 0, f32(1), bad), lambda: scatter(handle, [1], f32([1]), bad),
               lambda: split(handle, f32([1, 2, 3]), [1, 1, 1], bad)):
        with pytest.raises(errors.InvalidArgumentError, match="^flow_in must be a") as caught:
            op()
        assert str(caught.value).endswith(f" (TensorArray {handle.name})"), str(caught.value)
    for index in range(3):          # nothing was written
        write(handle, index, f32(index))
    assert_same(gather(handle, [0, 1, 2]), f32([0, 1, 2]))


@pytest.mark.parametrize("bad", [None, 5, 1.5, object(), ["gradients"]], ids=["None", "int", "float", "object",
                                                                              "list"])
def test_hostile_grad_sources(backend, bad):
    handle, _ = new(1)
    with pytest.raises(errors.OpError):
        ro.TensorArrayGradV3(handle, 0.0, bad)
    with pytest.raises(errors.OpError):
        ro.TensorArrayGradWithShape(handle, 0.0, [1], bad)


@pytest.mark.parametrize("bad", [[1.5], ["a"], [None], "ab", [2**40], object()],
                         ids=["float", "str", "None", "string", "huge", "object"])
def test_hostile_shape_to_prepend(backend, bad):
    handle, _ = new(1)
    with pytest.raises(errors.OpError):
        ro.TensorArrayGradWithShape(handle, 0.0, bad, "s")


@pytest.mark.parametrize("bad", [5, 1.5, object(), ["foo"]], ids=["int", "float", "object", "list"])
def test_hostile_tensor_array_name(backend, bad):
    with pytest.raises(errors.OpError):
        new(1, tensor_array_name=bad)


def test_a_closed_array_handle_stays_a_closed_error_not_a_crash(backend):
    handle, _ = new(2)
    close(handle)
    for op in (lambda: write(handle, 0, f32(1)), lambda: read(handle, 0), lambda: gather(handle, [0, 1]),
               lambda: scatter(handle, [0], f32([1])), lambda: split(handle, f32([1, 2]), [1, 1]),
               lambda: concat(handle), lambda: size(handle), lambda: grad(handle)):
        with pytest.raises(errors.InvalidArgumentError):
            op()


def test_results_live_on_the_backend(backend):
    handle, flow = new(3, "float64", clear_after_read=False)
    write(handle, 0, np.ones(2))
    split_handle, _ = new(2, "float64", clear_after_read=False)
    split(split_handle, np.ones(4), [2, 2])
    for result in (read(handle, 0, "float64"), gather(handle, [0], "float64"),
                   concat(split_handle, "float64").value):
        assert isinstance(result, backend.array_type)
    # Size and concat's lengths are host memory, as TensorFlow's (HostMemory): NumPy everywhere.
    for result in (concat(split_handle, "float64").lengths, ro.TensorArraySizeV3(handle, flow)):
        assert type(result) is np.ndarray
    assert host(gather(handle, [0], "float64")).dtype == np.float64
