"""The benches run on every usable backend, like the tests (helpers: benchrows.py)."""

from gpu_tensorarray.testing import backend_fixture

backend = backend_fixture()
