"""The least a TensorArray of this design can cost in a torch training step: a reference
for the torch bridge's figures, not a TensorArray anyone should use.

``FloorTensorArray`` does the work gpu_tensorarray.torch cannot avoid and nothing else:
- a write copies the value into a NumPy slab row (``numpy(force=True)``, a row assignment)
  and keeps the tensor for autograd; a growing array doubles its slab;
- a read copies a row out into a new tensor (torch has no read-only tensors);
- a stack makes one autograd node for every write so far (its backward hands each write
  its row of the gradient slab) and one for the read (its backward copies the incoming
  gradient into that slab): two nodes per array, as the bridge makes.
It checks nothing (no bounds, dtypes, shapes, written-once or read-once flags), takes no
lock, keeps no flow, and has no TensorArrayGradV3 accumulator: whatever the bridge costs
over this is the price of TensorFlow's semantics, checks and safety. It runs the two
models the bridge is measured on (CPU tensors, fixed or dynamic size, inputs that need no
gradient, one read per slot, one stack) and nothing more.
"""

import numpy as np
import torch

__all__ = ["FloorTensorArray"]

_FIRST_SLAB_BYTES = 16 * 1024


class _Writes(torch.autograd.Function):
    """(flow, array, *values) -> a flow; its backward: each value's row of the gradient slab."""

    @staticmethod
    def forward(ctx, flow, array, *values):
        ctx.array = array
        return flow.new_empty(())

    @staticmethod
    def backward(ctx, flow_grad):
        array = ctx.array
        rows = torch.from_numpy(array.gradient.take(np.array(array.indices, np.int64), axis=0))
        return (None, None) + rows.unbind(0)


class _Stack(torch.autograd.Function):
    """(flow, array) -> every row; its backward stores the gradient in the gradient slab."""

    @staticmethod
    def forward(ctx, flow, array):
        ctx.array = array
        return torch.from_numpy(array.slab[:array.count].copy())

    @staticmethod
    def backward(ctx, grad):
        ctx.array.gradient = grad.numpy().copy()
        return grad.new_zeros(()), None


class FloorTensorArray:
    """TensorArray(dtype, size, dynamic_size=False): unstack, read, write, size, stack."""

    def __init__(self, dtype, size, dynamic_size=False):
        self.dtype, self.slab, self.count, self.values, self.indices = dtype, None, 0, [], []
        self.capacity = size

    def _reserve(self, index, row):
        """Room for slot ``index`` of rows like ``row`` (a NumPy array)."""
        if self.slab is None:
            first = _FIRST_SLAB_BYTES // max(row.nbytes, 1)     # as the bridge's first slab
            self.slab = np.zeros((max(self.capacity, index + 1, first),) + row.shape, row.dtype)
        elif index >= len(self.slab):
            grown = np.zeros((max(2 * len(self.slab), index + 1),) + self.slab.shape[1:], self.slab.dtype)
            grown[:len(self.slab)] = self.slab
            self.slab = grown
        self.count = max(self.count, index + 1)

    def unstack(self, value):
        rows = value.numpy(force=True)
        self._reserve(len(rows) - 1, rows[0])
        self.slab[:len(rows)] = rows
        return self

    def size(self):
        return torch.tensor(self.count, dtype=torch.int32)

    def read(self, index):
        return torch.from_numpy(self.slab[index].copy())

    def write(self, index, value):
        row = value.numpy(force=True)
        self._reserve(index, row)
        self.slab[index] = row
        self.values.append(value)
        self.indices.append(index)
        return self

    def stack(self):
        flow = _Writes.apply(torch.zeros(()), self, *self.values)
        return _Stack.apply(flow, self)
