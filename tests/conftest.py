"""One test body for every backend: the ``backend`` fixture (gpu_tensorarray.testing)
runs a test on numpy, emulated (the CUDA kernels compiled for the CPU) and cupy
(where a GPU is usable); arrays created inside the test live on that backend."""

from gpu_tensorarray.testing import backend_fixture

backend = backend_fixture()
