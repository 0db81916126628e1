"""TensorArrayGatherV3 and TensorArrayScatterV3: docs/semantics.md §2.4 and §2.5.

Where TensorFlow keeps the partial effects of a failed Gather/Scatter, we keep none
(docs/semantics.md §6.1); those cases are in test_deviations.py.
"""

import numpy as np
import pytest

from gpu_tensorarray import errors
from ta_conformance_util import (
    ALL_DTYPES, ALREADY_READ, ALREADY_WRITTEN, CLEARED, CLOSED, INCOMPATIBLE, NOT_FULLY_DEFINED, READ_BOUNDS,
    READ_DTYPE, WRITE_BOUNDS, WRITE_DTYPE, assert_same, close, f32, gather, grad, new, raises, read, sample,
    scatter, size, write,
)

ZERO_SIZE_GATHER = ("TensorArray has size zero, but element shape {shape} is not fully defined. Currently only "
                    "static shapes are supported when packing zero-size TensorArrays.")


# -- §2.4 Gather: values --------------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 2, 8, 9, 33])
def test_gather_in_any_order_matches_a_python_loop(backend, count):
    rng = np.random.default_rng(count)
    values = [sample(rng, "float32", (2, 3)) for _ in range(count)]
    handle, _ = new(count, clear_after_read=False)
    for index, value in enumerate(values):
        write(handle, index, value)
    order = rng.permutation(count)
    assert_same(gather(handle, order), np.stack([values[i] for i in order]))
    assert_same(gather(handle, np.arange(count)), np.stack(values))


@pytest.mark.parametrize("count", [2, 12])
def test_gather_duplicates_without_clear_after_read(backend, count):
    rng = np.random.default_rng(3)
    values = [sample(rng, "int32", (2,)) for _ in range(3)]
    handle, _ = new(3, "int32", clear_after_read=False)
    for index, value in enumerate(values):
        write(handle, index, value)
    indices = [i % 2 for i in range(count)]
    assert_same(gather(handle, indices, "int32"), np.stack([values[i] for i in indices]))


@pytest.mark.parametrize("count", [3, 12])
def test_gather_clears_the_slots_it_read(backend, count):
    handle, _ = new(count)
    for index in range(count):
        write(handle, index, f32([index, index]))
    gather(handle, list(range(count)))
    for index in (0, count - 1):
        with raises(errors.InvalidArgumentError, CLEARED.format(name=handle.name, index=index)):
            read(handle, index)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=handle.name, index=1)):
        write(handle, 1, f32([0, 0]))


def test_gather_scalars_gives_a_vector(backend):
    handle, _ = new(3, "int64")
    for index in range(3):
        write(handle, index, np.int64(10 * index))
    assert_same(gather(handle, [2, 0], "int64"), np.array([20, 0], np.int64))


def test_gather_zero_fills_unwritten_slots_with_a_full_element_shape(backend):
    # TF test 6 (...NotAllValuesAvailableFillsZeros), stack part.
    handle, _ = new(3, tensor_array_name="foo", element_shape=[1, 2])
    write(handle, 1, f32([[4.0, 5.0]]))
    assert_same(gather(handle, [0, 1, 2]), f32([[[0.0, 0.0]], [[4.0, 5.0]], [[0.0, 0.0]]]))


def test_gather_attr_merge_enables_zero_reads_and_persists(backend):
    handle, _ = new(3)
    assert_same(gather(handle, [0, 1], element_shape=[2]), np.zeros((2, 2), np.float32))
    # The merged element shape [2] stays: another unwritten slot reads as zeros.
    assert_same(read(handle, 2), np.zeros((2,), np.float32))


def test_gather_attr_partial_merges_with_array_partial(backend):
    handle, _ = new(2, element_shape=[None, 3])
    assert_same(gather(handle, [0], element_shape=[2, None]), np.zeros((1, 2, 3), np.float32))
    assert_same(read(handle, 1), np.zeros((2, 3), np.float32))


# -- §2.4 Gather: errors and their order --------------------------------------------------------------------
def test_gather_missing_array(backend):
    with pytest.raises(errors.NotFoundError):
        gather("no-such-array", [0])


def test_gather_wrong_dtype(backend):
    handle, _ = new(2)
    write(handle, 0, f32(1))
    with raises(errors.InvalidArgumentError, READ_DTYPE.format(array="float", requested="int32")):
        gather(handle, [0], "int32")


def test_gather_dtype_is_checked_before_the_merge(backend):
    handle, _ = new(2, element_shape=[2])
    with raises(errors.InvalidArgumentError, READ_DTYPE.format(array="float", requested="int32")):
        gather(handle, [0], "int32", element_shape=[3])


@pytest.mark.parametrize("array_shape, attr, text", [
    ([2], [3], "shapes during merge: [2] vs. [3]"),
    ([2], [2, 1], "ranks during merge: 1 vs. 2"),
    ([None, 2], [3, 3], "shapes during merge: [?,2] vs. [3,3]"),
    ([], [1], "ranks during merge: 0 vs. 1"),
])
def test_gather_merge_conflict(backend, array_shape, attr, text):
    # TensorFlow's PartialTensorShape::MergeWith words rank and dimension conflicts apart.
    handle, _ = new(2, element_shape=array_shape)
    with raises(errors.InvalidArgumentError, f"PartialTensorShape: Incompatible {text}") as caught:
        gather(handle, [0], element_shape=attr)
    assert str(caught.value).endswith(f" (TensorArray {handle.name})"), str(caught.value)


def test_gather_merge_is_checked_before_the_indices_rank(backend):
    handle, _ = new(2, element_shape=[2])
    with raises(errors.InvalidArgumentError, "PartialTensorShape: Incompatible shapes during merge: [2] vs. [3]"):
        gather(handle, 0, element_shape=[3])


def test_gather_merge_is_checked_before_closed(backend):
    handle, _ = new(2, element_shape=[2])
    close(handle)
    with raises(errors.InvalidArgumentError, "PartialTensorShape: Incompatible shapes during merge: [2] vs. [3]"):
        gather(handle, [0], element_shape=[3])


@pytest.mark.parametrize("indices, text", [(0, "[]"), ([[0, 1]], "[1,2]"), (np.zeros((2, 0), np.int32), "[2,0]")])
def test_gather_indices_must_be_a_vector(backend, indices, text):
    handle, _ = new(2)
    with raises(errors.InvalidArgumentError, f"Expected indices to be a vector, but received shape: {text}"):
        gather(handle, indices)


def test_gather_indices_rank_is_checked_before_closed(backend):
    handle, _ = new(2)
    close(handle)
    with raises(errors.InvalidArgumentError, "Expected indices to be a vector, but received shape: []"):
        gather(handle, 0)


@pytest.mark.parametrize("attr, text", [(None, "<unknown>"), ([None, 2], "[?,2]"), ([2, None], "[2,?]")])
def test_gather_empty_indices_needs_a_full_attr(backend, attr, text):
    handle, _ = new(0, element_shape=[2, 2])        # the array's own full shape does not count
    with raises(errors.UnimplementedError, ZERO_SIZE_GATHER.format(shape=text)):
        gather(handle, [], element_shape=attr)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_gather_empty_indices_with_a_full_attr(backend, dtype):
    handle, _ = new(3, dtype)
    assert_same(gather(handle, np.zeros((0,), np.int32), dtype, element_shape=[2, 3]), np.zeros((0, 2, 3), dtype))
    handle, _ = new(0, dtype)
    assert_same(gather(handle, [], dtype, element_shape=[]), np.zeros((0,), dtype))


def test_gather_empty_indices_skips_the_closed_check(backend):
    handle, _ = new(3, element_shape=[4])
    close(handle)
    assert_same(gather(handle, [], element_shape=[4]), np.zeros((0, 4), np.float32))
    with raises(errors.UnimplementedError, ZERO_SIZE_GATHER.format(shape="<unknown>")):
        gather(handle, [])


def test_gather_of_closed_array(backend):
    handle, _ = new(3)
    write(handle, 0, f32(1))
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        gather(handle, [0])


@pytest.mark.parametrize("indices, bad", [([0, 5], 5), ([3], 3), ([-1, 0], -1), ([1, 2, -4], -4)])
def test_gather_out_of_bounds(backend, indices, bad):
    handle, _ = new(3, element_shape=[1])
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=bad, size=3)):
        gather(handle, indices)


def test_gather_reads_in_index_order(backend):
    # The first failing read wins: slot 1 (unwritten, unknown shape) before index 7 (out of bounds).
    handle, _ = new(3)
    write(handle, 0, f32(1))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=handle.name, index=1, shape="<unknown>")):
        gather(handle, [0, 1, 7])
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=7, size=3)):
        gather(handle, [0, 7, 1])


def test_gather_same_slot_twice_on_a_clearing_array(backend):
    handle, _ = new(2)
    write(handle, 0, f32(1))
    write(handle, 1, f32(2))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=handle.name, index=0)):
        gather(handle, [0, 1, 0])


def test_gather_attr_must_match_the_first_value(backend):
    handle, _ = new(2)
    write(handle, 0, f32([1, 2]))
    with raises(errors.InvalidArgumentError,
                "TensorArray was passed element_shape [3] which does not match the Tensor at index 0: [2]"):
        gather(handle, [0], element_shape=[3])
    with raises(errors.InvalidArgumentError,
                "TensorArray was passed element_shape [2,1] which does not match the Tensor at index 0: [2]"):
        gather(handle, [0], element_shape=[2, 1])


def test_gather_inconsistent_shapes_counts_positions_in_indices(backend):
    handle, _ = new(4)
    write(handle, 0, f32([1, 2]))
    write(handle, 1, f32([1, 2, 3]))
    write(handle, 3, f32([5, 6]))
    with raises(errors.InvalidArgumentError,
                "TensorArray has inconsistent shapes.  Index 0 has shape: [2] but index 2 has shape: [3]"):
        gather(handle, [3, 0, 1])


def test_gather_inconsistent_shapes_after_all_reads(backend):
    # Shapes are compared after every read ran: a bad read later in the list wins.
    handle, _ = new(3)
    write(handle, 0, f32([1, 2]))
    write(handle, 1, f32([1, 2, 3]))
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=9, size=3)):
        gather(handle, [0, 1, 9])


def test_gather_attr_is_checked_before_inconsistent_shapes(backend):
    handle, _ = new(2)
    write(handle, 0, f32([1, 2]))
    write(handle, 1, f32([1, 2, 3]))
    with raises(errors.InvalidArgumentError,
                "TensorArray was passed element_shape [3] which does not match the Tensor at index 0: [2]"):
        gather(handle, [0, 1], element_shape=[3])


# -- §2.5 Scatter: values ---------------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 3, 8, 9, 40])
def test_scatter_matches_a_python_loop(backend, count):
    rng = np.random.default_rng(count)
    total = count + 5
    indices = rng.permutation(total)[:count]
    value = sample(rng, "float64", (count, 2, 2))
    handle, _ = new(total, "float64", element_shape=[2, 2])
    scatter(handle, indices, value)
    reference = [np.zeros((2, 2)) for _ in range(total)]
    for k, index in enumerate(indices.tolist()):
        reference[index] = value[k]
    assert_same(gather(handle, np.arange(total), "float64"), np.stack(reference))


def test_scatter_rows_of_scalars(backend):
    handle, _ = new(3, "int32")
    scatter(handle, [2, 0, 1], np.array([7, 8, 9], np.int32))
    assert_same(read(handle, 0, "int32"), np.int32(8))
    assert_same(read(handle, 2, "int32"), np.int32(7))


def test_scatter_into_a_dynamic_array_grows_it(backend):
    # TF test 57's forward part: scatter to [1, 8] on an empty dynamic array.
    handle, _ = new(0, tensor_array_name="foo", dynamic_size=True)
    scatter(handle, [1, 8], f32([[1.0, -1.0], [10.0, -10.0]]))
    assert size(handle) == 9
    assert_same(read(handle, 1), f32([1.0, -1.0]))
    assert_same(read(handle, 8), f32([10.0, -10.0]))


def test_scatter_into_a_larger_dynamic_array_keeps_its_size(backend):
    handle, _ = new(10, dynamic_size=True)
    scatter(handle, [1, 2], f32([1, 2]))
    assert size(handle) == 10


def test_scatter_empty_indices_is_a_no_op(backend):
    handle, _ = new(0, dynamic_size=True)
    scatter(handle, [], np.zeros((0, 3), np.float32))
    assert size(handle) == 0
    handle, _ = new(2)
    scatter(handle, np.zeros((0,), np.int32), np.zeros((0,), np.float32))
    write(handle, 0, f32(1))


def test_scatter_empty_indices_captures_no_shape(backend):
    handle, _ = new(2, identical_element_shapes=True)
    scatter(handle, [], np.zeros((0, 3), np.float32))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=handle.name, index=0, shape="<unknown>")):
        read(handle, 0)


def test_scatter_in_identical_mode_captures_the_row_shape(backend):
    handle, _ = new(4, identical_element_shapes=True)
    scatter(handle, [0, 2], np.ones((2, 3), np.float32))
    assert_same(read(handle, 1), np.zeros((3,), np.float32))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=3, value="[2]",
                                                                 shape="[3]")):
        write(handle, 3, f32([1, 2]))


# -- §2.5 Scatter: errors and their order -------------------------------------------------------------------
def test_scatter_missing_array(backend):
    with pytest.raises(errors.NotFoundError):
        scatter("no-such-array", [0], f32([1]))


def test_scatter_wrong_dtype(backend):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="float", value="int32")):
        scatter(handle, [0], np.array([1], np.int32))


def test_scatter_dtype_is_checked_before_the_value_rank(backend):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, WRITE_DTYPE.format(array="float", value="int32")):
        scatter(handle, [0], np.int32(1))


def test_scatter_value_must_be_at_least_a_vector(backend):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError,
                "Input value for unpack must be at least a vector but received shape: []"):
        scatter(handle, [0], f32(1))


def test_scatter_value_rank_is_checked_before_closed(backend):
    handle, _ = new(3)
    close(handle)
    with raises(errors.InvalidArgumentError,
                "Input value for unpack must be at least a vector but received shape: []"):
        scatter(handle, [0], f32(1))


def test_scatter_closed_is_checked_before_the_indices(backend):
    handle, _ = new(3)
    close(handle)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        scatter(handle, 0, f32([1]))
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        scatter(handle, [], np.zeros((0,), np.float32))


@pytest.mark.parametrize("indices, text", [(0, "[]"), ([[0]], "[1,1]")])
def test_scatter_indices_must_be_a_vector(backend, indices, text):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, f"Expected indices to be a vector, but received shape: {text}"):
        scatter(handle, indices, f32([1, 2, 3]))


def test_scatter_length_mismatch_len_first(backend):
    handle, _ = new(5)
    with raises(errors.InvalidArgumentError, "Expected len(indices) == values.shape[0], but saw: 2 vs. 3"):
        scatter(handle, [0, 9], f32([1, 2, 3]))        # also past the end: the length wins


def test_scatter_max_index(backend):
    handle, _ = new(5)
    with raises(errors.InvalidArgumentError, "Max scatter index must be < array size (5 vs. 5)"):
        scatter(handle, [0, 5], f32([1, 2]))
    with raises(errors.InvalidArgumentError, "Max scatter index must be < array size (9 vs. 5)"):
        scatter(handle, [9, -1], f32([1, 2]))        # the max check runs before any write


def test_scatter_negative_index_fails_as_a_write(backend):
    handle, _ = new(3)
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=handle.name, index=-1, size=3)):
        scatter(handle, [0, -1], f32([1, 2]))


def test_scatter_negative_index_on_a_dynamic_array(backend):
    handle, _ = new(2, dynamic_size=True)
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=handle.name, index=-2, size=2)):
        scatter(handle, [-2], f32([1]))


def test_scatter_shape_check_reports_the_first_failing_index(backend):
    handle, _ = new(12, element_shape=[2])
    indices = [5, 3, 1, 0, 2, 4, 6, 7, 8, 9, 10, 11]
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=5, value="[3]",
                                                                 shape="[2]")):
        scatter(handle, indices, np.ones((12, 3), np.float32))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=7, value="[3]",
                                                                 shape="[2]")):
        scatter(handle, [7], np.ones((1, 3), np.float32))


@pytest.mark.parametrize("count", [2, 12])
def test_scatter_duplicate_index_on_a_forward_array(backend, count):
    handle, _ = new(count + 3)
    indices = list(range(count - 1)) + [count - 2]
    with raises(errors.InvalidArgumentError, ALREADY_WRITTEN.format(name=handle.name, index=count - 2)):
        scatter(handle, indices, np.ones((count,), np.float32))


@pytest.mark.parametrize("count", [2, 12])
def test_scatter_into_a_written_slot(backend, count):
    handle, _ = new(count)
    write(handle, 1, f32(5))
    with raises(errors.InvalidArgumentError, ALREADY_WRITTEN.format(name=handle.name, index=1)):
        scatter(handle, list(range(count)), np.ones((count,), np.float32))
    assert_same(read(handle, 1), f32(5))


@pytest.mark.parametrize("count", [2, 12])
def test_scatter_into_a_read_slot(backend, count):
    handle, _ = new(count, element_shape=[])
    read(handle, count - 1)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=handle.name, index=count - 1)):
        scatter(handle, list(range(count)), np.ones((count,), np.float32))


def test_scatter_then_gather_round_trip_property(backend):
    rng = np.random.default_rng(11)
    for trial in range(20):
        total = int(rng.integers(1, 40))
        count = int(rng.integers(0, total + 1))
        indices = rng.permutation(total)[:count]
        value = sample(rng, "float32", (count, 3))
        handle, _ = new(total, clear_after_read=False)
        scatter(handle, indices, value)
        if count:
            order = rng.permutation(count)
            assert_same(gather(handle, indices[order]), value[order])


def test_scatter_into_a_grad_array_counts_as_writes(backend):
    forward, _ = new(3, element_shape=[2])
    g = grad(forward)
    scatter(g, [0, 2], f32([[1, 2], [3, 4]]))
    assert_same(gather(g, [0, 1, 2]), f32([[1, 2], [0, 0], [3, 4]]))


def test_gather_merge_enables_zero_reads_with_elements_of_several_shapes(backend):
    handle, _ = new(4, clear_after_read=False)
    write(handle, 0, f32([1, 2]))
    write(handle, 1, f32([1, 2, 3]))
    # attr [2]: slot 0 matches it, slot 3 reads as zeros of the merged shape.
    assert_same(gather(handle, [0, 3], element_shape=[2]), f32([[1, 2], [0, 0]]))
    assert_same(read(handle, 2), f32([0, 0]))
    assert_same(read(handle, 1), f32([1, 2, 3]))


@pytest.mark.parametrize("count", [3, 9])
def test_scatter_into_an_array_of_several_shapes(backend, count):
    handle, _ = new(count + 2, clear_after_read=False)
    write(handle, 0, f32([1, 2]))
    write(handle, 1, f32([1, 2, 3]))
    value = np.arange(count * 2, dtype=np.float32).reshape(count, 2)
    scatter(handle, np.arange(2, count + 2), value)
    assert_same(gather(handle, np.arange(2, count + 2)), value)
    assert_same(read(handle, 1), f32([1, 2, 3]))


def test_scattered_values_are_copied(backend):
    handle, _ = new(2, clear_after_read=False)
    value = f32([[1, 2], [3, 4]])
    scatter(handle, [1, 0], value)
    value[:] = 0
    assert_same(gather(handle, [0, 1]), f32([[3, 4], [1, 2]]))


# -- Python ranges as indices (stack passes one) ------------------------------------------------------------
def test_gather_of_a_range(backend):
    handle, _ = new(12, element_shape=[2], clear_after_read=False)
    for index in range(0, 12, 2):
        write(handle, index, f32([index, index]))
    expected = np.zeros((12, 2), np.float32)
    expected[0::2] = np.arange(0, 12, 2, dtype=np.float32)[:, None]
    assert_same(gather(handle, range(12)), expected)
    assert_same(gather(handle, range(3, 9)), expected[3:9])
    assert_same(gather(handle, range(12)), expected)


def test_gather_of_a_range_clears_only_its_slots(backend):
    handle, _ = new(12, element_shape=[1])
    for index in range(12):
        write(handle, index, f32([index]))
    assert_same(gather(handle, range(3, 12)), np.arange(3, 12, dtype=np.float32)[:, None])
    assert_same(read(handle, 0), f32([0]))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=handle.name, index=3)):
        read(handle, 3)


def test_gather_of_a_range_past_the_end(backend):
    handle, _ = new(12, element_shape=[1])
    for index in range(12):
        write(handle, index, f32([index]))
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=12, size=12)):
        gather(handle, range(13))
    assert_same(gather(handle, range(12)), np.arange(12, dtype=np.float32)[:, None])


def test_gather_of_an_empty_range(backend):
    handle, _ = new(3)
    close(handle)
    assert_same(gather(handle, range(0), element_shape=[2]), np.zeros((0, 2), np.float32))
    with raises(errors.UnimplementedError, ZERO_SIZE_GATHER.format(shape="<unknown>")):
        gather(handle, range(0))
    with raises(errors.InvalidArgumentError, CLOSED.format(name=handle.name)):
        gather(handle, range(2), element_shape=[2])


def test_grad_gather_of_a_range_past_the_end_grows(backend):
    forward, _ = new(2, element_shape=[2])
    g = grad(forward)
    write(g, 0, f32([1, 2]))
    expected = np.zeros((12, 2), np.float32)
    expected[0] = [1, 2]
    assert_same(gather(g, range(12)), expected)
    assert size(g) == 12


def test_scatter_to_a_range(backend):
    handle, _ = new(12)
    value = np.arange(24, dtype=np.float32).reshape(12, 2)
    scatter(handle, range(12), value)
    assert_same(gather(handle, range(12)), value)
    other, _ = new(12)
    with raises(errors.InvalidArgumentError, "Expected len(indices) == values.shape[0], but saw: 11 vs. 12"):
        scatter(other, range(11), value)


def test_gather_of_empty_indices_merges_its_attr(backend):
    handle, _ = new(2)
    assert_same(gather(handle, [], element_shape=[2]), np.zeros((0, 2), np.float32))
    assert_same(read(handle, 1), f32([0, 0]))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=handle.name, index=0, value="[3]",
                                                                 shape="[2]")):
        write(handle, 0, f32([1, 2, 3]))
