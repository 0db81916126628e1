"""The numpy backend's compiled scatter-add: kernels/cpu_add_rows.cpp built by g++
as a CPython extension module.

Optional. It is built on first use (a few seconds, once: the library is cached
on disk exactly as the emulated backend's is, build_cache.py says how it is kept
safe) and used for every scatter-add it can take. Where no compiler or no Python
headers are found, the build fails, or GPU_TENSORARRAY_CPU_KERNELS=0,
``add_rows_function`` answers None and scatter_add.py's NumPy path runs instead:
the same sums, bit for bit, only slower. ``status()`` says which and why.
"""

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sysconfig
import threading
from pathlib import Path

from .. import dtypes
from ..errors import UnavailableError
from . import build_cache, kernel_sources

__all__ = ["add_rows_function", "status", "SOURCE", "DISABLE_ENV", "ADDED", "REFUSED", "OVERLAP"]

SOURCE = "cpu_add_rows.cpp"
COMPILER = "g++"
# -ffp-contract=off: no fused multiply-adds (there are only adds, but it is the promise).
FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-x", "c++")
DISABLE_ENV = "GPU_TENSORARRAY_CPU_KERNELS"
MODULE = "gpu_tensorarray_cpu_add_rows"          # PyInit_<this> in the source
ADDED, REFUSED, OVERLAP = 0, 1, 2                 # add_rows' answers (the source's AddStatus)

_lock = threading.Lock()
_loaded = None          # None: not tried yet; else (functions by dtype or None, why)


def _find_compiler():
    return shutil.which(COMPILER)


def _python_headers():
    """The folder holding this Python's Python.h, or None."""
    folder = sysconfig.get_paths().get("include")
    return folder if folder and (Path(folder) / "Python.h").is_file() else None


def _dtype_order():
    return sorted(dtypes.AGGREGATABLE, key=lambda d: d.name)


def source():
    """The source g++ compiles: the kernel, then its table of the aggregatable dtypes."""
    entries = "".join(f"    CPU_ADD_ROWS_ENTRY({dtype.name}, {dtypes.c_type(dtype)})\n" for dtype in _dtype_order())
    return (kernel_sources.host_source(SOURCE) + "\nextern const DtypeEntry DTYPES[] = {\n" + entries + "};\n"
            + "extern const int N_DTYPES = sizeof(DTYPES) / sizeof(DTYPES[0]);\n")


def library_name(compiler, headers):
    """A digest of the source, the compiler, its flags and the Python it is built for:
    a change to any is a new library."""
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout
    python = sysconfig.get_config_var("EXT_SUFFIX") or ""
    key = hashlib.sha256("\0".join([source(), compiler, version, headers, python, *FLAGS]).encode()).hexdigest()[:24]
    return f"cpu-add-rows-{key}.so"


class _Library:
    """The extension module at ``path`` (build_cache hands a verified descriptor's path)."""

    def __init__(self, path):
        try:
            loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
            module = importlib.util.module_from_spec(importlib.util.spec_from_loader(MODULE, loader))
            loader.exec_module(module)
            names = module.dtype_names()
        except (ImportError, AttributeError) as error:
            raise UnavailableError(f"{path} is not the compiled scatter-add: {error}") from None
        if list(names) != [dtype.name for dtype in _dtype_order()]:
            raise UnavailableError(f"{path} holds the dtypes {names}, not the aggregatable ones")
        self.functions = {dtype: functools.partial(module.add_rows, position)
                          for position, dtype in enumerate(_dtype_order())}


def _load():
    if os.environ.get(DISABLE_ENV, "1").strip() == "0":
        return None, f"{DISABLE_ENV}=0"
    compiler = _find_compiler()
    if compiler is None:
        return None, f"no {COMPILER} on PATH"
    headers = _python_headers()
    if headers is None:
        return None, "no Python.h for this Python (install its development headers, e.g. python3-dev)"

    def build(path):
        result = subprocess.run([compiler, *FLAGS, f"-I{headers}", "-o", str(path), "-"], input=source(),
                                capture_output=True, text=True)
        if result.returncode != 0:
            raise UnavailableError(f"{compiler} failed: {result.stderr[-2000:]}")

    try:
        library = build_cache.load_or_build(library_name(compiler, headers), build, _Library)
    except (UnavailableError, OSError) as error:
        return None, f"the build failed: {error}"
    return library.functions, f"compiled by {compiler}"


def _functions():
    global _loaded
    if _loaded is None:
        with _lock:
            if _loaded is None:
                _loaded = _load()
    return _loaded[0]


def status():
    """(True, how) when the compiled scatter-add is in use, else (False, why not)."""
    functions = _functions()
    return functions is not None, _loaded[1]


def reset():
    """Forget the outcome of loading (tests: a changed environment or compiler lookup)."""
    global _loaded
    with _lock:
        _loaded = None


def add_rows_function(dtype):
    """``add(dst, indices, rows[, flags, required])`` -> ADDED, REFUSED or OVERLAP,
    or None when there is no compiled scatter-add for ``dtype`` here.

    ``add`` adds ``rows[k]`` to ``dst[indices[k]]`` in order (bitwise np.add.at) and
    answers ADDED; it writes nothing and answers REFUSED when an index lies outside
    ``dst``, or, given ``flags`` (bytes per destination row), when a destination's flag
    is not ``required``; OVERLAP when ``rows`` share memory with ``dst`` (copy them
    first). ``dst`` and ``rows`` must be C-contiguous arrays of ``dtype``, ``rows``
    having ``dst``'s row shape, ``indices`` C-contiguous int64."""
    adders = _loaded[0] if _loaded is not None else _functions()
    return None if adders is None else adders.get(dtype)
