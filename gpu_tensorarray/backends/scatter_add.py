"""Scatter-add on the host, bitwise equal to np.add.at and several times faster.

The numpy backend's add_rows. The compiled loop (cpu_kernels.py:
kernels/cpu_add_rows.cpp) takes every add where it is available; otherwise NumPy
does it: rows of one element by np.add.at's own 1-D loop, wider rows like the
add_rows_deterministic kernel, each destination summing its rows in arrival
order, grouped by grouping.group_by_destination.
"""

import math

import numpy as np

from .. import dtypes
from ..host import flags_all_equal
from .base import guarded
from .cpu_kernels import ADDED, OVERLAP, REFUSED, add_rows_function
from .grouping import group_by_destination

__all__ = ["prepare_add_rows_sequential"]

# np.add.at costs about (row_size + 6) / 125 microseconds per row, the rounds
# about 30 microseconds plus the data: np.add.at wins below this many units.
_ADD_AT_BUDGET = 4000
# Source rows gathered per numpy call: temporaries stay in L2 and get reused.
_CHUNK_BYTES = 1 << 18


def prepare_add_rows_sequential(backend, indices, rows, n_destinations, dtype, guard=None):
    """-> ``add(dst)``: ``np.add.at(dst, indices, rows)``, bitwise, several times faster.
    Every temporary of more than a chunk is allocated here, through ``backend.allocate``
    (the plan, a contiguous copy of ``rows``, the sums), so ``add`` cannot run out of memory
    half way. ``guard``: see Backend.prepare_add_rows.

    np.add.at adds one source row per step of a C loop with a large per-row cost.
    Instead the source rows are grouped by destination in arrival order (one
    stable sort), and each group's sum is built strictly left to right:
    - round k adds the k-th row of every group still going; destinations within
      a round are distinct, so one vectorised add per round is exact;
    - groups longer than the rounds (heavily repeated indices) finish with
      np.add.reduce over axis 0 of [running sum + next row; following rows],
      started from -0.0. NumPy sums along a non-innermost axis row after row
      (pairwise summation is only used along the innermost one, and rows here
      have at least two elements);
    - the number of rounds minimises rounds + long groups, i.e. numpy calls.
    Rows of one element take np.add.at's own 1-D loop, which is sequential and fast.
    Floating-point overflow warns, as np.add.at does (the compiled loop does not warn).
    Every add takes the compiled loop first, where there is one."""
    n_rows, row_size = len(indices), math.prod(rows.shape[1:])
    compiled = add_rows_function(np.dtype(dtype)) if n_rows and row_size else None
    if compiled is not None:
        return _prepare_compiled(backend, compiled, indices, rows, dtype, guard)
    return guarded(guard, indices, lambda: _prepare_numpy(backend, indices, rows, n_destinations, dtype))


def _prepare_numpy(backend, indices, rows, n_destinations, dtype):
    n_rows, row_size = len(indices), math.prod(rows.shape[1:])
    if n_rows == 0 or row_size == 0:
        return _nothing
    if n_rows == 1:
        def add(dst):
            target = dst[indices[0]:indices[0] + 1]
            np.add(target, rows[:1], out=target)
        return add
    if row_size == 1:
        def add(dst):
            column = dst.reshape(len(dst)) if dst.flags.c_contiguous else dst[(slice(None),) + (0,) * (dst.ndim - 1)]
            np.add.at(column, indices, rows.reshape(n_rows))
        return add
    if rows.dtype != dtype or n_rows * (row_size + 6) < _ADD_AT_BUDGET:
        return lambda dst: np.add.at(dst, indices, rows)
    index_bytes = 8 * (6 * n_rows + 4 * n_destinations)     # the sorts, counts and groupings
    destinations, rounds, tails = backend.allocate(lambda: _plan(indices, n_destinations), index_bytes,
                                                   f"the plan of a scatter-add of {n_rows} rows", host=True)
    # take() gathers rows ~4x faster than fancy indexing, but copies a strided source whole.
    rows = backend.contiguous(rows, dtype).reshape(n_rows, row_size)
    sums = backend.empty((len(destinations), row_size), dtype)
    chunk = max(1, _CHUNK_BYTES // (row_size * rows.itemsize))
    part_buffer = backend.empty((min(chunk, n_rows), row_size), dtype)
    identity = dtypes.exact_identity(dtype)

    def add(dst):
        np.take(dst, destinations, axis=0, out=sums.reshape((len(destinations),) + dst.shape[1:]), mode="clip")
        for sources in rounds:
            for start in range(0, len(sources), chunk):
                part = sources[start:start + chunk]
                target = sums[start:start + len(part)]
                np.add(target, np.take(rows, part, axis=0, out=part_buffer[:len(part)], mode="clip"), out=target)
        for group, sources in enumerate(tails):
            for start in range(0, len(sources), chunk):
                part = sources[start:start + chunk]
                part = np.take(rows, part, axis=0, out=part_buffer[:len(part)], mode="clip")
                np.add(sums[group], part[0], out=part[0])
                np.add.reduce(part, axis=0, out=sums[group], initial=identity)
        dst[destinations] = sums.reshape((len(destinations),) + dst.shape[1:])
    return add


def _prepare_compiled(backend, compiled, indices, rows, dtype, guard):
    """-> ``add(dst)`` by the compiled loop, which then allocates nothing: the rows it
    reads are made contiguous and private (a view may be of the array's own storage,
    and np.add.at reads rows as they were) and the indices int64 here, through the door.
    A guard is checked in the loop's first pass, or, when something must be allocated
    first, on the host before that: a refused add allocates nothing."""
    copy_rows = rows.base is not None or rows.dtype != dtype or not rows.flags.c_contiguous
    if copy_rows or indices.dtype != np.int64 or not indices.flags.c_contiguous:
        if guard is not None:
            return guarded(guard, indices, lambda: _prepare_compiled(backend, compiled, indices, rows, dtype, None))
        if copy_rows:
            rows = backend.allocate(lambda: np.array(rows, dtype, order="C"), rows.size * np.dtype(dtype).itemsize,
                                    f"a contiguous copy of a value of shape {list(rows.shape)}")
        if indices.dtype != np.int64 or not indices.flags.c_contiguous:
            indices = backend.allocate(lambda: np.ascontiguousarray(indices, np.int64), 8 * len(indices),
                                       "scatter-add indices", host=True)
    checks = () if guard is None else guard

    def add(dst):
        status = compiled(dst, indices, rows, *checks) if dst.dtype == dtype and dst.flags.c_contiguous else OVERLAP
        if status == ADDED:
            return True
        if guard is not None and (status == REFUSED or not flags_all_equal(guard[0], indices, guard[1])):
            return False
        # An index outside dst (IndexError, as np.add.at), or a dst the loop cannot take
        # (never storage's own: its rows are private, its slab contiguous).
        np.add.at(dst, indices, rows)
        return True
    return add


def _nothing(dst):
    pass


def _plan(indices, n_destinations):
    """(destinations, rounds, tails): groups ordered by size, largest first, so
    round k's groups are a prefix; ``rounds[k]`` lists their k-th source rows,
    ``tails[g]`` the rows group g still has after the rounds."""
    order, destinations, starts = group_by_destination(indices, n_destinations)
    counts = starts[1:] - starts[:-1]
    largest_first = np.argsort(-counts)          # the order among equal sizes does not matter
    destinations, counts, starts = destinations[largest_first], counts[largest_first], starts[largest_first]
    longer_than = len(counts) - np.bincount(counts).cumsum()  # [k]: groups with more than k rows
    # k rounds cost k + longer_than[k] numpy calls; since that is >= k, no k beyond
    # the cost of a single round can win.
    candidates = longer_than[:2 + int(longer_than[1])].tolist()
    n_rounds = min(range(1, len(candidates)), key=lambda k: k + candidates[k])
    rounds = [order[starts[:active] + k] for k, active in enumerate(longer_than[:n_rounds].tolist())]
    n_tails = int(longer_than[n_rounds])
    tails = [order[start + n_rounds:start + count]
             for start, count in zip(starts[:n_tails].tolist(), counts[:n_tails].tolist())]
    return destinations, rounds, tails
