"""Hostile input (issue 6, reliability) through the public API: raw_ops and the
TensorArray class.

Every bad argument must raise the right gpu_tensorarray.errors class, never a
bare Python exception, and its message must say which array (its unique name,
whenever an array is involved), which argument, and what was expected versus
seen. A failed op leaves its array exactly as it was (docs/semantics.md §6.1).
Values themselves are never hostile: NaN, infinities, -0.0 and subnormals are
stored and read back bit for bit, and aggregate as np.add.at does.

The fuzzer of every argument of every raw op is test_fuzz_arguments.py.
"""

import math
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
import warnings
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import Handle, registry
from hostile_util import INT32_MAX, Opaque, expect, expect_unchanged
from reference_model import tf_add
from ta_conformance_util import (
    CLOSED, FLOAT_DTYPES, TF_NAME, WRITE_DTYPE, assert_same, close, concat, f32, gather, grad, grad_with_shape,
    host, new, read, scatter, size, split, write,
)

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gta.__file__)))




# -- integer arguments: index, indices, lengths, size, shape_to_prepend -------------------------------------------
BAD_SCALARS = {
    "float": 1.5, "integral-float": 2.0, "np.float64": np.float64(1), "nan": math.nan, "inf": math.inf,
    "bool": True, "np.bool_": np.bool_(False), "None": None, "str": "1", "bytes": b"1", "complex": 1 + 0j,
    "2**31": 2**31, "-2**31-1": -(2**31) - 1, "2**40": 2**40, "2**63": 2**63, "2**64": 2**64, "2**100": 2**100,
    "-2**100": -(2**100), "np.uint64(2**63)": np.uint64(2**63), "np.int64(2**40)": np.int64(2**40),
    "object": Opaque(), "Decimal": Decimal("1"), "Fraction": Fraction(1, 1), "float-0d-array": np.array(1.0),
    "str-0d-array": np.array("1"), "object-0d-array": np.array(1, dtype=object),
    "datetime64": np.datetime64(1, "s"), "dict": {0: 0}, "set": {0},
}


@pytest.mark.parametrize("bad", list(BAD_SCALARS.values()), ids=list(BAD_SCALARS))
def test_hostile_write_index(backend, bad):
    handle, _ = new(3, element_shape=[])
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: write(handle, bad, f32(1)), handle.name, "index")


@pytest.mark.parametrize("bad", list(BAD_SCALARS.values()), ids=list(BAD_SCALARS))
def test_hostile_read_index(backend, bad):
    handle, _ = new(3, element_shape=[])
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: read(handle, bad), handle.name, "index")


@pytest.mark.parametrize("bad", [[0], [[1]], np.zeros((1, 1), np.int32)], ids=["[0]", "[[1]]", "2-d"])
def test_index_of_the_wrong_rank(backend, bad):
    handle, _ = new(3, element_shape=[])
    shape = "[1]" if len(np.shape(bad)) == 1 else "[1,1]"
    for op in (lambda: write(handle, bad, f32(1)), lambda: read(handle, bad)):
        expect_unchanged(handle, errors.InvalidArgumentError, op,
                         "TensorArray index must be scalar, but had shape: " + shape, handle.name)


BAD_VECTORS = {
    "float": [0.5], "mixed-float": [0, 1.5], "nan": [math.nan], "bool": [True, False], "None": [None],
    "mixed-None": [0, None], "str-items": ["0"], "bytes-items": [b"0"], "str": "01", "bytes": b"\x00\x01",
    "2**31": [2**31], "-2**31-1": [-(2**31) - 1], "2**63": [0, 2**63], "2**64": [2**64], "2**100": [2**100],
    "ragged": [[0], [1, 2]], "float-array": np.array([0.0, 1.0]), "bool-array": np.array([True]),
    "uint64-array": np.array([2**63], np.uint64), "object-array": np.array([0, 1], dtype=object),
    "str-array": np.array(["0"]), "datetime-array": np.array([0], "M8[s]"), "complex": [1j], "object": [Opaque()],
    "dict": {0: 1}, "None-itself": None, "float-itself": 0.5,
}


@pytest.mark.parametrize("bad", list(BAD_VECTORS.values()), ids=list(BAD_VECTORS))
def test_hostile_gather_indices(backend, bad):
    handle, _ = new(3, element_shape=[], clear_after_read=False)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: gather(handle, bad), handle.name, "indices")


@pytest.mark.parametrize("bad", list(BAD_VECTORS.values()), ids=list(BAD_VECTORS))
def test_hostile_scatter_indices(backend, bad):
    handle, _ = new(3, element_shape=[])
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: scatter(handle, bad, f32([1.0])),
                     handle.name, "indices")


@pytest.mark.parametrize("bad, shape", [(0, "[]"), ([[0]], "[1,1]"), (np.zeros((1, 1, 1), np.int64), "[1,1,1]")],
                         ids=["scalar", "matrix", "3-d"])
def test_indices_of_the_wrong_rank(backend, bad, shape):
    handle, _ = new(3, element_shape=[])
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: gather(handle, bad),
                     "Expected indices to be a vector, but received shape: " + shape, handle.name)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: scatter(handle, bad, f32([1.0])),
                     "Expected indices to be a vector, but received shape: " + shape, handle.name)


BAD_LENGTHS = {
    "float": [1.5, 1.5], "integral-float": [1.0, 2.0], "nan": [math.nan, 3], "bool": [True, True, True],
    "None": [None, 3], "str-items": ["1", "2"], "str": "12", "2**63": [2**63, 0], "2**64": [2**64, 0],
    "-2**63-1": [-(2**63) - 1, 3], "ragged": [[1], [1, 1]], "float-array": np.array([1.0, 2.0]),
    "uint64-array": np.array([2**63, 3], np.uint64), "object-array": np.array([1, 2], dtype=object),
    "str-array": np.array(["1", "2"]), "object": [Opaque(), 3], "None-itself": None,
}


@pytest.mark.parametrize("bad", list(BAD_LENGTHS.values()), ids=list(BAD_LENGTHS))
def test_hostile_split_lengths(backend, bad):
    handle, _ = new(2)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: split(handle, f32([1, 2, 3]), bad),
                     handle.name, "lengths")


@pytest.mark.parametrize("bad, shape", [(3, "[]"), ([[1, 2]], "[1,2]")], ids=["scalar", "matrix"])
def test_split_lengths_of_the_wrong_rank(backend, bad, shape):
    handle, _ = new(2)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: split(handle, f32([1, 2, 3]), bad),
                     "Expected lengths to be a vector, received shape: " + shape, handle.name)


def test_split_lengths_whose_sum_overflows_int64(backend):
    handle, _ = new(3)
    expect_unchanged(handle, errors.InvalidArgumentError,
                     lambda: split(handle, f32([1, 2, 3]), [2**62, 2**62, 2**62 + 3]), handle.name, "lengths")


def test_negative_split_lengths(backend):
    # TF aborts the process; we raise (docs/semantics.md §6.2).
    handle, _ = new(2)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: split(handle, f32([1, 2, 3]), [5, -2]),
                     handle.name, "lengths", "-2")


@pytest.mark.parametrize("bad", list(BAD_SCALARS.values()), ids=list(BAD_SCALARS))
def test_hostile_size(backend, bad):
    before = len(registry._by_name)
    expect(errors.InvalidArgumentError, lambda: new(bad), "size")
    assert len(registry._by_name) <= before


@pytest.mark.parametrize("bad", [-1, -(2**31), np.int32(-5), np.array(-1, np.int64)],
                         ids=["-1", "-2**31", "np.int32", "0-d-int64"])
def test_negative_size(backend, bad):
    error = expect(errors.InvalidArgumentError, lambda: new(bad))
    assert str(error) == "Size should be >= 0."


@pytest.mark.parametrize("bad, shape", [([3], "[1]"), ([[1]], "[1,1]"), (np.zeros(0, np.int32), "[0]")],
                         ids=["vector", "matrix", "empty"])
def test_size_of_the_wrong_rank(backend, bad, shape):
    expect(errors.InvalidArgumentError, lambda: new(bad), "TensorArray size must be scalar, but had shape: " + shape)


BAD_PREPEND = {
    "float": [1.5], "bool": [True], "None": [None], "None-itself": None, "str": "12", "str-items": ["1"],
    "2**31": [2**31], "2**63": [2**63], "2**100": [2**100], "ragged": [[1], [1, 2]], "object": [Opaque()],
    "float-array": np.array([2.0]), "object-array": np.array([1], dtype=object),
    "scalar": 3, "matrix": [[1, 2]], "negative": [2, -1],
}


@pytest.mark.parametrize("bad", list(BAD_PREPEND.values()), ids=list(BAD_PREPEND))
def test_hostile_shape_to_prepend(backend, bad):
    handle, _ = new(2, element_shape=[3])
    write(handle, 0, f32([1, 2, 3]))
    error = expect_unchanged(handle, errors.InvalidArgumentError, lambda: grad_with_shape(handle, bad), handle.name)
    assert "shape" in str(error)
    assert size(handle) == 2
    g = grad_with_shape(handle, [2])           # a failed call created no grad array: this one is fresh
    assert_same(read(g, 0), np.zeros((2, 3), np.float32))


# -- values --------------------------------------------------------------------------------------------------------
BAD_VALUES = {
    "str": "abc", "numeric-str": "1.5", "bytes": b"abc", "None": None, "dict": {"a": 1}, "set": {1.0},
    "object": Opaque(), "ragged": [[1.0], [1.0, 2.0]], "ragged-deep": [[[1.0]], [1.0]],
    "mixed-str": [1.0, "a"], "mixed-None": [1.0, None],
    "object-array": np.array([1.0, None], dtype=object), "object-array-of-floats": np.array([1.0, 2.0], dtype=object),
    "str-array": np.array(["a", "b"]), "bytes-array": np.array([b"a", b"b"]),
    "datetime-array": np.array([0, 1], "M8[s]"), "timedelta-array": np.array([0, 1], "m8[s]"),
    "void": np.zeros(2, "V4"),
    "structured": np.zeros(2, [("a", "f4")]),
}


@pytest.mark.parametrize("bad", list(BAD_VALUES.values()), ids=list(BAD_VALUES))
def test_hostile_values_through_raw_ops(backend, bad):
    handle, _ = new(2)
    for op in (lambda: write(handle, 0, bad), lambda: scatter(handle, [0, 1], bad),
               lambda: split(handle, bad, [1, 1])):
        error = expect_unchanged(handle, errors.InvalidArgumentError, op, handle.name)
        assert "value" in str(error) or "dtype" in str(error), str(error)


def test_non_native_byte_order_is_converted_or_refused_cleanly(backend):
    # TF converts a big-endian float32 array to float32; refusing it is acceptable too,
    # as an InvalidArgumentError naming the array, but never a wrong value or a bare error.
    handle, _ = new(2, "float32", clear_after_read=False)
    swapped = np.array([1.5, -2.0], ">f4")
    try:
        write(handle, 0, swapped)
    except errors.OpError as error:
        assert type(error) is errors.InvalidArgumentError and handle.name in str(error), str(error)
        return
    assert_same(read(handle, 0), f32([1.5, -2.0]))


def test_lists_of_empty_integer_arrays_are_values(backend):
    # TF: convert_to_tensor([np.array([], np.int32)]) is an int32 tensor of shape [1, 0].
    handle, _ = new(3, "int32", clear_after_read=False)
    value = [np.array([], np.int32)]
    write(handle, 0, value)
    assert_same(read(handle, 0, "int32"), np.zeros((1, 0), np.int32))
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: scatter(handle, [], value), handle.name)
    scatter(handle, [1], [[np.array([], np.int32)]])
    assert_same(read(handle, 1, "int32"), np.zeros((1, 0), np.int32))
    pieces, _ = new(3, "int32", clear_after_read=False)
    split(pieces, (np.zeros(0, np.int32), np.zeros(0, np.int32)), [1, 1, 0])
    assert_same(read(pieces, 2, "int32"), np.zeros((0, 0), np.int32))


@pytest.mark.parametrize("dtype", ["float64", "int32", "int64", "float16", "bool", "complex64", "uint8"])
def test_values_of_the_wrong_dtype(backend, dtype):
    handle, _ = new(2, "float32")
    value = np.ones(2, dtype)
    text = WRITE_DTYPE.format(array="float", value=TF_NAME[dtype])
    for op in (lambda: write(handle, 0, value), lambda: scatter(handle, [0, 1], value),
               lambda: split(handle, value, [1, 1])):
        expect_unchanged(handle, errors.InvalidArgumentError, op, text, handle.name)


@pytest.mark.parametrize("bad", [[2**63], 2**63, [2**64 - 1], [-(2**63) - 1], [1, 2**70]],
                         ids=["[2**63]", "2**63", "[2**64-1]", "[-2**63-1]", "[1,2**70]"])
def test_python_ints_beyond_int64_are_rejected_not_wrapped(backend, bad):
    # TF: "Can't convert Python int to Tensor ... out of range for int64". Never a silent wrap-around.
    handle, _ = new(2, "int64", clear_after_read=False)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: write(handle, 0, bad), handle.name)


@pytest.mark.parametrize("dtype, bad", [
    ("float32", None), ("float32", "1.5"), ("float64", [None, 1.0]), ("int32", 1.7), ("int32", [1.5, 2.0]),
    ("int64", math.nan), ("bool", "abc"), ("bool", "False"), ("float32", {"a": 1}), ("int32", 2**40),
    ("uint8", -1), ("uint8", 300), ("float32", [[1.0], [1.0, 2.0]]), ("float32", b"1"),
], ids=["None-to-float", "str-to-float", "None-in-list", "1.7-to-int32", "floats-to-int32", "nan-to-int64",
        "str-to-bool", "'False'-to-bool", "dict", "2**40-to-int32", "-1-to-uint8", "300-to-uint8", "ragged", "bytes"])
def test_tensor_array_class_rejects_values_it_cannot_convert_exactly(backend, dtype, bad):
    # TF's convert_to_tensor(value, dtype) refuses all of these (TypeError/ValueError);
    # silently storing NaN, 1, True or 1.5 instead would corrupt data.
    ta = gta.TensorArray(dtype, size=2, clear_after_read=False)
    for op in (lambda: ta.write(0, bad), lambda: ta.unstack([bad, bad]), lambda: ta.scatter([0], [bad])):
        expect_unchanged(ta.handle, errors.InvalidArgumentError, op, ta.handle.name)


_CLASS_CASES = {
    # label: (call on a TensorArray ``ta`` of float32, size 2, element shape [2]; needles; whether ta is involved)
    "write-index-float": (lambda ta: ta.write(1.5, [1.0, 2.0]), ["index"], True),
    "read-index-None": (lambda ta: ta.read(None), ["index"], True),
    "gather-indices-str": (lambda ta: ta.gather(["a"]), ["indices"], True),
    "scatter-indices-float": (lambda ta: ta.scatter([0.5], [[1.0, 2.0]]), ["indices"], True),
    "split-lengths-float": (lambda ta: ta.split([[1.0, 2.0]], [0.5, 0.5]), ["lengths"], True),
    "split-lengths-None": (lambda ta: ta.split([[1.0, 2.0]], None), ["lengths"], True),
    "split-value-None": (lambda ta: ta.split(None, [1]), ["value"], True),
    "unstack-scalar": (lambda ta: ta.unstack(1.0), ["unstack"], True),
    "grad-source-None": (lambda ta: ta.grad(None), ["source"], True),
    "size-negative": (lambda ta: gta.TensorArray("float32", size=-1), ["Size should be >= 0."], False),
    "size-missing": (lambda ta: gta.TensorArray("float32", size=None), ["Size"], False),
    "dtype-unknown": (lambda ta: gta.TensorArray("float31", size=1), ["float31"], False),
    "element-shape-negative": (lambda ta: gta.TensorArray("float32", size=1, element_shape=[-2]),
                               ["element_shape", "-2"], False),
    "handle-int": (lambda ta: gta.TensorArray("float32", handle=42, flow=0.0), ["andle"], False),
    "flow-None": (lambda ta: gta.TensorArray("float32", handle=ta.handle, flow=None), ["flow"], False),
}


@pytest.mark.parametrize("case", list(_CLASS_CASES))
def test_tensor_array_class_hostile_arguments(backend, case):
    ta = gta.TensorArray("float32", size=2, element_shape=[2])
    call, needles, involved = _CLASS_CASES[case]
    expect_unchanged(ta.handle, errors.InvalidArgumentError, lambda: call(ta),
                     *needles, *([ta.handle.name] if involved else []))


# -- NaN, infinities, -0.0, subnormals: values, never errors --------------------------------------------------------
def special_values(dtype):
    """Every special bit pattern of a float dtype: NaNs with payloads and signs
    (a signalling one too), both infinities, both zeros, subnormals, extremes."""
    dtype = np.dtype(dtype)
    real = np.dtype(dtype.char.lower() if dtype.kind != "c" else {8: "f4", 16: "f8"}[dtype.itemsize])
    bits = np.dtype(f"u{real.itemsize}")
    mantissa = np.finfo(real).nmant
    exponent_all = ((1 << (8 * real.itemsize - 1)) - 1) & ~((1 << mantissa) - 1)
    sign = 1 << (8 * real.itemsize - 1)
    patterns = [exponent_all | (1 << (mantissa - 1)),            # quiet NaN
                exponent_all | (1 << (mantissa - 1)) | 0x5,      # quiet NaN with a payload
                sign | exponent_all | (1 << (mantissa - 1)),     # negative NaN
                exponent_all | 0x1,                              # signalling NaN
                exponent_all, sign | exponent_all,               # +inf, -inf
                0, sign,                                         # +0.0, -0.0
                1, sign | 3,                                     # subnormals
                exponent_all - 1, sign | (exponent_all - 1)]     # largest finite
    values = np.array(patterns, bits).view(real)
    if dtype.kind == "c":       # real parts the patterns, imaginary parts the same reversed (no arithmetic)
        return np.ascontiguousarray(np.stack([values, values[::-1]], axis=1)).view(dtype).ravel()
    return values


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_float_values_round_trip_bit_for_bit(backend, dtype):
    values = special_values(dtype)
    n = len(values)
    rows = np.ascontiguousarray(np.stack([values, values[::-1]], axis=1))      # [n, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # storing is not arithmetic: no FP warning either
        handle, _ = new(n, dtype, clear_after_read=False)
        for index in range(n):
            write(handle, index, rows[index])
        for index in range(n):
            assert_same(read(handle, index, dtype), rows[index])
        assert_same(gather(handle, list(range(n)), dtype), rows)
        assert_same(gather(handle, list(range(n))[::-1], dtype), rows[::-1])
        assert_same(gather(handle, range(n), dtype), rows)                        # stack: a view

        scattered, _ = new(n, dtype, clear_after_read=False)
        scatter(scattered, np.arange(n)[::-1], rows[::-1])
        assert_same(gather(scattered, list(range(n)), dtype), rows)

        pieces, _ = new(3, dtype, clear_after_read=False)
        split(pieces, values, [1, n - 3, 2])                                     # ragged pieces
        assert_same(concat(pieces, dtype).value, values)
        assert_same(read(pieces, 1, dtype), values[1:n - 2])

        ta = gta.TensorArray(dtype, size=n, clear_after_read=False).unstack(rows)
        assert_same(ta.stack(), rows)


def assert_same_up_to_nan_payload(actual, expected):
    """Bit for bit, except that any NaN matches any NaN: IEEE 754 leaves open which
    payload NaN + NaN keeps, and numpy's own loops differ (np.add vs np.add.at)."""
    actual, expected = host(actual), np.asarray(expected)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, (actual.dtype, actual.shape)
    real = np.dtype(expected.real.dtype)
    a = np.ascontiguousarray(actual).reshape(-1).view(real)
    e = np.ascontiguousarray(expected).reshape(-1).view(real)
    bits = np.dtype(f"u{real.itemsize}")
    same = (a.view(bits) == e.view(bits)) | (np.isnan(a) & np.isnan(e))
    bad = np.nonzero(~same)[0]
    assert not len(bad), f"mismatch at flat positions {bad[:10].tolist()}: {a[bad[:5]]} vs {e[bad[:5]]}"


def _aggregated(slots, indices, rows, gpu_atomics=False):
    """TensorFlow's aggregation: a slot's first arrival stored as it is, the later ones added
    (reference_model.tf_add: subnormal operands and sums flushed to zeros of their sign); with
    ``gpu_atomics`` added as a GPU's atomicAdd adds, float32's flushing so too, float64's keeping
    subnormals (float32 and complex64 parts, float64 and complex128 parts)."""
    expected = np.zeros((slots,) + rows.shape[1:], rows.dtype)
    keeps_subnormals = gpu_atomics and np.dtype(rows.dtype) in (np.float64, np.complex128)
    first = set()
    for position, index in enumerate(indices):
        if index not in first:
            expected[index] = rows[position]
            first.add(index)
        elif keeps_subnormals:
            with np.errstate(all="ignore"):
                np.add.at(expected, [index], rows[position:position + 1])
        else:
            expected[index] = tf_add(expected[index], rows[position])
    return expected


@pytest.mark.parametrize("mode", ["deterministic", "atomic"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
def test_special_float_values_aggregate_as_tensorflow(backend, dtype, mode):
    # inf + -inf = nan, nan + x = nan, -0.0 + -0.0 = -0.0, max + max = inf, subnormals
    # flushed: what TensorFlow's CPU kernels compute, bit for bit (NaN payloads aside);
    # a GPU's atomics (atomic mode off the numpy backend) as the hardware adds.
    values = special_values(dtype)
    n = len(values)
    rows = np.stack([values, values[::-1], values[::3].repeat(3)[:n]])         # [3, n]
    indices = [1, 1, 1, 0, 0, 2]
    rows = rows[[0, 1, 2, 1, 0, 2]]
    forward, _ = new(3, dtype, element_shape=[n])
    with gta.accumulation(mode), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # overflow/invalid warnings are numpy's business
        g = grad(forward)
        scatter(g, indices, rows)
        by_write = grad(forward, "by_write")
        for index, row in zip(indices, rows):
            write(by_write, index, row)
    # Atomic mode off the numpy backend adds with the GPU's atomics (the emulated kernels model them).
    atomics = mode == "atomic" and backend.name != "numpy"
    assert_same_up_to_nan_payload(gather(g, [0, 1, 2], dtype), _aggregated(3, indices, rows, atomics))
    assert_same_up_to_nan_payload(gather(by_write, [0, 1, 2], dtype), _aggregated(3, indices, rows, atomics))


def test_inf_plus_minus_inf_is_nan(backend):
    forward, _ = new(1, "float32", element_shape=[2])
    g = grad(forward)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        write(g, 0, f32([np.inf, 1]))
        write(g, 0, f32([-np.inf, np.nan]))
    result = host(read(g, 0))
    assert np.isnan(result).all()
    expected = f32([np.inf, 1])
    with np.errstate(all="ignore"):
        np.add.at(expected, [0, 1], f32([-np.inf, np.nan]))
    # NaN payloads and signs are not bitwise across backends: x86 gives the negative
    # default NaN for inf + -inf and keeps the operand's payload for 1 + nan; NVIDIA
    # GPUs return their one canonical NaN (0x7fffffff) for both.
    assert_same_up_to_nan_payload(result, expected)


# -- sizes and memory ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size_, element_shape, dtype", [
    (2**20, [2**20], "float32"), (1, [2**20, 2**20], "float64"), (INT32_MAX, [2**10], "int8"),
    (2**10, [2**10, 2**10, 2**10], "complex128"), (3, [2**62], "float32"), (2, [2**61], "complex128"),
], ids=["2**20x2**20", "1x2**40", "int32max-x-2**10", "2**40-complex", "3x2**62", "2x2**61-complex"])
def test_huge_arrays_are_refused_quickly_without_allocating(backend, size_, element_shape, dtype):
    before = gta.stats()
    tracemalloc.start()
    started = time.perf_counter()
    try:
        error = expect(errors.ResourceExhaustedError,
                       lambda: new(size_, dtype, element_shape=element_shape), "OOM", str(size_))
        elapsed = time.perf_counter() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert elapsed < 0.5, f"{elapsed:.2f} s to refuse: {error}"
    assert peak < 1 << 20, f"{peak} bytes traced while refusing"
    assert gta.stats()["live_arrays"] <= before["live_arrays"]


@pytest.mark.parametrize("how", ["write", "scatter", "split"])
def test_growth_past_memory_is_refused_quickly_and_changes_nothing(backend, how):
    # Each needs 2**44 bytes (16 TiB) of slab: more than any machine has.
    if how == "split":
        handle, _ = new(0, "float32", dynamic_size=True)
        value = np.broadcast_to(np.float32(1), (2**12, 2**32))                    # a view: no memory
        call = lambda: split(handle, value, np.ones(2**12, np.int64))             # noqa: E731
    else:
        handle, _ = new(1, "float32", dynamic_size=True, element_shape=[2**12])
        row = np.ones(2**12, np.float32)
        write(handle, 0, row)
        call = {"write": lambda: write(handle, 2**30, row),
                "scatter": lambda: scatter(handle, [1, 2**30], np.stack([row, row]))}[how]
    started = time.perf_counter()
    error = expect_unchanged(handle, errors.ResourceExhaustedError, call, "OOM")
    assert time.perf_counter() - started < 1.0
    assert handle.name in str(error), f"the message does not name the array: {error}"


def test_grad_read_far_past_the_end_is_refused_quickly_and_changes_nothing(backend):
    # A grad array grows on reads past its end (docs/semantics.md §2.3 step 6). When the zeros cannot
    # fit, the read must fail fast and leave the size as it was.
    forward, _ = new(2, "float32", element_shape=[2**20])       # 2**21 of them: 8 TiB
    g = grad(forward)
    started = time.perf_counter()
    expect_unchanged(g, errors.ResourceExhaustedError, lambda: read(g, 2**21), "OOM")
    expect_unchanged(g, errors.ResourceExhaustedError, lambda: gather(g, [0, 2**21]), "OOM")
    assert time.perf_counter() - started < 1.0, f"{time.perf_counter() - started:.2f} s"
    assert size(g) == 2


def test_size_zero_arrays_with_huge_element_shapes(backend):
    # Nothing to allocate: creation succeeds, and the empty results need no memory either;
    # what cannot be represented must be an OpError, never numpy's ValueError.
    for shape in ([2**40, 2**40], [2**31, 2**31, 2**31], [2**64]):
        handle, _ = new(0, "float32")
        for op in (lambda: gather(handle, [], element_shape=shape),
                   lambda: concat(handle, element_shape_except0=shape)):
            try:
                result = op()
            except errors.OpError:
                continue
            except Exception as error:  # noqa: BLE001
                raise AssertionError(f"{type(error).__name__} escaped for element shape {shape}: {error}")
            value = result.value if hasattr(result, "value") else result
            assert host(value).size == 0


_UNDER_MEMORY_LIMIT = textwrap.dedent("""
    import json, resource, sys, time
    import numpy as np
    import gpu_tensorarray as gta
    from gpu_tensorarray import errors, raw_ops as ro

    limit = 3 << 29
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    results = {}

    def case(name, build, call):
        with gta.device(sys.argv[1]):
            handle = build()
            before = None if handle is None else int(ro.TensorArraySizeV3(handle, 0.0))
            started = time.perf_counter()
            try:
                call(handle)
                outcome = "ok"
            except errors.OpError as error:
                outcome = type(error).__name__ + ": " + str(error)[:200]
            except BaseException as error:
                outcome = "ESCAPED " + type(error).__name__ + ": " + str(error)[:200]
            elapsed = time.perf_counter() - started
            after = None
            if handle is not None and not outcome.startswith("ok"):
                after = int(ro.TensorArraySizeV3(handle, 0.0))
            results[name] = {"outcome": outcome, "seconds": elapsed, "size_before": before, "size_after": after}

    dynamic = lambda: ro.TensorArrayV3(0, "float32", dynamic_size=True).handle
    small = lambda: ro.TensorArrayV3(3, "float32", element_shape=[2]).handle
    case("create-int32-max", lambda: None, lambda h: ro.TensorArrayV3(2**31 - 1, "float32"))
    case("write-int32-max-empty-value", dynamic,
         lambda h: ro.TensorArrayWriteV3(h, 2**31 - 2, np.ones(0, np.float32), 0.0))
    case("scatter-int32-max-empty-value", dynamic,
         lambda h: ro.TensorArrayScatterV3(h, [2**31 - 2], np.ones((1, 0), np.float32), 0.0))
    case("gather-range-2**31", small, lambda h: ro.TensorArrayGatherV3(h, range(0, 2**31), 0.0, "float32"))
    case("gather-range-2**40", small, lambda h: ro.TensorArrayGatherV3(h, range(0, 2**40), 0.0, "float32"))
    case("scatter-range-2**40", small,
         lambda h: ro.TensorArrayScatterV3(h, range(0, 2**40), np.ones((1, 2), np.float32), 0.0))
    case("split-lengths-range-2**40", small,
         lambda h: ro.TensorArraySplitV3(h, np.ones((1, 2), np.float32), range(0, 2**40), 0.0))
    print(json.dumps(results))
""")

_LIMIT_CASES = ["create-int32-max", "write-int32-max-empty-value", "scatter-int32-max-empty-value",
                "gather-range-2**31", "gather-range-2**40", "scatter-range-2**40", "split-lengths-range-2**40"]
_limit_results = {}


def _results_under_memory_limit(backend_name):
    if backend_name not in _limit_results:
        env = dict(os.environ,
                   PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
        done = subprocess.run([sys.executable, "-c", _UNDER_MEMORY_LIMIT, backend_name], capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        import json
        _limit_results[backend_name] = json.loads(done.stdout.strip().splitlines()[-1])
    return _limit_results[backend_name]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS limits memory on Linux only")
@pytest.mark.parametrize("case", _LIMIT_CASES)
def test_memory_exhaustion_is_an_op_error_and_changes_nothing(backend, case):
    # In a fresh interpreter limited to 1.5 GiB of address space, so that what would
    # need more memory fails for sure: the failure must be an OpError (not a bare
    # MemoryError), come quickly, and leave the array's size as it was. Ranges
    # name their bounds in O(1): they must not be materialised to find that out.
    if backend.name == "cupy":
        pytest.skip("an address-space limit breaks CUDA; device memory has its own test")
    result = _results_under_memory_limit(backend.name)[case]
    assert not result["outcome"].startswith("ESCAPED"), result
    assert result["seconds"] < 2.0, result
    if result["outcome"] != "ok":
        assert result["size_after"] == result["size_before"], result


# -- element shapes, dtypes ------------------------------------------------------------------------------------------
BAD_SHAPES = {
    "-1": [-1], "2,-3": [2, -3], "None,-2": [None, -2], "-2**40": [-(2**40)], "float": [1.5], "str-dim": ["a"],
    "str": "abc", "bytes": b"ab", "bool": True, "float-itself": 2.5, "nested": [[1]], "object": [Opaque()],
    "0-d-bool-array": np.array(True), "float-array": np.array([1.0]), "object-itself": Opaque(), "nan": [math.nan],
}
# A single integer n is a valid shape, [n], as TensorShape(n) is (tests/ops/test_dtypes_shapes.py).


@pytest.mark.parametrize("bad", list(BAD_SHAPES.values()), ids=list(BAD_SHAPES))
def test_hostile_element_shapes(backend, bad):
    expect(errors.InvalidArgumentError, lambda: new(1, element_shape=bad), "element_shape")
    handle, _ = new(2, clear_after_read=False)
    write(handle, 0, f32([1.0]))
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: gather(handle, [0], element_shape=bad),
                     "element_shape", handle.name)
    expect_unchanged(handle, errors.InvalidArgumentError,
                     lambda: concat(handle, element_shape_except0=bad), "element_shape_except0", handle.name)


def test_negative_element_shape_dimension_names_it(backend):
    error = expect(errors.InvalidArgumentError, lambda: new(1, element_shape=[2, -3]), "element_shape", "-3")
    assert "must be >= 0" in str(error)


# "string" and np.dtype("O") name tf.string (tests/ops/test_strings.py); "object" and str do not.
BAD_DTYPES = {
    "float31": "float31", "empty": "", "float8_e4m3fn": "float8_e4m3fn", "object": "object",
    "str-type": str, "datetime": np.dtype("M8[s]"), "int": 42, "float": 1.5,
    "instance": Opaque(), "list": ["float32"], "dict": {"float32": 1}, "ndarray": np.zeros(1, np.float32),
    "big-endian": np.dtype(">f4"), "longdouble": np.longdouble, "void": np.dtype("V4"), "None": None,
}


@pytest.mark.parametrize("bad", list(BAD_DTYPES.values()), ids=list(BAD_DTYPES))
def test_hostile_dtypes(backend, bad):
    expect(errors.InvalidArgumentError, lambda: new(1, bad), "dtype")
    handle, _ = new(2, element_shape=[], clear_after_read=False)
    write(handle, 0, f32(1))
    for op in (lambda: read(handle, 0, bad), lambda: gather(handle, [0], bad), lambda: concat(handle, bad)):
        expect_unchanged(handle, errors.InvalidArgumentError, op, "dtype", handle.name)
    expect(errors.InvalidArgumentError, lambda: gta.TensorArray(bad, size=1), "dtype")


def test_unknown_dtype_message_lists_what_is_supported(backend):
    error = expect(errors.InvalidArgumentError, lambda: new(1, "float31"), "float31")
    for known in ("float32", "int64", "complex128", "bool"):
        assert known in str(error)


# -- handles -----------------------------------------------------------------------------------------------------------
def _every_op(handle):
    return {
        "write": lambda: write(handle, 0, f32(1)), "read": lambda: read(handle, 0),
        "gather": lambda: gather(handle, [0]), "scatter": lambda: scatter(handle, [0], f32([1])),
        "split": lambda: split(handle, f32([1]), [1]), "concat": lambda: concat(handle),
        "size": lambda: size(handle), "close": lambda: close(handle), "grad": lambda: grad(handle),
        "grad_with_shape": lambda: grad_with_shape(handle, [1]),
    }


@pytest.mark.parametrize("op", list(_every_op(None)))
def test_closed_handles(backend, op):
    handle, _ = new(2)
    close(handle)
    call = _every_op(handle)[op]
    if op == "close":
        call()                                   # closing twice is fine
        return
    expect(errors.InvalidArgumentError, call, CLOSED.format(name=handle.name))
    by_name = _every_op(handle.name)[op]         # the same array named by a string
    expect(errors.InvalidArgumentError, by_name, CLOSED.format(name=handle.name))


FOREIGN_HANDLES = {
    "int": 42, "zero": 0, "float": 3.5, "None": None, "object": Opaque(), "bytes": b"TensorArrayV3_0",
    "list": [1, 2], "tuple": ("a", "b"), "ndarray": np.zeros(2), "dict": {}, "type": Handle,
    "flow": np.float32(0.0),
}


@pytest.mark.parametrize("op", list(_every_op(None)))
@pytest.mark.parametrize("bad", list(FOREIGN_HANDLES.values()), ids=list(FOREIGN_HANDLES))
def test_foreign_handles_are_the_wrong_type(backend, op, bad):
    expect(errors.InvalidArgumentError, _every_op(bad)[op], "Trying to access a handle's resource using the wrong type",
           type(bad).__name__)


@pytest.mark.parametrize("op", list(_every_op(None)))
@pytest.mark.parametrize("name", ["no-such-array", "", "TensorArrayV3_999999999", "TensorArrayV3_0@gradients",
                                  "\x00", "\ud800"], ids=["word", "empty", "unused-counter", "grad-name", "nul",
                                                          "surrogate"])
def test_strings_naming_nothing_are_not_found(backend, op, name):
    expect(errors.NotFoundError, _every_op(name)[op], "Could not find")


def test_a_fake_handle_object_is_the_wrong_type(backend):
    real, _ = new(1)

    class FakeHandle:
        name = real.name
        _array = "not an array"

    for op in _every_op(FakeHandle()).values():
        expect(errors.InvalidArgumentError, op, "wrong type")


def test_a_grad_handle_has_no_grad(backend):
    forward, _ = new(1)
    g = grad(forward)
    expect(errors.InvalidArgumentError, lambda: grad(g), "Wrong input container.", g.name)


# -- the other attributes: flags, names, sources, flows ----------------------------------------------------------------
@pytest.mark.parametrize("attr", ["dynamic_size", "clear_after_read", "identical_element_shapes"])
@pytest.mark.parametrize("bad", [np.array([1, 2]), Opaque(), "False", None],
                         ids=["array", "object", "str-False", "None"])
def test_hostile_boolean_attributes(backend, attr, bad):
    # Anything with a truth value may be taken as a bool (numpy-style); what has none
    # (an array of two elements) must be an InvalidArgumentError naming the attribute.
    try:
        handle, _ = new(1, **{attr: bad})
    except errors.OpError as error:
        assert attr in str(error), str(error)
    except Exception as error:  # noqa: BLE001
        raise AssertionError(f"{type(error).__name__} escaped for {attr}={bad!r}: {error}")
    else:
        close(handle)


@pytest.mark.parametrize("bad", [5, 1.5, None, Opaque(), ["foo"], np.array("foo")],
                         ids=["int", "float", "None", "object", "list", "0-d-array"])
def test_hostile_names_and_sources(backend, bad):
    if bad is not None:             # None is tensor_array_name's default, as TensorFlow's op builder takes it
        expect(errors.InvalidArgumentError, lambda: new(1, tensor_array_name=bad), "tensor_array_name")
    handle, _ = new(1)
    expect_unchanged(handle, errors.InvalidArgumentError, lambda: ro.TensorArrayGradV3(handle, 0.0, bad), "source")
    expect_unchanged(handle, errors.InvalidArgumentError,
                     lambda: ro.TensorArrayGradWithShape(handle, 0.0, [1], bad), "source")


def test_undecodable_bytes_as_names_and_sources(backend):
    handle, _ = new(1, tensor_array_name=b"\xff\xfe")
    g = ro.TensorArrayGradV3(handle, 0.0, b"\xff").grad_handle
    assert g.name.startswith(handle.name + "@")
    assert ro.TensorArrayGradV3(handle, 0.0, b"\xff").grad_handle is g


BAD_FLOWS = {"str": "abc", "None": None, "object": Opaque(), "vector": [1.0, 2.0], "dict": {}, "complex": 1j,
             "2**2000": 2**2000, "ragged": [[1.0], [1.0, 2.0]], "str-array": np.array(["a"]),
             "object-array": np.array([None])}


@pytest.mark.parametrize("op", ["write", "scatter", "split"])
@pytest.mark.parametrize("bad", list(BAD_FLOWS.values()), ids=list(BAD_FLOWS))
def test_hostile_flow_in_fails_before_anything_is_written(backend, op, bad):
    handle, _ = new(2)
    call = {"write": lambda: write(handle, 0, f32(1), flow=bad),
            "scatter": lambda: scatter(handle, [0, 1], f32([1, 2]), flow=bad),
            "split": lambda: split(handle, f32([1, 2]), [1, 1], flow=bad)}[op]
    expect_unchanged(handle, errors.InvalidArgumentError, call, "flow_in")
    write(handle, 0, f32(5))            # the failed op wrote nothing
    assert_same(read(handle, 0), f32(5))


@pytest.mark.parametrize("flow", [math.nan, math.inf, -0.0, np.float64(7.5), np.array(3, np.int64), True],
                         ids=["nan", "inf", "-0.0", "float64", "int64-0d", "bool"])
def test_odd_but_numeric_flows_are_accepted(backend, flow):
    handle, _ = new(1)
    out = write(handle, 0, f32(1), flow=flow)
    assert host(out).dtype == np.float32 and host(out).shape == ()


class _BadRepr:
    """An argument whose repr() raises: messages must be built without trusting it."""

    def __repr__(self):
        raise RuntimeError("repr() of this argument fails")

    __str__ = __repr__


@pytest.mark.parametrize("argument", ["handle", "index", "indices", "value", "lengths", "dtype", "flow_in", "source",
                                      "tensor_array_name", "shape_to_prepend", "size"])
def test_arguments_whose_repr_fails(backend, argument):
    bad = _BadRepr()
    handle, _ = new(2)
    call = {"handle": lambda: size(bad), "index": lambda: read(handle, bad), "indices": lambda: gather(handle, bad),
            "value": lambda: write(handle, 0, bad), "lengths": lambda: split(handle, f32([1, 2]), bad),
            "dtype": lambda: read(handle, 0, bad), "flow_in": lambda: write(handle, 0, f32(1), flow=bad),
            "source": lambda: ro.TensorArrayGradV3(handle, 0.0, bad),
            "tensor_array_name": lambda: new(1, tensor_array_name=bad),
            "shape_to_prepend": lambda: grad_with_shape(handle, bad), "size": lambda: new(bad)}[argument]
    needle = "size" if argument == "size" else argument if argument != "handle" else "handle"
    error = expect(errors.InvalidArgumentError, call)
    assert needle in str(error) or argument in ("value", "dtype"), str(error)
