"""Helpers for test and benchmark suites (ours and users'): run one body on every backend.

``backend_fixture`` is a pytest fixture: arrays created inside the test live on the
parametrised backend (numpy, emulated, cupy). Backends that cannot load here are
skipped, except those listed in REQUIRED_IN_CI when the CI variable is set: there a
missing backend fails, so CI can never pass by skipping the emulated kernels.
``import_torch`` does the same for PyTorch (gpu_tensorarray.torch's suites): CI
installs a CPU build, so there a missing torch fails too. ``torch_device`` says on which
torch device gpu_tensorarray.torch returns a backend's values: where a test builds the
leaves, weights and reference tensors it mixes with them.
"""

import os

from . import device, get_backend
from .errors import UnavailableError

__all__ = ["BACKEND_NAMES", "REQUIRED_IN_CI", "load_backend", "backend_fixture", "import_torch", "require_in_ci",
           "torch_device", "open_array_names", "settle_autograd"]

BACKEND_NAMES = ("numpy", "emulated", "cupy")
REQUIRED_IN_CI = ("numpy", "emulated")
_required = set(REQUIRED_IN_CI)


def require_in_ci(*names):
    """Make these backends required under CI too (a suite that always has them: ours
    runs cupy on a GPU or on its CuPy stand-in)."""
    _required.update(names)


def load_backend(name):
    import pytest

    try:
        return get_backend(name)
    except UnavailableError as error:
        if name in _required and os.environ.get("CI"):
            pytest.fail(f"the {name} backend must run in CI: {error}")
        pytest.skip(f"{name} backend unavailable here: {error}")


def _backend(request):
    with device(load_backend(request.param)) as selected:
        yield selected


def backend_fixture():
    import pytest

    return pytest.fixture(params=BACKEND_NAMES, name="backend")(_backend)


def import_torch():
    """torch, for a test module that needs it: skips the module where torch is not
    installed, fails it under CI (which installs torch: .ci/run)."""
    import pytest

    try:
        import torch
    except ImportError as error:
        if os.environ.get("CI"):
            pytest.fail(f"torch must be installed in CI (.ci/run installs a CPU build): {error}", pytrace=False)
        pytest.skip(f"torch is not installed here ({error}): pip install 'gpu_tensorarray[torch]'",
                    allow_module_level=True)
    return torch


_torch_devices = {}      # backend -> the torch device of its arrays' values


def torch_device(backend=None):
    """The torch device on which gpu_tensorarray.torch returns the values of ``backend``'s
    arrays (default: the active device's, the ``backend`` fixture's inside a test): a
    cupy array's GPU where torch has CUDA, else the CPU.
    The bridge's own answer, ``TensorArray.device``, asked once per backend."""
    backend = get_backend(backend)
    found = _torch_devices.get(backend)
    if found is None:
        import torch

        from .torch import TensorArray

        with device(backend):
            probe = TensorArray(torch.float32, size=0)
        found = _torch_devices[backend] = probe.device
        probe.close()
    return found


def open_array_names():
    """The names of the open arrays, after a garbage collection. A leak test compares the
    arrays it made (this set after, less this set before), whatever earlier tests left for
    the collector: those may be freed at any moment, on a GPU from torch's own threads."""
    import gc

    from .registry import registry

    gc.collect()
    return {array.name for array in list(registry._open) if not array.closed}


def settle_autograd():
    """Let torch drop what its engine still holds of finished backward passes (on a GPU,
    a device thread runs them) before a test counts arrays: one tiny pass on the active
    backend's torch device."""
    import gc

    import torch

    gc.collect()
    torch.ones(1, device=torch_device(), requires_grad=True).sum().backward()
    gc.collect()
