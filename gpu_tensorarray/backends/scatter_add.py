"""The numpy backend's scatter-add: the compiled loop (cpu_kernels.py,
kernels/cpu_add_rows.cpp) where the install built it, else NumPy (``add_at``). Both add each
destination's rows in arrival order, as TensorFlow's CPU kernels add (subnormals flushed:
kernels/common.cuh's add_values), so the sums are the same, bit for bit.
"""

import numpy as np

from .. import dtypes
from ..host import flags_all_equal
from .base import guarded
from .cpu_kernels import ADDED, REFUSED, add_rows_function
from .grouping import group_by_destination

__all__ = ["prepare_add_rows_sequential", "add_at"]

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))     # what the compiled loop reads as they are


def prepare_add_rows_sequential(backend, indices, rows, n_destinations, dtype, guard=None):
    """-> ``add(dst)``: ``add_at(dst, indices, rows)``, bitwise. Whatever must be
    allocated (a private copy of rows that are a view, which may be of the array's own
    storage: np.add.at reads rows as they were; int64 indices for the compiled loop) is
    allocated here, through ``backend.allocate``, so ``add`` cannot run out of memory half
    way; int32 indices (TensorFlow's) need no copy. ``guard``: see Backend.prepare_add_rows. A guard is checked in the compiled
    loop's first pass, or, when something must be allocated first, on the host before
    that: a refused add allocates nothing."""
    compiled = add_rows_function(np.dtype(dtype)) if len(indices) and rows.size else None
    copy_rows = rows.base is not None or (compiled is not None and
                                          (rows.dtype != dtype or not rows.flags.c_contiguous))
    copy_indices = compiled is not None and (indices.dtype not in _INDEX_DTYPES or not indices.flags.c_contiguous)
    if guard is not None and (compiled is None or copy_rows or copy_indices):
        return guarded(guard, indices, lambda: prepare_add_rows_sequential(backend, indices, rows, n_destinations,
                                                                            dtype))
    if copy_rows:
        rows = backend.allocate(lambda: np.array(rows, dtype if compiled is not None else rows.dtype, order="C"),
                                rows.size * np.dtype(dtype).itemsize,
                                f"a contiguous copy of a value of shape {list(rows.shape)}")
    if copy_indices:
        indices = backend.allocate(lambda: np.ascontiguousarray(indices, np.int64), 8 * len(indices),
                                   "scatter-add indices", host=True)
    if compiled is None:
        return lambda dst: add_at(dst, indices, rows)
    checks = () if guard is None else guard

    def add(dst):
        status = compiled(dst, indices, rows, *checks) if dst.dtype == dtype and dst.flags.c_contiguous else None
        if status == ADDED:
            return True
        if guard is not None and (status == REFUSED or not flags_all_equal(guard[0], indices, guard[1])):
            return False
        # An index outside dst (IndexError, as np.add.at), or a dst the loop cannot take
        # (never storage's own: its slab is contiguous, and its rows private, copied above).
        add_at(dst, indices, rows)
        return True
    return add


def add_at(dst, indices, rows):
    """``dst[indices[k]] += rows[k]`` for k in order (``indices``: a vector; negative ones count
    from the end, as np.add.at's), as TensorFlow's CPU kernels add: np.add.at, but for float32,
    float64, their complex parts and bfloat16 (added in float32) a subnormal operand counts as a
    zero of its sign and a subnormal sum becomes one (kernels/common.cuh). ``dst`` changes in
    one assignment at the end: an interrupt or a failed allocation before it leaves it as it was."""
    # Overflow and inf - inf give inf and NaN silently, as in TensorFlow and the compiled loop,
    # whatever NumPy's error settings say.
    with np.errstate(over="ignore", invalid="ignore"):
        _add_at(dst, indices, rows)


def _add_at(dst, indices, rows):
    if not dtypes.flushes_subnormals(dst.dtype):    # integers, bool, float16: nothing to flush
        np.add.at(dst, indices, rows)
        return
    part = np.dtype(np.float64 if dst.dtype in _DOUBLE else np.float32)    # bfloat16 adds in float32
    indices = np.asarray(indices, np.int64).reshape(-1)
    if not len(indices):
        return
    if indices.min() < -len(dst) or indices.max() >= len(dst):
        raise IndexError(f"index out of bounds for a scatter-add into {len(dst)} rows")
    indices = np.where(indices < 0, indices + len(dst), indices)
    rows = np.broadcast_to(rows, (len(indices),) + dst.shape[1:])
    order, destinations, starts = group_by_destination(indices, len(dst))
    sums, sizes = dst[destinations], np.diff(starts)
    # Round r adds each group's r-th row, to the groups that have one: every add once, in
    # arrival order, O(len(indices)) in all.
    active = np.arange(len(destinations))
    for round_ in range(int(sizes.max())):
        active = active[sizes[active] > round_]
        sums[active] = _flushed_sum(sums[active], rows[order[starts[active] + round_]], part)
    dst[destinations] = sums


_DOUBLE = (np.dtype(np.float64), np.dtype(np.complex128))


def _flushed_sum(a, b, part):
    if a.dtype.kind == "c":
        total = np.empty(np.broadcast_shapes(a.shape, b.shape), a.dtype)
        total.real = _flushed_sum(a.real, b.real, part)
        total.imag = _flushed_sum(a.imag, b.imag, part)
        return total
    total = _flushed(_flushed(a.astype(part)) + _flushed(b.astype(part)))
    return total.astype(a.dtype)                # bfloat16: rounded once, to nearest even


def _flushed(x):
    tiny = np.finfo(x.dtype).tiny
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros((), x.dtype), x), x)
