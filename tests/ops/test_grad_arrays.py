"""TensorArrayGradV3, TensorArrayGradWithShape and aggregation: docs/semantics.md §3 and §4.

The gradient scenarios at the end replay, op by op, what tensor_array_grad.py emits
for TF's gradient tests (docs/semantics.md §5.3), with hand-computed expectations.
"""

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from ta_conformance_util import (
    AGGREGATE_SHAPE, ALREADY_READ, CLEARED, CLOSED, INCOMPATIBLE, NOT_FULLY_DEFINED, NUMBER_DTYPES,
    READ_BOUNDS, SPLIT_COUNT, WRITE_BOUNDS, assert_same, close, concat, f32, gather, grad, grad_with_shape, host, new,
    raises, read, sample, scatter, size, split, write,
)


# -- identity: names, sources, handles ---------------------------------------------------------------------------
def test_grad_name_is_forward_name_at_source(backend):
    forward, _ = new(2, tensor_array_name="foo")
    g = grad(forward, "gradients")
    assert g.name == forward.name + "@gradients"
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=f"{forward.name}@gradients", index=2, size=2)):
        write(g, 2, f32(1))


def test_grad_name_of_a_default_named_array(backend):
    forward, _ = new(1)
    g = grad(forward, "gradients_1")
    assert g.name.startswith("TensorArrayV3_") and g.name.endswith("@gradients_1")
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=-1, size=1)):
        read(g, -1)


def test_any_string_is_a_source_even_empty(backend):
    forward, _ = new(1, element_shape=[])
    g = grad(forward, "")
    assert g.name == forward.name + "@"
    h = grad(forward, "outer/gradients")
    assert h.name == forward.name + "@outer/gradients"
    write(g, 0, f32(1))
    write(h, 0, f32(2))
    assert_same(read(g, 0), f32(1))
    assert_same(read(h, 0), f32(2))


def test_byte_sources_are_told_apart_by_their_bytes(backend):
    # TensorFlow's source attribute is bytes: b"\xff" and b"\xfe" (not UTF-8) are two sources,
    # b"abc" and "abc" one.
    forward, _ = new(1, element_shape=[])
    first, second = grad(forward, b"\xff"), grad(forward, b"\xfe")
    assert first.array is not second.array and grad(forward, b"\xff").array is first.array
    assert grad(forward, b"abc").array is grad(forward, "abc").array
    write(first, 0, f32(1))
    write(second, 0, f32(2))
    assert_same(read(first, 0), f32(1))
    assert_same(read(second, 0), f32(2))
    # Its string handle, [container, name] as bytes, names that array again.
    name = first.name.encode("utf-8", "surrogateescape")
    assert size([b"_tensor_array_grads", name]) == 1


def test_same_source_returns_the_same_array(backend):
    # TF test 14 (testSkipEagerTensorGradAccessTwiceReceiveSameObject).
    forward, _ = new(3, tensor_array_name="foo")
    g0 = grad(forward, "grad")
    g1 = grad(forward, "grad")
    assert g0.name == g1.name
    write(g0, 0, f32([[4.0, 5.0]]))
    assert_same(read(g1, 0), f32([[4.0, 5.0]]))


def test_different_sources_are_separate_accumulators(backend):
    forward, _ = new(2, element_shape=[2])
    write(forward, 0, f32([1, 1]))
    first = grad(forward, "gradients")
    second = grad(forward, "gradients_1")
    assert first.name != second.name
    write(first, 0, f32([1, 2]))
    write(first, 0, f32([10, 20]))
    write(second, 0, f32([5, 5]))
    assert_same(read(first, 0), f32([11, 22]))
    assert_same(read(second, 0), f32([5, 5]))
    assert_same(read(second, 1), f32([0, 0]))


def test_grad_array_and_forward_array_are_independent(backend):
    # TF test 11 (testSkipEagerTensorGradArrayWriteRead).
    forward, _ = new(3, tensor_array_name="foo")
    g = grad(forward, "grad")
    write(forward, 0, f32([[4.0, 5.0]]))
    write(forward, 1, f32([[1.0]]))
    write(forward, 2, f32(-3.0))
    write(g, 0, f32([[5.0, 6.0]]))
    write(g, 1, f32([[2.0]]))
    write(g, 2, f32(-2.0))
    assert_same(read(forward, 0), f32([[4.0, 5.0]]))
    assert_same(read(forward, 1), f32([[1.0]]))
    assert_same(read(forward, 2), f32(-3.0))
    assert_same(read(g, 0), f32([[5.0, 6.0]]))
    assert_same(read(g, 1), f32([[2.0]]))
    assert_same(read(g, 2), f32(-2.0))


def test_grad_of_a_dynamic_array_has_the_forward_size(backend):
    # TF test 13 (testSkipEagerTensorGradArrayDynamicWriteRead).
    forward, _ = new(0, tensor_array_name="foo", dynamic_size=True)
    write(forward, 0, f32([[4.0, 5.0]]))
    write(forward, 1, f32([[1.0]]))
    write(forward, 2, f32(-3.0))
    g = grad(forward, "grad")
    assert size(forward) == 3
    assert size(g) == 3
    write(g, 0, f32([[5.0, 6.0]]))
    write(g, 1, f32([[2.0]]))
    write(g, 2, f32(-2.0))
    assert_same(read(g, 1), f32([[2.0]]))


def test_grad_flow_out_is_a_fresh_zero(backend):
    forward, _ = new(2)
    result = ro.TensorArrayGradV3(forward, np.float32(7.0), "gradients")
    assert float(host(result.flow_out)) == 0.0
    assert result.flow_out.dtype == np.float32 and result.flow_out.shape == ()
    assert result.grad_handle is result[0]


# -- errors and their order ------------------------------------------------------------------------------
def test_grad_of_a_grad_is_wrong_input_container(backend):
    forward, _ = new(2)
    g = grad(forward, "gradients")
    with raises(errors.InvalidArgumentError, f"Wrong input container. _tensor_array_grads{g.name}"):
        grad(g, "gradients")
    with raises(errors.InvalidArgumentError, f"Wrong input container. _tensor_array_grads{g.name}"):
        grad_with_shape(g, [2], "other")


def test_wrong_input_container_is_checked_before_closed(backend):
    forward, _ = new(2)
    g = grad(forward)
    close(g)
    with raises(errors.InvalidArgumentError, f"Wrong input container. _tensor_array_grads{g.name}"):
        grad(g)


def test_grad_of_a_missing_array(backend):
    with pytest.raises(errors.NotFoundError):
        grad("no-such-array")


def test_grad_after_close_of_the_forward(backend):
    forward, _ = new(2)
    close(forward)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=forward.name)):
        grad(forward)


def test_grad_after_close_of_the_forward_even_when_the_grad_exists(backend):
    forward, _ = new(2)
    grad(forward, "gradients")
    close(forward)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=forward.name)):
        grad(forward, "gradients")


def test_closed_is_checked_before_the_prepend_shape(backend):
    forward, _ = new(2)
    close(forward)
    with raises(errors.InvalidArgumentError, CLOSED.format(name=forward.name)):
        grad_with_shape(forward, [-1])


@pytest.mark.parametrize("prepend, text", [(4, "[]"), ([[1]], "[1,1]"), (np.zeros((2, 1), np.int32), "[2,1]")])
def test_grad_with_shape_needs_a_vector(backend, prepend, text):
    forward, _ = new(2)
    with raises(errors.InvalidArgumentError, f"shape must be a vector of {{int32,int64}}, got shape {text}"):
        grad_with_shape(forward, prepend)


@pytest.mark.parametrize("prepend, bad", [([-1], -1), ([4, -2], -2), ([3, -5, -1], -5)])
def test_grad_with_shape_negative_dimension(backend, prepend, bad):
    forward, _ = new(2)
    with raises(errors.InvalidArgumentError, f"Dimension {bad} must be >= 0"):
        grad_with_shape(forward, prepend)


def test_grad_with_shape_prepend_is_validated_even_when_the_grad_exists(backend):
    forward, _ = new(2)
    grad(forward, "s")
    with raises(errors.InvalidArgumentError, "Dimension -1 must be >= 0"):
        grad_with_shape(forward, [-1], "s")


_BIG = 2**31 - 1
_TOO_MANY = "Shape {} would have more than 2**63 - 1 elements"     # TensorFlow's text, as TF 2.21 gives it


@pytest.mark.parametrize("element_shape, prepend, shown", [
    # the prefix alone (TensorShapeUtils::MakeShape), whatever the forward shape
    (None, [2**30] * 3, "[1073741824,1073741824,1073741824]"),
    ([0, 4], [_BIG, _BIG, 3], "[2147483647,2147483647,3]"),
    # prefix + element shape (Concatenate), counted in order up to the first unknown dimension
    ([4], [_BIG, _BIG], "[2147483647,2147483647,4]"),
    ([4, None], [_BIG, _BIG], "[2147483647,2147483647,4,?]"),
    ([2**20, 2**20], [2**30], "[1073741824,1048576,1048576]"),
])
def test_grad_with_shape_refuses_a_shape_past_int64_and_changes_nothing(backend, element_shape, prepend, shown):
    forward, _ = new(0, element_shape=element_shape, dynamic_size=True)
    with raises(errors.InvalidArgumentError, _TOO_MANY.format(shown)):
        grad_with_shape(forward, prepend)
    assert not forward.array.grads and forward.array.dynamic_size      # no gradient array, the size not locked


@pytest.mark.parametrize("element_shape, prepend", [([None, 4], [_BIG, _BIG]), ([2**30, None, 2**30], [1024])])
def test_grad_with_shape_counts_only_up_to_the_first_unknown_dimension(backend, element_shape, prepend):
    forward, _ = new(2, element_shape=element_shape)
    grad_with_shape(forward, prepend)
    assert len(forward.array.grads) == 1


@pytest.mark.parametrize("element_shape", [None, [None]])
def test_grad_with_shape_refuses_a_written_slot_past_int64(backend, element_shape):
    # D2: TensorFlow's CopyShapesFrom aborts the process (a CHECK) on [B,B] + a written [4].
    forward, _ = new(2, element_shape=element_shape)
    write(forward, 1, np.ones(4, np.float32))
    with raises(errors.InvalidArgumentError, _TOO_MANY.format("[2147483647,2147483647,4]")):
        grad_with_shape(forward, [_BIG, _BIG])
    assert not forward.array.grads
    g = grad_with_shape(forward, [2, 3])          # a valid prefix still works afterwards
    assert_same(read(g, 1), np.zeros((2, 3, 4), np.float32))


# -- existing grad arrays are returned as they are ------------------------------------------------------------
def test_existing_grad_is_returned_as_is_even_closed(backend):
    forward, _ = new(2, element_shape=[])
    g = grad(forward, "gradients")
    close(g)
    again = grad(forward, "gradients")
    assert again.name == g.name
    with raises(errors.InvalidArgumentError, CLOSED.format(name=g.name)):
        read(again, 0)


def test_existing_grad_ignores_another_prepend(backend):
    forward, _ = new(3, element_shape=[2, 3])
    first = grad_with_shape(forward, [4, 5], "source")
    second = grad(forward, "source")
    third = grad_with_shape(forward, [7], "source")
    assert first.name == second.name == third.name
    with pytest.raises(errors.InvalidArgumentError, match="Could not write to TensorArray"):
        write(second, 0, np.ones((2, 3), np.float32))
    with pytest.raises(errors.InvalidArgumentError, match="Could not write to TensorArray"):
        write(third, 0, np.ones((7, 2, 3), np.float32))
    value = np.arange(120, dtype=np.float32).reshape(4, 5, 2, 3)
    write(third, 0, value)
    assert_same(read(first, 0), value)


def test_existing_grad_keeps_its_own_soft_shapes(backend):
    # No re-copy of shapes: forward slots written after the grad was made stay unknown to it.
    forward, _ = new(2)
    write(forward, 0, f32([1, 2]))
    g = grad(forward)
    write(forward, 1, f32([1, 2, 3]))
    again = grad(forward)
    assert_same(read(again, 0), f32([0, 0]))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=1, shape="<unknown>")):
        read(again, 1)


# -- GradWithShape ------------------------------------------------------------------------------------------
def test_grad_with_shape_known_element_shape(backend):
    # TF test 21 (testSkipEagerTensorArrayGradWithShapeKnownElementShape).
    forward, _ = new(3, element_shape=[2, 3])
    g = grad_with_shape(forward, [4, 5], "source")
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=g.name, index=0, value="[2,3]",
                                                                 shape="[4,5,2,3]")):
        write(g, 0, np.random.default_rng(0).random((2, 3)).astype(np.float32))
    value = np.random.default_rng(1).random((4, 5, 2, 3)).astype(np.float32)
    write(g, 0, value)
    assert_same(read(g, 0), value)
    assert_same(read(g, 1), np.zeros((4, 5, 2, 3), np.float32))


def test_grad_with_shape_unknown_element_shape(backend):
    # TF test 22 (testSkipEagerTensorArrayGradWithShapeUnknownElementShape).
    forward, _ = new(3)
    g = grad_with_shape(forward, [4, 5], "source")
    value = np.random.default_rng(2).random((4, 5, 7)).astype(np.float32)
    write(g, 0, value)
    assert_same(read(g, 0), value)
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=1, shape="<unknown>")):
        read(g, 1)


def test_grad_with_shape_partial_element_shape(backend):
    forward, _ = new(2, element_shape=[None, 3])
    g = grad_with_shape(forward, [4], "source")
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=g.name, index=0, value="[2,3]",
                                                                 shape="[4,?,3]")):
        write(g, 0, np.ones((2, 3), np.float32))
    write(g, 0, np.ones((4, 2, 3), np.float32))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=1, shape="[4,?,3]")):
        read(g, 1)


def test_grad_with_shape_prefixes_the_soft_shapes(backend):
    forward, _ = new(3)
    write(forward, 1, np.ones((2, 3), np.float32))
    write(forward, 2, f32(1))
    g = grad_with_shape(forward, [4, 5])
    assert_same(read(g, 1), np.zeros((4, 5, 2, 3), np.float32))
    assert_same(read(g, 2), np.zeros((4, 5), np.float32))


def test_grad_with_empty_prepend_is_grad(backend):
    forward, _ = new(2, element_shape=[3])
    write(forward, 0, f32([1, 2, 3]))
    g = grad_with_shape(forward, np.zeros((0,), np.int32))
    assert_same(read(g, 0), np.zeros((3,), np.float32))
    assert_same(read(g, 1), np.zeros((3,), np.float32))


def test_grad_with_shape_accepts_int64_prepend(backend):
    forward, _ = new(1, element_shape=[2])
    g = grad_with_shape(forward, np.array([3], np.int64))
    assert_same(read(g, 0), np.zeros((3, 2), np.float32))


# -- attributes copied from the forward ------------------------------------------------------------------------
def test_grad_has_the_forward_dtype(backend):
    forward, _ = new(1, "int16", element_shape=[])
    g = grad(forward)
    with raises(errors.InvalidArgumentError, "TensorArray dtype is int16 but Op is trying to write dtype float."):
        write(g, 0, f32(1))
    with raises(errors.InvalidArgumentError, "TensorArray dtype is int16 but Op requested dtype float."):
        read(g, 0)


def test_grad_is_not_resizeable(backend):
    forward, _ = new(3, dynamic_size=True)
    g = grad(forward)
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=g.name, index=3, size=3)):
        write(g, 3, f32(1))
    with raises(errors.InvalidArgumentError, "Max scatter index must be < array size (3 vs. 3)"):
        scatter(g, [3], f32([1]))
    with raises(errors.InvalidArgumentError, SPLIT_COUNT.format(size=3, count=4)):
        split(g, f32([1, 2, 3, 4]), [1, 1, 1, 1])
    with raises(errors.InvalidArgumentError, SPLIT_COUNT.format(size=3, count=2)):
        split(g, f32([1, 2]), [1, 1])


def test_grad_always_clears_after_read(backend):
    forward, _ = new(2, clear_after_read=False, element_shape=[2])
    g = grad(forward)
    write(g, 0, f32([1, 2]))
    assert_same(read(g, 0), f32([1, 2]))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=g.name, index=0)):
        read(g, 0)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=g.name, index=0)):
        write(g, 0, f32([1, 2]))
    assert_same(read(g, 1), f32([0, 0]))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=g.name, index=1)):
        gather(g, [1])


def test_grad_copies_identical_element_shapes(backend):
    identical, _ = new(3, identical_element_shapes=True)
    g = grad(identical)
    write(g, 0, f32([1, 2, 3]))
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=g.name, index=1, value="[2]", shape="[3]")):
        write(g, 1, f32([1, 2]))
    free, _ = new(3)
    h = grad(free)
    write(h, 0, f32([1, 2, 3]))
    write(h, 1, f32([1, 2]))


def test_grad_element_shape_is_an_independent_copy(backend):
    forward, _ = new(3, identical_element_shapes=True)
    g = grad(forward)
    write(forward, 0, f32([1, 2]))           # the forward captures [2]; the grad does not see it
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=1, shape="<unknown>")):
        read(g, 1)
    write(g, 2, f32([1, 2, 3]))              # the grad captures [3]; the forward does not see it
    assert_same(read(forward, 1), f32([0, 0]))


# -- soft zero shapes (CopyShapesFrom) ------------------------------------------------------------------------
def test_soft_zeros_have_the_forward_slot_shape_even_with_unknown_element_shape(backend):
    forward, _ = new(3)
    write(forward, 0, np.ones((2, 3), np.float32))
    g = grad(forward)
    assert_same(read(g, 0), np.zeros((2, 3), np.float32))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=1, shape="<unknown>")):
        read(g, 1)


@pytest.mark.parametrize("dtype", NUMBER_DTYPES + ("bool",))
def test_soft_zeros_of_every_dtype(backend, dtype):
    forward, _ = new(2, dtype)
    write(forward, 1, np.ones((2,), dtype))
    g = grad(forward)
    assert_same(read(g, 1, dtype), np.zeros((2,), dtype))


def test_soft_zeros_of_forward_slots_of_different_shapes(backend):
    forward, _ = new(4)
    write(forward, 0, f32([1, 2]))
    write(forward, 1, f32([1, 2, 3]))
    write(forward, 3, np.ones((2, 2), np.float32))
    g = grad(forward)
    assert_same(read(g, 0), np.zeros((2,), np.float32))
    assert_same(read(g, 1), np.zeros((3,), np.float32))
    assert_same(read(g, 3), np.zeros((2, 2), np.float32))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=2, shape="<unknown>")):
        read(g, 2)


def test_soft_zeros_include_read_and_cleared_forward_slots(backend):
    forward, _ = new(3, element_shape=[2])
    write(forward, 0, f32([1, 2]))
    read(forward, 0)                      # written then read (cleared)
    read(forward, 1)                      # zero-read: written with the element shape
    g = grad(forward)
    assert_same(gather(g, [0, 1, 2]), np.zeros((3, 2), np.float32))


def test_forward_writes_after_the_grad_are_not_soft_in_it(backend):
    forward, _ = new(3)
    g = grad(forward)
    write(forward, 1, f32([1, 2]))
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=1, shape="<unknown>")):
        read(g, 1)


def test_gather_of_soft_slots(backend):
    forward, _ = new(12)
    for index in range(12):
        write(forward, index, f32([index, index]))
    g = grad(forward)
    write(g, 5, f32([1, 2]))
    expected = np.zeros((12, 2), np.float32)
    expected[5] = [1, 2]
    assert_same(gather(g, np.arange(12)), expected)


# -- size locking --------------------------------------------------------------------------------------------
def test_grad_locks_the_size_of_a_dynamic_forward(backend):
    forward, _ = new(0, dynamic_size=True)
    write(forward, 0, f32(1))
    write(forward, 1, f32(2))
    grad(forward)
    # TensorFlow's texts, then why an array made dynamic does not grow.
    fixed = "the array was made with dynamic_size=True: a gradient array of it, TensorArrayGradV3, fixed its size"
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=forward.name, index=2, size=2)) as raised:
        write(forward, 2, f32(3))
    assert fixed in str(raised.value)
    with raises(errors.InvalidArgumentError, "Max scatter index must be < array size (5 vs. 2)") as raised:
        scatter(forward, [5], f32([1]))
    assert fixed in str(raised.value)
    fixed_size, _ = new(2)
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=fixed_size.name, index=2, size=2)) as raised:
        write(fixed_size, 2, f32(3))
    assert "dynamic_size" not in str(raised.value)
    with raises(errors.InvalidArgumentError, SPLIT_COUNT.format(size=2, count=3)):
        split(forward, f32([1, 2, 3]), [1, 1, 1])
    assert size(forward) == 2


def test_grad_with_shape_locks_the_size_too(backend):
    forward, _ = new(1, dynamic_size=True)
    grad_with_shape(forward, [2])
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=forward.name, index=1, size=1)):
        write(forward, 1, f32(3))


def test_forward_writes_within_size_still_work_after_the_grad(backend):
    forward, _ = new(0, dynamic_size=True)
    write(forward, 3, f32(1))
    grad(forward)
    write(forward, 1, f32(2))
    scatter(forward, [0, 2], f32([5, 6]))
    assert_same(gather(forward, [0, 1, 2, 3]), f32([5, 2, 6, 1]))


# -- reads past the end of a grad array ---------------------------------------------------------------------
def test_grad_read_past_the_end_grows_with_zeros(backend):
    forward, _ = new(2, element_shape=[2])
    g = grad(forward)
    assert_same(read(g, 4), f32([0, 0]))
    assert size(g) == 5
    assert_same(read(g, 3), f32([0, 0]))
    assert_same(read(g, 2), f32([0, 0]))
    with raises(errors.InvalidArgumentError, CLEARED.format(name=g.name, index=4)):
        read(g, 4)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=g.name, index=3)):
        write(g, 3, f32([1, 1]))
    assert size(forward) == 2


def test_grown_grad_slots_are_soft_and_writable(backend):
    forward, _ = new(1, element_shape=[])
    g = grad(forward)
    read(g, 3)
    assert size(g) == 4
    write(g, 2, f32(5))                   # soft: an aggregating write stores it
    write(g, 2, f32(6))
    assert_same(read(g, 2), f32(11))
    # The element shape check (docs/semantics.md §2.2 step 7) precedes the aggregation rules (step 10).
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=g.name, index=1, value="[1]", shape="[]")):
        write(g, 1, f32([1]))


def test_grad_gather_past_the_end_grows(backend):
    forward, _ = new(2, element_shape=[3])
    g = grad(forward)
    assert_same(gather(g, [0, 6]), np.zeros((2, 3), np.float32))
    assert size(g) == 7
    assert_same(read(g, 5), np.zeros((3,), np.float32))


def test_grad_read_past_the_end_needs_a_full_element_shape(backend):
    forward, _ = new(2, element_shape=[None])
    g = grad(forward)
    with raises(errors.InvalidArgumentError, NOT_FULLY_DEFINED.format(name=g.name, index=4, shape="[?]")):
        read(g, 4)
    assert size(g) == 2


@pytest.mark.parametrize("width", [2, 64])
@pytest.mark.parametrize("reader", ["read", "gather"])
def test_grad_read_past_int32_slots_is_refused_as_too_many_slots(backend, width, reader):
    # D2: growth to 2**31 slots is refused for its count, whatever the memory: before the
    # slab's bytes are checked against the device's (the error would depend on the machine).
    forward, _ = new(1, element_shape=[width])
    g = grad(forward)
    last = 2**31 - 1
    with pytest.raises(errors.InvalidArgumentError, match=rf"Could not grow to {last + 1} slots: a TensorArray's "
                                                          rf"size is an int32, at most {last}"):
        read(g, last) if reader == "read" else gather(g, [0, last])
    assert size(g) == 1


def test_grad_read_of_negative_index(backend):
    forward, _ = new(2, element_shape=[2])
    g = grad(forward)
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=-1, size=2)):
        read(g, -1)


# -- aggregation (§4) --------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", NUMBER_DTYPES)
def test_grad_writes_3_4_5_aggregate_to_12(backend, dtype):
    # TF test 20 (testSkipEagerTensorArrayWriteGradientAddMultipleAdds).
    forward, _ = new(3, dtype, tensor_array_name="foo")
    g = grad(forward, "grad")
    c = lambda x: np.asarray(x, dtype=dtype)
    write(forward, 2, c(3.0))
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^TensorArray foo_\d+: Could not write to TensorArray index 2 because it has already "
                             r"been written to\."):
        write(forward, 2, c(4.0))
    for value in (3.0, 4.0, 5.0):
        write(g, 2, c(value))
    assert_same(read(g, 2, dtype), c(12.0))
    write(g, 1, c(1.0))
    with raises(errors.InvalidArgumentError, AGGREGATE_SHAPE.format(name=g.name, index=1, old="[]", new="[1]")):
        write(g, 1, c([1.0]))


@pytest.mark.parametrize("dtype", NUMBER_DTYPES)
def test_aggregation_sums_in_arrival_order_bitwise(backend, dtype):
    rng = np.random.default_rng(4)
    values = [sample(rng, dtype, (3, 4)) for _ in range(6)]
    forward, _ = new(2, dtype)
    g = grad(forward)
    for value in values:
        write(g, 1, value)
    expected = values[0].copy()
    for value in values[1:]:
        expected = (expected + value).astype(dtype)
    assert_same(read(g, 1, dtype), expected)


def test_first_write_to_a_soft_slot_stores_without_adding(backend):
    # Storing keeps -0.0; 0.0 + -0.0 would give +0.0.
    forward, _ = new(2)
    write(forward, 0, f32([1, 1]))
    g = grad(forward)
    write(g, 0, f32([-0.0, 2.0]))
    write(g, 1, f32(-0.0))                       # an unwritten slot: a plain first write
    result = host(read(g, 0))
    assert np.signbit(result[0]) and result[1] == 2.0
    assert np.signbit(host(read(g, 1)))


def test_aggregation_shape_must_match_the_soft_shape(backend):
    forward, _ = new(2)
    write(forward, 1, f32(3.0))
    g = grad(forward)
    with raises(errors.InvalidArgumentError, AGGREGATE_SHAPE.format(name=g.name, index=1, old="[]", new="[1]")):
        write(g, 1, f32([1.0]))


@pytest.mark.parametrize("old, new_shape, old_text, new_text", [
    ((2,), (3,), "[2]", "[3]"),
    ((2, 1), (1, 2), "[2,1]", "[1,2]"),      # same element count: still no reshaping
    ((1,), (4,), "[1]", "[4]"),              # no broadcasting
    ((2, 3), (2, 3, 1), "[2,3]", "[2,3,1]"),
])
def test_aggregation_shape_mismatch(backend, old, new_shape, old_text, new_text):
    forward, _ = new(3)
    g = grad(forward)
    write(g, 2, np.ones(old, np.float32))
    with raises(errors.InvalidArgumentError, AGGREGATE_SHAPE.format(name=g.name, index=2, old=old_text,
                                                                    new=new_text)):
        write(g, 2, np.ones(new_shape, np.float32))
    assert_same(read(g, 2), np.ones(old, np.float32))       # the failed write changed nothing


def test_bool_aggregation_is_not_supported(backend):
    forward, _ = new(2, "bool")
    g = grad(forward)
    write(g, 0, np.array([True, False]))
    with raises(errors.InvalidArgumentError, "tensor_array::AddToTensor type not supported: bool"):
        write(g, 0, np.array([True, True]))
    assert_same(read(g, 0, "bool"), np.array([True, False]))


def test_bool_write_into_a_soft_slot_is_stored(backend):
    forward, _ = new(2, "bool")
    write(forward, 0, np.array([True, False]))
    g = grad(forward)
    write(g, 0, np.array([False, True]))
    assert_same(read(g, 0, "bool"), np.array([False, True]))


def test_bool_aggregation_of_zero_element_values_is_stored(backend):
    forward, _ = new(1, "bool")
    g = grad(forward)
    write(g, 0, np.zeros((0, 3), bool))
    write(g, 0, np.zeros((0, 3), bool))
    assert_same(read(g, 0, "bool"), np.zeros((0, 3), bool))


def test_bool_scatter_with_duplicates_fails(backend):
    forward, _ = new(3, "bool")
    g = grad(forward)
    with raises(errors.InvalidArgumentError, "tensor_array::AddToTensor type not supported: bool"):
        scatter(g, [1, 0, 1], np.array([True, True, False]))


def test_aggregation_into_zero_element_value_stores(backend):
    forward, _ = new(1)
    g = grad(forward)
    write(g, 0, np.zeros((0,), np.float32))
    write(g, 0, np.zeros((0,), np.float32))
    assert_same(read(g, 0), np.zeros((0,), np.float32))


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128", "int32", "int64",
                                   "uint8"])
@pytest.mark.parametrize("count", [3, 9, 200])
def test_scatter_duplicates_sum_like_np_add_at(backend, dtype, count):
    rng = np.random.default_rng(count)
    slots = 7
    indices = rng.integers(0, slots, size=count)
    values = sample(rng, dtype, (count, 5))
    forward, _ = new(slots, dtype, element_shape=[5])
    g = grad(forward)
    scatter(g, indices, values)
    reference = np.zeros((slots, 5), dtype)
    np.add.at(reference, indices, values)
    assert_same(gather(g, np.arange(slots), dtype), reference)


@pytest.mark.parametrize("count", [4, 50])
def test_scatter_adds_to_existing_values_in_order(backend, count):
    rng = np.random.default_rng(12)
    slots = 5
    first = sample(rng, "float32", (slots, 3))
    indices = rng.integers(0, slots, size=count)
    values = sample(rng, "float32", (count, 3))
    forward, _ = new(slots)
    for index in range(slots):
        write(forward, index, np.ones(3, np.float32))
    g = grad(forward)
    scatter(g, np.arange(slots), first)
    scatter(g, indices, values)
    reference = [first[i].copy() for i in range(slots)]        # a sequential Python loop
    for index, value in zip(indices.tolist(), values):
        reference[index] = reference[index] + value
    assert_same(gather(g, np.arange(slots)), np.stack(reference))


def test_scatter_duplicates_of_tf_section_4(backend):
    forward, _ = new(2, element_shape=[])
    g = grad(forward)
    scatter(g, [0, 0, 1], f32([1, 2, 3]))
    assert_same(gather(g, [0, 1]), f32([3, 3]))


def test_split_into_a_grad_array_aggregates(backend):
    forward, _ = new(0, dynamic_size=True)
    split(forward, f32([1, 2, 3]), [2, 1])
    g = grad(forward)
    split(g, f32([1, 2, 3]), [2, 1])
    split(g, f32([10, 20, 30]), [2, 1])
    assert_same(concat(g).value, f32([11, 22, 33]))


def test_split_on_a_grad_array_does_not_change_its_marked_size(backend):
    forward, _ = new(0, dynamic_size=True)
    split(forward, f32([1, 2, 3]), [2, 1])
    write(forward, 2, f32([4, 5]))
    g = grad(forward)                       # size 3, marked size 2
    split(g, f32([1, 2, 3, 4, 5]), [2, 1, 2])
    value, lengths = concat(g)
    assert_same(value, f32([1, 2, 3]))
    assert_same(lengths, np.array([2, 1], np.int64))


# -- Concat of grad arrays: the forward's marked size at grad creation ----------------------------------------
def test_grad_concat_uses_the_marked_size(backend):
    forward, _ = new(0, dynamic_size=True)
    split(forward, f32([1, 2, 3, 4]), [1, 2, 1])
    write(forward, 3, f32([5]))
    write(forward, 4, f32([6]))
    g = grad(forward)
    assert size(g) == 5
    write(g, 0, f32([7]))
    value, lengths = concat(g)
    assert_same(value, f32([7, 0, 0, 0]))
    assert_same(lengths, np.array([1, 2, 1], np.int64))


def test_grad_concat_marked_size_is_taken_at_grad_creation(backend):
    forward, _ = new(3)
    g = grad(forward)                      # marked size -1 now
    split(forward, f32([1, 2, 3]), [1, 1, 1])
    write(g, 0, f32([1]))
    with pytest.raises(errors.InvalidArgumentError):
        concat(g)


def test_grad_concat_of_marked_size_zero(backend):
    forward, _ = new(0, dynamic_size=True)
    split(forward, np.zeros((0, 2), np.float32), np.zeros((0,), np.int64))
    write(forward, 0, f32([[1, 2]]))
    g = grad(forward)
    value, lengths = concat(g, element_shape_except0=[2])
    assert_same(value, np.zeros((0, 2), np.float32))
    assert_same(lengths, np.zeros((0,), np.int64))


# -- gradient scenarios of TF's tests, replayed op by op ------------------------------------------------------
def test_gradient_of_two_reads_of_one_slot_aggregates(backend):
    # TF tests 24 and 27: read(0) twice (clear_after_read=False) -> the grads of both reads add.
    forward, flow = new(2, clear_after_read=False)
    value = f32([[1.0, -1.0], [10.0, -10.0]])
    flow = scatter(forward, [0, 1], value, flow)
    g = grad(forward, "gradients", flow)
    write(g, 0, f32([2.0, 3.0]))          # grad of r0
    write(g, 0, f32([-1.5, 1.5]))         # grad of r0_1
    write(g, 1, f32([4.0, 5.0]))          # grad of r1
    assert_same(gather(g, [0, 1]), f32([[2.0 - 1.5, 3.0 + 1.5], [4.0, 5.0]]))


def test_gradient_of_unread_components_is_zero(backend):
    # TF test 48: unstack [2, 3], read only 0 -> gradient [1, 0].
    forward, flow = new(2, identical_element_shapes=True)
    flow = scatter(forward, [0, 1], f32([2.0, 3.0]), flow)
    read(forward, 0)
    g = grad(forward, "gradients", flow)
    write(g, 0, f32(1.0))
    assert_same(gather(g, [0, 1]), f32([1.0, 0.0]))


def test_gradient_of_split_dynamic_concat(backend):
    # TF test 51 (testSkipEagerTensorArraySplitDynamic): the grad concat uses marked size 3.
    forward, flow = new(3, dynamic_size=True, identical_element_shapes=True)
    x = f32([1.0, 2.0, 3.0])
    flow = split(forward, x, [1, 1, 1], flow)
    flow = write(forward, 3, f32([4.0]), flow)
    r, lengths = concat(forward)
    assert_same(r, f32([1.0, 2.0, 3.0, 4.0]))
    g = grad(forward, "gradients", flow)
    split(g, np.ones(4, np.float32), host(lengths))       # concat's gradient
    assert_same(concat(g).value, f32([1.0, 1.0, 1.0]))     # split's gradient


def test_gradient_of_unstack_dynamic_stack(backend):
    # TF test 50 (testSkipEagerTensorArrayUnpackDynamic).
    forward, flow = new(3, dynamic_size=True, identical_element_shapes=True)
    flow = scatter(forward, [0, 1, 2], f32([1.0, 2.0, 3.0]), flow)
    flow = write(forward, 3, f32(4.0), flow)
    r = gather(forward, np.arange(size(forward)), element_shape=[])
    assert_same(r, f32([1.0, 2.0, 3.0, 4.0]))
    g = grad(forward, "gradients", flow)
    scatter(g, np.arange(4), np.ones(4, np.float32))       # stack's gradient
    assert_same(gather(g, [0, 1, 2], element_shape=[]), f32([1.0, 1.0, 1.0]))   # unstack's gradient


def test_gradient_of_scatter_partial_read(backend):
    # TF test 58: scatter to [1, 8], read only 1 -> the row for 8 is zeros.
    forward, flow = new(0, dynamic_size=True, identical_element_shapes=True)
    flow = scatter(forward, [1, 8], f32([[1.0, -1.0], [10.0, -10.0]]), flow)
    assert_same(read(forward, 1), f32([1.0, -1.0]))
    g = grad(forward, "gradients", flow)
    write(g, 1, f32([2.0, 3.0]))
    assert_same(gather(g, [1, 8]), f32([[2.0, 3.0], [0.0, 0.0]]))


def test_gradient_of_write_gather(backend):
    # TF test 60: unstack 10 rows, gather [1, 8] -> gradient zero except rows 1 and 8.
    forward, flow = new(0, dynamic_size=True, identical_element_shapes=True)
    values = np.array([[1.0 * x, -1.0 * x] for x in range(10)], np.float32)
    flow = scatter(forward, np.arange(10), values, flow)
    assert_same(gather(forward, [1, 8]), f32([[1.0, -1.0], [8.0, -8.0]]))
    g = grad(forward, "gradients", flow)
    scatter(g, [1, 8], f32([[2.0, 3.0], [4.0, 5.0]]))
    expected = np.zeros((10, 2), np.float32)
    expected[1] = [2.0, 3.0]
    expected[8] = [4.0, 5.0]
    assert_same(gather(g, np.arange(10)), expected)


def test_gradient_of_pack_read_and_concat_sums(backend):
    # TF test 25: the gradients of stack, read(0) and concat all land in one grad array.
    forward, flow = new(2, clear_after_read=False, identical_element_shapes=True)
    flow = write(forward, 0, f32([-1.0, 1.0]), flow)
    flow = write(forward, 1, f32([-10.0, 10.0]), flow)
    gather(forward, [0, 1])
    read(forward, 0)
    _, lengths = concat(forward)
    g = grad(forward, "gradients", flow)
    scatter(g, [0, 1], f32([[2.0, 3.0], [4.0, 5.0]]))      # stack's gradient
    write(g, 0, f32([-0.5, 1.5]))                           # read(0)'s gradient
    split(g, f32([20.0, 30.0, 40.0, 50.0]), host(lengths))  # concat's gradient
    assert_same(read(g, 0), f32([2.0 - 0.5 + 20.0, 3.0 + 1.5 + 30.0]))
    assert_same(read(g, 1), f32([4.0 + 40.0, 5.0 + 50.0]))


def test_two_gradient_computations_do_not_double_count(backend):
    forward, flow = new(2, identical_element_shapes=True, clear_after_read=False)
    flow = scatter(forward, [0, 1], f32([[1, 2], [3, 4]]), flow)
    for source in ("gradients", "gradients_1"):
        g = grad(forward, source, flow)
        write(g, 0, f32([1, 1]))
        assert_same(gather(g, [0, 1]), f32([[1, 1], [0, 0]]))


# -- aggregation never touches the caller's arrays; grad arrays of several shapes --------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int64", "complex128"])
def test_aggregation_leaves_the_written_values_alone(backend, dtype):
    forward, _ = new(2, dtype)
    g = grad(forward)
    first = np.ones((3,), dtype)
    second = np.full((3,), 2, dtype)
    write(g, 0, first)
    write(g, 0, second)
    write(g, 0, second)
    assert_same(read(g, 0, dtype), np.full((3,), 5, dtype))
    assert_same(first, np.ones((3,), dtype))
    assert_same(second, np.full((3,), 2, dtype))


def test_scatter_aggregation_leaves_the_value_alone(backend):
    forward, _ = new(3, element_shape=[2])
    g = grad(forward)
    value = f32([[1, 1], [2, 2], [3, 3]])
    scatter(g, [0, 0, 1], value)
    scatter(g, [0, 1, 1], value)
    assert_same(value, f32([[1, 1], [2, 2], [3, 3]]))
    assert_same(gather(g, [0, 1, 2]), f32([[4, 4], [8, 8], [0, 0]]))


@pytest.mark.parametrize("count", [3, 12])
def test_grad_scatter_with_duplicates_into_soft_slots_of_several_shapes(backend, count):
    forward, _ = new(4)
    write(forward, 0, f32([1]))
    write(forward, 2, f32([1]))
    write(forward, 1, f32([1, 2]))
    g = grad(forward)
    indices = [(0, 2)[k % 2] for k in range(count)]
    values = np.arange(count, dtype=np.float32).reshape(count, 1)
    scatter(g, indices, values)
    reference = {0: np.zeros(1, np.float32), 2: np.zeros(1, np.float32)}
    for index, value in zip(indices, values):
        reference[index] = reference[index] + value
    assert_same(read(g, 0), reference[0])
    assert_same(read(g, 2), reference[2])
    assert_same(read(g, 1), f32([0, 0]))


@pytest.mark.parametrize("count", [3, 10])
def test_grad_split_into_a_grad_array_of_several_shapes(backend, count):
    forward, _ = new(count)
    g = grad(forward)
    write(g, 0, f32([1]))
    write(g, 1, f32([1, 2]))
    with raises(errors.InvalidArgumentError, AGGREGATE_SHAPE.format(name=g.name, index=0, old="[1]", new="[2]")):
        split(g, np.ones(2 * count, np.float32), [2] * count)
    lengths = [1, 2] + [2] * (count - 2)
    split(g, np.ones(sum(lengths), np.float32), lengths)
    assert_same(read(g, 0), f32([2]))
    assert_same(read(g, 1), f32([2, 3]))
    assert_same(read(g, count - 1), f32([1, 1]))


# -- the aggregating scatter's common case (storage.try_add) against the checked op ---------------------------------
def _valued_grad(backend, slots=6, width=3, covered=None):
    """A gradient array with real flows (what the common-case path takes), slots [0, covered) valued."""
    forward, flow = ro.TensorArrayV3(slots, "float32", element_shape=[width])
    g, g_flow = ro.TensorArrayGradV3(forward, flow, "gradients")
    covered = slots if covered is None else covered
    g_flow = ro.TensorArrayScatterV3(g, np.arange(covered), backend.asarray(np.ones((covered, width), np.float32)),
                                     g_flow)
    return g, g_flow


def _snapshot(handle):
    """Every slot's state, read without marking anything read (a read would end the common case)."""
    states = [handle.array.slot_state(index) for index in range(handle.array.size)]
    return [(state[:5], None if state.value is None else host(state.value).tolist()) for state in states]


def _outcome(call, name):
    try:
        call()
    except Exception as error:      # noqa: BLE001 -- the class and text are what is compared
        # A name handle's messages say which array less often (about(owner) in errors.py).
        return type(error), str(error).replace(name, "{name}").replace(" (TensorArray {name})", "")
    return None


_BAD_SCATTERS = {
    "negative index": (lambda n: np.array([0, -1]), None, None),
    "index at size": (lambda n: np.array([0, n]), None, None),
    "int64 past int32": (lambda n: np.array([0, 2**40]), None, None),
    "int64 past int32 and a bad flow": (lambda n: np.array([0, 2**40]), None, "not a flow"),
    "a bad flow": (lambda n: np.array([0, 1]), None, "not a flow"),
    "indices of rank 2": (lambda n: np.array([[0, 1]]), None, None),
    "fewer rows than indices": (lambda n: np.array([0, 1, 2]), (2, 3), None),
    "another row shape": (lambda n: np.array([0, 1]), (2, 4), None),
    "float64 rows": (lambda n: np.array([0, 1]), "float64", None),
    "an unwritten slot": (lambda n: np.array([0, n - 1]), None, None),
}


@pytest.mark.parametrize("case", sorted(_BAD_SCATTERS))
def test_the_common_case_path_fails_exactly_as_the_checked_op(backend, case):
    """The same scatter by handle (which may take the common-case path) and by name (which
    never does): the same error class and text, and neither changes the array."""
    make_indices, rows, bad_flow = _BAD_SCATTERS[case]
    outcomes, contents = [], []
    for by_name in (False, True):
        g, g_flow = _valued_grad(backend, covered=5)
        shape, dtype = (rows, "float32") if isinstance(rows, tuple) else ((2, 3), rows or "float32")
        value = backend.asarray(np.ones(shape, dtype))
        before = _snapshot(g)
        outcomes.append(_outcome(lambda: ro.TensorArrayScatterV3(g.name if by_name else g, make_indices(6), value,
                                                                 bad_flow or g_flow), g.name))
        contents.append((before, _snapshot(g)))
    if case == "an unwritten slot":     # not an error: the checked op writes the unwritten slot
        assert outcomes == [None, None]
        return
    assert outcomes[0] is not None and outcomes[0] == outcomes[1]
    for before, after in contents:
        assert after == before


def test_the_common_case_path_adds_like_np_add_at_then_refuses_after_a_read(backend):
    rng = np.random.default_rng(11)
    g, g_flow = _valued_grad(backend, slots=8, width=4)
    expected = np.ones((8, 4), np.float32)
    for _ in range(3):
        indices = rng.integers(0, 8, size=20)
        rows = rng.standard_normal((20, 4), dtype=np.float32)
        ro.TensorArrayScatterV3(g, indices, backend.asarray(rows), g_flow)
        np.add.at(expected, indices, rows)
    assert_same(np.array([values for _, values in _snapshot(g)], np.float32), expected)
    ro.TensorArrayReadV3(g, 3, g_flow, "float32")
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=g.name, index=3)):
        ro.TensorArrayScatterV3(g, np.array([0, 3]), backend.asarray(np.ones((2, 4), np.float32)), g_flow)


@pytest.mark.parametrize("size", [8, 200_000])          # slots counted per slot, or found by a sort
def test_a_lone_first_arrival_keeps_its_subnormals_beside_repeated_ones(backend, size):
    """One scatter into a fresh gradient array: a slot that gets one row stores it, every bit
    (TensorFlow stores a first arrival); a slot that gets two adds them, flushing subnormals
    (TensorFlow's CPU adds do)."""
    tiny = np.finfo(np.float32).smallest_subnormal
    handle, flow = ro.TensorArrayV3(size=size, dtype="float32", element_shape=[2])
    grad_handle, flow = ro.TensorArrayGradV3(handle=handle, flow_in=flow, source="gradients")
    rows = np.array([[3 * tiny, 1.0], [5 * tiny, -tiny], [2 * tiny, 2.0]], np.float32)
    last = size - 1
    flow = ro.TensorArrayScatterV3(handle=grad_handle, indices=np.array([last, 3, last], np.int32), value=rows,
                                   flow_in=flow)
    lone = gta.to_numpy(ro.TensorArrayReadV3(handle=grad_handle, index=3, flow_in=flow, dtype="float32"))
    added = gta.to_numpy(ro.TensorArrayReadV3(handle=grad_handle, index=last, flow_in=flow, dtype="float32"))
    assert lone.tobytes() == rows[1].tobytes()
    assert added.tolist() == [0.0, 3.0] and not np.signbit(added[0])
