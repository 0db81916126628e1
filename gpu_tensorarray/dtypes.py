"""Dtypes: user spellings -> numpy dtypes, TensorFlow's display names, C type names.

The one place that knows every name a dtype goes by. Storage works with numpy
dtype objects (CuPy uses the same ones); messages print TensorFlow's names
("float", not "float32") because users match on TensorFlow's wording.
"""

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["as_dtype", "tf_name", "c_type", "exact_identity", "python_value_dtype", "SUPPORTED", "AGGREGATABLE"]

# numpy name -> TensorFlow's DataTypeString name (used in messages).
_TF_NAMES = {
    "bool": "bool",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "half", "float32": "float", "float64": "double",
    "complex64": "complex64", "complex128": "complex128",
}
SUPPORTED = frozenset(np.dtype(name) for name in _TF_NAMES)

# Gradient arrays add: every number type can (TF's AddToTensor), bool cannot.
AGGREGATABLE = frozenset(dt for dt in SUPPORTED if dt.kind in "iufc")

# The C type each kernel instantiation uses: the template argument T of
# kernels/*.cu (kernel_sources.name_expression). kernels/common.cuh defines the
# complex structs; __half is CUDA's, or emulation.h's stand-in on the CPU.
_C_TYPES = {
    "bool": "bool",
    "int8": "signed char", "int16": "short", "int32": "int", "int64": "long long",
    "uint8": "unsigned char", "uint16": "unsigned short", "uint32": "unsigned int",
    "uint64": "unsigned long long",
    "float16": "__half", "float32": "float", "float64": "double",
    "complex64": "complex64", "complex128": "complex128",
}

_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16",
    "bool_": "bool", "boolean": "bool",
    "cfloat": "complex64", "cdouble": "complex128",
}
_PYTHON_TYPES = {float: "float32", int: "int32", complex: "complex128", bool: "bool"}
_CACHE = {}


def as_dtype(spec):
    """A numpy dtype from a numpy dtype or type, a name ("float32", "float",
    "double", "half"), a Python type, or a TensorFlow DType (``as_numpy_dtype``)."""
    try:
        return _CACHE[spec]
    except (KeyError, TypeError):
        pass
    dtype = _resolve(spec)
    try:
        _CACHE[spec] = dtype
    except TypeError:
        pass
    return dtype


def _resolve(spec):
    if spec is None:
        raise InvalidArgumentError(f"dtype is required; supported: {_supported_names()}")
    if isinstance(spec, str):
        name = _ALIASES.get(spec.lower(), spec.lower())
    elif spec in _PYTHON_TYPES:
        name = _PYTHON_TYPES[spec]
    elif hasattr(spec, "as_numpy_dtype"):
        name = spec.as_numpy_dtype
    else:
        name = spec
    try:
        dtype = np.dtype(name)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"Unknown dtype {spec!r}; supported: {_supported_names()}") from None
    if dtype not in SUPPORTED:
        raise InvalidArgumentError(f"Unsupported dtype {spec!r}; supported: {_supported_names()}")
    return dtype


def _supported_names():
    return ", ".join(_TF_NAMES)


def tf_name(dtype):
    """TensorFlow's name for a dtype, as its error messages print it."""
    return _TF_NAMES.get(np.dtype(dtype).name, np.dtype(dtype).name)


def c_type(dtype):
    """The C type name kernels are instantiated with for this dtype."""
    return _C_TYPES[np.dtype(dtype).name]


def exact_identity(dtype):
    """The x with x + v == v bitwise for every v: -0.0 for floats and complex
    (+0.0 + -0.0 is +0.0, losing the sign), 0 for integers."""
    if dtype.kind == "c":
        return dtype.type(complex(-0.0, -0.0))
    return dtype.type(-0.0 if dtype.kind == "f" else 0)


def python_value_dtype(host_array, value):
    """The dtype TensorFlow gives a Python scalar or (nested) list: floats are
    float32, ints int32 unless they need 64 bits. ``host_array`` is
    ``np.asarray(value)``; numpy and foreign arrays never come here."""
    kind = host_array.dtype.kind
    if kind == "f":
        return np.dtype("float32")
    if kind in "iu":
        low, high = host_array.min(), host_array.max()
        if -(2**31) <= low and high < 2**31:
            return np.dtype("int32")
        return np.dtype("int64")
    if kind == "c":
        return np.dtype("complex128")
    if kind == "b":
        return np.dtype("bool")
    raise InvalidArgumentError(
        f"Cannot convert a value of type {type(value).__name__} to a tensor: "
        f"numpy sees dtype {host_array.dtype} (ragged lists, strings and objects are not supported)")
