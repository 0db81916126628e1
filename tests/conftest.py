"""One test body for every backend: the ``backend`` fixture (gpu_tensorarray.testing)
runs a test on numpy, emulated (the CUDA kernels compiled for the CPU) and cupy;
arrays created inside the test live on that backend.

The cupy variants run on a GPU where the real CuPy sees one, and elsewhere on the
CuPy stand-in (tests/cupy_standin.py), installed here before any test imports CuPy:
so they run, and must pass, on every machine, CI included."""

import cupy_standin

cupy_standin.install()

from gpu_tensorarray.testing import backend_fixture, require_in_ci  # noqa: E402

require_in_ci("cupy")
backend = backend_fixture()
