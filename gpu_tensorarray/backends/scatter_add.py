"""The numpy backend's scatter-add: the compiled loop (cpu_kernels.py,
kernels/cpu_add_rows.cpp) where the install built it, else np.add.at. Both add each
destination's rows in arrival order, so the sums are the same, bit for bit.
"""

import numpy as np

from ..host import flags_all_equal
from .base import guarded
from .cpu_kernels import ADDED, REFUSED, add_rows_function

__all__ = ["prepare_add_rows_sequential"]

_INDEX_DTYPES = (np.dtype(np.int64), np.dtype(np.int32))     # what the compiled loop reads as they are


def prepare_add_rows_sequential(backend, indices, rows, n_destinations, dtype, guard=None):
    """-> ``add(dst)``: ``np.add.at(dst, indices, rows)``, bitwise. Whatever must be
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
        return lambda dst: np.add.at(dst, indices, rows)
    checks = () if guard is None else guard

    def add(dst):
        status = compiled(dst, indices, rows, *checks) if dst.dtype == dtype and dst.flags.c_contiguous else None
        if status == ADDED:
            return True
        if guard is not None and (status == REFUSED or not flags_all_equal(guard[0], indices, guard[1])):
            return False
        # An index outside dst (IndexError, as np.add.at), or a dst the loop cannot take
        # (never storage's own: its slab is contiguous, and its rows private, copied above).
        np.add.at(dst, indices, rows)
        return True
    return add
