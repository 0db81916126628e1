"""Which rules ``TensorArray`` follows: "tf1" (TensorFlow's V3 ops and TF1 code:
write-once slots, reads that clear) or "tf2" (tf.TensorArray inside a TensorFlow 2
tf.function: slots overwrite, reads never clear, unstack/split replace the contents).

The mode is chosen at construction: ``TensorArray(..., mode="tf2")``, else the
innermost ``with gta.tensor_array_mode("tf2"):`` of this thread, else the default
set by ``gta.set_tensor_array_mode``, else the environment variable
``GPU_TENSORARRAY_MODE`` (read once, when this module loads, as the accumulation mode's
is), else "tf1". raw_ops always follow the V3 rules.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from .errors import InvalidArgumentError, shown

__all__ = ["MODES", "tensor_array_mode", "set_tensor_array_mode", "get_tensor_array_mode", "resolve",
           "register_class", "class_for"]

MODES = ("tf1", "tf2")


class _ThreadModes(threading.local):
    stack: list[str] | tuple[()] = ()      # a class default: a thread with no ``with`` block finds it at once


_local = _ThreadModes()
_default: list[str | None] = [None]
_classes: dict[str, type] = {}           # mode -> the TensorArray class with its rules (each registers itself)
# Read once: an array's creation would otherwise look the environment up each time.
_environment = os.environ.get("GPU_TENSORARRAY_MODE")


def _checked(mode: Any, what: str) -> str:
    if mode not in MODES:
        raise InvalidArgumentError(f"{what} must be one of {', '.join(map(repr, MODES))}, got {shown(mode)}")
    return mode


def set_tensor_array_mode(mode: str | None) -> None:
    """The process-wide default mode (None: back to GPU_TENSORARRAY_MODE, else "tf1")."""
    _default[0] = None if mode is None else _checked(mode, "mode")


@contextlib.contextmanager
def tensor_array_mode(mode: str) -> Iterator[str]:
    """TensorArrays created inside (in this thread) follow ``mode``'s rules."""
    _checked(mode, "mode")
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(mode)
    try:
        yield mode
    finally:
        stack.pop()


def get_tensor_array_mode() -> str:
    """The mode a TensorArray created here without ``mode=`` gets."""
    stack = _local.stack
    if stack:
        return stack[-1]
    if _default[0] is not None:
        return _default[0]
    if _environment:        # checked where it is used: the error quotes what was set
        return _checked(_environment.strip().lower(), "GPU_TENSORARRAY_MODE")
    return "tf1"


def resolve(mode: str | None) -> str:
    return get_tensor_array_mode() if mode is None else _checked(mode, "mode")


def register_class(mode: str, cls: type) -> None:
    """``cls`` implements ``mode``'s rules (called by the module defining it, so the
    base class needs no import of its subclasses)."""
    _classes[_checked(mode, "mode")] = cls


def class_for(mode: str | None) -> Any:
    """The class a ``TensorArray(..., mode=mode)`` construction makes."""
    return _classes[resolve(mode)]
