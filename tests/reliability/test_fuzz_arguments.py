"""The argument fuzzer (issue 6, reliability): hypothesis draws valid values, hostile
objects (odd types, huge integers, arrays of every dtype, objects whose protocol methods
raise) for every argument of every raw op, on arrays in many states. Only
gpu_tensorarray.errors classes may escape, and a failed op must leave its array exactly
as it was (docs/semantics.md §6.1). The hand-written cases are test_hostile_input.py.
"""

import array
import math
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import Handle, registry
from hostile_util import INT32_MAX, Opaque, same_snapshot, snapshot
from ta_conformance_util import close, grad, grad_with_shape, host, new, read, scatter, split, write


# -- fuzz: hypothesis in every argument of every raw op ---------------------------------------------------------------
# Integers that fit in int32 but are large (2**16 .. 2**31-1) are legitimate sizes and
# indices whose cost is real work (a 2**31-slot array has 2 GiB of slot flags), so
# draws keep in-range integers small; out-of-range ones stay huge. The large in-range
# cases have their own tests above (memory limit, grad reads far past the end).
_SMALL = 1 << 12


def _tame(value):
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        value_int = int(value)
        if -(2**31) <= value_int <= INT32_MAX and abs(value_int) >= _SMALL:
            return type(value)(value_int % _SMALL) if not isinstance(value, int) else value_int % _SMALL
    return value


def _tame_array(array):
    if array.dtype.kind in "iu" and array.size:
        wide = array.astype(object)
        for position, item in np.ndenumerate(wide):
            wide[position] = _tame(int(item))
        return wide.astype(array.dtype)
    return array


_huge_ints = st.one_of(st.integers(min_value=2**31), st.integers(max_value=-(2**31) - 1),
                       st.sampled_from([2**31, -(2**31) - 1, 2**32, 2**53 + 1, 2**63 - 1, 2**63, -(2**63),
                                        -(2**63) - 1, 2**64, 2**100, -(2**100)]))
_ints = st.one_of(st.integers(-_SMALL, _SMALL), _huge_ints)
_floats = st.one_of(st.floats(), st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 1e300, 5e-324]))
_texts = st.one_of(st.text(max_size=6), st.sampled_from(["", "0", "1", "float32", "int32", "nan", "\x00", "\ud800",
                                                         "TensorArrayV3_0", "gradients"]))
_ODD = [Opaque(), int, float, str, bytes, type, np.float32, np.dtype("O"), np.dtype("M8[s]"), Ellipsis,
        NotImplemented, slice(1, 2), range(3), range(-1, 2), range(5, 0, -1), frozenset(), frozenset({1}),
        Decimal("1.5"), Decimal("NaN"), Fraction(3, 2), bytearray(b"12"), complex(1, 1), np.datetime64(1, "s"),
        np.timedelta64(1, "s"), np.float32(np.nan), np.int64(2**40), np.uint64(2**64 - 1), np.bool_(True)]


class _FuzzBoom(Exception):
    pass


def _raising(method_name, base=object):
    def method(*args, **kwargs):
        raise _FuzzBoom(method_name)
    namespace = {method_name: method, "__repr__": lambda self: f"<raises in {method_name}>"}
    if method_name == "__len__":
        namespace["__getitem__"] = lambda self, i: 1
    return type("Raising", (base,), namespace)()


# Typed buffers (their dtype is theirs) and objects whose protocol methods raise.
_ODD += [memoryview(array.array("d", [1e300, 2.0])), array.array("f", [1.5]), memoryview(b"\x01\x02"), b"\x00\x01",
         np.array([1.5], ">f4"), np.array([2**62, 2**62], np.int64)]
_odd = st.integers(0, len(_ODD) - 1).map(_ODD.__getitem__)     # (sampled_from inspects types: slow)
_RAISING = [_raising(name) for name in ("__hash__", "__eq__", "__index__", "__int__", "__float__", "__len__",
                                        "__iter__", "__array__", "__dlpack__", "__dlpack_device__", "as_list",
                                        "__bool__", "__getattr__")] + [_raising("__hash__", str), _raising("__index__", int)]
_raising_objects = st.integers(0, len(_RAISING) - 1).map(_RAISING.__getitem__)   # not in object arrays: NumPy
                                                                                  # would run them here
_scalars = st.one_of(st.none(), st.booleans(), _ints, _floats, _texts, st.binary(max_size=6), st.complex_numbers(),
                     _odd)
# Every numpy dtype family in both byte orders, filled with random bytes (every bit
# pattern: NaNs, infinities, huge integers - tamed as above) from a drawn seed; hnp.arrays
# costs several times more per example. Object arrays are built from _scalars.
# (Datetimes get units: generic-unit ones cannot even be repr()ed; test_arguments_whose_repr_fails
# covers that, and here it would hide every other finding.)
_ARRAY_DTYPES = sorted({np.dtype(code).newbyteorder(order) for code in ["?", "b", "h", "i", "l", "q", "B", "H", "I",
                                                                        "L", "Q", "e", "f", "d", "g", "F", "D", "G",
                                                                        "M8[s]", "m8[ms]"]
                        for order in "<>"}, key=str)
_STRING_ARRAYS = [np.array(["a", ""]), np.array([b"\xff"]), np.array("0"), np.zeros((2, 0), "U1"),
                  np.zeros(2, [("a", "f4")]), np.zeros(3, "V4")]


def _random_array(draw_args):
    code, shape, seed = draw_args
    dtype = _ARRAY_DTYPES[code]
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.random.default_rng(seed).integers(0, 256, count * dtype.itemsize, dtype=np.uint8)
    array = raw.view(dtype).reshape(shape)
    if dtype.kind == "b":
        array = raw.astype(bool).reshape(shape)
    return _tame_array(array)


_ndarrays = st.one_of(
    st.tuples(st.integers(0, len(_ARRAY_DTYPES) - 1), st.lists(st.integers(0, 3), max_size=3).map(tuple),
              st.integers(0, 2**32 - 1)).map(_random_array),
    st.integers(0, len(_STRING_ARRAYS) - 1).map(_STRING_ARRAYS.__getitem__),
    st.lists(_scalars, max_size=3).map(lambda items: np.array(items + [None], dtype=object)),
)
_leaf = st.one_of(_scalars, _ndarrays, _raising_objects)
_hostile = st.one_of(
    _leaf,
    st.lists(_leaf, max_size=4),
    st.tuples(_leaf, _leaf),
    st.lists(st.lists(_scalars, max_size=3), max_size=3),
    st.dictionaries(st.one_of(_texts, st.integers(-3, 3)), _leaf, max_size=2),
)

_valid_dtype_names = ["float32", "float64", "int32", "int64", "bool", "complex64", "float16", "uint8"]
_valid = {
    "size": st.integers(0, 6),
    "dtype": st.sampled_from(_valid_dtype_names + [np.float32, np.dtype("int32"), float, int, "float", "double"]),
    "element_shape": st.one_of(st.none(), st.lists(st.one_of(st.none(), st.integers(0, 3)), max_size=3)),
    "flag": st.booleans(),
    "string": st.text(max_size=5),
    "index": st.integers(-2, 7),
    "indices": st.one_of(st.lists(st.integers(-1, 7), max_size=9),
                         hnp.arrays(st.sampled_from([np.int32, np.int64]), st.integers(0, 9),
                                    elements=st.integers(-1, 7))),
    "lengths": st.one_of(st.lists(st.integers(0, 3), max_size=6),
                         hnp.arrays(np.int64, st.integers(0, 6), elements=st.integers(0, 3)),
                         st.sampled_from([[2**63 - 1, 2**63 - 1, 5], [2**62, 2**62, 2**62 + 3],      # int64 sums that
                                          [-(2**63), 2**63 - 1, 4], np.array([2**64 - 1, 4], np.uint64)])),  # wrap
    "value": st.one_of(
        hnp.arrays(st.sampled_from(["float32", "float32", "float64", "int32", "bool", "complex64"]),
                   hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)),
        st.floats(width=32), st.lists(st.floats(width=32), max_size=4)),
    "flow": st.one_of(st.just(0.0), st.floats(width=32), st.just(np.float32(0))),
    "prepend": st.lists(st.integers(0, 3), max_size=3),
    "name": st.none(),
}

_OMIT = object()


def _arg(kind, optional=False):
    choices = [_valid[kind], _valid[kind], _hostile]
    if optional:
        choices.append(st.just(_OMIT))
    return st.one_of(*choices)


# op name -> {argument: strategy}; "handle" is drawn separately.
_OPS = {
    "TensorArrayV3": {"size": _arg("size"), "dtype": _arg("dtype"), "element_shape": _arg("element_shape", True),
                      "dynamic_size": _arg("flag", True), "clear_after_read": _arg("flag", True),
                      "identical_element_shapes": _arg("flag", True), "tensor_array_name": _arg("string", True),
                      "name": _arg("name", True)},
    "TensorArrayWriteV3": {"index": _arg("index"), "value": _arg("value"), "flow_in": _arg("flow"),
                           "name": _arg("name", True)},
    "TensorArrayReadV3": {"index": _arg("index"), "flow_in": _arg("flow"), "dtype": _arg("dtype"),
                          "name": _arg("name", True)},
    "TensorArrayGatherV3": {"indices": _arg("indices"), "flow_in": _arg("flow"), "dtype": _arg("dtype"),
                            "element_shape": _arg("element_shape", True), "name": _arg("name", True)},
    "TensorArrayScatterV3": {"indices": _arg("indices"), "value": _arg("value"), "flow_in": _arg("flow"),
                             "name": _arg("name", True)},
    "TensorArrayConcatV3": {"flow_in": _arg("flow"), "dtype": _arg("dtype"),
                            "element_shape_except0": _arg("element_shape", True), "name": _arg("name", True)},
    "TensorArraySplitV3": {"value": _arg("value"), "lengths": _arg("lengths"), "flow_in": _arg("flow"),
                           "name": _arg("name", True)},
    "TensorArraySizeV3": {"flow_in": _arg("flow"), "name": _arg("name", True)},
    "TensorArrayCloseV3": {"name": _arg("name", True)},
    "TensorArrayGradV3": {"flow_in": _arg("flow"), "source": _arg("string"), "name": _arg("name", True)},
    "TensorArrayGradWithShape": {"flow_in": _arg("flow"), "shape_to_prepend": _arg("prepend"),
                                 "source": _arg("string"), "name": _arg("name", True)},
}


def _build(kind):
    """A live array in some state -> (handle, objects to keep alive)."""
    f = np.float32
    if kind == "fresh":
        return new(3)[0], ()
    if kind == "shaped-partly-used":
        handle, _ = new(4, element_shape=[2])
        write(handle, 0, np.ones(2, f))
        write(handle, 1, np.ones(2, f))
        read(handle, 1)
        return handle, ()
    if kind == "dynamic-empty":
        return new(0, dynamic_size=True)[0], ()
    if kind == "dynamic-used":
        handle, _ = new(0, dynamic_size=True, clear_after_read=False, identical_element_shapes=True)
        scatter(handle, [0, 2], np.ones((2, 2), f))
        return handle, ()
    if kind == "closed":
        handle, _ = new(2)
        close(handle)
        return handle, ()
    if kind == "ragged":
        handle, _ = new(3, clear_after_read=False)
        split(handle, np.arange(6, dtype=f), [1, 2, 3])
        return handle, ()
    if kind == "size-zero":
        return new(0, element_shape=[2])[0], ()
    if kind == "grad":
        forward, _ = new(3, element_shape=[2])
        scatter(forward, [0, 1], np.ones((2, 2), f))
        return grad(forward), (forward,)
    if kind == "grad-with-shape":
        forward, _ = new(2)
        split(forward, np.ones(3, f), [1, 2])
        return grad_with_shape(forward, [2]), (forward,)
    if kind == "forward-with-grad":
        forward, _ = new(0, dynamic_size=True, element_shape=[])
        write(forward, 1, f(1))
        return forward, (grad(forward),)
    if kind == "int64":
        handle, _ = new(2, "int64", clear_after_read=False)
        write(handle, 0, np.arange(3))
        return handle, ()
    if kind == "bool":
        return new(2, "bool", element_shape=[])[0], ()
    if kind == "by-name":
        handle, _ = new(2, clear_after_read=False, element_shape=[])
        write(handle, 0, f(1))
        return handle.name, (handle,)
    raise AssertionError(kind)


_HANDLE_KINDS = ["fresh", "shaped-partly-used", "dynamic-empty", "dynamic-used", "closed", "ragged", "size-zero",
                 "grad", "grad-with-shape", "forward-with-grad", "int64", "bool", "by-name"]
_FUZZ_EXAMPLES = {"numpy": 300, "emulated": 80, "cupy": 80}    # about 5 ms each


def _fuzz_one(data, op_name, backend):
    arguments = {}
    keep = ()
    handle_kind = None
    if op_name != "TensorArrayV3":
        if data.draw(st.integers(0, 4), label="hostile handle?") == 0:
            arguments["handle"] = data.draw(_hostile, label="handle")
        else:
            handle_kind = data.draw(st.sampled_from(_HANDLE_KINDS), label="handle kind")
            arguments["handle"], keep = _build(handle_kind)
    for argument, strategy in _OPS[op_name].items():
        value = data.draw(strategy, label=argument)
        if value is not _OMIT:
            arguments[argument] = value
    before = snapshot(arguments["handle"]) if handle_kind else None
    open_before = len(registry._by_name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # numpy's RuntimeWarnings for odd draws are not failures
        try:
            result = getattr(ro, op_name)(**arguments)
        except errors.OpError as error:
            note(f"{type(error).__name__}: {error}")
            if handle_kind:
                assert same_snapshot(snapshot(arguments["handle"]), before), \
                    f"a failed {op_name} changed the array: {type(error).__name__}: {error}"
            if op_name == "TensorArrayV3":
                assert len(registry._by_name) <= open_before
            return
    # A success: flows are float32 scalars of the array's backend, handles are handles.
    if op_name in ("TensorArrayWriteV3", "TensorArrayScatterV3", "TensorArraySplitV3"):
        assert host(result).dtype == np.float32 and host(result).shape == ()
    elif op_name in ("TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape"):
        assert isinstance(result[0], Handle)
        assert host(result[1]).dtype == np.float32 and host(result[1]).shape == ()
    elif op_name == "TensorArrayCloseV3":
        assert result is None
    del keep


def _run_fuzz(backend, op_name, examples):
    @settings(max_examples=examples, deadline=None, database=None,
              phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def fuzz(data):
        _fuzz_one(data, op_name, backend)

    fuzz()


@pytest.mark.parametrize("op_name", list(_OPS))
def test_fuzz_only_op_errors_escape(backend, op_name):
    _run_fuzz(backend, op_name, _FUZZ_EXAMPLES[backend.name])


@pytest.mark.slow
@pytest.mark.parametrize("op_name", list(_OPS))
def test_fuzz_only_op_errors_escape_long(backend, op_name):
    _run_fuzz(backend, op_name, 5_000)
