"""The row primitives (gather, scatter, scatter-add) as launches of kernels/*.cu.

Shared by the cupy backend and the emulated one, so the emulated backend runs
the GPU path's own preparation and launch code, not a copy of it.
"""

import contextlib
import math

import numpy as np

from . import kernel_sources
from ..errors import InternalError
from .accumulation import checked_mode, get_accumulation
from .base import guarded
from .grouping import group_by_destination
from .launch import launch

__all__ = ["KernelRows"]


class KernelRows:
    """Mixin for a Backend. The subclass provides ``_module`` (an object with
    ``run(kernel, dtype, blocks, threads, args)``) and two small hooks:
    ``_device_indices`` and ``_context``; allocations go through the Backend's
    ``empty`` and ``contiguous`` and, for host temporaries, ``allocate``."""

    _module = None
    #: Dtype names whose "atomic" mode launches add_rows_atomic; the others run the
    #: deterministic kernel (a GPU narrows this to what its architecture has).
    atomic_dtypes = kernel_sources.ATOMIC_DTYPES

    def _device_indices(self, host_indices):
        """A host int64 vector where the kernels can read it (through ``allocate``)."""
        raise self._missing("_device_indices")

    def _context(self):
        """Entered around allocations and launches (the device, on GPUs)."""
        return contextlib.nullcontext()

    def prepare_take_rows(self, indices, row_shape, dtype):
        n_rows, row_size = len(indices), math.prod(row_shape)
        with self._context():
            out = self.empty((n_rows,) + tuple(row_shape), dtype)
            device_indices = self._device_indices(indices) if n_rows * row_size else None

        def take(src):
            if n_rows * row_size:
                _check_rows("gather_rows", indices, len(src))
                _check_row_size("gather_rows", src, row_size)
                with self._context():
                    launch(self._module, "gather_rows", dtype, n_rows * row_size, out,
                           self.contiguous(src, dtype), device_indices, np.int64(n_rows), np.int64(row_size))
            return out
        return take

    def prepare_put_rows(self, indices, rows, dtype):
        n_rows, row_size = len(indices), math.prod(rows.shape[1:])
        if n_rows * row_size == 0:
            return _nothing
        with self._context():
            rows = self.contiguous(rows, dtype)
            device_indices = self._device_indices(indices)

        def put(dst):
            _check_rows("put_rows", indices, len(dst), rows, row_size)
            _check_row_size("put_rows", dst, row_size)
            with self._context(), self._writable(dst) as target:
                launch(self._module, "put_rows", dtype, n_rows * row_size, target, rows, device_indices,
                       np.int64(n_rows), np.int64(row_size))
        return put

    def prepare_add_rows(self, indices, rows, n_destinations, dtype, mode=None, guard=None):
        return guarded(guard, indices, lambda: self._prepare_add_rows(indices, rows, n_destinations, dtype, mode))

    def _prepare_add_rows(self, indices, rows, n_destinations, dtype, mode):
        mode = get_accumulation() if mode is None else checked_mode(mode)
        n_rows, row_size = len(indices), math.prod(rows.shape[1:])
        if n_rows * row_size == 0:
            return _nothing
        _check_rows("add_rows", indices, n_destinations, rows, row_size)
        with self._context():
            rows = self.contiguous(rows, dtype)
            if mode == "atomic" and np.dtype(dtype).name in self.atomic_dtypes:
                device_indices = self._device_indices(indices)

                def add(dst):
                    _check_row_size("add_rows_atomic", dst, row_size)
                    with self._context(), self._writable(dst) as target:
                        launch(self._module, "add_rows_atomic", dtype, n_rows * row_size, target, rows,
                               device_indices, np.int64(n_rows), np.int64(row_size))
                return add
            order, destinations, starts = self.allocate(
                lambda: group_by_destination(indices, n_destinations), 8 * (3 * n_rows + 2 * n_destinations),
                lambda: f"the grouping of a scatter-add of {n_rows} rows", host=True)
            n_groups = len(destinations)
            # One transfer for the three index vectors; the kernel gets views into it.
            packed = self._device_indices(self.allocate(lambda: np.concatenate([order, starts, destinations]),
                                                        8 * (n_rows + 2 * n_groups + 1), "scatter-add indices",
                                                        host=True))

        def add(dst):
            _check_row_size("add_rows_deterministic", dst, row_size)
            with self._context(), self._writable(dst) as target:
                launch(self._module, "add_rows_deterministic", dtype, n_groups * row_size, target, rows,
                       packed[:n_rows], packed[n_rows:n_rows + n_groups + 1], packed[n_rows + n_groups + 1:],
                       np.int64(n_groups), np.int64(row_size))
        return add

    @contextlib.contextmanager
    def _writable(self, dst):
        """``dst`` itself when kernels can write it in place (the slabs of layouts), else a
        contiguous copy whose contents go back into ``dst`` afterwards (the primitives
        called on any array: tests)."""
        target = dst if dst.flags.c_contiguous else self.contiguous(dst, dst.dtype)
        yield target
        if target is not dst:
            dst[...] = target


def _check_rows(kernel, indices, n_destinations, rows=None, row_size=None):
    """InternalError unless every index is a row of the ``n_destinations``-row array and
    ``rows`` holds one row per index. Storage checks its indices before any primitive
    runs, so this is our bug, never the user's; on a GPU it would write outside the
    array (or poison the CUDA context) instead of raising. One pass over host indices."""
    if len(indices) == 1:
        low = high = int(indices[0])
    else:
        low, high = int(indices.min()), int(indices.max())
    if low < 0 or high >= n_destinations:
        bad = low if low < 0 else high
        raise InternalError(f"{kernel}: row index {bad} is outside an array of {n_destinations} rows")
    if rows is not None and (len(rows) != len(indices) or math.prod(rows.shape) != len(indices) * row_size):
        raise InternalError(f"{kernel}: {len(indices)} indices of rows of {row_size} elements, but the rows "
                            f"have shape {list(rows.shape)}")


def _nothing(dst):
    pass


def _check_row_size(kernel, array, row_size):
    """InternalError unless ``array``'s rows hold ``row_size`` elements: the kernels index it
    with that row size, so a wider or narrower row would reach past the array (as _check_rows)."""
    if math.prod(array.shape[1:]) != row_size:
        raise InternalError(f"{kernel}: rows of {row_size} elements, but the array's rows hold "
                            f"{math.prod(array.shape[1:])} (shape {list(array.shape)})")
