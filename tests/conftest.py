"""One test body for every backend: the ``backend`` fixture runs a test on numpy,
on emulated (the CUDA kernels compiled for the CPU) and on cupy (when a GPU is
usable), with arrays created inside the test living on that backend."""

import os

import pytest

import gpu_tensorarray as gta
from gpu_tensorarray.errors import UnavailableError

BACKEND_NAMES = ("numpy", "emulated", "cupy")
# Backends CI must be able to run: there a missing one fails instead of skipping.
REQUIRED_IN_CI = ("numpy", "emulated")


def load_backend(name):
    try:
        return gta.get_backend(name)
    except UnavailableError as error:
        if name in REQUIRED_IN_CI and os.environ.get("CI"):
            pytest.fail(f"the {name} backend must run in CI: {error}")
        pytest.skip(f"{name} backend unavailable here: {error}")


@pytest.fixture(params=BACKEND_NAMES)
def backend(request):
    """The Backend object; arrays created in the test live there."""
    selected = load_backend(request.param)
    with gta.device(selected):
        yield selected


@pytest.fixture
def to_host():
    return gta.to_numpy
