"""Dtypes: user spellings -> numpy dtypes, TensorFlow's display names, C type names.

The one place that knows every name a dtype goes by. Storage works with numpy
dtype objects (CuPy uses the same ones); messages print TensorFlow's names
("float", not "float32") because users match on TensorFlow's wording.

bfloat16 is ml_dtypes' (TensorFlow's and JAX's bfloat16 for NumPy), an optional
dependency imported only when bfloat16 is asked for or a bfloat16 value arrives;
it then joins SUPPORTED and AGGREGATABLE. The kernels are instantiated by dtype
name (NAMES), so they include bfloat16 whether or not ml_dtypes is installed.

Strings (TensorFlow's "string") are NumPy's object dtype, STRING: values live on
the host as object arrays of bytes (strings.py). STRING is no device dtype: it is
not in SUPPORTED (what backends and kernels hold), nor AGGREGATABLE, nor does it
have zeros (fills_zeros).
"""

import sys

import numpy as np

from .errors import InvalidArgumentError, OpError, UnimplementedError, about, described, host_memory_ran_out, shown
from .python_values import INT64_MAX as _INT64_MAX, INT64_MIN as _INT64_MIN, integer_leaves, leaf_types

__all__ = ["as_dtype", "bfloat16", "tf_name", "c_type", "name_of", "is_supported", "finfo",
           "exact_identity", "python_value_dtype", "python_value_as", "SUPPORTED", "AGGREGATABLE", "NAMES",
           "AGGREGATABLE_NAMES", "FLUSHING_NAMES", "flushes_subnormals", "BFLOAT16", "STRING", "fills_zeros"]

BFLOAT16 = "bfloat16"
STRING = np.dtype(object)       # strings.STRING: TensorFlow's as_numpy_dtype of tf.string
_FLOAT32 = np.dtype("float32")

# numpy name -> TensorFlow's DataTypeString name (used in messages).
_TF_NAMES = {
    "bool": "bool",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "float16": "half", "float32": "float", "float64": "double",
    "complex64": "complex64", "complex128": "complex128",
    BFLOAT16: "bfloat16",
}
# Every dtype name, bfloat16 included; the dtype objects of all but bfloat16.
NAMES = frozenset(_TF_NAMES)
SUPPORTED = frozenset(np.dtype(name) for name in NAMES - {BFLOAT16})

# Gradient arrays add: every number type can (TF's AddToTensor), bool cannot.
AGGREGATABLE = frozenset(dt for dt in SUPPORTED if dt.kind in "iufc")
AGGREGATABLE_NAMES = frozenset(dt.name for dt in AGGREGATABLE) | {BFLOAT16}
#: Those whose adds flush subnormals, as TensorFlow's CPU kernels add (kernels/common.cuh): float16
#: adds in float32, where none of its values is subnormal, and integers have none.
FLUSHING_NAMES = frozenset({"float32", "float64", "complex64", "complex128", BFLOAT16})
_FLUSHING = frozenset(np.dtype(name) for name in FLUSHING_NAMES - {BFLOAT16})


def flushes_subnormals(dtype):
    """Whether ``dtype``'s adds flush subnormals (FLUSHING_NAMES), without ``dtype.name``, which
    NumPy builds in Python at each call."""
    return dtype in _FLUSHING or (dtype.kind == "V" and dtype.name == BFLOAT16)

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
    BFLOAT16: "__nv_bfloat16",
}

_ALIASES = {
    "float": "float32", "double": "float64", "half": "float16",
    "bool_": "bool", "boolean": "bool",
    "cfloat": "complex64", "cdouble": "complex128",
}
_PYTHON_TYPES = {float: "float32", int: "int32", complex: "complex128", bool: "bool"}
# TensorFlow's DataType enum (tensorflow/core/framework/types.proto), which tf.as_dtype takes
# by dict lookup: any value equal to a number with its hash (1, np.int8(1), 1.0, True) names it.
_DATATYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8", 7: "string",
              8: "complex64", 9: "int64", 10: "bool", 14: BFLOAT16, 17: "uint16", 18: "complex128",
              19: "float16", 22: "uint32", 23: "uint64"}
# Those TensorFlow has and no TensorArray here holds, by TensorFlow's names; and every reference
# type (number + 100), which TensorArrayV3's dtype attribute refuses.
_TENSORFLOW_ONLY = {11: "qint8", 12: "quint8", 13: "qint32", 15: "qint16", 16: "quint16", 20: "resource",
                    21: "variant", 24: "float8_e5m2", 25: "float8_e4m3fn", 26: "float8_e4m3fnuz",
                    27: "float8_e4m3b11fnuz", 28: "float8_e5m2fnuz", 29: "int4", 30: "uint4", 31: "int2", 32: "uint2",
                    33: "float4_e2m1fn"}
_TENSORFLOW_ONLY.update({100 + number: f"{name}_ref" for number, name in (_DATATYPES | _TENSORFLOW_ONLY).items()})
_DATATYPES.update(_TENSORFLOW_ONLY)
CACHE: dict = {}     # spec -> dtype, for specs of the types in _CACHEABLE


def as_dtype(spec, owner=None):
    """A numpy dtype from a numpy dtype or type, a name ("float32", "float",
    "double", "half"), a Python type, a TensorFlow DType (``as_numpy_dtype``) or a
    torch dtype (torch.float32; torch.bfloat16 has no counterpart)."""
    try:
        return CACHE[spec]
    except Exception:       # KeyError, unhashable, or a hostile __hash__/__eq__
        pass
    dtype = _resolve(spec, owner)
    if type(spec) in _CACHEABLE:        # never a caller's own class: its __hash__ may lie
        CACHE[spec] = dtype
    return dtype


_CACHEABLE = frozenset({str, type, type(np.dtype("float32")), type(STRING)} | {type(dt) for dt in SUPPORTED})


def _resolve(spec, owner):
    if spec is None:
        raise InvalidArgumentError(f"dtype is required; supported: {_supported_names()}{about(owner)}")
    try:
        numpy_spec = _numpy_spec(spec)
        if type(numpy_spec) is str and numpy_spec in _TENSORFLOW_ONLY_NAMES:
            raise InvalidArgumentError(
                f"Unsupported dtype {shown(spec)} (TensorFlow's {numpy_spec}"
                f"{', a reference type' if numpy_spec.endswith('_ref') else ''}); supported: "
                f"{_supported_names()}{about(owner)}")
        if type(numpy_spec) is str and numpy_spec in (BFLOAT16, "string"):
            return bfloat16(owner) if numpy_spec == BFLOAT16 else STRING
        dtype = np.dtype(numpy_spec)
    except OpError:                 # bfloat16 without ml_dtypes: UnimplementedError
        raise
    except Exception as error:      # whatever a caller's object raises (__getattr__ too), it is not a dtype
        raise InvalidArgumentError(f"Unknown dtype {shown(spec)} ({described(error)}); supported: "
                                   f"{_supported_names()}{about(owner)}") from None
    if dtype.kind in "OSU" and _names_strings(numpy_spec):
        return STRING
    if dtype.kind == "O" and isinstance(numpy_spec, type):
        # NumPy holds any other Python type (dict, list, a class of the caller's) as objects.
        raise InvalidArgumentError(f"Unsupported dtype {shown(spec)}: NumPy would hold it as Python objects, which is "
                                   f"no dtype here (strings are \"string\", np.object_ or tf.string); supported: "
                                   f"{_supported_names()}{about(owner)}")
    if not is_supported(dtype):
        raise InvalidArgumentError(f"Unsupported dtype {shown(spec)}; supported: {_supported_names()}{about(owner)}")
    return dtype


def _names_strings(numpy_spec):
    """TensorFlow's as_dtype: NumPy's object, bytes and str types and dtypes, Python's
    object and tf.string (its as_numpy_dtype is object) are tf.string; of names only
    "string" (_resolve) is, and Python's str and bytes types are not."""
    return (isinstance(numpy_spec, np.dtype) or numpy_spec is object
            or (isinstance(numpy_spec, type) and issubclass(numpy_spec, np.generic)))


_NAMES_ANY_CASE = NAMES | frozenset(_ALIASES) | {"string"}
_TENSORFLOW_ONLY_NAMES = frozenset(_TENSORFLOW_ONLY.values())


def _numpy_spec(spec):
    """What np.dtype() takes for ``spec`` (may raise whatever ``spec`` raises)."""
    if isinstance(spec, str):
        lowered = str.lower(spec)       # str's own: a subclass's methods are not consulted
        if lowered in _NAMES_ANY_CASE:
            return _ALIASES.get(lowered, lowered)
        # Anything else as given: NumPy's codes are case-sensitive ('B' uint8, 'b' int8).
        return str.__str__(spec)
    if isinstance(spec, type) and spec in _PYTHON_TYPES:
        return _PYTHON_TYPES[spec]
    if not isinstance(spec, (type, np.dtype)):
        try:
            name = _DATATYPES.get(spec)
        except Exception:       # unhashable, or a hostile __hash__/__eq__: no DataType
            name = None
        if name is not None:
            return name
    if hasattr(spec, "as_numpy_dtype"):
        return spec.as_numpy_dtype
    if type(spec).__module__ == "torch" and type(spec).__name__ == "dtype":
        return str(spec).rpartition(".")[2]     # torch.float32 -> "float32", without importing torch
    return spec


def bfloat16(owner=None):
    """ml_dtypes' bfloat16 dtype, importing ml_dtypes on first use (it then joins
    SUPPORTED and AGGREGATABLE); UnimplementedError when it is not installed."""
    global SUPPORTED, AGGREGATABLE
    try:
        import ml_dtypes
    except ImportError:
        raise UnimplementedError(f"dtype bfloat16 needs the ml_dtypes package (TensorFlow's and JAX's bfloat16 "
                                 f"for NumPy), which is not installed: pip install ml_dtypes{about(owner)}") from None
    dtype = np.dtype(ml_dtypes.bfloat16)
    if dtype not in SUPPORTED:
        # Rebound, not mutated: readers elsewhere never see a set change under them.
        SUPPORTED, AGGREGATABLE = SUPPORTED | {dtype}, AGGREGATABLE | {dtype}
    return dtype


def is_supported(dtype):
    """Whether arrays may hold ``dtype`` (a numpy dtype). A bfloat16 dtype counts
    when it is ml_dtypes' (already imported, since a value of it exists)."""
    if dtype in SUPPORTED:
        return True
    return dtype.name == BFLOAT16 and "ml_dtypes" in sys.modules and dtype == bfloat16()


def _supported_names():
    return ", ".join(_TF_NAMES) + ", string"


def fills_zeros(dtype):
    """Whether TensorFlow fills unwritten slots of ``dtype`` with zeros (its
    TensorSetZero: numbers and bool); strings have no zeros there."""
    return dtype is not STRING


def tf_name(dtype):
    """TensorFlow's name for a dtype, as its error messages print it; dtypes TensorFlow
    has no name for are named for what they are (strings, byte order, records)."""
    dtype = np.dtype(dtype)
    name = _TF_NAMES.get(dtype.name)
    if name is None:
        if dtype.kind in "OSU":
            return "string"
        if dtype.kind == "V":
            return f"structured {dtype}" if dtype.names else f"raw bytes {dtype.str}"
        return dtype.name
    if not dtype.isnative:
        return f"{name} in non-native byte order ({dtype.str})"
    return name


def name_of(dtype):
    """The canonical name ("float32", "bfloat16") of a dtype, or of a name itself
    (a name needs no ml_dtypes: the kernel tables are keyed by names)."""
    return dtype if isinstance(dtype, str) else np.dtype(dtype).name


def c_type(dtype):
    """The C type name kernels are instantiated with for this dtype (or dtype name)."""
    return _C_TYPES[name_of(dtype)]


def finfo(dtype):
    """The machine limits of a float or complex dtype: NumPy's finfo, which knows
    only NumPy's own types, or ml_dtypes' for bfloat16."""
    if dtype.name == BFLOAT16:
        import ml_dtypes
        return ml_dtypes.finfo(dtype)
    return np.finfo(dtype)


def exact_identity(dtype):
    """The x with x + v == v bitwise for every v: -0.0 for floats and complex
    (+0.0 + -0.0 is +0.0, losing the sign), 0 for integers."""
    if dtype.kind == "c":
        return dtype.type(complex(-0.0, -0.0))
    return dtype.type(-0.0 if dtype.kind == "f" or dtype.name == BFLOAT16 else 0)


def python_value_dtype(host_array, value):
    """The dtype TensorFlow gives a Python scalar or (nested) list: floats are
    float32 (float16 when every leaf is a NumPy float16 scalar), ints int32 unless
    they need 64 bits. ``host_array`` is ``python_values.as_host_array(value)``; numpy and
    foreign arrays never come here."""
    kind = host_array.dtype.kind
    if kind in "iufc" and isinstance(value, (list, tuple)) and _may_hold_bools(host_array) \
            and not _BOOLS.isdisjoint(leaf_types(value)):
        # NumPy makes numbers of the bools; TensorFlow refuses the list ("mixed types")
        raise InvalidArgumentError(f"Cannot convert value {shown(value)} to a tensor: it mixes bools and numbers")
    if kind == "f":
        # TensorFlow keeps float16 for a list of np.float16 only (eager and in tf.function
        # alike); other NumPy scalars in lists get dtypes that differ between the two.
        if host_array.dtype == _FLOAT16 and _all_float16_scalars(value):
            return _FLOAT16
        return np.dtype("float32")
    if kind in "iu":
        if host_array.size == 0:
            return np.dtype("int32")
        low, high = int(host_array.min()), int(host_array.max())
        if -(2**31) <= low and high < 2**31:
            return np.dtype("int32")
        if -(2**63) <= low and high < 2**63:
            return np.dtype("int64")
        raise InvalidArgumentError(f"Cannot convert {shown(value)} to a tensor: {high if high >= 2**63 else low} "
                                   f"does not fit in int64")
    if kind == "c":
        return np.dtype("complex128")
    if kind == "b":
        return np.dtype("bool")
    problem = object_value_problem(host_array, value) if kind == "O" else None
    if problem is not None:
        raise InvalidArgumentError(problem)
    raise InvalidArgumentError(
        f"Cannot convert a value of type {type(value).__name__} to a tensor: "
        f"numpy sees dtype {host_array.dtype} (ragged lists, strings and objects are not supported)")


def _not_of_dtype(value, host, dtype, owner):
    """The error for a Python value ``dtype`` cannot take. TensorFlow converts it to a dtype of
    its own, which a TensorArray's op then refuses: ``written_dtypes`` (that dtype's name and
    ``dtype``'s) lets the classes say so in TensorFlow's words (TensorArray._value,
    tf2_lists.converted)."""
    error = InvalidArgumentError(f"Cannot convert value {shown(value)} (numpy sees {host.dtype}) to "
                                 f"{tf_name(dtype)}{about(owner)}")
    try:
        error.written_dtypes = (tf_name(python_value_dtype(host, value)), tf_name(dtype))
    except InvalidArgumentError:
        pass
    return error


_FLOAT16 = np.dtype("float16")
_BOOLS = frozenset((bool, np.bool_))


def _may_hold_bools(host_array):
    """Whether a list's leaves are worth asking for bools: a short list's always; a long one's
    when NumPy's array of it holds a 0 or a 1, which it makes of bools (else no leaf is one,
    and asking each leaf's type, as long as NumPy's reading, is spared)."""
    return host_array.size <= 256 or bool(((host_array == 0) | (host_array == 1)).any())


def _all_float16_scalars(value):
    """Whether every leaf of a (nested) list or tuple is an np.float16 scalar."""
    return leaf_types(value) == {np.float16}


def object_value_problem(host_array, value):
    """Why TensorFlow cannot convert a Python value that NumPy holds only as objects
    (``host_array`` is its object array): an int outside int64, None or another
    object that is no number, bool or string; None when every element is a str or
    bytes (a string value, which the array's dtype then accepts or refuses)."""
    strings = numbers = 0
    for position, element in enumerate(host_array.reshape(-1).tolist()):
        if isinstance(element, (str, bytes)):
            strings += 1
            continue
        numbers += 1
        if isinstance(element, (int, np.integer)) and not isinstance(element, bool) \
                and not _INT64_MIN <= int(element) <= _INT64_MAX:
            # as python_value_dtype words 2**63 and above, which NumPy holds as uint64
            return f"Cannot convert {shown(value)} to a tensor: {int(element)} does not fit in int64"
        if not isinstance(element, (bool, int, float, complex, np.number, np.bool_)):
            return (f"Cannot convert value {shown(value)} to a tensor: element {position} (in row-major order) is "
                    f"{shown(element)} of type {type(element).__name__}, which is no number, bool or string")
    if not numbers:
        return None
    why = "it mixes strings and numbers" if strings else "numpy holds its numbers only as objects"
    return f"Cannot convert value {shown(value)} to a tensor: {why}"


def attribute_of(value, name):
    """``getattr(value, name, None)`` for a caller's value, None too where asking raises (a
    property or ``__getattr__`` of theirs): the conversion that follows reports the value."""
    try:
        return getattr(value, name, None)
    except Exception:
        return None


def python_value_as(value, dtype, owner=None):
    """A Python scalar or (nested) list as a NumPy array of ``dtype``, refusing what
    TensorFlow's convert_to_tensor(value, dtype) refuses: strings, None, floats into
    integers, and integers that do not fit (TensorFlow wraps some into unsigned dtypes;
    here never a silent NaN, truncation or wrap).
    For a string ``dtype`` the value is returned as it is: TensorFlow prefers the
    array's dtype there without requiring it (conversion.to_tensor reads strings, and
    any other value keeps its own dtype, which the op then refuses)."""
    try:
        return _python_value_as(value, dtype, owner)
    except MemoryError as error:
        raise host_memory_ran_out(f"{shown(value)} to {tf_name(dtype)}", error, owner) from None


def _python_value_as(value, dtype, owner):
    if dtype is STRING:
        return value
    ints = integer_leaves(value) if dtype.kind in "iu" and isinstance(value, (list, tuple)) else None
    if ints:
        # Integers, read exactly against the dtype's range (NumPy would make floats or objects
        # of some, as of [0, 2**63]); other dtypes take NumPy's floats, rounded as TensorFlow's.
        info = np.iinfo(dtype)
        if not info.min <= min(ints) or not max(ints) <= info.max:
            raise InvalidArgumentError(
                f"Cannot convert value {shown(value)} to {tf_name(dtype)}: out of range{about(owner)}")
        return np.array(value, dtype=dtype)
    try:
        host = np.asarray(value)
    except MemoryError:
        raise
    except Exception as error:
        raise InvalidArgumentError(
            f"Cannot convert value {shown(value)} to {tf_name(dtype)}: {described(error)}{about(owner)}") from None
    if host.dtype.kind in "US":
        string = InvalidArgumentError(f"Cannot convert value {shown(value)} to {tf_name(dtype)}: it is a string"
                                      f"{about(owner)}")
        string.written_dtypes = ("string", tf_name(dtype))    # (TensorFlow's dtype for it)
        raise string
    problem = object_value_problem(host, value) if host.dtype.kind == "O" else None
    if problem is not None:
        raise InvalidArgumentError(problem + about(owner))
    # NumPy sees Python ints as int64 and [] as float64: ints may become unsigned (the range
    # check below refuses what does not fit), and an empty list any dtype, as in TensorFlow.
    # ml_dtypes' bfloat16 (kind "V") casts from any dtype as "same_kind", complex too: it is a float.
    kind = _FLOAT32 if name_of(dtype) == BFLOAT16 else dtype
    if host.dtype.kind not in "biufc" or (host.size and not np.can_cast(host.dtype, kind, casting="same_kind")
                                           and not (host.dtype.kind in "iu" and dtype.kind == "u")):
        raise _not_of_dtype(value, host, dtype, owner)
    converted = host.astype(dtype)
    if dtype.kind in "iu" and not np.array_equal(converted, host):
        raise InvalidArgumentError(
            f"Cannot convert value {shown(value)} to {tf_name(dtype)}: out of range{about(owner)}")
    return converted
