"""What the torch suites share: on which torch device the bridge returns a backend's values
(where a test builds the leaves, weights and reference tensors it mixes with them), and a
way to let torch's autograd engine settle before a test counts arrays. Imported after
gpu_tensorarray.testing.import_torch."""

import gc
import time

import torch

from gpu_tensorarray import device, get_backend
from gpu_tensorarray.testing import open_array_names
from gpu_tensorarray.torch import TensorArray

_torch_devices = {}      # backend -> the torch device of its arrays' values


def torch_device(backend=None):
    """The torch device on which gpu_tensorarray.torch returns the values of ``backend``'s
    arrays (default: the active device's, the ``backend`` fixture's inside a test): a
    cupy array's GPU where torch has CUDA, else the CPU.
    The bridge's own answer, ``TensorArray.device``, asked once per backend."""
    backend = get_backend(backend)
    found = _torch_devices.get(backend)
    if found is None:
        with device(backend):
            probe = TensorArray(torch.float32, size=0)
        found = _torch_devices[backend] = probe.device
        probe.close()
    return found


def settle_autograd():
    """Let torch drop what its engine still holds of finished backward passes (on a GPU,
    a device thread runs them) before a test counts arrays: one tiny pass on the active
    backend's torch device."""
    gc.collect()
    torch.ones(1, device=torch_device(), requires_grad=True).sum().backward()
    gc.collect()


def opened_since(before, wait=2.0):
    """The arrays opened since ``before`` (``open_array_names()``) that stay open once torch has
    settled. On a GPU, torch's device thread can still hold a failed pass's queued tasks (and
    their nodes) after a settling pass, since its queue runs newer nodes first, and drop
    them a moment later: a leak is what is still open after ``wait`` seconds."""
    deadline = time.monotonic() + wait
    while True:
        settle_autograd()
        left = open_array_names() - before
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.01)
