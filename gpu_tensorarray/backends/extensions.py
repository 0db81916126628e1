"""Where the package's compiled extension modules (built at install by setup.py: the numpy
backend's scatter-add, the emulated backend's kernels) come from, and why one is missing."""

import os

__all__ = ["not_built"]


def not_built(extension, installed_fix=""):
    """Why the extension module ``extension`` of this package is missing, and what to do
    (``installed_fix`` is added where the package is an installed one). A source checkout's
    package (setup.py beside it: python run from the checkout imports it) has extensions only
    once built there, whatever the install built elsewhere."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(os.path.dirname(package), "setup.py")):
        return (f"{extension} is not built in the source checkout {package}: build it there (python setup.py "
                f"build_ext --inplace) or run from outside the checkout")
    return (f"{extension} was not built when gpu_tensorarray was installed in {package} (no C++17 compiler then, "
            f"or the build failed: pip install -v shows why){installed_fix}")
