"""Backend choice as data: known names, then an explicit argument, the
``device()`` context, the environment, and the automatic default.

CuPy is imported only when the cupy backend is chosen (or the automatic choice
looks for a GPU because CuPy is installed): ``import gpu_tensorarray`` never does.
A backend is usable once it is created: the cupy backend compiles its kernels
then. So the automatic choice only ever picks a backend that works (falling back
to numpy with a warning that says why), and an explicit choice that cannot work
raises UnavailableError saying what to install.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import importlib.util
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidArgumentError, UnavailableError, shown
from .accumulation import MODES as ACCUMULATION_MODES
from .accumulation import accumulation, get_accumulation
from .base import Backend

__all__ = ["Backend", "get_backend", "backend_of", "device", "accumulation", "get_accumulation",
           "available_backends", "default_backend", "BACKENDS", "ACCUMULATION_MODES"]

# name -> (module, class). Order is the order `info` lists them.
BACKENDS = {
    "numpy": ("gpu_tensorarray.backends.numpy", "NumpyBackend"),
    "emulated": ("gpu_tensorarray.backends.emulated", "EmulatedBackend"),
    "cupy": ("gpu_tensorarray.backends.cupy", "CupyBackend"),
}
BACKEND_ENV = "GPU_TENSORARRAY_BACKEND"

_device_choice: contextvars.ContextVar[Backend | None] = contextvars.ContextVar("gpu_tensorarray_device",
                                                                             default=None)
_instances: dict[Any, Backend] = {}
_instances_lock = threading.Lock()
_auto = None
_auto_lock = threading.Lock()
# How to get the cupy backend's one dependency that pip can install.
INSTALL_CUPY = 'pip install "gpu_tensorarray[cuda]"'


def _after_fork():
    """In a forked child: fresh locks, as the thread that held one does not exist here. One
    that was making the automatic choice may have been importing CuPy, whose module lock no
    thread here will release, and CUDA does not survive a fork: the child takes numpy."""
    global _instances_lock, _auto_lock, _auto
    if _auto is None and _auto_lock.locked():
        _auto = ("numpy", "the process was forked while another thread made the automatic choice "
                          "(CUDA does not survive a fork)")
    _instances_lock, _auto_lock = threading.Lock(), threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _parse(spec):
    """'cpu' | 'numpy' | 'emulated' | 'cupy' | 'cuda' | 'cuda:N' -> (backend name, device index or None)."""
    if isinstance(spec, Backend):
        return spec
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"device must be a string such as 'cpu' or 'cuda:0', got {shown(spec)}")
    text = spec.strip().lower()
    if text in ("cpu", "numpy"):
        return "numpy", None
    if text == "emulated":
        return "emulated", None
    if text in ("cuda", "cupy", "gpu"):
        return "cupy", None
    for prefix in ("cuda:", "gpu:"):
        if text.startswith(prefix) and text[len(prefix):].isdigit():
            return "cupy", int(text[len(prefix):])
    raise InvalidArgumentError(
        f"Unknown device or backend {shown(spec)}; known: 'cpu' (numpy), 'emulated', 'cuda', 'cuda:N' (cupy)")


def _load(name, index):
    key = (name, index)
    backend = _instances.get(key)
    if backend is not None:
        return backend
    with _instances_lock:
        backend = _instances.get(key)
        if backend is None:
            module_name, class_name = BACKENDS[name]
            try:
                cls = getattr(importlib.import_module(module_name), class_name)
                backend = cls() if index is None else cls(index)
            except UnavailableError:
                raise
            except Exception as error:  # an explicit request that cannot load must say why
                raise UnavailableError(_cannot_load(name, error)) from error
            _instances[key] = backend
    return backend


def _cannot_load(name, error):
    text = f"The {name} backend cannot be used here: {type(error).__name__}: {error}"
    if name == "cupy" and isinstance(error, ImportError):
        text += f". Install CuPy with: {INSTALL_CUPY}"
    return text


def _auto_choice():
    """cupy when CuPy is installed and its backend works (a device is usable and
    the kernels compile), else numpy; with the reason. A fallback while CuPy is
    installed warns once: that user expects the GPU."""
    global _auto
    if _auto is None:
        with _auto_lock:
            if _auto is None:
                _auto = _choose_automatically()
    return _auto


def _choose_automatically():
    if importlib.util.find_spec("cupy") is None:
        return "numpy", "cupy is not installed"
    try:
        _load("cupy", None)
    except UnavailableError as error:
        warnings.warn(f"gpu_tensorarray: CuPy is installed, but the cupy backend cannot be used, so arrays are "
                      f"created on the CPU (numpy backend). {error} (GPU_TENSORARRAY_BACKEND=numpy chooses the CPU "
                      f"without this warning)", RuntimeWarning, stacklevel=_callers_level())
        return "numpy", f"cupy is installed but unusable: {error}"
    return "cupy", "cupy is installed, a CUDA device is usable and the kernels compile"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _callers_level():
    """The stacklevel of the first frame outside this package: a warning names the caller's line
    (run as ``python -m gpu_tensorarray``, the package's outermost one, not runpy's)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    if frame is not None and frame.f_code.co_filename.startswith("<frozen"):
        level -= 1
    return level


def default_backend() -> tuple[str, str]:
    """(name, reason): the backend used when nothing is chosen, and why. The
    automatic choice is always a backend that works; a choice made in the
    environment is explicit, so when it cannot load the reason says so (and
    get_backend raises UnavailableError)."""
    spec = os.environ.get(BACKEND_ENV)
    if spec:
        name, index = _parse(spec)
        try:
            _load(name, index)
        except UnavailableError as error:
            return name, f"{BACKEND_ENV}={spec}, which cannot load here: {error}; unset {BACKEND_ENV} to choose automatically"
        return name, f"{BACKEND_ENV}={spec}"
    return _auto_choice()


def get_backend(spec: str | Backend | None = None) -> Backend:
    """The backend for ``spec``, else the active ``device()``, else the environment,
    else the automatic choice. Explicit choices that cannot load raise UnavailableError."""
    if spec is None:
        spec = _device_choice.get()
        if spec is None:
            spec = os.environ.get(BACKEND_ENV) or _auto_choice()[0]
    if isinstance(spec, Backend):
        return spec
    return _load(*_parse(spec))


def backend_of(value):
    """The backend whose arrays ``value`` is one of, on its device (a loaded backend first,
    else the one named after the library that made it: numpy, cupy), or None for anything
    else. Code that holds a caller's array asks it for zeros and host copies of its kind."""
    for backend in tuple(_instances.values()):
        if isinstance(value, backend.array_type) and backend.holds(value):
            return backend
    library = type(value).__module__.partition(".")[0]
    if library in BACKENDS:
        try:
            # A device array's own device (NumPy's arrays have none: a device "cpu" without an id).
            backend = _load(library, getattr(getattr(value, "device", None), "id", None))
        except UnavailableError:
            return None
        if isinstance(value, backend.array_type):
            return backend
    return None


@contextlib.contextmanager
def device(spec: str | Backend) -> Iterator[Backend]:
    """``with device("cpu" | "emulated" | "cuda" | "cuda:1"):`` arrays created inside
    live there (an array keeps the backend it was created with)."""
    backend = get_backend(spec)
    token = _device_choice.set(backend)
    try:
        yield backend
    finally:
        _device_choice.reset(token)


def available_backends() -> dict[str, str | None]:
    """name -> None when usable here, else the reason it is not."""
    report: dict[str, str | None] = {}
    for name in BACKENDS:
        try:
            _load(name, None)
            report[name] = None
        except UnavailableError as error:
            report[name] = str(error)
    return report
