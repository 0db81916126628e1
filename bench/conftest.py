"""The benches run on every usable backend, like the tests."""

from gpu_tensorarray.testing import backend_fixture

backend = backend_fixture()
