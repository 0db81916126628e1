"""Shared helpers of the TensorArray conformance suite (tests/test_*.py of issue 2).

References here are deliberately dumb (Python loops, np.stack / np.concatenate of
Python lists, np.add.at); nothing in this module calls into the library except the
thin op wrappers, which only forward their arguments to ``gpu_tensorarray.raw_ops``.
"""

import contextlib
import re
import sys

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops as ro

# Every dtype TensorFlow supports on the CPU that NumPy also has.
ALL_DTYPES = (
    "float16", "float32", "float64", "complex64", "complex128",
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool",
)
# Dtypes gradient arrays can add (TF's AddToTensor: every number type).
NUMBER_DTYPES = tuple(d for d in ALL_DTYPES if d != "bool")
FLOAT_DTYPES = ("float16", "float32", "float64", "complex64", "complex128")

# TensorFlow's DataTypeString names, as its messages print them (written out by
# hand from docs/semantics.md §0, not taken from the library).
TF_NAME = {
    "float16": "half", "float32": "float", "float64": "double",
    "complex64": "complex64", "complex128": "complex128",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "bool": "bool",
}

# Messages that appear in many files, in TensorFlow's exact wording.
NOT_FULLY_DEFINED = (
    "TensorArray {name}: Could not read from TensorArray index {index}.  Furthermore, the element shape "
    "is not fully defined: {shape}.  It is possible you are working with a resizeable TensorArray and "
    "stop_gradients is not allowing the gradients to be written.  If you set the full element_shape "
    "property on the forward TensorArray, the proper all-zeros tensor will be returned instead of "
    "incurring this error.")
CLEARED = ("TensorArray {name}: Could not read index {index} twice because it was cleared after a previous "
           "read (perhaps try setting clear_after_read = false?).")
ALREADY_WRITTEN = ("TensorArray {name}: Could not write to TensorArray index {index} because it has already been "
                   "written to.")
ALREADY_READ = "TensorArray {name}: Could not write to TensorArray index {index} because it has already been read."
WRITE_BOUNDS = "TensorArray {name}: Tried to write to index {index} but array is not resizeable and size is: {size}"
READ_BOUNDS = "Tried to read from index {index} but array size is: {size}"
CLOSED = "TensorArray {name} has already been closed."
INCOMPATIBLE = ("TensorArray {name}: Could not write to TensorArray index {index} because the value shape is "
                "{value} which is incompatible with the TensorArray's inferred element shape: {shape} "
                "(consider setting infer_shape=False).")
WRITE_DTYPE = "TensorArray dtype is {array} but Op is trying to write dtype {value}."
READ_DTYPE = "TensorArray dtype is {array} but Op requested dtype {requested}."
SPLIT_COUNT = ("TensorArray's size is not equal to the size of lengths ({size} vs. {count}), and the "
               "TensorArray is not marked as dynamically resizeable")
AGGREGATE_SHAPE = ("TensorArray {name}: Could not aggregate to TensorArray index {index} because the existing "
                   "shape is {old} but the new input shape is {new}.")


def raises(cls, text):
    """pytest.raises for TensorFlow's message ``text``: the message must start with
    it (the library may add context after it, never before)."""
    return pytest.raises(cls, match="^" + re.escape(text))


def host(x):
    return gta.to_numpy(x)


def assert_same(actual, expected):
    """Same dtype, same shape, same values; floats compared bit for bit."""
    actual = host(actual)
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_array_equal(actual, expected)
    if actual.dtype.kind in "fc":
        a, e = _bits(actual), _bits(expected)
        if not np.array_equal(a, e):
            bad = np.nonzero(a != e)[0]
            raise AssertionError(f"bitwise mismatch at flat positions {bad[:10].tolist()}")


def _bits(x):
    flat = np.ascontiguousarray(x).reshape(-1)
    if flat.dtype.kind == "c":
        flat = flat.view(flat.real.dtype)
    return flat.view(f"u{flat.dtype.itemsize}")


def assert_flow(flow, backend, value):
    """A flow: a float32 0-d array of the backend holding ``value``."""
    assert isinstance(flow, backend.array_type), type(flow)
    assert flow.dtype == np.float32 and flow.ndim == 0, (flow.dtype, flow.shape)
    assert float(host(flow)) == value


def sample(rng, dtype, shape):
    """Random values of ``dtype`` (no -0.0, no NaN), as a NumPy array."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind == "u":
        return rng.integers(0, 100, size=shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-100, 100, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    values = rng.standard_normal(shape).astype(dtype)
    values[values == 0] = 1        # keeps -0.0 out
    return values


# -- thin op wrappers: arguments forwarded to raw_ops as they are -----------------------------
def new(size, dtype="float32", **attrs):
    """(handle, flow) of a fresh array."""
    return ro.TensorArrayV3(size, dtype, **attrs)


def write(handle, index, value, flow=0.0):
    return ro.TensorArrayWriteV3(handle, index, value, flow)


def read(handle, index, dtype="float32", flow=0.0):
    return ro.TensorArrayReadV3(handle, index, flow, dtype)


def gather(handle, indices, dtype="float32", element_shape=None, flow=0.0):
    return ro.TensorArrayGatherV3(handle, indices, flow, dtype, element_shape=element_shape)


def scatter(handle, indices, value, flow=0.0):
    return ro.TensorArrayScatterV3(handle, indices, value, flow)


def split(handle, value, lengths, flow=0.0):
    return ro.TensorArraySplitV3(handle, value, lengths, flow)


def concat(handle, dtype="float32", element_shape_except0=None, flow=0.0):
    return ro.TensorArrayConcatV3(handle, flow, dtype, element_shape_except0=element_shape_except0)


def size(handle, flow=0.0):
    return int(host(ro.TensorArraySizeV3(handle, flow)))


def close(handle):
    ro.TensorArrayCloseV3(handle)


def grad(handle, source="gradients", flow=0.0):
    return ro.TensorArrayGradV3(handle, flow, source).grad_handle


def grad_with_shape(handle, prepend, source="gradients", flow=0.0):
    return ro.TensorArrayGradWithShape(handle, flow, prepend, source).grad_handle


def f32(x):
    return np.asarray(x, np.float32)


def name_number(name, base):
    """The counter of a unique name ``<base>_<n>``."""
    match = re.fullmatch(re.escape(base) + r"_(\d+)", name)
    assert match, f"{name!r} is not of the form {base}_<n>"
    return int(match.group(1))


@contextlib.contextmanager
def interrupt_at(code, event, name=None):
    """A KeyboardInterrupt raised once, where CPython delivers a signal: at the start of ``code``
    (event "call"), or as a C function called in it returns ("c_return", ``name`` the function's).
    The profiler in place before is put back (a test's coverage tracer is a trace function)."""
    previous = sys.getprofile()

    def hook(frame, what, arg):
        if frame.f_code is code and what == event and (name is None or getattr(arg, "__name__", None) == name):
            sys.setprofile(previous)
            raise KeyboardInterrupt
    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


def cuda_devices():
    """How many CUDA devices CuPy (or its stand-in) sees; 0 without CuPy or a device."""
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount()
    except Exception:
        return 0


class NumpyWithoutMemory:
    """NumPy, but for ``function`` (a name), which finds no memory as NumPy reports it: set in
    place of a module's ``np`` (monkeypatch) to fail that module's allocations alone."""

    def __init__(self, function):
        self._function = function

    def __getattr__(self, name):
        if name == self._function:
            def no_memory(*args, **kwargs):
                raise MemoryError("Unable to allocate 8.00 GiB for an array")
            return no_memory
        return getattr(np, name)
