"""The numpy backend's compiled host code: kernels/cpu_*.cpp built by g++ as CPython
extension modules.

- kernels/cpu_add_rows.cpp, the scatter-add (``add_rows_function``);
- kernels/cpu_raw_ops.cpp, raw Write, Read and Gather with their common case in C
  (``compiled_raw_ops``).

Both are optional. Each is built once, on first use (the raw ops when raw_ops.py is
imported), in a second or a few, and cached on disk exactly as the emulated backend's
library is (build_cache.py says how it is kept safe). Where no compiler or no Python
headers are found, the build fails, or GPU_TENSORARRAY_CPU_KERNELS=0, the Python code
runs instead: the same results, bit for bit, only slower. ``status()`` and
``raw_op_status()`` say which and why.
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

import numpy as np

from .. import dtypes
from ..errors import UnavailableError
from . import build_cache, kernel_sources

__all__ = ["add_rows_function", "set_grouping_bytes", "last_level_cache_bytes", "status", "compiled_raw_ops",
           "raw_op_status", "reset", "DISABLE_ENV", "ADDED", "REFUSED", "OVERLAP"]

COMPILER = "g++"
# -ffp-contract=off: no fused multiply-adds (there are only adds, but it is the promise).
FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off", "-x", "c++")
DISABLE_ENV = "GPU_TENSORARRAY_CPU_KERNELS"
ADDED, REFUSED, OVERLAP = 0, 1, 2                 # add_rows' answers (cpu_add_rows.cpp's AddStatus)


def _find_compiler():
    return shutil.which(COMPILER)


@functools.cache
def _compiler_version(compiler):
    """``compiler --version``: asked once per process, however many libraries it keys."""
    return subprocess.run([compiler, "--version"], capture_output=True, text=True).stdout


def _python_headers():
    """The folder holding this Python's Python.h, or None."""
    folder = sysconfig.get_paths().get("include")
    return folder if folder and (Path(folder) / "Python.h").is_file() else None


class _Extension:
    """kernels/``source_name`` (its text from ``source()``) built as the extension module
    ``module``, loaded once per process. ``accept(module)`` turns the loaded module into
    what callers use, raising UnavailableError when it is not the expected module;
    ``extra_headers()`` -> (include folders, their version text), or None with why not."""

    def __init__(self, source_name, module, prefix, source, accept, extra_headers=lambda: ((), "")):
        self.source_name, self.module, self.prefix = source_name, module, prefix
        self.source, self.accept, self.extra_headers = source, accept, extra_headers
        self._lock = threading.Lock()
        self._loaded = None         # None: not tried yet; else (what accept made, or None; how or why not)

    def library_name(self, compiler, includes, versions):
        """A digest of the source, the compiler, its flags, the headers and the Python it is
        built for: a change to any is a new library."""
        python = sysconfig.get_config_var("EXT_SUFFIX") or ""
        key = "\0".join([self.source(), compiler, _compiler_version(compiler), *includes, versions, python, *FLAGS])
        return f"{self.prefix}-{hashlib.sha256(key.encode()).hexdigest()[:24]}.so"

    def _load_module(self, path):
        try:
            loader = importlib.machinery.ExtensionFileLoader(self.module, str(path))
            module = importlib.util.module_from_spec(importlib.util.spec_from_loader(self.module, loader))
            loader.exec_module(module)
        except ImportError as error:
            raise UnavailableError(f"{path} is not {self.source_name} compiled: {error}") from None
        return self.accept(module)

    def _load(self):
        if os.environ.get(DISABLE_ENV, "1").strip() == "0":
            return None, f"{DISABLE_ENV}=0"
        compiler = _find_compiler()
        if compiler is None:
            return None, f"no {COMPILER} on PATH"
        headers = _python_headers()
        if headers is None:
            return None, "no Python.h for this Python (install its development headers, e.g. python3-dev)"
        extra = self.extra_headers()
        if extra[0] is None:
            return None, extra[1]
        includes, versions = (headers, *extra[0]), extra[1]

        def build(path):
            result = subprocess.run([compiler, *FLAGS, *(f"-I{folder}" for folder in includes), "-o", str(path), "-"],
                                    input=self.source(), capture_output=True, text=True)
            if result.returncode != 0:
                raise UnavailableError(f"{compiler} failed: {result.stderr[-2000:]}")

        try:
            made = build_cache.load_or_build(self.library_name(compiler, includes, versions), build,
                                             self._load_module)
        except (UnavailableError, OSError) as error:
            return None, f"the build failed: {error}"
        return made, f"compiled by {compiler}"

    def loaded(self):
        """(what ``accept`` made, or None; how, or why not)."""
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._load()
        return self._loaded

    def reset(self):
        with self._lock:
            self._loaded = None


# -- the scatter-add ------------------------------------------------------------------------------
def _dtype_order():
    return sorted(dtypes.AGGREGATABLE, key=lambda d: d.name)


def _add_rows_source():
    """The source g++ compiles: the kernel, then its table of the aggregatable dtypes."""
    entries = "".join(f"    CPU_ADD_ROWS_ENTRY({dtype.name}, {dtypes.c_type(dtype)})\n" for dtype in _dtype_order())
    return (kernel_sources.host_source("cpu_add_rows.cpp") + "\nextern const DtypeEntry DTYPES[] = {\n" + entries
            + "};\n" + "extern const int N_DTYPES = sizeof(DTYPES) / sizeof(DTYPES[0]);\n")


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


class _AddRows(dict):
    """The loaded scatter-add: its add by dtype (a dict, as add_rows_function reads it on
    every aggregating op), and the setter of its grouping threshold."""

    def __init__(self, by_dtype, set_grouping_bytes):
        super().__init__(by_dtype)
        self.set_grouping_bytes = set_grouping_bytes


def _add_rows_by_dtype(module):
    names = module.dtype_names()
    if list(names) != [dtype.name for dtype in _dtype_order()]:
        raise UnavailableError(f"the compiled scatter-add holds the dtypes {names}, not the aggregatable ones")
    module.set_grouping_bytes(last_level_cache_bytes())
    adds = {dtype: functools.partial(module.add_rows, position) for position, dtype in enumerate(_dtype_order())}
    return _AddRows(adds, module.set_grouping_bytes)


_ADD_ROWS = _Extension("cpu_add_rows.cpp", "gpu_tensorarray_cpu_add_rows", "cpu-add-rows", _add_rows_source,
                       _add_rows_by_dtype)


def status():
    """(True, how) when the compiled scatter-add is in use, else (False, why not)."""
    adders, how = _ADD_ROWS.loaded()
    return adders is not None, how


def add_rows_function(dtype):
    """``add(dst, indices, rows[, flags, required])`` -> ADDED, REFUSED or OVERLAP,
    or None when there is no compiled scatter-add for ``dtype`` here.

    ``add`` adds ``rows[k]`` to ``dst[indices[k]]`` in order (bitwise np.add.at) and
    answers ADDED; it writes nothing and answers REFUSED when an index lies outside
    ``dst``, or, given ``flags`` (bytes per destination row), when a destination's flag
    is not ``required``; OVERLAP when ``rows`` share memory with ``dst`` (copy them
    first). ``dst`` and ``rows`` must be C-contiguous arrays of ``dtype``, ``rows``
    having ``dst``'s row shape, ``indices`` C-contiguous int64."""
    loaded = _ADD_ROWS._loaded
    adders = (loaded if loaded is not None else _ADD_ROWS.loaded())[0]
    return None if adders is None else adders.get(dtype)


def set_grouping_bytes(nbytes):
    """Sets, and returns the value before: the compiled scatter-add adds rows destination by
    destination (each destination line loaded and stored once for several rows) when the
    rows it is given take ``nbytes`` or more in all, each at least 2 KiB; below, in source
    order. Either way the sums are the same, bit for bit. At load: the last-level cache's
    size, where grouping starts to pay. None where there is no compiled scatter-add."""
    adders = _ADD_ROWS.loaded()[0]
    return None if adders is None else adders.set_grouping_bytes(nbytes)


# -- raw Write, Read and Gather ------------------------------------------------------------------
def _numpy_headers():
    folder = np.get_include()
    if not (Path(folder) / "numpy" / "arrayobject.h").is_file():
        return None, f"no NumPy headers in {folder}"
    return (folder,), f"numpy {np.__version__}"


def _enabled(module):
    if not module.enabled():
        raise UnavailableError("this Python has no GIL, which the compiled raw ops rely on")
    return module


_RAW_OPS = _Extension("cpu_raw_ops.cpp", "gpu_tensorarray_cpu_raw_ops", "cpu-raw-ops",
                      lambda: kernel_sources.host_source("cpu_raw_ops.cpp"), _enabled, _numpy_headers)
_raw_ops_status = (False, "not loaded yet")


def compiled_raw_ops(namespace, handle_type, storage_type, uniform_layout_type):
    """(TensorArrayWriteV3, TensorArrayReadV3, TensorArrayGatherV3) of kernels/cpu_raw_ops.cpp,
    or None where it cannot be built or used here (``raw_op_status`` says why).

    Each takes its op's common case in C, exactly as storage.py's branch for it would,
    reading the state of the three classes' instances; every other call, and every call
    while ``namespace["_record"]`` is not None, goes to ``namespace["_write_op"]``,
    ``["_read_op"]`` or ``["_gather_op"]`` (looked up at the call) with the caller's arguments."""
    global _raw_ops_status
    module, how = _RAW_OPS.loaded()
    if module is not None:
        try:
            module.configure(namespace, handle_type, storage_type, uniform_layout_type, type(threading.Lock()),
                             np.dtype("float32"), dtypes.resolved())
        except TypeError as error:
            module, how = None, f"the compiled raw ops cannot read this library's state: {error}"
    _raw_ops_status = (module is not None, how)
    return None if module is None else (module.TensorArrayWriteV3, module.TensorArrayReadV3,
                                        module.TensorArrayGatherV3)


def raw_op_status():
    """(True, how) when raw Write, Read and Gather take their common case in compiled code, else
    (False, why not), as of the last ``compiled_raw_ops``."""
    return _raw_ops_status


def reset():
    """Forget the outcome of loading (tests: a changed environment or compiler lookup)."""
    _ADD_ROWS.reset()
    _RAW_OPS.reset()
