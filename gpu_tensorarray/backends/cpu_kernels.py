"""The numpy backend's compiled scatter-add: the extension module gpu_tensorarray._cpu_add_rows
(kernels/cpu_add_rows.cpp), built when the package is installed (setup.py).

Optional: where the install found no compiler, or GPU_TENSORARRAY_CPU_KERNELS=0, the
numpy backend adds with np.add.at instead: the same sums, bit for bit, only slower.
``status()`` says which and why. Nothing is compiled at run time.
"""

import functools
import importlib
import os
from pathlib import Path

from ..errors import UnavailableError

__all__ = ["add_rows_function", "set_grouping_bytes", "last_level_cache_bytes", "status", "reset", "DISABLE_ENV",
           "MODULE", "ADDED", "REFUSED", "OVERLAP"]

DISABLE_ENV = "GPU_TENSORARRAY_CPU_KERNELS"
MODULE = "gpu_tensorarray._cpu_add_rows"
ADDED, REFUSED, OVERLAP = 0, 1, 2                 # add_rows' answers (cpu_add_rows.cpp's AddStatus)

_CACHES = Path("/sys/devices/system/cpu/cpu0/cache")
_UNKNOWN_CACHE_BYTES = 32 << 20         # a common size per core complex of current server CPUs


def last_level_cache_bytes(caches=_CACHES):
    """The size of the largest cache of CPU 0 that Linux lists (sysfs), or 32 MiB where it
    lists none. Not sysconf's: glibc answers a whole AMD socket's L3 there, where a core
    uses only its own complex's."""
    sizes = []
    for entry in caches.glob("index*/size"):
        try:
            text = entry.read_text().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if scale != 1 else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes, default=_UNKNOWN_CACHE_BYTES)


def _load():
    """({dtype name: add}, the module) or (None, why not)."""
    if os.environ.get(DISABLE_ENV, "1").strip() == "0":
        return None, f"{DISABLE_ENV}=0"
    try:
        module = importlib.import_module(MODULE)
    except ImportError as error:
        return None, (f"{MODULE} was not built when gpu_tensorarray was installed (no C++ compiler then?), "
                      f"so the numpy backend adds with np.add.at: {error}")
    module.set_grouping_bytes(last_level_cache_bytes())
    adds = {name: functools.partial(module.add_rows, position) for position, name in enumerate(module.dtype_names())}
    return adds, module


_adds, _module = None, None
_by_dtype = {}      # dtype -> its add or None, filled on use (dtype.name is a slow property)


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

    ``add`` adds ``rows[k]`` to ``dst[indices[k]]`` in order (bitwise np.add.at) and
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


def set_grouping_bytes(nbytes):
    """Sets, and returns the value before: the compiled scatter-add adds rows destination by
    destination (each destination line loaded and stored once for several rows) when the
    rows it is given take ``nbytes`` or more in all, each at least 2 KiB; below, in source
    order. Either way the sums are the same, bit for bit. At import: the last-level cache's
    size, where grouping starts to pay. Raises UnavailableError where there is no compiled
    scatter-add."""
    if _adds is None:
        raise UnavailableError(f"no compiled scatter-add: {_module}")
    return _module.set_grouping_bytes(nbytes)
