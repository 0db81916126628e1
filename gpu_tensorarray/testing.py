"""Helpers for test and benchmark suites (ours and users'): run one body on every backend.

``backend_fixture`` is a pytest fixture: arrays created inside the test live on the
parametrised backend (numpy, emulated, cupy). Backends that cannot load here are
skipped, except those listed in REQUIRED_IN_CI when the CI variable is set: there a
missing backend fails, so CI can never pass by skipping the emulated kernels.
``import_torch`` does the same for PyTorch (gpu_tensorarray.torch's suites): CI
installs a CPU build, so there a missing torch fails too. ``open_array_names`` lets a
leak test compare the arrays it made.
"""

import os

from . import device, get_backend
from .errors import UnavailableError

__all__ = ["BACKEND_NAMES", "REQUIRED_IN_CI", "load_backend", "backend_fixture", "import_torch", "require_in_ci",
           "open_array_names"]

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


def open_array_names():
    """The names of the open arrays, after a garbage collection. A leak test compares the
    arrays it made (this set after, less this set before), whatever earlier tests left for
    the collector: those may be freed at any moment, on a GPU from torch's own threads."""
    import gc

    from .registry import registry

    gc.collect()
    return {array.name for array in registry.live_arrays() if not array.closed}
