"""One test body for every backend: the ``backend`` fixture (gpu_tensorarray.testing)
runs a test on numpy, emulated (the CUDA kernels compiled for the CPU) and cupy;
arrays created inside the test live on that backend.

The cupy variants run on a GPU where the real CuPy sees one, and elsewhere on the
CuPy stand-in (tests/cupy_standin.py), installed here before any test imports CuPy:
so they run, and must pass, on every machine, CI included. Tests that name no
backend keep the default of a machine without a GPU (numpy): the stand-in would
otherwise become the automatic choice."""

import os

import cupy_standin

if cupy_standin.install() is cupy_standin:
    os.environ.setdefault("GPU_TENSORARRAY_BACKEND", "numpy")

from gpu_tensorarray.testing import backend_fixture, require_in_ci  # noqa: E402

require_in_ci("cupy")
backend = backend_fixture()
