"""How gradient arrays add: the scatter-add mode, one setting for the package.

"deterministic" (the default): each destination sums its rows in arrival order,
bitwise equal to TensorFlow's sequential adds (kernels/common.cuh). "atomic": any order, with
atomics where the kernels have them. The ``accumulation()`` context chooses it,
else the environment variable (read once, when this module loads), else the
default. Only the kernel launches read it (kernel_rows.py); backends without
kernels sum sequentially, which is a valid order for both modes.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from typing import Any

from ..errors import InvalidArgumentError, shown

__all__ = ["MODES", "ENV", "accumulation", "get_accumulation", "checked_mode"]

MODES = ("deterministic", "atomic")
ENV = "GPU_TENSORARRAY_ACCUMULATION"

_choice: contextvars.ContextVar[str | None] = contextvars.ContextVar("gpu_tensorarray_accumulation", default=None)
# Read as GPU_TENSORARRAY_MODE and _BACKEND are (stripped, any case); checked where it is
# used, so that import never fails.
_environment = os.environ.get(ENV) or "deterministic"
_from_environment = _environment.strip().lower()


def checked_mode(mode: Any, source: str = "") -> str:
    if mode not in MODES:
        raise InvalidArgumentError(f"Unknown accumulation mode {shown(mode)}{source}; known: {', '.join(MODES)}")
    return mode


def get_accumulation() -> str:
    """The active scatter-add mode: the ``accumulation()`` context, else the
    environment, else "deterministic"."""
    mode = _choice.get()
    if mode is None:
        if _from_environment not in MODES:       # the error quotes what was set
            checked_mode(_environment, f" (from {ENV})")
        mode = _from_environment
    return mode


@contextlib.contextmanager
def accumulation(mode: str) -> Iterator[str]:
    """``with accumulation("deterministic" | "atomic"):`` how gradient arrays add."""
    token = _choice.set(checked_mode(mode))
    try:
        yield mode
    finally:
        _choice.reset(token)
