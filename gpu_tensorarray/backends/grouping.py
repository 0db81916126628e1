"""Grouping scatter-add rows by destination, keeping their arrival order.

The one host-side step behind every deterministic scatter-add: the numpy
backend's sequential add and the add_rows_deterministic kernel both sum group g
in the order given here, which is the order TensorFlow (and np.add.at) adds.
It costs O(len(indices)), never O(n_destinations): a one-row add into a large
array stays as cheap as into a small one.
"""

import numpy as np

__all__ = ["group_by_destination"]

# numpy sorts 16-bit keys stably with a radix sort, ~10x faster than int64's timsort.
_RADIX_LIMIT = 1 << 16


def group_by_destination(indices, n_destinations):
    """(order, destinations, starts) for host int64 ``indices`` into ``n_destinations`` rows.

    ``order`` is a stable argsort of ``indices``; group g is the source rows
    ``order[starts[g]:starts[g + 1]]``, in arrival order, all adding into row
    ``destinations[g]``; destinations ascend. All intp (int64 on 64-bit platforms)."""
    n = len(indices)
    if n <= 1:       # the aggregated single-slot write: no sort at all
        return np.arange(n, dtype=np.intp), indices.astype(np.intp), np.arange(n + 1, dtype=np.intp)
    keys = indices.astype(np.uint16) if n_destinations <= _RADIX_LIMIT else indices
    order = np.argsort(keys, kind="stable")
    ordered = indices[order]
    # A group starts where the sorted index changes.
    starts = np.empty(n + 1, np.intp)
    starts[0] = 0
    changes = np.flatnonzero(ordered[1:] != ordered[:-1])
    n_groups = len(changes) + 1
    np.add(changes, 1, out=starts[1:n_groups])
    starts[n_groups] = n
    starts = starts[:n_groups + 1]
    destinations = ordered[starts[:-1]].astype(np.intp, copy=False)
    return order, destinations, starts
