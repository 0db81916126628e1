"""tf.string TensorArrays on every backend: values live on the host as NumPy object
arrays of bytes (what tf.Tensor.numpy() gives), every op works, aggregation and zeros are
refused with TensorFlow's texts (tensor_array.h: AddToTensor, TensorSetZero).

The references are Python lists of bytes built by hand next to each test."""

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import TensorArray, errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry

OBJECT = np.dtype(object)


def expect_strings(value, expected):
    """``value`` is a host NumPy object array of exactly these bytes (a nested list)."""
    assert type(value) is np.ndarray, type(value)
    assert value.dtype == OBJECT, value.dtype
    expected_array = np.empty(np.shape(expected) if not isinstance(expected, bytes) else (), dtype=object)
    if isinstance(expected, bytes):
        expected_array[()] = expected
    else:
        expected_array[...] = expected
    assert value.shape == expected_array.shape, (value.shape, expected_array.shape)
    for got, want in zip(value.reshape(-1).tolist(), expected_array.reshape(-1).tolist()):
        assert type(got) is bytes and got == want, (got, want)


def storage(ta):
    return registry.lookup(ta.handle)


def raises(cls, *needles):
    class _Check:
        def __enter__(self):
            self.context = pytest.raises(cls)
            self.info = self.context.__enter__()
            return self.info

        def __exit__(self, *exc):
            result = self.context.__exit__(*exc)
            for needle in needles:
                assert needle in str(self.info.value), (needle, str(self.info.value))
            return result
    return _Check()


# -- values in and out ---------------------------------------------------------------------------
def test_str_bytes_unicode_and_empty_strings_round_trip(backend):
    ta = TensorArray("string", size=5, clear_after_read=False)
    ta = ta.write(0, "plain").write(1, b"\x00\xffraw").write(2, "日本語 é").write(3, "").write(4, np.str_("np"))
    expect_strings(ta.read(0), b"plain")
    expect_strings(ta.read(1), b"\x00\xffraw")
    expect_strings(ta.read(2), "日本語 é".encode("utf-8"))
    expect_strings(ta.read(3), b"")
    expect_strings(ta.read(4), b"np")
    expect_strings(ta.stack(), [b"plain", b"\x00\xffraw", "日本語 é".encode("utf-8"), b"", b"np"])
    assert ta.dtype == OBJECT


@pytest.mark.parametrize("value, expected", [(np.bytes_(b"a\x00"), b"a"), (np.str_("a\x00"), b"a"),
                                             ([np.bytes_(b"x\x00\x00")], [b"x\x00\x00"]), (b"a\x00", b"a\x00"),
                                             ("a\x00", b"a\x00")])
def test_trailing_nuls_as_tensorflow_reads_them(backend, value, expected):
    # A NumPy string scalar loses its trailing NULs (TensorFlow converts it through a fixed-width
    # array); Python's own str and bytes, and NumPy scalars inside a list, keep them (TF 2.21).
    handle, flow = ro.TensorArrayV3(size=1, dtype="string")
    flow = ro.TensorArrayWriteV3(handle=handle, index=0, value=value, flow_in=flow)
    assert np.asarray(ro.TensorArrayReadV3(handle=handle, index=0, flow_in=flow, dtype="string")).tolist() == expected


def test_values_are_host_object_arrays_on_every_backend(backend):
    ta = TensorArray("string", size=2, clear_after_read=False).write(0, ["a", "b"]).write(1, [b"c", "d"])
    for value in (ta.read(0), ta.stack(), ta.gather([1, 0]), ta.concat()):
        assert type(value) is np.ndarray and value.dtype == OBJECT       # never a device array
    expect_strings(ta.gather([1, 0]), [[b"c", b"d"], [b"a", b"b"]])
    expect_strings(ta.concat(), [b"a", b"b", b"c", b"d"])
    assert storage(ta).backend is backend


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 0)], ids=["scalar", "vector", "matrix", "empty"])
def test_element_shapes_through_every_op(backend, shape):
    count = 4
    rows = [[[f"{k}:{i}:{j}".encode() for j in range(shape[1])] for i in range(shape[0])] if len(shape) == 2 else
            [f"{k}:{i}".encode() for i in range(shape[0])] if len(shape) == 1 else f"{k}".encode()
            for k in range(count)]
    stacked = np.empty((count,) + shape, dtype=object)
    for k in range(count):
        stacked[k] = rows[k]
    written = TensorArray("string", size=count, clear_after_read=False)
    for k in range(count):
        written = written.write(k, np.array(rows[k], dtype=object).reshape(shape))
    scattered = TensorArray("string", size=count, clear_after_read=False).scatter([3, 1, 0, 2], stacked[[3, 1, 0, 2]])
    unstacked = TensorArray("string", size=count, clear_after_read=False).unstack(stacked)
    for ta in (written, scattered, unstacked):
        assert int(gta.to_numpy(ta.size())) == count
        for k in range(count):
            expect_strings(ta.read(k), stacked[k].tolist() if shape else rows[k])
        expect_strings(ta.stack(), stacked.tolist())
        expect_strings(ta.gather([2, 0]), stacked[[2, 0]].tolist())
        if shape:
            expect_strings(ta.concat(), stacked.reshape((count * shape[0],) + shape[1:]).tolist())


def test_split_and_concat_of_differing_lengths(backend):
    value = ["a", "bb", "", "dddd", "é"]
    ta = TensorArray("string", size=3, infer_shape=False, clear_after_read=False).split(value, [2, 0, 3])
    expect_strings(ta.read(0), [b"a", b"bb"])
    expect_strings(ta.read(1), [])
    expect_strings(ta.read(2), [b"", b"dddd", "é".encode()])
    expect_strings(ta.concat(), [b"a", b"bb", b"", b"dddd", "é".encode()])


def test_ragged_elements_with_infer_shape_false(backend):
    ta = TensorArray("string", size=3, infer_shape=False, clear_after_read=False)
    ta = ta.write(0, "x").write(1, [["a", "b"], ["c", "d"]]).write(2, ["e"])
    expect_strings(ta.read(0), b"x")
    expect_strings(ta.read(1), [[b"a", b"b"], [b"c", b"d"]])
    expect_strings(ta.read(2), [b"e"])
    with raises(errors.InvalidArgumentError, "TensorArray has inconsistent shapes.  Index 0 has shape: [] "
                                             "but index 1 has shape: [2,2]"):
        ta.stack()
    with raises(errors.InvalidArgumentError, "Concat saw a scalar shape at index 0"):
        ta.concat()
    expect_strings(ta.read(1), [[b"a", b"b"], [b"c", b"d"]])     # the failed ops read nothing


def test_clear_after_read(backend):
    ta = TensorArray("string", size=2).write(0, "once").write(1, "twice")
    expect_strings(ta.read(0), b"once")
    with raises(errors.InvalidArgumentError, "Could not read index 0 twice because it was cleared"):
        ta.read(0)
    expect_strings(ta.read(1), b"twice")


def test_dynamic_growth(backend):
    ta = TensorArray("string", size=0, dynamic_size=True, clear_after_read=False)
    expected = {}
    for index in (0, 7, 3, 20):
        ta = ta.write(index, [f"v{index}", "tail"])
        expected[index] = [f"v{index}".encode(), b"tail"]
    assert int(gta.to_numpy(ta.size())) == 21
    for index, value in expected.items():
        expect_strings(ta.read(index), value)
    expect_strings(ta.gather([20, 0]), [expected[20], expected[0]])


# -- what strings cannot do -----------------------------------------------------------------------
def test_unwritten_slots_have_no_zeros_and_a_failed_read_changes_nothing(backend):
    ta = TensorArray("string", size=3, element_shape=[2], clear_after_read=False).write(1, ["a", "b"])
    text = "tensor_array::TensorSetZero type not supported: string"
    for op in (lambda: ta.read(0), lambda: ta.stack(), lambda: ta.gather([1, 2]), lambda: ta.concat()):
        with raises(errors.InvalidArgumentError, text, storage(ta).name):
            op()
    state = storage(ta).slot_state(0)
    assert not state.written and not state.read        # D1: TensorFlow would have marked it written
    ta = ta.write(0, ["c", "d"]).write(2, ["e", "f"])  # the failed reads read nothing: writes still work
    expect_strings(ta.stack(), [[b"c", b"d"], [b"a", b"b"], [b"e", b"f"]])


def test_gathers_of_many_slots_refuse_zeros_before_changing_anything(backend):
    # More than eight indices take storage's batch paths: the check still comes first.
    text = "tensor_array::TensorSetZero type not supported: string"
    fresh = TensorArray("string", size=12, element_shape=[1], clear_after_read=False)
    with raises(errors.InvalidArgumentError, text, storage(fresh).name):
        fresh.gather(list(range(12)))
    assert not any(storage(fresh).slot_state(index).written for index in range(12))
    forward = TensorArray("string", size=12, clear_after_read=False)
    forward = forward.scatter(list(range(12)), [[f"s{index}"] for index in range(12)])
    grad = forward.grad("gradients")
    grad = grad.write(3, ["x"])
    for indices in (list(range(12)), [3] + list(range(4, 12)) + [40]):
        with raises(errors.InvalidArgumentError, text, storage(grad).name):
            grad.gather(indices)
        assert storage(grad).size == 12
        states = [storage(grad).slot_state(index) for index in range(12)]
        assert [(state.written, state.read, state.has_value) for state in states] == \
            [(True, False, index == 3) for index in range(12)]
    empty = TensorArray("string", size=12, element_shape=[0])
    value = empty.gather([1, 0, 2, 5, 4, 3, 6, 7, 8, 9, 11])
    assert type(value) is np.ndarray and value.dtype == OBJECT and value.shape == (11, 0)


def test_unwritten_slots_without_elements_read_as_empty(backend):
    ta = TensorArray("string", size=2, element_shape=[0, 3], clear_after_read=False)
    for value in (ta.read(0), ta.stack()):
        assert type(value) is np.ndarray and value.dtype == OBJECT
    assert ta.read(1).shape == (0, 3)
    assert TensorArray("string", size=2, element_shape=[0, 3]).stack().shape == (2, 0, 3)


def test_gradient_arrays_store_once_and_refuse_to_add(backend):
    ta = TensorArray("string", size=2, clear_after_read=False).write(0, ["a", "b"]).write(1, ["c", "d"])
    grad = ta.grad("gradients")
    assert grad.dtype == OBJECT
    with raises(errors.InvalidArgumentError, "tensor_array::TensorSetZero type not supported: string"):
        grad.read(0)                                   # a soft slot from the forward's shapes: no zeros
    grad = grad.write(0, ["x", "y"])
    with raises(errors.InvalidArgumentError, "tensor_array::AddToTensor type not supported: string",
                storage(grad).name):
        grad.write(0, ["p", "q"])
    with raises(errors.InvalidArgumentError, "tensor_array::AddToTensor type not supported: string"):
        grad.scatter([1, 1], [["p", "q"], ["r", "s"]])
    expect_strings(grad.read(0), [b"x", b"y"])        # the slot kept its first value
    grad_with_shape = ro.TensorArrayGradWithShape(ta.handle, ta.flow, [1], "with_shape").grad_handle
    assert registry.lookup(grad_with_shape).slot_state(0).shape == (1, 2)


# -- dtypes and conversion ------------------------------------------------------------------------
class _TFString:
    """What tf.string looks like to us: an object whose as_numpy_dtype is object."""
    as_numpy_dtype = object


@pytest.mark.parametrize("spec", ["string", np.object_, np.bytes_, np.str_, np.dtype("O"), np.dtype("U3"),
                                  np.dtype("S2"), object, _TFString()],
                         ids=["string", "np.object_", "np.bytes_", "np.str_", "dtype-O", "dtype-U3", "dtype-S2",
                              "object", "tf.string"])
def test_tensorflow_names_for_string(backend, spec):
    ta = TensorArray(spec, size=1).write(0, "v")
    assert ta.dtype == OBJECT
    handle, flow = ro.TensorArrayV3(1, spec)
    ro.TensorArrayWriteV3(handle, 0, "w", flow)
    expect_strings(ro.TensorArrayReadV3(handle, 0, flow, spec), b"w")
    expect_strings(ta.read(0), b"v")


@pytest.mark.parametrize("spec", ["object", "str", "bytes", "U", str, bytes])
def test_names_tensorflow_does_not_take(backend, spec):
    with raises(errors.InvalidArgumentError, "dtype"):
        TensorArray(spec, size=1)


def test_requested_dtype_is_named_string(backend):
    handle, flow = ro.TensorArrayV3(1, "string")
    ro.TensorArrayWriteV3(handle, 0, "v", flow)
    with raises(errors.InvalidArgumentError, "TensorArray dtype is string but Op requested dtype float."):
        ro.TensorArrayReadV3(handle, 0, flow, "float32")


@pytest.mark.parametrize("value", ["abc", b"abc", ["a", "b"], np.array(["a"]), np.array([b"a"]),
                                   np.array(["a"], dtype=object)],
                         ids=["str", "bytes", "list", "np-str", "np-bytes", "np-object"])
def test_strings_into_a_float_array(backend, value):
    ta = TensorArray("float32", size=2)
    with raises(errors.InvalidArgumentError, "TensorArray dtype is float but Op is trying to write dtype string.",
                storage(ta).name):
        ta.write(0, value)
    with raises(errors.InvalidArgumentError, "TensorArray dtype is float but Op is trying to write dtype string."):
        ro.TensorArrayWriteV3(ta.handle, 0, value, ta.flow)
    assert not storage(ta).slot_state(0).written


@pytest.mark.parametrize("value, name", [(1.5, "float"), (7, "int32"), ([1.0, 2.0], "float"), (True, "bool"),
                                         (np.float64(1.0), "double"), (np.zeros(2, np.int64), "int64")],
                         ids=["float", "int", "float-list", "bool", "np.float64", "int64-array"])
def test_other_values_into_a_string_array(backend, value, name):
    ta = TensorArray("string", size=2)
    text = f"TensorArray dtype is string but Op is trying to write dtype {name}."
    with raises(errors.InvalidArgumentError, text, storage(ta).name):
        ta.write(0, value)
    with raises(errors.InvalidArgumentError, text):
        ro.TensorArrayWriteV3(ta.handle, 0, value, ta.flow)
    assert not storage(ta).slot_state(0).written


@pytest.mark.parametrize("value", [["a", 1], np.array(["a", 1.5], dtype=object), [["a"], ["b", "c"]], [None]],
                         ids=["mixed-list", "object-array-with-float", "ragged", "None"])
def test_values_that_are_not_all_strings_are_refused(backend, value):
    ta = TensorArray("string", size=2)
    with pytest.raises(errors.InvalidArgumentError):
        ta.write(0, value)
    with pytest.raises(errors.InvalidArgumentError):
        ta.scatter([0, 1], value)
    assert not storage(ta).slot_state(0).written and not storage(ta).slot_state(1).written


# TensorFlow's conversion error, not "dtype is string but Op is trying to write dtype string".
@pytest.mark.parametrize("value, text", [
    (-(2**63) - 1, "Cannot convert -9223372036854775809 to a tensor: -9223372036854775809 does not fit in int64"),
    ([b"a", 2**64], "Cannot convert [b'a', 18446744073709551616] to a tensor: 18446744073709551616 does not fit"),
    (["a", None], "Cannot convert value ['a', None] to a tensor: element 1 (in row-major order) is None"),
    ([1, None], "Cannot convert value [1, None] to a tensor: element 1 (in row-major order) is None"),
], ids=["below-int64", "bytes-and-2**64", "str-and-None", "int-and-None"])
def test_values_numpy_holds_only_as_objects_are_conversion_errors(backend, value, text):
    ta = TensorArray("string", size=2)
    with raises(errors.InvalidArgumentError, text, storage(ta).name) as caught:
        ro.TensorArrayWriteV3(ta.handle, 0, value, ta.flow)
    assert "trying to write dtype" not in str(caught.value)
    with raises(errors.InvalidArgumentError, text, storage(ta).name):
        ta.write(0, value)
    assert not storage(ta).slot_state(0).written


@pytest.mark.parametrize("value, expected", [
    ("a", b"a"), (b"b", b"b"), (["a", b"b"], [b"a", b"b"]), (("a",), [b"a"]), ([np.str_("x")], [b"x"]),
    ([[np.bytes_(b"y")]], [[b"y"]]), (np.array(["u"]), [b"u"]), (np.array([b"s"]), [b"s"]),
    (np.array(["o", b"p"], dtype=object), [b"o", b"p"]),
    # str beside bytes NumPy cannot decode as ASCII (np.asarray raises): TensorFlow takes them
    ([b"\xc3\xa9", "a"], [b"\xc3\xa9", b"a"]), (["a", b"\xff"], [b"a", b"\xff"]),
    ([["\xe9"], [b"\x80"]], [[b"\xc3\xa9"], [b"\x80"]]),
], ids=["str", "bytes", "mixed-list", "tuple", "np-str-list", "np-bytes-nested", "U-array", "S-array", "O-array",
        "utf8-bytes-and-str", "str-and-byte-ff", "nested-non-ascii"])
def test_genuine_strings_still_convert_and_numeric_arrays_refuse_them(backend, value, expected):
    handle, flow = ro.TensorArrayV3(1, "string")
    ro.TensorArrayWriteV3(handle, 0, value, flow)
    expect_strings(ro.TensorArrayReadV3(handle, 0, flow, "string"), expected)
    handle, flow = ro.TensorArrayV3(1, "float32")
    with raises(errors.InvalidArgumentError, "TensorArray dtype is float but Op is trying to write dtype string."):
        ro.TensorArrayWriteV3(handle, 0, value, flow)


def test_an_empty_list_is_an_empty_string_vector(backend):
    # TensorFlow converts with the array's dtype preferred: [] becomes a string vector.
    ta = TensorArray("string", size=1).write(0, [])
    value = ta.read(0)
    assert value.shape == (0,) and value.dtype == OBJECT


# -- returned and written values are the caller's own ------------------------------------------------
def test_returned_values_do_not_change_the_array(backend):
    ta = TensorArray("string", size=2, clear_after_read=False, infer_shape=False)
    ta = ta.write(0, ["a", "b"]).write(1, ["c"])
    for value in (ta.read(0), ta.gather([0]), ta.concat(), ta.read(1)):
        value[...] = b"zz"
    expect_strings(ta.read(0), [b"a", b"b"])
    expect_strings(ta.read(1), [b"c"])
    expect_strings(ta.concat(), [b"a", b"b", b"c"])


def test_written_values_are_copied(backend):
    source = np.array([b"a", b"b"], dtype=object)
    ta = TensorArray("string", size=2, clear_after_read=False).write(0, source)
    rows = np.array([["c"], ["d"]], dtype=object)
    ta2 = TensorArray("string", size=2, clear_after_read=False).unstack(rows)
    source[0] = b"changed"
    rows[0, 0] = b"changed"
    expect_strings(ta.read(0), [b"a", b"b"])
    expect_strings(ta2.stack(), [[b"c"], [b"d"]])


# -- bytes held, close -----------------------------------------------------------------------------
def test_nbytes_counts_pointers_and_contents_and_close_releases(backend):
    ta = TensorArray("string", size=2, clear_after_read=False)
    assert storage(ta).nbytes == 0
    ta = ta.write(0, ["x" * 1000, "y"]).write(1, ["", "z" * 10])
    array = storage(ta)
    payload = 1000 + 1 + 0 + 10
    assert payload <= array.nbytes <= payload + 4 * 64      # contents plus a pointer per element
    per_backend = gta.stats()["per_backend"][backend.name]
    assert per_backend["bytes"] >= array.nbytes
    ta.close()
    assert array.nbytes == 0 and array.closed
    with raises(errors.InvalidArgumentError, "has already been closed"):
        ta.read(0)


# -- TensorFlow 2's rules (mode="tf2") ---------------------------------------------------------------
def test_tf2_mode_lists_of_strings(backend):
    ta = TensorArray("string", size=3, mode="tf2").write(0, "a").write(2, ["c"][0])
    expect_strings(ta.read(0), b"a")
    expect_strings(ta.stack(), [b"a", b"", b"c"])       # TensorFlow 2's lists fill unset strings with b""
    grown = TensorArray("string", size=0, dynamic_size=True, mode="tf2").unstack(["x", "y"]).write(2, "z")
    expect_strings(grown.stack(), [b"x", b"y", b"z"])
    expect_strings(grown.gather([2, 0]), [b"z", b"x"])
    with pytest.raises(errors.InvalidArgumentError, match="op elements float but list elements string"):
        grown.write(3, np.float32(1.0))
