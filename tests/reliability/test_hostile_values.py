"""Hostile values and arguments, part two (reliability issue, sections 2 and 5):
typed buffers, objects whose protocol methods raise, and integers whose sums or
products wrap around in int64.

After every refused call: the error is a gpu_tensorarray.errors class (never the
object's own exception, never a bare NumPy error), its message names the real
problem, and the array is unchanged: every stored value is read back and compared
with a host copy kept by the test, and the slot flags are as they were.
"""

import array as pyarray
import math
import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry
from ta_conformance_util import (
    TF_NAME, WRITE_DTYPE, assert_same, concat, f32, gather, grad, grad_with_shape, host, new, read, scatter, size,
    split, write,
)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
NATIVE = "<" if sys.byteorder == "little" else ">"
FOREIGN_ORDER = ">" if NATIVE == "<" else "<"


def _slot_flags(array):
    """Every slot's written/read/cleared/has-value flags and shape (storage's public face)."""
    return [tuple(array.slot_state(index)[:5]) for index in range(array.size)]


# -- the array under attack and its host copy ---------------------------------------------------------------------------
class Victim:
    """A float32 array (size 4, clear_after_read=False) with slots 0 and 2 written, and
    the host copy of what it must hold. ``unchanged()`` reads everything back."""

    def __init__(self, dtype="float32", element_shape=None):
        self.dtype = dtype
        self.handle, _ = new(4, dtype, clear_after_read=False, element_shape=element_shape)
        self.expected = {0: np.array([1, 2]).astype(dtype), 2: np.array([3, 4]).astype(dtype)}
        for index, value in self.expected.items():
            write(self.handle, index, value)
        self.flags = _slot_flags(registry.lookup(self.handle))

    def unchanged(self):
        array = registry.lookup(self.handle)
        assert not array.closed and array.size == 4, f"size {array.size}, closed {array.closed}"
        assert _slot_flags(array) == self.flags, "slot flags changed"
        for index, value in self.expected.items():
            assert_same(read(self.handle, index, self.dtype), value)
        self.flags = _slot_flags(array)         # our reads marked the slots read


def refused(cls, call, *needles, victim=None):
    """``call`` must raise exactly ``cls`` (an OpError class) whose message contains every
    needle (a tuple needle: any one of it); ``victim`` must be unchanged after it."""
    try:
        call()
    except errors.OpError as error:
        message = str(error)
        assert type(error) is cls, f"{type(error).__name__} instead of {cls.__name__}: {message}"
        for needle in needles:
            options = needle if isinstance(needle, tuple) else (needle,)
            assert any(option in message for option in options), f"message lacks {needle!r}: {message!r}"
        if victim is not None:
            victim.unchanged()
        return message
    except Exception as error:      # noqa: BLE001 - the point of this file
        raise AssertionError(f"{type(error).__name__} escaped instead of {cls.__name__}: {error}") from error
    raise AssertionError(f"no error: expected {cls.__name__}")


# -- typed values: their dtype is theirs, never narrowed or widened on the way ---------------------------------------
def _typed_values():
    """label -> (value of two elements, the TensorFlow name of its dtype)."""
    return {
        "memoryview-d": (memoryview(pyarray.array("d", [1e300, 2.0])), "double"),
        "array-d": (pyarray.array("d", [1e300, 2.0]), "double"),
        "memoryview-f": (memoryview(pyarray.array("f", [1.5, 2.0])), "float"),
        "array-f": (pyarray.array("f", [1.5, 2.0]), "float"),
        "array-q": (pyarray.array("q", [2**40, 1]), "int64"),
        "array-b": (pyarray.array("b", [1, -1]), "int8"),
        "bytearray": (bytearray(b"\x01\x02"), "uint8"),
        "memoryview-bytes": (memoryview(b"\x01\x02"), "uint8"),
        "numpy-<f4": (np.array([1.5, 2.0], "<f4"), "float"),           # either byte order: TensorFlow converts it
        "numpy->f4": (np.array([1.5, 2.0], ">f4"), "float"),
        "numpy-foreign-order-f8": (np.array([1.5, 2.0], FOREIGN_ORDER + "f8"), "double"),
        "numpy-foreign-order-i4": (np.array([1, 2], FOREIGN_ORDER + "i4"), "int32"),
        "bytes": (b"ab", "string"),
        "str": ("ab", "string"),
        "numpy-str": (np.array(["a", "b"]), "string"),
        "numpy-bytes": (np.array([b"a", b"b"]), "string"),
        "object-array": (np.array([1.0, 2.0], dtype=object), "string"),     # TensorFlow: np.object_ is tf.string
        "structured": (np.zeros(2, [("a", "f4"), ("b", "i4")]), "structured"),
        "void": (np.zeros(2, "V4"), "raw bytes"),
        "float128": (np.ones(2, np.longdouble), np.dtype(np.longdouble).name),
    }


def _typed_expectation(value, dtype):
    """What a typed value must become in an array of ``dtype`` (TensorFlow: it must already
    have that dtype): the NumPy copy of it, or None when it must be refused."""
    if isinstance(value, str):
        return None
    as_numpy = np.asarray(value)
    return as_numpy.astype(dtype) if as_numpy.dtype.newbyteorder("=") == np.dtype(dtype) else None


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "uint8", "int8"])
@pytest.mark.parametrize("label", list(_typed_values()))
def test_typed_values_keep_their_dtype_through_raw_ops(backend, label, dtype):
    value, value_name = _typed_values()[label]
    expected = _typed_expectation(value, dtype)
    victim = Victim(dtype)
    ops = {"write": lambda: write(victim.handle, 1, value),
           "scatter": lambda: scatter(victim.handle, [1, 3], value),
           "split": lambda: split(victim.handle, value, [0, 1, 0, 1])}
    for op_name, op in ops.items():
        if expected is None and op_name == "split" and np.ndim(value) == 0:
            # str and bytes are string scalars: TensorArraySplitV3 checks the rank before the dtype
            refused(errors.InvalidArgumentError, op, "Expected value to be at least a vector", victim.handle.name,
                    victim=victim)
            continue
        if expected is None:
            text = WRITE_DTYPE.format(array=TF_NAME[dtype], value=value_name)[:-1]   # value_name may go on
            refused(errors.InvalidArgumentError, op, text, victim.handle.name, victim=victim)
            continue
        fresh, _ = new(2, dtype, clear_after_read=False)
        {"write": lambda: write(fresh, 1, value), "scatter": lambda: scatter(fresh, [0, 1], value),
         "split": lambda: split(fresh, value, [1, 1])}[op_name]()
        if op_name == "write":
            assert_same(read(fresh, 1, dtype), expected)
        else:
            assert_same(read(fresh, 0, dtype), expected[0] if op_name == "scatter" else expected[:1])
            assert_same(read(fresh, 1, dtype), expected[1] if op_name == "scatter" else expected[1:])


@pytest.mark.parametrize("label", list(_typed_values()))
def test_typed_values_keep_their_dtype_through_the_class(backend, label):
    value, value_name = _typed_values()[label]
    expected = _typed_expectation(value, "float32")
    ta = gta.TensorArray("float32", size=2, clear_after_read=False)
    ops = {"write": lambda t: t.write(0, value), "scatter": lambda t: t.scatter([0, 1], value),
           "unstack": lambda t: t.unstack(value), "split": lambda t: t.split(value, [1, 1])}
    for op_name, op in ops.items():
        if expected is None and op_name == "unstack" and np.ndim(value) == 0:
            # str and bytes are string scalars: TensorFlow's unstack takes shape(value)[0] first
            refused(errors.InvalidArgumentError, lambda: op(ta), "rank >= 1", ta.handle.name)
            continue
        if expected is None:
            before = _slot_flags(registry.lookup(ta.handle))
            refused(errors.InvalidArgumentError, lambda: op(ta),
                    WRITE_DTYPE.format(array="float", value=value_name)[:-1], ta.handle.name)
            assert _slot_flags(registry.lookup(ta.handle)) == before
            continue
        fresh = op(gta.TensorArray("float32", size=2, clear_after_read=False))
        if op_name == "write":
            assert_same(fresh.read(0), expected)
        else:
            assert_same(host(fresh.stack()).reshape(expected.shape), expected)


def test_a_float64_buffer_is_never_narrowed_to_float32(backend):
    # The defect: float64 buffers became float32 (1e300 -> inf, with only a RuntimeWarning).
    victim = Victim("float32")
    buffer = memoryview(pyarray.array("d", [1e300, 2.0]))
    with np.errstate(all="raise"):
        refused(errors.InvalidArgumentError, lambda: write(victim.handle, 1, buffer),
                WRITE_DTYPE.format(array="float", value="double"), victim=victim)
    wide = Victim("float64")
    write(wide.handle, 1, buffer)
    assert_same(read(wide.handle, 1, "float64"), np.array([1e300, 2.0]))


def test_a_value_in_the_other_byte_order_is_converted_as_tensorflow_converts_it(backend):
    value = np.array([1.5, -2.0], FOREIGN_ORDER + "f4")
    handle, _ = new(4, "float32", clear_after_read=False)
    write(handle, 0, value)
    scatter(handle, [1, 2], value.reshape(2, 1).repeat(2, axis=1))
    assert_same(read(handle, 0, "float32"), np.array([1.5, -2.0], np.float32))
    assert_same(read(handle, 2, "float32"), np.array([-2.0, -2.0], np.float32))
    victim = Victim("float64")              # still a float: the dtype error names it so
    refused(errors.InvalidArgumentError, lambda: write(victim.handle, 1, value),
            WRITE_DTYPE.format(array="double", value="float"), victim=victim)
    scalar = np.array(1.5, FOREIGN_ORDER + "f4")
    assert gta.to_numpy(gta.TensorArray("float32", size=1, infer_shape=False).write(0, scalar).read(0)).shape == ()
    assert float(gta.to_numpy(gta.TensorArray("float32", size=1, element_shape=[]).write(0, scalar).read(0))) == 1.5


def test_mode_tf2_converts_a_value_in_the_other_byte_order_too(backend):
    rows = np.array([[1.5], [-2.0]], FOREIGN_ORDER + "f4")
    for op in (lambda ta: ta.write(0, rows[0]).write(1, rows[1]), lambda ta: ta.scatter([0, 1], rows),
               lambda ta: ta.unstack(rows), lambda ta: ta.split(rows.reshape(-1), [1, 1])):
        ta = op(gta.TensorArray("float32", size=2, mode="tf2"))
        assert gta.to_numpy(ta.stack()).tolist() == [[1.5], [-2.0]]
    with pytest.raises(errors.InvalidArgumentError, match="op elements double but list elements float"):
        gta.TensorArray("float32", size=2, mode="tf2").write(0, np.array([1.5], FOREIGN_ORDER + "f8"))


def test_an_unconnected_source_in_the_other_byte_order_gets_native_zeros(backend):
    source = np.array([1.0, 2.0], FOREIGN_ORDER + "f4")
    with gta.GradientTape() as tape:
        target = gta.TensorArray("float32", size=1).write(0, np.ones(2, np.float32)).read(0)
    zeros = gta.to_numpy(tape.gradient(target, source, unconnected_gradients="zero"))
    assert zeros.dtype == np.float32 and zeros.tolist() == [0.0, 0.0]


def test_a_python_str_gets_tensorflows_write_error(backend):
    victim = Victim("float32")
    text = "TensorArray dtype is float but Op is trying to write dtype string."
    refused(errors.InvalidArgumentError, lambda: write(victim.handle, 1, "wrong_type_scalar"), text, victim=victim)
    ta = gta.TensorArray("float32", size=2)
    refused(errors.InvalidArgumentError, lambda: ta.write(0, "wrong_type_scalar"), text, ta.handle.name)
    refused(errors.InvalidArgumentError, lambda: ta.unstack(["a", "b"]), text, ta.handle.name)


# -- objects whose protocol methods raise ------------------------------------------------------------------------------
class Boom(Exception):
    """A caller's own exception class: it must never escape the library."""


class BoomError(ArithmeticError):
    """Another one, deriving from a builtin the library might catch by accident."""


def _raise(exception):
    def method(*args, **kwargs):
        raise exception("boom from the caller's object")
    return method


def _hostile(method_name, exception=Boom, base=object):
    """An instance of a class whose ``method_name`` raises ``exception``."""
    namespace = {method_name: _raise(exception), "__repr__": lambda self: f"<hostile {method_name}>"}
    if method_name == "__eq__":
        namespace["__hash__"] = object.__hash__
    if method_name == "__len__":
        namespace["__getitem__"] = lambda self, i: 1.0      # a sequence, to NumPy, until __len__ runs
    if method_name == "__getitem__":
        namespace["__len__"] = lambda self: 2
    if method_name == "__dlpack__":
        namespace["__dlpack_device__"] = lambda self: (1, 0)
    if method_name == "__dlpack_device__":
        namespace["__dlpack__"] = lambda self, *a, **k: None
    if method_name == "__getattr__":
        namespace["__getattr__"] = lambda self, name: _raise(exception)()
    return type(f"Hostile_{method_name.strip('_')}", (base,), namespace)()


_METHODS = ["__hash__", "__eq__", "__index__", "__int__", "__float__", "__len__", "__iter__", "__getitem__",
            "__array__", "__dlpack__", "__dlpack_device__", "as_list", "__bool__", "__getattr__",
            "__array_interface__"]
HOSTILE = {f"{name}-{exception.__name__}": _hostile(name, exception)
           for name in _METHODS for exception in (Boom, BoomError)}
# Strings and ints that look right but whose own methods raise (a hash of a str subclass
# runs before any comparison in a dict).
HOSTILE["str-subclass-__hash__"] = _hostile("__hash__", Boom, str)
HOSTILE["str-subclass-__eq__"] = _hostile("__eq__", Boom, str)
HOSTILE["int-subclass-__index__"] = _hostile("__index__", Boom, int)
HOSTILE["int-subclass-__hash__"] = _hostile("__hash__", Boom, int)


def _array_ops(victim, argument, bad):
    """Calls of every raw op that takes ``argument``, with ``bad`` in it and good values
    elsewhere -> {label: call}. Arguments TensorFlow ignores (flow_in of reading ops)
    are not listed: nothing reads them, here as there."""
    h = victim.handle
    good = {"handle": h, "index": 1, "indices": [1, 3], "value": f32([7.0, 8.0]), "rows": f32([[7.0, 8.0]] * 2),
            "lengths": [0, 1, 0, 1], "flow_in": 0.0, "dtype": "float32", "element_shape": None,
            "element_shape_except0": None, "source": "gradients", "shape_to_prepend": [2]}

    def arg(name, default_key=None):
        return bad if name == argument else good[default_key or name]

    calls = {
        "write": lambda: ro.TensorArrayWriteV3(arg("handle"), arg("index"), arg("value"), arg("flow_in")),
        "read": lambda: ro.TensorArrayReadV3(arg("handle"), arg("index"), 0.0, arg("dtype")),
        "gather": lambda: ro.TensorArrayGatherV3(arg("handle"), arg("indices", "indices") if argument == "indices"
                                                 else [0, 2], 0.0, arg("dtype"), element_shape=arg("element_shape")),
        "scatter": lambda: ro.TensorArrayScatterV3(arg("handle"), arg("indices"), arg("value", "rows"),
                                                   arg("flow_in")),
        "split": lambda: ro.TensorArraySplitV3(arg("handle"), arg("value", "value"), arg("lengths"), arg("flow_in")),
        "concat": lambda: ro.TensorArrayConcatV3(arg("handle"), 0.0, arg("dtype"),
                                                 element_shape_except0=arg("element_shape_except0")),
        "size": lambda: ro.TensorArraySizeV3(arg("handle"), 0.0),
        "grad": lambda: ro.TensorArrayGradV3(arg("handle"), 0.0, arg("source")),
        "grad_with_shape": lambda: ro.TensorArrayGradWithShape(arg("handle"), 0.0, arg("shape_to_prepend"),
                                                               arg("source")),
        "close": lambda: ro.TensorArrayCloseV3(arg("handle")),
    }
    takes = {
        "handle": list(calls), "index": ["write", "read"], "indices": ["gather", "scatter"],
        "value": ["write", "scatter", "split"], "lengths": ["split"], "flow_in": ["write", "scatter", "split"],
        "dtype": ["read", "gather", "concat"], "element_shape": ["gather"],
        "element_shape_except0": ["concat"], "source": ["grad", "grad_with_shape"],
        "shape_to_prepend": ["grad_with_shape"],
    }
    return {name: calls[name] for name in takes[argument]}


# What each argument's error must name when the object itself is the problem.
_NEEDLES = {
    "handle": ("handle", "TensorArray"), "index": "index", "indices": "indices", "value": ("value", "write dtype"),
    "lengths": "lengths", "flow_in": "flow_in", "dtype": "dtype", "element_shape": "element_shape",
    "element_shape_except0": "element_shape_except0", "source": "source", "shape_to_prepend": "shape_to_prepend",
}


def _may_succeed(label, argument):
    # A str subclass is a str, an int subclass an int: TensorFlow takes them, and so may
    # we, as long as the subclass's own hostile methods are never run.
    return label.startswith(("str-subclass", "int-subclass"))


@pytest.mark.parametrize("argument", list(_NEEDLES))
@pytest.mark.parametrize("label", list(HOSTILE))
def test_hostile_objects_in_every_argument_of_every_raw_op(backend, label, argument):
    bad = HOSTILE[label]
    victim = Victim("float32")
    for op_name, call in _array_ops(victim, argument, bad).items():
        grads_before = set(registry.lookup(victim.handle).grads)
        try:
            call()
        except errors.OpError as error:
            message = str(error)
            needle = _NEEDLES[argument] if not _may_succeed(label, argument) else ("",)    # a valid value
            options = needle if isinstance(needle, tuple) else (needle,)
            assert any(option in message for option in options) or "boom" in message, \
                f"{op_name}: the message names neither {argument} nor the object's error: {message!r}"
            assert isinstance(error, (errors.InvalidArgumentError, errors.NotFoundError)), \
                f"{op_name}: {type(error).__name__}: {message}"
            assert set(registry.lookup(victim.handle).grads) == grads_before
            victim.unchanged()
            continue
        except Exception as error:  # noqa: BLE001
            raise AssertionError(f"{op_name}({argument}={label}): {type(error).__name__} escaped: {error}") from error
        assert _may_succeed(label, argument), f"{op_name} accepted {label} as {argument}"
        if op_name == "close":
            return
        victim = Victim("float32")      # a success may have written: start again


_CREATE_ARGUMENTS = ["size", "dtype", "element_shape", "dynamic_size", "clear_after_read",
                     "identical_element_shapes", "tensor_array_name"]


@pytest.mark.parametrize("argument", _CREATE_ARGUMENTS)
@pytest.mark.parametrize("label", list(HOSTILE))
def test_hostile_objects_in_every_argument_of_tensor_array_v3(backend, label, argument):
    arguments = {"size": 2, "dtype": "float32"}
    arguments[argument] = HOSTILE[label]
    open_before = gta.stats()["live_arrays"]
    try:
        ro.TensorArrayV3(**arguments)
    except errors.OpError as error:
        assert type(error) is errors.InvalidArgumentError, f"{type(error).__name__}: {error}"
        assert argument in str(error) or "boom" in str(error) or (argument == "size" and "Size" in str(error)), \
            str(error)
        assert gta.stats()["live_arrays"] <= open_before
        return
    except Exception as error:  # noqa: BLE001
        raise AssertionError(f"{type(error).__name__} escaped: {error}") from error
    assert _may_succeed(label, argument), f"TensorArrayV3 accepted {label} as {argument}"


def _class_calls(ta, bad):
    return {
        "write-index": lambda: ta.write(bad, [7.0, 8.0]), "write-value": lambda: ta.write(1, bad),
        "read-index": lambda: ta.read(bad), "gather-indices": lambda: ta.gather(bad),
        "scatter-indices": lambda: ta.scatter(bad, [[7.0, 8.0]]), "scatter-value": lambda: ta.scatter([1], bad),
        "unstack-value": lambda: ta.unstack(bad), "split-value": lambda: ta.split(bad, [1, 1]),
        "split-lengths": lambda: ta.split([[7.0, 8.0], [9.0, 1.0]], bad), "grad-source": lambda: ta.grad(bad),
        "constructor-dtype": lambda: gta.TensorArray(bad, size=2),
        "constructor-size": lambda: gta.TensorArray("float32", size=bad),
        "constructor-element_shape": lambda: gta.TensorArray("float32", size=2, element_shape=bad),
        "constructor-dynamic_size": lambda: gta.TensorArray("float32", size=2, dynamic_size=bad),
        "constructor-clear_after_read": lambda: gta.TensorArray("float32", size=2, clear_after_read=bad),
        "constructor-tensor_array_name": lambda: gta.TensorArray("float32", size=2, tensor_array_name=bad),
        "constructor-infer_shape": lambda: gta.TensorArray("float32", size=2, infer_shape=bad),
        "constructor-handle": lambda: gta.TensorArray("float32", handle=bad, flow=0.0),
        "constructor-flow": lambda: gta.TensorArray("float32", handle=ta.handle, flow=bad),
    }


@pytest.mark.parametrize("call_name", list(_class_calls(None, None)))
@pytest.mark.parametrize("label", list(HOSTILE))
def test_hostile_objects_in_every_argument_of_the_class(backend, label, call_name):
    bad = HOSTILE[label]
    ta = gta.TensorArray("float32", size=4, clear_after_read=False, element_shape=[2])
    ta.write(0, [1.5, -2.0]).write(2, [3.0, 0.25])
    flags = _slot_flags(registry.lookup(ta.handle))
    try:
        _class_calls(ta, bad)[call_name]()
    except errors.OpError as error:
        assert isinstance(error, errors.InvalidArgumentError), f"{type(error).__name__}: {error}"
        assert _slot_flags(registry.lookup(ta.handle)) == flags
        assert_same(host(ta.read(0)), f32([1.5, -2.0]))
        assert_same(host(ta.read(2)), f32([3.0, 0.25]))
        return
    except Exception as error:  # noqa: BLE001
        raise AssertionError(f"{call_name} with {label}: {type(error).__name__} escaped: {error}") from error
    # Accepted: only a str/int subclass may be, and infer_shape, which TensorFlow only
    # truth-tests (any object whose truth value exists is a valid infer_shape).
    truthy = call_name == "constructor-infer_shape" and not label.startswith(("__bool__", "__len__"))
    assert _may_succeed(label, call_name) or truthy, f"{call_name} accepted {label}"


# -- integers that wrap around in int64 --------------------------------------------------------------------------------
WRAPPING_LENGTHS = {
    # lengths whose int64 sum wraps to the value's row count (3)
    "max+max+5": [INT64_MAX, INT64_MAX, 5],
    "2**62x3+3": [2**62, 2**62, 2**62 + 3],
    "2**63-1x4": [INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, 7],
    "np.int64": np.array([INT64_MAX, INT64_MAX, 5], np.int64),
    "np.uint64-wraps-to-3": np.array([2**64 - 1, 4], np.uint64),
    "np.uint64-2**63": np.array([2**63, 2**63 + 3], np.uint64),
    "min+max+4": [INT64_MIN, INT64_MAX, 4],                   # exact sum 3, but a negative length
    "2**63": [2**63, 3],
    "-2**63-1": [-(2**63) - 1, 2**63 + 4],
    "2**64+3": [2**64 + 3],
}


@pytest.mark.parametrize("label", list(WRAPPING_LENGTHS))
def test_split_lengths_that_wrap_around_are_refused(backend, label):
    lengths = WRAPPING_LENGTHS[label]
    count = len(lengths)
    value = f32([10.0, 20.0, 30.0])
    handle, _ = new(count, clear_after_read=False, element_shape=None)
    refused(errors.InvalidArgumentError, lambda: split(handle, value, lengths), "lengths", handle.name)
    array = registry.lookup(handle)
    assert array.size == count and not any(any(slot) for slot in _slot_flags(array)), "a refused split wrote something"
    ta = gta.TensorArray("float32", size=count, clear_after_read=False, infer_shape=False)
    refused(errors.InvalidArgumentError, lambda: ta.split(value, lengths), "lengths", ta.handle.name)
    assert not any(any(slot) for slot in _slot_flags(registry.lookup(ta.handle)))


def test_the_wrapping_split_does_not_write_six_rows_of_a_three_row_value(backend):
    # The defect: int64 sum 2**64 + 3 wrapped to 3 == rows, and six rows were written.
    handle, _ = new(3, clear_after_read=False)
    message = refused(errors.InvalidArgumentError,
                      lambda: split(handle, f32([1.0, 2.0, 3.0]), [INT64_MAX, INT64_MAX, 5]), "lengths")
    assert str(2 * INT64_MAX + 5) in message, message       # the exact sum, not the wrapped one
    assert size(handle) == 3
    split(handle, f32([1.0, 2.0, 3.0]), [1, 0, 2])          # and the array still works
    assert_same(concat(handle).value, f32([1.0, 2.0, 3.0]))


def test_lengths_with_exact_sums_near_the_int64_limits_are_judged_by_the_exact_sum(backend):
    # Sums whose partial sums leave int64 but whose total fits are not overflow: they are
    # refused for what they are (negative lengths, a sum that is not the row count).
    handle, _ = new(4, clear_after_read=False)
    refused(errors.InvalidArgumentError,
            lambda: split(handle, f32([1.0, 2.0, 3.0]), [2**62, 2**62, -(2**62), -(2**62) + 3]),
            "Split lengths must be >= 0", handle.name)
    refused(errors.InvalidArgumentError, lambda: split(handle, f32([1.0, 2.0, 3.0]), [INT64_MAX, 0, 0, 0]),
            f"sum of lengths is {INT64_MAX}")


@pytest.mark.parametrize("bad", [INT64_MAX, INT64_MIN, 2**63, np.uint64(2**64 - 1), np.int64(INT64_MIN),
                                 np.uint64(2**32 + 1)],
                         ids=["2**63-1", "-2**63", "2**63", "uint64-max", "int64-min", "uint64-2**32+1"])
def test_int64_extremes_as_indices_and_sizes(backend, bad):
    victim = Victim("float32")
    h = victim.handle
    for call, needle in ((lambda: write(h, bad, f32([7.0, 8.0])), "index"), (lambda: read(h, bad), "index"),
                         (lambda: gather(h, [0, bad]), "indices"),
                         (lambda: scatter(h, [bad], f32([[7.0, 8.0]])), "indices"),
                         (lambda: grad_with_shape(h, [bad]), "shape_to_prepend")):
        message = refused(errors.InvalidArgumentError, call, needle, "does not fit", victim=victim)
        assert str(int(bad)) in message, message
    refused(errors.InvalidArgumentError, lambda: new(bad), "size", "does not fit")
    refused(errors.InvalidArgumentError, lambda: gta.TensorArray("float32", size=bad), "size", "does not fit")


@pytest.mark.parametrize("element_shape", [[2**62], [2**31, 2**31], [2**20] * 3, [INT64_MAX]],
                         ids=["2**62", "2**31x2**31", "2**20**3", "int64max"])
def test_arrays_whose_bytes_exceed_int64_are_sized_exactly(backend, element_shape):
    # size x elements x bytes computed in Python ints: never wrapped to something small. (A shape
    # whose own entries pass int64 is TensorFlow's InvalidArgumentError: tests/ops/test_dtypes_shapes.py.)
    exact = 3 * math.prod(element_shape) * 4
    message = refused(errors.ResourceExhaustedError, lambda: new(3, "float32", element_shape=element_shape), "OOM")
    assert str(exact) in message, message
    forward, _ = new(2, "float32", element_shape=[2])
    g = grad_with_shape(forward, [2**31 - 1, 2**31 - 1])
    refused(errors.ResourceExhaustedError, lambda: read(g, 0), "OOM", g.name)
    assert int(host(size(g))) == 2


class _Hostile(Exception):
    pass


class _SubclassThatRaises(np.ndarray):
    """A NumPy subclass whose every Python-level attribute an op might touch raises."""
    dtype = property(lambda self: _raise())
    ndim = property(lambda self: _raise())
    shape = property(lambda self: _raise())

    def reshape(self, *args, **kwargs):
        _raise()

    def __getitem__(self, key):
        _raise()

    def view(self, *args, **kwargs):
        _raise()


def _raise():
    raise _Hostile("a subclass's own code ran inside the op")


@pytest.mark.parametrize("op", ["write", "scatter", "split", "split uneven"])
def test_a_numpy_subclass_is_written_as_the_plain_array_over_its_memory(backend, op):
    # Its own attributes never run inside an op (they could raise anything, or lie).
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)
    hostile = rows.view(_SubclassThatRaises)
    handle, _ = new(4, "float32", clear_after_read=False)
    if op == "write":
        write(handle, 2, rows[1].view(_SubclassThatRaises))
        assert_same(read(handle, 2), rows[1])
        return
    if op == "scatter":
        ro.TensorArrayScatterV3(handle, np.arange(4), hostile, 0.0)
        assert_same(ro.TensorArrayGatherV3(handle, np.arange(4), 0.0, "float32"), rows)
        return
    split(handle, hostile, [1, 1, 1, 1] if op == "split" else [2, 0, 1, 1])
    assert_same(concat(handle).value, rows)


# -- TensorFlow's string handles and element_shape_except0 ------------------------------------------------------------
def test_string_handles_name_their_array(backend):
    handle, _ = new(2, clear_after_read=False)
    split(handle, f32([1.0, 2.0, 3.0]), [1, 2])
    for legacy in (["_tensor_arrays", handle.name], np.array(["_tensor_arrays", handle.name]),
                   [b"_tensor_arrays", handle.name.encode()], np.array([b"_tensor_arrays", handle.name.encode()])):
        assert_same(concat(legacy).value, f32([1.0, 2.0, 3.0]))
        assert int(host(size(legacy))) == 2
    g = grad(handle)
    write(g, 0, f32([5.0]))
    assert_same(read(["_tensor_array_grads", g.name], 0), f32([5.0]))


@pytest.mark.parametrize("legacy", [["a", "b"], np.array(["a", "b"]), [b"a", b"b"], ["", ""]],
                         ids=["list", "array", "bytes", "empty"])
def test_string_handles_in_other_containers_are_not_found(backend, legacy):
    for call in (lambda: concat(legacy, "int32", element_shape_except0=1), lambda: size(legacy),
                 lambda: read(legacy, 0), lambda: write(legacy, 0, f32(1)), lambda: grad(legacy),
                 lambda: ro.TensorArrayCloseV3(legacy)):
        refused(errors.NotFoundError, call, "Container", "does not exist")


def test_a_string_handle_names_an_array_in_its_own_container(backend):
    # TensorFlow keys _tensor_arrays<name> and _tensor_array_grads<name> apart: a forward array
    # may bear the name of another array's gradient array, and each pair finds its own.
    first, _ = new(2, element_shape=[1])
    forward, _ = new(5, tensor_array_name=f"{first.name}@x")        # named "<first>@x_<n>"
    name = forward.name
    g = grad(first, name.partition("@")[2])                          # "<first>@x_<n>" too, a gradient array
    assert g.name == name
    assert int(host(size(["_tensor_arrays", name]))) == 5 and int(host(size(name))) == 5    # a bare name: forward first
    assert int(host(size(["_tensor_array_grads", name]))) == 2
    assert grad(["_tensor_arrays", name]).array is forward.array.grads["gradients"].array
    refused(errors.NotFoundError, lambda: size(["_tensor_array_grads", first.name]), first.name, "does not exist")
    refused(errors.NotFoundError, lambda: size(["_tensor_arrays", f"{first.name}@gradients"]), "does not exist")


def test_string_handles_of_missing_arrays_are_not_found(backend):
    refused(errors.NotFoundError, lambda: size(["_tensor_arrays", "no-such-array"]), "no-such-array")


@pytest.mark.parametrize("except0", [2, np.int64(2), np.array(2), np.uint8(2)], ids=["int", "np.int64", "0-d", "uint8"])
def test_element_shape_except0_n_means_a_vector_of_n(backend, except0):
    handle, _ = new(2, clear_after_read=False)
    scatter(handle, [0, 1], f32([[[1.0, 2.0]], [[3.0, 4.0]]]))
    value, lengths = concat(handle, element_shape_except0=except0)
    assert_same(value, f32([[1.0, 2.0], [3.0, 4.0]]))
    assert_same(lengths, np.array([1, 1], np.int64))
    refused(errors.InvalidArgumentError, lambda: concat(handle, element_shape_except0=type(except0)(3)
                                                        if not isinstance(except0, np.ndarray) else np.array(3)),
            "element_shape_except0 [3]", handle.name)
    empty, _ = new(0)
    assert host(concat(empty, element_shape_except0=except0).value).shape == (0, 2)
    for bad in (True, 2.0, -1):
        refused(errors.InvalidArgumentError, lambda: concat(handle, element_shape_except0=bad),
                "element_shape_except0", handle.name)
