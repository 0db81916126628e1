"""An interrupt never breaks an array (issue 24).

A KeyboardInterrupt or an asynchronous exception may land at any point of an op. After
it, the array must be exactly as before the op or exactly as after it (every slot's
state, shape and value: hostile_util.snapshot), its lock free, and its counters in
agreement with its flags (interrupt_util.consistency).

1. Every point: for each op of op_cases.py and INTERRUPT_CASES below, on every backend,
   the op runs once to count the points where CPython can deliver an interrupt inside
   the library (interrupt_util.Interrupt), then once per point on a fresh, identical
   array, interrupted there.
2. Real signals: SIGINT timers (signal.setitimer) at random moments over loops of ops.
3. Asynchronous exceptions (PyThreadState_SetAsyncExc) into worker threads running ops
   on one shared array, some of them waiting for its lock.
"""

import ctypes
import random
import signal
import sys
import threading
import time

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray import errors
from gpu_tensorarray import raw_ops as ro
from gpu_tensorarray.registry import registry
from interrupt_util import Interrupt, consistency, lock_held, state
from op_cases import OP_CASES
from ta_conformance_util import close, f32, gather, grad, host, new, read, scatter, size, split, write


def _interrupt_cases():
    """Ops that allocate nothing (the fast paths), which op_cases.py, made for failing
    allocations, leaves out."""
    cases = {}

    def case(name):
        def register(build):
            cases[name] = build
            return build
        return register

    def filled(count=4, **attrs):
        handle, _ = new(count, "float32", element_shape=[2], **attrs)
        for index in range(count):
            write(handle, index, f32([index, -index]))
        return handle

    @case("write-common-case")
    def _():
        handle, _ = new(4, "float32", element_shape=[2])
        write(handle, 0, f32([1, 2]))
        return [handle], lambda: write(handle, 1, f32([3, 4]))

    @case("write-within-capacity-past-size")
    def _():
        handle, _ = new(1, "float32", dynamic_size=True, element_shape=[2])
        write(handle, 0, f32([1, 2]))
        write(handle, 5, f32([1, 2]))           # capacity grows past the size
        return [handle], lambda: write(handle, 6, f32([3, 4]))

    @case("read-clears")
    def _():
        handle = filled()
        return [handle], lambda: read(handle, 2)

    @case("read-keeps")
    def _():
        handle = filled(clear_after_read=False)
        return [handle], lambda: read(handle, 2)

    @case("read-unwritten-zeros")
    def _():
        handle, _ = new(3, "float32", element_shape=[2])
        write(handle, 0, f32([1, 2]))
        return [handle], lambda: read(handle, 1)

    @case("stack")
    def _():
        handle = filled()
        return [handle], lambda: gather(handle, range(4))

    @case("size-settles-a-stack")
    def _():
        handle = filled()
        gather(handle, range(4))
        return [handle], lambda: size(handle)

    @case("gather-common-case")
    def _():
        handle = filled(12, clear_after_read=False)
        return [handle], lambda: gather(handle, np.arange(11, -1, -1))

    @case("scatter-common-case")
    def _():
        handle, _ = new(12, "float32", element_shape=[2])
        return [handle], lambda: scatter(handle, np.arange(12)[::-1].copy(), f32(np.ones((12, 2))))

    @case("scatter-few-rows")
    def _():
        handle, _ = new(4, "float32", element_shape=[2])
        return [handle], lambda: scatter(handle, [2, 0], f32([[1, 2], [3, 4]]))

    @case("scatter-adds-into-grad")
    def _():
        forward = filled(12)
        g = grad(forward)
        scatter(g, np.arange(12), f32(np.ones((12, 2))))
        return [forward, g], lambda: scatter(g, np.arange(12) % 5, f32(np.full((12, 2), 2)))

    @case("split-dynamic-growth")
    def _():
        handle, _ = new(0, "float32", dynamic_size=True)
        return [handle], lambda: split(handle, f32(np.arange(12).reshape(6, 2)), [3, 3])

    @case("grad-existing-source")
    def _():
        forward = filled()
        grad(forward)
        return [forward], lambda: grad(forward)

    @case("grad-locks-dynamic-size")
    def _():
        handle, _ = new(2, "float32", dynamic_size=True, element_shape=[2])
        write(handle, 0, f32([1, 2]))
        return [handle], lambda: grad(handle)

    @case("close")
    def _():
        handle = filled()
        return [handle], lambda: close(handle)

    @case("close-with-grads")
    def _():
        forward = filled()
        g = grad(forward)
        write(g, 0, f32([1, 1]))
        return [forward, g], lambda: close(forward)

    @case("string-write")
    def _():
        handle, _ = new(3, "string")
        write(handle, 0, ["a"])
        return [handle], lambda: write(handle, 1, ["b", "c"])

    return cases


INTERRUPT_CASES = {**OP_CASES, **_interrupt_cases()}


def enumerate_interrupts(build):
    """Interrupt the op of ``build`` at each of its points in turn, until it runs to its
    end -> (points, failures: a list of (point, where, what went wrong))."""
    handles, op = build()
    assert not Interrupt().run(op)
    after = [state(handle) for handle in handles]
    failures = []
    at = 0
    while True:
        at += 1
        handles, op = build()
        before = [state(handle) for handle in handles]
        interrupt = Interrupt(at)
        if not interrupt.run(op):
            break
        for position, handle in enumerate(handles):
            array = registry.lookup(handle)
            problems = consistency(array)
            if not problems:
                now = state(handle)
                if now != before[position] and now != after[position]:
                    problems.append("neither as before nor as after the op")
            if problems:
                failures.append((at, interrupt.where, f"{handle.name}: {'; '.join(problems)}"))
                if lock_held(array):
                    array._lock.release()       # so the next point's build is not blocked
        if registry._lock.locked():
            failures.append((at, interrupt.where, "the registry's lock is held"))
            registry._lock.release()
    return at - 1, failures


@pytest.mark.parametrize("name", list(INTERRUPT_CASES))
def test_an_interrupt_at_any_point_leaves_the_array_before_or_after(backend, name):
    points, failures = enumerate_interrupts(INTERRUPT_CASES[name])
    assert points > 0
    assert not failures, f"{name}: {len(failures)} of {points} interrupt points broke the array:\n" + \
        "\n".join(f"  point {at} ({where}): {what}" for at, where, what in failures[:10])
