"""Checks shared by the hostile-input tests (test_hostile_input.py) and the argument
fuzzer (test_fuzz_arguments.py): an op must raise exactly the expected OpError class
with a message naming what it should, and a failed op must leave its array as it was."""

import numpy as np

from gpu_tensorarray import errors
from gpu_tensorarray.registry import registry
from ta_conformance_util import host

INT32_MAX = 2**31 - 1


def expect(cls, call, *needles):
    """Run ``call``; it must raise exactly ``cls`` (an OpError class) whose message
    contains every needle. Returns the error."""
    try:
        call()
    except errors.OpError as error:
        message = str(error)
        assert type(error) is cls, f"{type(error).__name__} instead of {cls.__name__}: {message}"
        missing = [needle for needle in needles if needle not in message]
        assert not missing, f"message lacks {missing}: {message!r}"
        return error
    except Exception as error:      # noqa: BLE001 - the point of this file
        raise AssertionError(f"a bare {type(error).__name__} escaped instead of {cls.__name__}: {error}") from error
    raise AssertionError(f"no error: expected {cls.__name__}")


def snapshot(handle):
    """What a failed op must leave as it was: the array's attributes and every slot's
    state (written/read/cleared/has a value), shape and value bytes (storage's public
    face: ArrayStorage.slot_state, layout-independent)."""
    array = registry.lookup(handle)
    slots = []
    for index in range(0 if array.closed else array.size):      # a closed array holds no slots
        state = array.slot_state(index)
        value = None
        if state.has_value:
            row = np.ascontiguousarray(host(state.value))
            # (strings: their values, not the pointers of an object array)
            value = (row.dtype.str, row.shape, repr(row.tolist()) if row.dtype.hasobject else row.tobytes())
        slots.append((state.written, state.read, state.cleared, state.has_value, state.shape, value))
    return (array.size, array.element_shape, array.closed, array.marked_size, array.dynamic_size,
            tuple(sorted(array.grads)), tuple(slots))


def same_snapshot(a, b):
    return a == b


def expect_unchanged(handle, cls, call, *needles):
    """``expect`` on an op of ``handle``'s array, which must not change."""
    before = snapshot(handle)
    error = expect(cls, call, *needles)
    assert same_snapshot(snapshot(handle), before), f"the failed op changed {handle.name}: {error}"
    return error


class Opaque:
    def __repr__(self):
        return "<opaque>"
