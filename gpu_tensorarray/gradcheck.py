"""A finite-difference checker for TensorArray programs: central differences of a
scalar function, and check_gradients, which compares them with what GradientTape
gives. Inputs may be any backend's arrays: the checker asks the input's backend
for host copies and for arrays of its kind."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import numpy as np

from . import raw_ops
from .backends import backend_of
from .errors import InvalidArgumentError
from .tape import GradientTape

__all__ = ["numeric_gradients", "check_gradients", "GradientCheckError", "GradientCheck"]

_DEFAULT_RTOL = {np.dtype("float64"): 1e-6, np.dtype("float32"): 1e-3, np.dtype("float16"): 5e-2}

GradientCheck = collections.namedtuple("GradientCheck", ["max_relative_error", "errors", "analytic", "numeric"])
GradientCheck.__doc__ = """check_gradients(..., details=True): the worst relative error, the
relative error per input, and the analytic and numeric gradients (NumPy float64)."""


class GradientCheckError(AssertionError):
    """Analytic and numeric gradients differ by more than the tolerance."""


def _host(value):
    """A NumPy array with ``value``'s values (a device-to-host copy for device arrays)."""
    backend = backend_of(value)
    return np.asarray(value) if backend is None else backend.to_numpy(value)


def _like(host, original):
    """``host`` (NumPy) as an array of the kind ``original`` is (its backend's)."""
    backend = backend_of(original)
    return host if backend is None else backend.from_host(host)


def _check_real(inputs):
    for position, value in enumerate(inputs):
        dtype = np.dtype(getattr(value, "dtype", np.float64))
        if dtype.kind != "f":
            raise InvalidArgumentError(f"Finite differences need real floating inputs; input {position} has "
                                       f"dtype {dtype}")


def numeric_gradients(f, inputs, delta=None):
    """Central differences of the scalar function ``f(*inputs)`` -> one NumPy float64
    array per input. Each evaluation gets a fresh perturbed copy of the input it varies
    (of the input's kind: NumPy or CuPy). ``delta`` defaults to cbrt(machine epsilon)
    of the input's dtype, times max(1, |x|); the step actually taken (after rounding
    to the dtype) is what the difference is divided by."""
    inputs = list(inputs)
    _check_real(inputs)
    results = []
    for position, original in enumerate(inputs):
        host = _host(original)
        dtype = host.dtype
        step = float(np.finfo(dtype).eps) ** (1.0 / 3.0) if delta is None else float(delta)
        gradient = np.zeros(host.shape, np.float64)
        flat = host.reshape(-1)
        for element in range(flat.size):
            h = step * max(1.0, abs(float(flat[element])))
            plus, minus = host.copy(), host.copy()
            plus.reshape(-1)[element] = flat[element] + dtype.type(h)
            minus.reshape(-1)[element] = flat[element] - dtype.type(h)
            taken = float(plus.reshape(-1)[element]) - float(minus.reshape(-1)[element])
            args = list(inputs)
            args[position] = _like(plus, original)
            f_plus = float(f(*args))
            args[position] = _like(minus, original)
            f_minus = float(f(*args))
            gradient.reshape(-1)[element] = (f_plus - f_minus) / taken
        results.append(gradient)
    return results


def _close_recorded(tape):
    for op in tape.operations:
        array = op.array
        if not array.closed:
            raw_ops.TensorArrayCloseV3(op.inputs[0])


def check_gradients(fn: Callable[..., Any], inputs: Any, output_gradients: Any = None, delta: float | None = None,
                    rtol: float | None = None, seed: int = 0, raise_on_mismatch: bool = True,
                    details: bool = False) -> Any:
    """Compare the tape's gradients of a TensorArray program with central differences.

    ``fn(*inputs)`` builds its TensorArrays inside, passes each input as the value of
    a write/scatter/unstack/split, and returns what it read out (read/gather/stack/
    concat results: one array or a list). The checker differentiates the scalar
    ``sum_k sum(w_k * output_k)``, with ``w_k`` = ``output_gradients`` or seeded random
    normals, once under a GradientTape and once by central differences (one fresh call
    of ``fn`` per evaluation, so write-once and clear-after-read never get in the way).
    The arrays ``fn`` used are closed after each call. Inputs: real floating arrays
    (NumPy or CuPy).

    The relative error of an input is max|analytic - numeric| / max(max|analytic|,
    max|numeric|) (0 when both vanish). Returns the largest over the inputs (or, with
    ``details=True``, a GradientCheck); raises GradientCheckError when it exceeds
    ``rtol`` (default by dtype: float64 1e-6, float32 1e-3, float16 5e-2) unless
    ``raise_on_mismatch`` is false.
    """
    single = not isinstance(inputs, (list, tuple))
    inputs = [inputs] if single else list(inputs)
    _check_real(inputs)

    with GradientTape() as tape:
        outputs = fn(*inputs)
    output_list = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    if output_gradients is None:
        rng = np.random.default_rng(seed)
        weights = [_like(rng.standard_normal(tuple(out.shape)).astype(out.dtype), out) for out in output_list]
    else:
        weights = list(output_gradients) if isinstance(output_gradients, (list, tuple)) else [output_gradients]
    host_weights = [_host(w).astype(np.float64) for w in weights]
    try:
        analytic = tape.gradient(output_list, inputs, output_gradients=weights)
    finally:
        _close_recorded(tape)
    analytic = [_host(g).astype(np.float64) for g in analytic]

    def loss(*args):
        with GradientTape() as evaluation:
            outs = fn(*args)
        try:
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return sum(float((_host(o).astype(np.float64) * w).sum()) for o, w in zip(outs, host_weights))
        finally:
            _close_recorded(evaluation)

    numeric = numeric_gradients(loss, inputs, delta)
    errors = []
    worst = 0
    for position, (a, n) in enumerate(zip(analytic, numeric)):
        scale = max(float(np.abs(a).max(initial=0.0)), float(np.abs(n).max(initial=0.0)))
        diff = np.abs(a - n)
        error = float(diff.max(initial=0.0)) / scale if scale > 0 else 0.0
        errors.append(error)
        if error > errors[worst]:
            worst = position
    max_error = max(errors, default=0.0)
    if rtol is None:
        rtol = max((_DEFAULT_RTOL.get(np.dtype(x.dtype), 1e-3) for x in inputs), default=1e-6)
    if raise_on_mismatch and max_error > rtol:
        a, n = analytic[worst], numeric[worst]
        element = np.unravel_index(int(np.abs(a - n).argmax()), a.shape) if a.size else ()
        raise GradientCheckError(
            f"gradient check failed: relative error {max_error:.3g} > rtol {rtol:g} for input {worst}; "
            f"worst element {tuple(int(i) for i in element)}: analytic {float(a[element]):.9g}, numeric "
            f"{float(n[element]):.9g}")
    if details:
        return GradientCheck(max_error, errors, analytic, numeric)
    return max_error
