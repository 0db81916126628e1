"""TensorFlow's error classes, each also a subclass of the closest Python builtin.

Code that catches ``tf.errors.InvalidArgumentError`` keeps working with
``gpu_tensorarray.errors.InvalidArgumentError``; code that catches ``ValueError``
works too. Messages keep TensorFlow's wording (users match on them).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "OpError", "CancelledError", "UnknownError", "InvalidArgumentError",
    "DeadlineExceededError", "NotFoundError", "AlreadyExistsError",
    "PermissionDeniedError", "ResourceExhaustedError", "FailedPreconditionError",
    "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError",
    "UnavailableError", "DataLossError", "UnauthenticatedError",
]


def shown(value: Any, limit: int = 80) -> str:
    """A caller's value for an error message: its repr, shortened, and never failing
    (a hostile __repr__ must not replace our error with its own)."""
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__} object>"
    return text if len(text) <= limit else text[:limit - 3] + "..."


def described(error: BaseException) -> str:
    """An exception a caller's object raised, for our message: its class and text,
    never failing (its __str__ may raise too)."""
    try:
        text = str(error)
    except Exception:
        text = ""
    name = type(error).__name__
    return f"{name}: {text}" if text else name


def about(owner: Any) -> str:
    """" (TensorArray <name>)" when an argument meant for an array's op is bad: the
    message then names the array, as every check inside the array's op does."""
    try:
        name = getattr(owner, "name", None)
    except Exception:
        name = None
    return f" (TensorArray {name})" if isinstance(name, str) else ""


def allocation_over_limit(what: str, nbytes: int, limit: int, backend: str, device: Any) -> ResourceExhaustedError:
    """The ResourceExhaustedError for a request over a backend's limit, before allocating."""
    return ResourceExhaustedError(
        f"OOM when allocating {what}: {nbytes} bytes exceed the {backend} backend's limit of {limit} bytes on {device}")


def host_memory_ran_out(what: str, error: BaseException, owner: Any = None) -> ResourceExhaustedError:
    """The ResourceExhaustedError for NumPy's MemoryError while converting a caller's value (a
    full host is no fault of the value's, which every other exception there is)."""
    return ResourceExhaustedError(f"OOM when converting {what} on the host: {described(error)}{about(owner)}")


class OpError(Exception):
    """Base of every error an op raises. ``error_code`` is TensorFlow's code."""

    error_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


# Written out (not made by a factory) so that type checkers and help() see real classes.
class CancelledError(OpError, RuntimeError):
    """An operation was cancelled."""
    error_code = 1


class UnknownError(OpError, RuntimeError):
    """An error of no other class."""
    error_code = 2


class InvalidArgumentError(OpError, ValueError):
    """An argument is invalid."""
    error_code = 3


class DeadlineExceededError(OpError, TimeoutError):
    """A deadline passed."""
    error_code = 4


class NotFoundError(OpError, LookupError):
    """A resource (a TensorArray) was not found."""
    error_code = 5


class AlreadyExistsError(OpError, RuntimeError):
    """A resource already exists."""
    error_code = 6


class PermissionDeniedError(OpError, PermissionError):
    """Permission denied."""
    error_code = 7


class ResourceExhaustedError(OpError, MemoryError):
    """Out of memory, host or device."""
    error_code = 8


class FailedPreconditionError(OpError, RuntimeError):
    """The system is not in a state for the op."""
    error_code = 9


class AbortedError(OpError, RuntimeError):
    """An operation was aborted."""
    error_code = 10


class OutOfRangeError(OpError, IndexError):
    """An index is out of range."""
    error_code = 11


class UnimplementedError(OpError, NotImplementedError):
    """Not implemented or supported."""
    error_code = 12


class InternalError(OpError, RuntimeError):
    """An internal invariant broke."""
    error_code = 13


class UnavailableError(OpError, RuntimeError):
    """A service is unavailable."""
    error_code = 14


class DataLossError(OpError, RuntimeError):
    """Unrecoverable data loss."""
    error_code = 15


class UnauthenticatedError(OpError, PermissionError):
    """Not authenticated."""
    error_code = 16
