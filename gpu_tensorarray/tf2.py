"""TensorFlow 2 spelling for code ported from tf.TensorArray:

    import gpu_tensorarray.tf2 as tf
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)      # mode "tf2"

It has exactly these names, enough for the three examples of tf.TensorArray's
documentation to run unchanged:

* ``TensorArray``: always TensorFlow 2's rules (tf2_array.py);
* the dtypes (NumPy dtypes) ``bool``, ``float16``, ``float32``, ``float64``, ``int8``,
  ``int16``, ``int32``, ``int64``, ``uint8``, ``uint16``, ``uint32``, ``uint64``,
  ``complex64``, ``complex128``;
* ``constant``: Python values typed as tf.constant types them (floats to float32,
  ints to int32, strings to bytes), as NumPy arrays;
* ``range``: tf.range, as a NumPy array (int32 for ints, float32 for floats);
* ``Variable``: a mutable value with ``assign``, ``assign_add``, ``assign_sub``,
  ``read_value`` and ``numpy``, which every op reads as an array;
* ``function``: a no-op decorator (there is no graph to trace; TensorArrays here
  follow the tf.function rules everywhere);
* ``GradientTape``: gpu_tensorarray.GradientTape, with tf.GradientTape's ``watch``.

Everything else of TensorFlow (math, tf.Tensor, tf.while_loop) is not here: values are
NumPy (or CuPy) arrays, and math on them is NumPy's.
"""

from __future__ import annotations

import builtins as _builtins
from collections.abc import Callable as _Callable
from typing import Any as _Any, TypeVar as _TypeVar

import numpy as _np

from . import dtypes as _dtypes
from .conversion import host_array as _host_array
from .errors import InvalidArgumentError as _InvalidArgumentError, shown as _shown
from .gradients import WRITE_VALUE as _WRITE_VALUE
from .strings import as_strings as _as_strings, is_string_like as _is_string_like
from .tape import GradientTape as _GradientTape, nested_leaves as _nested_leaves, reach as _reach
from .tf2_array import TF2TensorArray as TensorArray

__all__ = ["TensorArray", "constant", "range", "Variable", "function", "GradientTape", "bool", "float16", "float32",
           "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "complex64",
           "complex128"]

bool = _np.dtype("bool")  # noqa: A001 (TensorFlow's name)
float16, float32, float64 = _np.dtype("float16"), _np.dtype("float32"), _np.dtype("float64")
int8, int16, int32, int64 = _np.dtype("int8"), _np.dtype("int16"), _np.dtype("int32"), _np.dtype("int64")
uint8, uint16, uint32, uint64 = _np.dtype("uint8"), _np.dtype("uint16"), _np.dtype("uint32"), _np.dtype("uint64")
complex64, complex128 = _np.dtype("complex64"), _np.dtype("complex128")

_F = _TypeVar("_F", bound=_Callable[..., _Any])


def constant(value: _Any, dtype: _Any = None) -> _np.ndarray:
    """A NumPy array of ``value``, typed as tf.constant types it (strings: an object array of bytes)."""
    if hasattr(value, "dtype") and dtype is None:
        value = _np.asarray(value)
        return _as_strings(value) if value.dtype.kind in "SU" else value
    if dtype is None:
        host = _host_array(value)
        strings = host.dtype.kind in "SU" or _is_string_like(value)     # NumPy's str for str beside bytes
        dtype = "string" if strings else _dtypes.python_value_dtype(host, value)
    dtype = _dtypes.as_dtype(dtype)
    if dtype is _dtypes.STRING:
        return _as_strings(value)
    return _dtypes.python_value_as(value, dtype)


# tf.range's dtypes, and when none is given, the highest of its arguments' in this order.
_RANGE_DTYPES = ("int32", "int64", "float16", "bfloat16", "float32", "float64")


def range(start: _Any, limit: _Any = None, delta: _Any = 1, dtype: _Any = None) -> _np.ndarray:  # noqa: A001
    """tf.range: ``start, start + delta, ...`` up to ``limit`` (``range(n)``: 0 .. n-1). Its
    arguments typed as tf.constant types them (ints int32, or int64 past it; floats float32), the
    highest of them the result's dtype, unless ``dtype`` is given (then they convert to it)."""
    if limit is None:
        start, limit = 0, start
    if dtype is None:
        bounds = [constant(bound) for bound in (start, limit, delta)]
        names = [_dtypes.name_of(bound.dtype) for bound in bounds]
        if any(name not in _RANGE_DTYPES for name in names):
            raise _InvalidArgumentError(f"tf.range takes integers and floats, got {names}")
        dtype = _dtypes.as_dtype(max(names, key=_RANGE_DTYPES.index))
    else:
        spec, dtype = dtype, _dtypes.as_dtype(dtype)
        if _dtypes.name_of(dtype) not in _RANGE_DTYPES:         # the dtypes TensorFlow has a Range kernel of
            raise _InvalidArgumentError(f"tf.range makes no values of dtype {spec!r}: it makes "
                                        f"{', '.join(_RANGE_DTYPES)}")
        bounds = [constant(bound, dtype) for bound in (start, limit, delta)]
    if any(bound.ndim for bound in bounds):
        raise _InvalidArgumentError(f"tf.range takes scalars, got shapes {[list(bound.shape) for bound in bounds]}")
    start, limit, delta = (bound.item() for bound in bounds)
    if delta == 0:
        raise _InvalidArgumentError("Requires delta != 0: 0")
    if delta > 0 and start > limit:
        raise _InvalidArgumentError(f"Requires start <= limit when delta > 0: {start}/{limit}")
    if delta < 0 and start < limit:
        raise _InvalidArgumentError(f"Requires start >= limit when delta < 0: {start}/{limit}")
    return _np.arange(start, limit, delta, dtype=dtype)


class Variable:
    """tf.Variable's value semantics: one mutable value, read by every op as an array
    (``np.asarray(v)``, or passed to ``ta.write``) at the time of the op."""

    def __init__(self, initial_value: _Any, dtype: _Any = None, name: str | None = None) -> None:
        self._value = _np.array(constant(initial_value, dtype))
        self.name = name

    @property
    def dtype(self) -> _np.dtype:
        return self._value.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    def assign(self, value: _Any) -> Variable:
        """Replace the value (same dtype and shape)."""
        self._value = self._same(value, lambda old, new: new)
        return self

    def assign_add(self, delta: _Any) -> Variable:
        """Add ``delta`` to the value."""
        self._value = self._same(delta, _np.add)
        return self

    def assign_sub(self, delta: _Any) -> Variable:
        """Subtract ``delta`` from the value."""
        self._value = self._same(delta, _np.subtract)
        return self

    def _same(self, value: _Any, combine: _Callable[[_np.ndarray, _np.ndarray], _Any]) -> _np.ndarray:
        # Converted as tf.Variable converts it, to its dtype: 2.5 for an int32 variable is refused, not truncated.
        new = _np.asarray(combine(self._value, constant(value, self._value.dtype)))
        if new.shape != self._value.shape:
            raise _InvalidArgumentError(f"Cannot assign a value of shape {list(new.shape)} to a variable of shape "
                                       f"{list(self._value.shape)}")
        return new.astype(self._value.dtype, copy=False)

    def read_value(self) -> _np.ndarray:
        """A copy of the value now."""
        return self._value.copy()

    def numpy(self) -> _np.ndarray:
        return self.read_value()

    def __array__(self, dtype: _Any = None, copy: _builtins.bool | None = None) -> _np.ndarray:
        return self._value.astype(dtype) if dtype is not None else self._value.copy()

    def __repr__(self) -> str:
        return f"<gpu_tensorarray.tf2.Variable shape={self.shape} dtype={self.dtype.name} value={self._value!r}>"


class GradientTape(_GradientTape):
    """gpu_tensorarray.GradientTape under tf.GradientTape's name, with ``watch``,
    ``watch_accessed_variables`` and ``watched_variables``. By default every value given to a
    TensorArray's write, scatter, unstack or split inside the tape is a source (the only sources
    a TensorArray tape has: TensorFlow watches the variables among them); with
    ``watch_accessed_variables=False`` only what ``watch`` was given, the values read that depend
    on it and the targets are, as in TensorFlow, and a gradient for anything else is unconnected
    (None, or zeros)."""

    def __init__(self, persistent: _builtins.bool = False, watch_accessed_variables: _builtins.bool = True) -> None:
        super().__init__(persistent)
        self._watch_accessed = _builtins.bool(watch_accessed_variables)
        self._watched: list[_Any] = []

    def watch(self, tensor: _Any) -> None:
        """Makes ``tensor`` (a value, or a nested structure of them) a source: what it does with
        ``watch_accessed_variables=False``; otherwise every value written is one already."""
        values = _nested_leaves(tensor)
        for value in values:
            if not (hasattr(value, "shape") and hasattr(value, "dtype")):      # TensorFlow's ValueError and words
                raise _InvalidArgumentError(f"Passed in object {_shown(value)} of type {type(value).__name__!r}, not "
                                            f"an array (NumPy, CuPy, torch, ...) or a Variable")
        for value in values:
            if not any(value is seen for seen in self._watched):
                self._watched.append(value)

    def _forget(self) -> None:
        # reset(), and entering a used non-persistent tape again: what ``watch`` was given goes too.
        super()._forget()
        self._watched = []

    def watched_variables(self) -> tuple[Variable, ...]:
        """The Variables watched: given to ``watch``, and (by default) written inside the tape,
        while its recorded ops are kept (a persistent tape's, or until ``gradient``)."""
        written = [op.inputs[_WRITE_VALUE[op.type]] for op in self._ops or () if op.type in _WRITE_VALUE]
        variables: list[Variable] = []
        for value in self._watched + (written if self._watch_accessed else []):
            if isinstance(value, Variable) and not any(value is seen for seen in variables):
                variables.append(value)
        return tuple(variables)

    def _watched_ids(self, ops: list[_Any]) -> set[int] | None:
        # As TensorFlow's tape records an op once an input is watched or recorded: what was
        # watched, and every value read that depends on it.
        return None if self._watch_accessed else _reach(ops, {id(value) for value in self._watched})[0]


def function(fn: _F | None = None, **unused_options: _Any) -> _Any:
    """tf.function's place: returns ``fn`` itself (TensorArrays here follow the
    tf.function rules everywhere)."""
    if fn is None:
        return lambda inner: inner
    return fn


del annotations      # the __future__ import's name: the module's names are TensorFlow's alone
