"""The numpy backend's compiled scatter-add: the extension module gpu_tensorarray._cpu_add_rows
(kernels/cpu_add_rows.cpp), built when the package is installed (setup.py).

Optional: where the install found no compiler, or GPU_TENSORARRAY_CPU_KERNELS=0, the
numpy backend adds with NumPy instead (scatter_add.add_at): the same sums, bit for bit, only slower.
``status()`` says which and why. Nothing is compiled at run time.
"""

import functools
import importlib
import os

from .extensions import not_built

__all__ = ["add_rows_function", "status", "reset", "DISABLE_ENV", "MODULE", "ADDED", "REFUSED", "OVERLAP"]

DISABLE_ENV = "GPU_TENSORARRAY_CPU_KERNELS"
MODULE = "gpu_tensorarray._cpu_add_rows"
ADDED, REFUSED, OVERLAP = 0, 1, 2                 # add_rows' answers (cpu_add_rows.cpp's AddStatus)


def _load():
    """({dtype name: add}, the module), or (None, why not)."""
    if os.environ.get(DISABLE_ENV, "1").strip() == "0":
        return None, f"{DISABLE_ENV}=0"
    try:
        module = importlib.import_module(MODULE)
    except ModuleNotFoundError:
        return None, f"{not_built(MODULE)}; the numpy backend adds with NumPy"
    except ImportError as error:
        return None, f"{MODULE} cannot be loaded ({error}); the numpy backend adds with NumPy"
    adds = {name: functools.partial(module.add_rows, position) for position, name in enumerate(module.dtype_names())}
    return adds, module


_adds, _module = None, None
_by_dtype: dict = {}      # dtype -> its add or None, filled on use (dtype.name is a slow property)


def reset():
    """Look the module up again (tests: a changed environment)."""
    global _adds, _module
    _adds, _module = _load()
    _by_dtype.clear()


reset()


def status():
    """(True, how) when the compiled scatter-add is in use, else (False, why not)."""
    if _adds is None:
        return False, _module
    return True, f"{MODULE}, built at install"


def add_rows_function(dtype):
    """``add(dst, indices, rows[, flags, required])`` -> ADDED, REFUSED or OVERLAP,
    or None when there is no compiled scatter-add for ``dtype`` here.

    ``add`` adds ``rows[k]`` to ``dst[indices[k]]`` in order (bitwise TensorFlow's adds) and
    answers ADDED; it writes nothing and answers REFUSED when an index lies outside
    ``dst``, or, given ``flags`` (bytes per destination row), when a destination's flag
    is not ``required``; OVERLAP when ``rows`` share memory with ``dst`` (copy them
    first). ``dst`` and ``rows`` must be C-contiguous arrays of ``dtype``, ``rows``
    having ``dst``'s row shape, ``indices`` C-contiguous int64 or int32."""
    try:
        return _by_dtype[dtype]
    except KeyError:
        add = _by_dtype[dtype] = None if _adds is None else _adds.get(dtype.name)
        return add
