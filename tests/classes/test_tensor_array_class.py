"""The pythonic ``gpu_tensorarray.TensorArray``: tf.TensorArray's constructor and methods with
``_GraphTensorArray`` semantics (docs/semantics.md §5.4), and TF's own test scenarios
(tensor_array_ops_test.py, docs/semantics.md §7) that apply to the V3 kernels.

TF's graph tests evaluate several fetches in separate session runs, each with fresh
resources; where a scenario does that, it is replayed here on a fresh array per fetch.
"""

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import TensorArray, errors
from gpu_tensorarray import raw_ops as ro
from ta_conformance_util import (
    ALREADY_READ, ALREADY_WRITTEN, CLEARED, CLOSED, INCOMPATIBLE, NUMBER_DTYPES, READ_BOUNDS, SPLIT_COUNT, WRITE_BOUNDS,
    assert_same, f32, host, name_number, raises,
)

CONVERT_DTYPES = ("float32", "float64", "int32", "int64", "complex64", "complex128", "float16", "int8", "uint16",
                  "bool")


def convert(dtype):
    """TF's _make_converter: cast, and give complex values an imaginary part."""
    def _convert(x):
        x = np.asarray(x).astype(dtype)
        if np.dtype(dtype).kind == "c":
            x = x - 1j * x
        return x
    return _convert


# -- properties and method results --------------------------------------------------------------------------
def test_properties(backend):
    ta = TensorArray("float32", size=3, element_shape=[None, 2])
    assert ta.dtype == np.float32
    assert ta.element_shape == (None, 2)
    assert ta.dynamic_size is False
    assert isinstance(ta.flow, backend.array_type) and ta.flow.dtype == np.float32 and ta.flow.shape == ()
    assert ta.handle.name.startswith("TensorArrayV3_")
    dyn = TensorArray(np.int64, size=0, dynamic_size=True)
    assert dyn.dtype == np.int64 and dyn.dynamic_size is True and dyn.element_shape is None


def test_tensor_array_name(backend):
    ta = TensorArray("float32", size=1, tensor_array_name="foo")
    name_number(ta.handle.name, "foo")


def test_write_returns_a_new_array_sharing_the_handle(backend):
    ta = TensorArray("float32", size=2)
    w = ta.write(0, [1.0, 2.0])
    assert isinstance(w, TensorArray) and w is not ta
    assert w.handle is ta.handle
    assert w.dtype == ta.dtype
    # The old object is the same resource: it sees the write.
    assert_same(ta.read(0), f32([1.0, 2.0]))


@pytest.mark.parametrize("method, args", [
    ("write", (0, [1.0, 2.0])),
    ("scatter", ([0, 1], [[1.0, 2.0], [3.0, 4.0]])),
    ("unstack", ([[1.0, 2.0], [3.0, 4.0]],)),
    ("split", ([[1.0, 2.0], [3.0, 4.0]], [1, 1])),
])
def test_mutating_methods_return_new_arrays_with_a_float32_flow(backend, method, args):
    ta = TensorArray("float32", size=2)
    result = getattr(ta, method)(*args)
    assert isinstance(result, TensorArray) and result is not ta
    assert result.handle is ta.handle
    assert isinstance(result.flow, backend.array_type)
    assert result.flow.dtype == np.float32 and result.flow.shape == ()


def test_identity_keeps_handle_flow_dtype_and_values(backend):
    # TF test 64 (testTensorArrayIdentity), minus the control dependencies.
    ta0 = TensorArray("float32", size=2, infer_shape=False).write(0, 0.0)
    ta1 = TensorArray("int32", size=4, infer_shape=True).write(0, 1)
    i0, i1 = ta0.identity(), ta1.identity()
    assert i0.handle is ta0.handle and i1.handle is ta1.handle
    assert float(host(i0.flow)) == float(host(ta0.flow))
    assert i0.dtype == np.float32 and i1.dtype == np.int32
    assert_same(i0.read(0), f32(0.0))
    assert_same(i1.read(0), np.int32(1))
    assert int(host(i0.size())) == 2 and int(host(i1.size())) == 4


def test_python_values_take_the_array_dtype(backend):
    ta = TensorArray("float16", size=2).write(0, [1, 2])
    assert_same(ta.read(0), np.array([1, 2], np.float16))
    ta = TensorArray("int64", size=1).unstack([2**40])
    assert_same(ta.read(0), np.int64(2**40))


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("dtype, value", [("uint8", 3), ("uint16", [1, 2]), ("uint64", 2**63), ("int32", []),
                                          ("bool", []), ("int8", [[], []]), ("uint32", [])])
def test_python_ints_convert_to_unsigned_and_empty_lists_to_any_dtype(backend, mode, dtype, value):
    """As TensorFlow's convert_to_tensor(value, dtype) (NumPy sees int64 and float64 there)."""
    ta = TensorArray(dtype, size=1, mode=mode).write(0, value)
    assert_same(ta.read(0), np.array(value, dtype))


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("dtype, value", [("uint8", 256), ("uint8", -1), ("uint64", [2**64])])
def test_python_values_that_do_not_fit_are_refused_never_wrapped(backend, mode, dtype, value):
    with pytest.raises(errors.InvalidArgumentError, match="Cannot convert"):
        TensorArray(dtype, size=1, mode=mode).write(0, value)


@pytest.mark.parametrize("dtype, value, written", [("bool", [1], "int32"), ("int32", [1.5], "float"),
                                                   ("int8", 1.5, "float"), ("half", 1 + 2j, "complex128"),
                                                   ("bfloat16", 1 + 2j, "complex128"), ("uint8", -1.0, "float")])
def test_a_python_value_of_another_kind_is_refused_in_tensorflows_words(backend, dtype, value, written):
    # TensorFlow converts the value to its own dtype (a Python float to float32) and refuses that:
    # TF1's class in the op's words, tf.function's TF2 class in the list's (checked on TF 2.21).
    if dtype == "bfloat16":
        pytest.importorskip("ml_dtypes")
    name = "half" if dtype == "half" else dtype
    with pytest.raises(errors.InvalidArgumentError, match=rf"^TensorArray dtype is {name} but Op is trying to write "
                                                          rf"dtype {written}\."):
        TensorArray("float16" if dtype == "half" else dtype, size=1).write(0, value)
    with pytest.raises(errors.InvalidArgumentError, match=rf"^TensorArray TensorArrayV2_\d+: Invalid data types; op "
                                                          rf"elements {written} but list elements {name} "
                                                          rf"\(TensorArray.write at index 0, mode 'tf2'\)"):
        TensorArray("float16" if dtype == "half" else dtype, size=1, mode="tf2").write(0, value)


def test_arrays_keep_their_own_dtype(backend):
    ta = TensorArray("float32", size=1)
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray dtype is float but Op is trying to write "
                                                          r"dtype int32\."):
        ta.write(0, np.array([1], np.int32))


def test_size_of_a_static_array_is_a_constant_even_after_close(backend):
    # _GraphTensorArray.size() never runs SizeV3 for non-dynamic arrays (TF test 31 for the value).
    ta = TensorArray("float32", size=3, tensor_array_name="foo")
    assert int(host(ta.size())) == 3
    ta.close()
    assert int(host(ta.size())) == 3


def test_size_of_a_dynamic_array_runs_the_op(backend):
    ta = TensorArray("float32", size=0, dynamic_size=True)
    ta = ta.write(4, 1.0)
    assert int(host(ta.size())) == 5
    ta.close()
    with pytest.raises(errors.InvalidArgumentError, match="has already been closed"):
        ta.size()


def test_stack_gather_concat_methods(backend):
    ta = TensorArray("float32", size=3, clear_after_read=False)
    ta = ta.unstack([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    assert_same(ta.stack(), f32([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert_same(ta.gather([2, 0]), f32([[5.0, 6.0], [1.0, 2.0]]))
    assert_same(ta.concat(), f32([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]))


def test_close_method(backend):
    ta = TensorArray("float32", size=2).write(0, 1.0)
    assert ta.close() is None
    with raises(errors.InvalidArgumentError, CLOSED.format(name=ta.handle.name)):
        ta.read(0)


def test_unstack_of_a_scalar_fails(backend):
    ta = TensorArray("float32", size=1)
    with pytest.raises(errors.OpError):
        ta.unstack(1.0)


# -- grad ------------------------------------------------------------------------------------------------
def test_grad_same_source_same_array(backend):
    ta = TensorArray("float32", size=3, tensor_array_name="foo")
    g0 = ta.grad("grad")
    g1 = ta.grad("grad")
    assert g0.handle.name == g1.handle.name == ta.handle.name + "@grad"
    g0.write(0, [[4.0, 5.0]])
    assert_same(g1.read(0), f32([[4.0, 5.0]]))


def test_grad_flow_is_the_flow_given(backend):
    ta = TensorArray("float32", size=1).write(0, 1.0)
    g = ta.grad("gradients", flow=np.float32(3.0))
    assert isinstance(g.flow, backend.array_type) and g.flow.dtype == np.float32 and g.flow.shape == ()
    assert float(host(g.flow)) == 3.0
    h = ta.grad("gradients_1")
    assert float(host(h.flow)) == float(host(ta.flow))


def test_grad_of_grad_fails(backend):
    ta = TensorArray("float32", size=1)
    g = ta.grad("gradients")
    with pytest.raises(errors.InvalidArgumentError, match="^Wrong input container"):
        g.grad("gradients")


def test_grad_size_runs_the_op(backend):
    ta = TensorArray("float32", size=2, element_shape=[2])
    g = ta.grad("gradients")
    g.read(6)
    assert int(host(g.size())) == 7


def test_grad_locks_a_dynamic_forward(backend):
    ta = TensorArray("float32", size=0, dynamic_size=True).write(1, 1.0)
    ta.grad("gradients")
    with raises(errors.InvalidArgumentError, WRITE_BOUNDS.format(name=ta.handle.name, index=2, size=2)):
        ta.write(2, 1.0)


@pytest.mark.parametrize("flow", [[1.0, 2.0], "x", None.__class__], ids=["vector", "str", "type"])
def test_grad_with_a_refused_flow_changes_nothing(backend, flow):
    # The flow is checked before the op runs (TensorFlow converts it first; a vector it takes, we refuse):
    # no gradient array, the size not locked.
    ta = TensorArray("float32", size=0, dynamic_size=True).write(0, [1.0, 2.0])
    with pytest.raises(errors.InvalidArgumentError, match="^flow_in must be a") as caught:
        ta.grad("gradients", flow=flow)
    assert str(caught.value).endswith(f" (TensorArray {ta.handle.name})")
    assert dict(ta.handle.array.grads) == {}
    ta = ta.write(5, [3.0, 4.0])            # still dynamic
    assert int(host(ta.size())) == 6
    assert ta.grad("gradients").handle.name == ta.handle.name + "@gradients"


@pytest.mark.parametrize("how", ["write", "scatter", "unstack", "split"])
def test_a_grad_made_before_the_forward_knew_its_shape_checks_values_against_it(backend, how):
    # TensorFlow's class: a gradient TensorArray shares its forward's element shape, and
    # checks each value against it before the op (_check_element_shape; a split's only when
    # its pieces are equal: unequal ones go to the op, whose argument checks come first).
    ta = TensorArray("float32", size=2)
    g = ta.grad("gradients")
    ta = ta.write(0, f32([1, 2]))
    assert g.element_shape == (2,)
    bad = {"write": lambda: g.write(1, f32([1, 2, 3])), "scatter": lambda: g.scatter([1], f32([[1, 2, 3]])),
           "unstack": lambda: g.unstack(f32([[1, 2, 3], [4, 5, 6]])),
           "split": lambda: g.split(f32([1, 2, 3, 4, 5, 6]), [3, 3])}[how]
    index, value = {"write": (1, "[3]"), "scatter": (1, "[3]"), "unstack": (0, "[3]"), "split": (0, "[3]")}[how]
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=g.handle.name, index=index, value=value,
                                                                 shape="[2]")):
        bad()
    assert not g.handle.array.slot_state(0).written and not g.handle.array.slot_state(1).written
    g.write(1, f32([5, 6]))                      # a value of the shared shape goes in
    assert_same(g.read(1), f32([5, 6]))


# -- constructor argument errors (_GraphTensorArray) -------------------------------------------------------------
def existing():
    handle, flow = ro.TensorArrayV3(2, "float32")
    return handle, flow


def test_wrapping_an_existing_handle(backend):
    handle, flow = existing()
    ro.TensorArrayWriteV3(handle, 0, f32(3.0), flow)
    ta = TensorArray("float32", handle=handle, flow=flow)
    assert ta.handle is handle
    assert_same(ta.read(0), f32(3.0))


def test_constructor_needs_size_or_handle(backend):
    with pytest.raises(ValueError):
        TensorArray("float32")


@pytest.mark.parametrize("extra", [
    {"size": 2}, {"element_shape": [2]}, {"dynamic_size": True}, {"dynamic_size": False},
    {"clear_after_read": False}, {"tensor_array_name": "foo"},
], ids=str)
def test_constructor_rejects_handle_with_creation_arguments(backend, extra):
    handle, flow = existing()
    with pytest.raises(ValueError):
        TensorArray("float32", handle=handle, flow=flow, **extra)


def test_constructor_needs_a_flow_with_a_handle(backend):
    handle, _ = existing()
    with pytest.raises(ValueError, match="flow must not be None if handle is not None."):
        TensorArray("float32", handle=handle)


@pytest.mark.parametrize("bad", [42, "not-a-handle", np.zeros(2)], ids=["int", "str", "ndarray"])
def test_constructor_rejects_a_handle_that_is_not_a_handle(backend, bad):
    with pytest.raises((TypeError, ValueError)):
        TensorArray("float32", handle=bad, flow=0.0)


def test_constructor_rejects_unknown_dtypes_and_bad_sizes(backend):
    with pytest.raises(errors.OpError):
        TensorArray("no-such-dtype", size=1)
    with pytest.raises(errors.InvalidArgumentError, match=r"^Size should be >= 0\."):
        TensorArray("float32", size=-1)
    with pytest.raises(errors.OpError):
        TensorArray("float32", size=1, element_shape=[-1])


# -- TF's test scenarios (tensor_array_ops_test.py) ---------------------------------------------------------
def test_tf1_write_read(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3, infer_shape=False)
    w2 = ta.write(0, [[4.0, 5.0]]).write(1, [[1.0]]).write(2, -3.0)
    assert_same(w2.read(0), f32([[4.0, 5.0]]))
    assert_same(w2.read(1), f32([[1.0]]))
    assert_same(w2.read(2), f32(-3.0))


@pytest.mark.parametrize("dtype", ("float32", "float64", "int32", "int64", "complex64", "complex128"))
def test_tf2_write_pack(backend, dtype):
    c = convert(dtype)
    ta = TensorArray(dtype=dtype, tensor_array_name="foo", size=3)
    w2 = ta.write(0, c([[4.0, 5.0]])).write(1, c([[6.0, 7.0]])).write(2, c([[8.0, 9.0]]))
    assert_same(w2.stack(), c([[[4.0, 5.0]], [[6.0, 7.0]], [[8.0, 9.0]]]))


def test_tf3_empty_tensor_array_pack(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3)
    empty = np.zeros((0, 1), dtype=np.float32)
    assert host(ta.write(0, empty).write(1, empty).write(2, empty).stack()).shape == (3, 0, 1)


@pytest.mark.parametrize("dtype", ("float32", "float64", "int32", "int64", "complex64", "complex128"))
def test_tf5_write_concat(backend, dtype):
    c = convert(dtype)
    ta = TensorArray(dtype=dtype, tensor_array_name="foo", size=3, infer_shape=False)
    w2 = ta.write(0, c([[4.0, 5.0], [104.0, 105.0], [204.0, 205.0]])).write(
        1, c([[6.0, 7.0], [106.0, 107.0]])).write(2, c([[8.0, 9.0]]))
    assert_same(w2.concat(), c([[4.0, 5.0], [104.0, 105.0], [204.0, 205.0], [6.0, 7.0], [106.0, 107.0],
                                [8.0, 9.0]]))


def test_tf6_read_or_pack_not_all_values_available_fills_zeros(backend):
    def fresh():
        return TensorArray(dtype="float32", tensor_array_name="foo", size=3, element_shape=[1, 2])
    assert_same(fresh().read(0), f32([[0.0, 0.0]]))
    assert_same(fresh().write(1, [[4.0, 5.0]]).stack(), f32([[[0.0, 0.0]], [[4.0, 5.0]], [[0.0, 0.0]]]))
    assert_same(fresh().write(1, [[4.0, 5.0]]).concat(), f32([[0.0, 0.0], [4.0, 5.0], [0.0, 0.0]]))


def test_tf7_infer_shape_fills_zeros(backend):
    def fresh():
        return TensorArray(dtype="float32", tensor_array_name="foo", size=3)
    assert_same(fresh().write(1, [[4.0, 5.0]]).read(0), f32([[0.0, 0.0]]))
    assert_same(fresh().write(1, [[4.0, 5.0]]).stack(), f32([[[0.0, 0.0]], [[4.0, 5.0]], [[0.0, 0.0]]]))
    assert_same(fresh().write(1, [[4.0, 5.0]]).concat(), f32([[0.0, 0.0], [4.0, 5.0], [0.0, 0.0]]))


@pytest.mark.parametrize("dtype", CONVERT_DTYPES)
def test_tf9_unstack_read(backend, dtype):
    c = convert(dtype)

    def fresh():
        return TensorArray(dtype=dtype, tensor_array_name="foo", size=3, infer_shape=False)
    w0 = fresh().unstack(c([1.0, 2.0, 3.0]))
    for index, expected in enumerate((1.0, 2.0, 3.0)):
        assert_same(w0.read(index), c(expected))
    w1 = fresh().unstack(c([[1.0, 1.1], [2.0, 2.1], [3.0, 3.1]]))
    for index, expected in enumerate(([1.0, 1.1], [2.0, 2.1], [3.0, 3.1])):
        assert_same(w1.read(index), c(expected))
    w2 = fresh().unstack(c([[], [], []]))
    for index in range(3):
        assert_same(w2.read(index), c([]))


@pytest.mark.parametrize("dtype", CONVERT_DTYPES)
def test_tf10_split_read(backend, dtype):
    c = convert(dtype)

    def fresh():
        return TensorArray(dtype=dtype, tensor_array_name="foo", size=3, infer_shape=False)
    w0 = fresh().split(c([]), lengths=[0, 0, 0])
    for index in range(3):
        assert_same(w0.read(index), c([]))
    w0 = fresh().split(c([1.0, 2.0, 3.0]), lengths=[2, 0, 1])
    assert_same(w0.read(0), c([1.0, 2.0]))
    assert_same(w0.read(1), c([]))
    assert_same(w0.read(2), c([3.0]))
    w0 = fresh().split(c([[1.0, 101.0], [2.0, 201.0], [3.0, 301.0]]), lengths=[2, 0, 1])
    assert_same(w0.read(0), c([[1.0, 101.0], [2.0, 201.0]]))
    assert_same(w0.read(1), c([]).reshape(0, 2))
    assert_same(w0.read(2), c([[3.0, 301.0]]))


def test_tf15_write_wrong_index_or_data_type_fails(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3, infer_shape=False)
    with pytest.raises((TypeError, errors.InvalidArgumentError)):
        ta.write(0, "wrong_type_scalar")
    with pytest.raises(errors.InvalidArgumentError, match="index -1"):
        ta.write(-1, 3.0)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"Tried to write to index 3 but array is not resizeable and size is: 3"):
        ta.write(3, 3.0)


def test_tf16_read_wrong_index_or_data_type_fails(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3, infer_shape=False)
    w0 = ta.write(0, [[4.0, 5.0]])
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^TensorArray dtype is float but Op requested dtype double\."):
        ro.TensorArrayReadV3(handle=w0.handle, index=0, dtype="float64", flow_in=w0.flow)
    with pytest.raises(errors.InvalidArgumentError, match="index -1"):
        ta.read(-1)
    with pytest.raises(errors.InvalidArgumentError, match=r"^Tried to read from index 3 but array size is: 3"):
        ta.read(3)


def test_tf17_write_multiple_fails(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3)
    w = ta.write(2, 3.0)
    with raises(errors.InvalidArgumentError, ALREADY_WRITTEN.format(name=ta.handle.name, index=2)):
        w.write(2, 3.0)


def test_tf18_concat_incompatible_shapes_fails(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3, infer_shape=False)
    w3 = ta.write(0, 3.0).write(1, 4.0).write(2, [3.0])
    with pytest.raises(errors.InvalidArgumentError,
                       match="^Concat saw a scalar shape at index 0 but requires at least vectors"):
        w3.concat()
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3, infer_shape=False)
    w3 = ta.write(0, [3.0]).write(1, [4.0]).write(2, [[3.0]])
    with pytest.raises(errors.InvalidArgumentError, match="shape"):
        w3.concat()


def test_tf19_split_incompatible_shapes_fails(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3, infer_shape=False)
    with pytest.raises(errors.InvalidArgumentError, match=r"^Expected lengths to be a vector, received shape: \[\]"):
        ta.split([1.0, 2.0, 3.0], 1)
    with pytest.raises(errors.InvalidArgumentError, match=r"^Expected sum of lengths to be equal to values.shape\[0\], "
                                                          r"but sum of lengths is 1 and value's shape is: \[3\]"):
        ta.split([1.0, 2.0, 3.0], [1])
    ta = TensorArray(dtype="float32", tensor_array_name="baz", size=1, infer_shape=False)
    with pytest.raises(errors.InvalidArgumentError,
                       match=r"^Expected value to be at least a vector, but received shape: \[\]"):
        ta.split(1.0, [1])
    ta = TensorArray(dtype="float32", tensor_array_name="buz", size=2, infer_shape=False)
    with raises(errors.InvalidArgumentError, SPLIT_COUNT.format(size=2, count=1)):
        ta.split([1.0], [1])


@pytest.mark.parametrize("dtype", ("int32", "int64", "float32", "float64", "complex64", "complex128"))
def test_tf20_write_gradient_add_multiple_adds(backend, dtype):
    ta = TensorArray(dtype=dtype, tensor_array_name="foo", size=3, infer_shape=False)
    ta_grad = ta.grad("grad")
    c = lambda x: np.asarray(x, dtype=dtype)
    w0 = ta.write(2, c(3.0))
    with pytest.raises(errors.InvalidArgumentError, match=r"^TensorArray foo_.*: Could not write to TensorArray "
                                                          r"index 2 because it has already been written to\."):
        w0.write(2, c(4.0))
    w2_grad = ta_grad.write(2, c(3.0)).write(2, c(4.0)).write(2, c(5.0))
    assert_same(w2_grad.read(2), c(12.0))
    wb0_grad = ta_grad.write(1, c(1.0))
    with pytest.raises(errors.InvalidArgumentError, match=r"Could not aggregate to TensorArray index 1 because the "
                                                          r"existing shape is \[\] but the new input shape is \[1\]"):
        wb0_grad.write(1, c([1.0]))


def test_tf23_multi_tensor_array(backend):
    r1 = TensorArray(size=1, dtype="float32", tensor_array_name="foo").write(0, 4.0).read(0)
    r2 = TensorArray(size=1, dtype="float32", tensor_array_name="bar").write(0, 5.0).read(0)
    assert float(host(r1)) + float(host(r2)) == 9.0


def test_tf26_read_twice(backend):
    value = f32([[1.0, -1.0], [10.0, -10.0]])
    w = TensorArray(dtype="float32", tensor_array_name="foo", size=2).unstack(value)
    assert_same(w.read(0), value[0])
    with pytest.raises(errors.InvalidArgumentError, match=r"Could not read index 0 twice because it was cleared "
                                                          r"after a previous read \(perhaps try setting "
                                                          r"clear_after_read = false\?\)"):
        w.read(0)
    w = TensorArray(dtype="float32", tensor_array_name="foo", size=2, clear_after_read=False).unstack(value)
    w.read(0)
    assert_same(w.read(0), f32([1.0, -1.0]))


def test_tf50_unpack_dynamic(backend):
    ta = TensorArray(dtype="float32", size=3, dynamic_size=True)
    w1 = ta.unstack([1.0, 2.0, 3.0]).write(3, 4.0)
    assert_same(w1.stack(), f32([1.0, 2.0, 3.0, 4.0]))
    g = w1.grad("gradients")
    g = g.scatter(np.arange(4), np.ones(4, np.float32))           # stack's gradient
    assert_same(g.gather(np.arange(3)), f32([1.0, 1.0, 1.0]))       # unstack's gradient


def test_tf51_split_dynamic(backend):
    ta = TensorArray(dtype="float32", size=3, dynamic_size=True)
    x = f32([1.0, 2.0, 3.0])
    w1 = ta.split(x, [1, 1, 1]).write(3, [4.0])
    assert_same(w1.concat(), f32([1.0, 2.0, 3.0, 4.0]))
    g = w1.grad("gradients")
    g = g.split(np.ones(4, np.float32), [1, 1, 1, 1])               # concat's gradient
    assert_same(g.concat(), f32([1.0, 1.0, 1.0]))                    # split's gradient (marked size 3)


def test_tf55_eval_empty(backend):
    ta = TensorArray(dtype="float32", size=0, dynamic_size=False, infer_shape=False)
    with pytest.raises(errors.UnimplementedError,
                       match=r"^TensorArray has size zero, but element shape <unknown> is not fully defined\. "
                             r"Currently only static shapes are supported when packing zero-size TensorArrays\."):
        ta.stack()


def test_tf56_eval_empty_with_default(backend):
    ta = TensorArray(dtype="float32", size=0, dynamic_size=False, infer_shape=True)
    assert int(host(ta.size())) == 0
    ta = ta.unstack(np.zeros([0, 3, 5], np.float32))
    assert host(ta.stack()).shape == (0, 3, 5)
    assert host(ta.concat()).shape == (0, 5)


def test_tf59_scatter_into_existing_list(backend):
    steps = [([3, 4], np.ones([2], np.float32)), ([1], np.ones([1], np.float32)), ([0, 2], [5.0, 6.0])]
    expected = [[0., 0., 0., 1., 1.], [0., 1., 0., 1., 1.], [5., 1., 6., 1., 1.]]
    for upto, stacked in enumerate(expected, start=1):
        ta = TensorArray(dtype="float32", tensor_array_name="foo", size=5)
        for indices, value in steps[:upto]:
            ta = ta.scatter(indices=indices, value=value)
        assert_same(ta.stack(), f32(stacked))


def test_tf68_infer_shape_false_valid(backend):
    ta = TensorArray("float32", size=3, infer_shape=False, element_shape=[None, 10, 20])
    ta = ta.write(0, np.ones([50, 10, 20], np.float32))
    ta = ta.write(1, np.ones([50, 10, 20], np.float32))
    ta = ta.write(2, np.ones([1, 10, 20], np.float32))
    assert_same(ta.concat(), np.ones([101, 10, 20], np.float32))


def test_tf69_infer_shape_false_invalid(backend):
    ta = TensorArray("float32", size=2, infer_shape=False, element_shape=[None, 10, 20])
    ta = ta.write(0, np.ones([50, 10, 20], np.float32))
    with pytest.raises(ValueError):
        ta.write(1, np.ones([1, 20, 20], np.float32))


def test_tf70_infer_shape_true(backend):
    ta = TensorArray("float32", size=3, infer_shape=True, element_shape=[None, 10, 20])
    assert ta.element_shape == (None, 10, 20)
    ta = ta.write(0, np.ones([50, 10, 20], np.float32))
    assert ta.element_shape == (50, 10, 20)
    ta = ta.write(1, np.ones([50, 10, 20], np.float32))
    with pytest.raises(ValueError):
        ta.write(2, np.ones([1, 10, 20], np.float32))


def test_tf70_infer_shape_true_unknown(backend):
    ta = TensorArray("float32", size=3, infer_shape=True)
    assert ta.element_shape is None
    ta = ta.write(0, np.ones([50, 10, 20], np.float32))
    assert ta.element_shape == (50, 10, 20)


def test_tf71_stack_shape_on_empty(backend):
    ta = TensorArray("float32", size=0, element_shape=(5, 10), dynamic_size=True)
    assert host(ta.stack()).shape == (0, 5, 10)


def test_tf73_stack_shape_on_static_size(backend):
    ta = TensorArray("float32", size=42).write(0, [0])
    assert host(ta.stack()).shape == (42, 1)


def test_size_zero_stack_and_concat_keep_the_rank(backend):
    ta = TensorArray("int16", size=0, element_shape=[2, 3])
    assert_same(ta.stack(), np.zeros((0, 2, 3), np.int16))
    assert_same(ta.concat(), np.zeros((0, 3), np.int16))


def test_size_zero_concat_of_a_vector_element_shape(backend):
    ta = TensorArray("float32", size=0, element_shape=[4])
    assert_same(ta.concat(), np.zeros((0,), np.float32))


@pytest.mark.parametrize("infer_shape", [False, True])
def test_size_zero_concat_of_scalar_elements(backend, infer_shape):
    # TensorFlow's class passes element_shape[1:], which for a known scalar shape is the
    # known shape [] (fully defined), not an unknown one: TF returns float32 (0,).
    ta = TensorArray("float32", size=0, element_shape=[], infer_shape=infer_shape)
    assert_same(ta.concat(), np.zeros((0,), np.float32))


def test_unstack_infer_shape_then_write_mismatch(backend):
    # TF test 45 (testUnpackShape), kernel-observable part.
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=0, dynamic_size=True, infer_shape=True)
    w0 = ta.unstack(f32([[1.0, -1.0], [10.0, -10.0], [100.0, -100.0]]))
    assert host(w0.read(0)).shape == (2,)
    w1 = w0.write(3, [4.0, 5.0])
    with raises(errors.InvalidArgumentError, CLEARED.format(name=ta.handle.name, index=0)):
        w1.read(0)
    assert host(w1.read(1)).shape == (2,)
    with pytest.raises(ValueError):
        w1.write(4, [4.0, 5.0, 6.0])


@pytest.mark.parametrize("dtype", NUMBER_DTYPES)
def test_class_grad_aggregation_of_every_number_dtype(backend, dtype):
    ta = TensorArray(dtype, size=2, element_shape=[3])
    g = ta.grad("gradients")
    rng = np.random.default_rng(0)
    values = [np.asarray(rng.integers(0, 5, size=3)).astype(dtype) for _ in range(4)]
    for value in values:
        g = g.write(1, value)
    expected = values[0]
    for value in values[1:]:
        expected = (expected + value).astype(dtype)
    assert_same(g.read(1), expected)
    assert_same(g.read(0), np.zeros(3, dtype))


def test_read_of_zero_fill_marks_read(backend):
    ta = TensorArray("float32", size=2, element_shape=[2])
    ta.read(1)
    with raises(errors.InvalidArgumentError, ALREADY_READ.format(name=ta.handle.name, index=1)):
        ta.write(1, [1.0, 2.0])


def test_read_bounds_from_the_class(backend):
    ta = TensorArray("float32", size=2)
    with raises(errors.InvalidArgumentError, READ_BOUNDS.format(index=2, size=2)):
        ta.read(2)


def test_to_numpy_is_the_way_out(backend):
    ta = TensorArray("float32", size=1).write(0, [1.0, 2.0])
    out = gta.to_numpy(ta.read(0))
    assert isinstance(out, np.ndarray)


def test_tf21_grad_with_shape_wrapped_by_the_class(backend):
    ta = TensorArray(size=3, dtype="float32", element_shape=[2, 3])
    handle, flow = ro.TensorArrayGradWithShape(handle=ta.handle, flow_in=ta.flow, shape_to_prepend=[4, 5],
                                               source="source")
    ta_grad = TensorArray("float32", handle=handle, flow=flow)
    with pytest.raises(errors.InvalidArgumentError, match="Could not write to TensorArray"):
        ta_grad.write(0, np.random.default_rng(0).random([2, 3]).astype(np.float32))
    value = np.random.default_rng(1).random([4, 5, 2, 3]).astype(np.float32)
    assert_same(ta_grad.write(0, value).read(0), value)


def test_tf22_grad_with_shape_unknown_wrapped_by_the_class(backend):
    ta = TensorArray(size=3, dtype="float32", element_shape=None)
    handle, flow = ro.TensorArrayGradWithShape(handle=ta.handle, flow_in=ta.flow, shape_to_prepend=[4, 5],
                                               source="source")
    ta_grad = TensorArray("float32", handle=handle, flow=flow)
    value = np.random.default_rng(2).random([4, 5, 7]).astype(np.float32)
    assert_same(ta_grad.write(0, value).read(0), value)


def test_tf14_grad_access_twice_receive_same_object(backend):
    ta = TensorArray(dtype="float32", tensor_array_name="foo", size=3)
    g_ta_0 = ta.grad("grad")
    g_ta_1 = ta.grad("grad")
    g_ta_0.write(0, [[4.0, 5.0]])
    assert g_ta_0.handle.name == g_ta_1.handle.name
    assert_same(g_ta_1.read(0), f32([[4.0, 5.0]]))


@pytest.mark.parametrize("how", ["unstack", "scatter"])
def test_an_empty_value_of_another_row_shape_is_refused(backend, how):
    # TensorFlow's class checks value.shape[1:] before the op, however many rows there are.
    ta = TensorArray("float32", size=2, element_shape=[3])
    empty = np.zeros((0, 5), np.float32)
    with raises(errors.InvalidArgumentError, INCOMPATIBLE.format(name=ta.handle.name, index=0, value="[5]",
                                                                 shape="[3]")):
        ta.unstack(empty) if how == "unstack" else ta.scatter([], empty)
    assert_same(ta.write(0, f32([1, 2, 3])).read(0), f32([1, 2, 3]))


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_copies_share_the_array_deep_copies_and_pickles_are_refused(backend, mode):
    """A TensorArray is a handle to an array in device memory: copy.copy shares it, and
    copy.deepcopy and pickle, which would have to copy device memory into a new array, raise
    TypeError naming the array (what Python raises for objects it cannot copy or pickle)."""
    import copy
    import pickle
    ta = gta.TensorArray("float32", size=2, mode=mode)
    ta = ta.write(0, np.ones(2, np.float32))
    shared = copy.copy(ta)
    assert gta.to_numpy(shared.read(0)).tolist() == [1.0, 1.0]
    assert copy.copy(ta.handle) is ta.handle
    for deep_copy in (lambda: copy.deepcopy(ta), lambda: copy.deepcopy(ta.handle), lambda: copy.deepcopy({"a": ta})):
        with pytest.raises(TypeError, match=f"^TensorArray {ta.handle.name} cannot be deep-copied"):
            deep_copy()
    for pickled in (lambda: pickle.dumps(ta), lambda: pickle.dumps(ta.handle)):
        with pytest.raises(TypeError, match=f"^TensorArray {ta.handle.name} cannot be pickled"):
            pickled()
