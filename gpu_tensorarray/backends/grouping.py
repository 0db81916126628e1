"""Grouping scatter-add rows by destination, keeping their arrival order.

The one host-side step behind every deterministic scatter-add: the numpy
backend's sequential add and the add_rows_deterministic kernel both sum group g
in the order given here, which is the order np.add.at (and TensorFlow) adds.
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
    keys = indices.astype(np.uint16) if n_destinations <= _RADIX_LIMIT else indices
    order = np.argsort(keys, kind="stable")
    counts = np.bincount(indices, minlength=n_destinations)
    destinations = counts.nonzero()[0]
    starts = np.empty(len(destinations) + 1, np.intp)
    starts[0] = 0
    counts[destinations].cumsum(out=starts[1:])
    return order, destinations, starts
