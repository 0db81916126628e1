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

import contextlib
import ctypes
import os
import random
import signal
import sys
import threading
import time

import numpy as np
import pytest

from gpu_tensorarray import errors
from gpu_tensorarray.registry import registry
from interrupt_util import PACKAGE, Interrupt, consistency, lock_held, state
from op_cases import OP_CASES, registering
from ta_conformance_util import close, f32, gather, grad, host, new, read, scatter, size, split, write


def _interrupt_cases():
    """Ops that allocate nothing (the fast paths), which op_cases.py, made for failing
    allocations, leaves out."""
    cases = {}
    case = registering(cases)

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


# -- 2. real signals at random moments ------------------------------------------------------------
_TRIALS = 150


def _random_ops(rng, handles):
    """Random ops on ``handles`` (forward, its gradient array, a dynamic array) until interrupted."""
    forward, g, dynamic = handles
    next_index = 0
    for _ in range(100_000):
        kind = rng.randrange(8)
        try:
            if kind == 0:
                write(forward, rng.randrange(12), f32(rng.random() * np.ones(2)))
            elif kind == 1:
                read(forward, rng.randrange(12))
            elif kind == 2:
                scatter(g, np.array([rng.randrange(12) for _ in range(10)]), f32(np.ones((10, 2))))
            elif kind == 3:
                gather(forward, np.arange(12))
            elif kind == 4:
                write(dynamic, next_index, f32([next_index, 1]))
                next_index += 1
            elif kind == 5:
                scatter(dynamic, np.arange(next_index, next_index + 9), f32(np.ones((9, 2))))
                next_index += 9
            elif kind == 6:
                gather(dynamic, range(size(dynamic)))
            else:
                split(new(0, "float32", dynamic_size=True)[0], f32(np.ones((6, 2))), [2, 1, 3])
        except errors.OpError:
            pass                        # an op's own error (a slot read twice, ...): fine here


def _fresh_handles():
    forward, _ = new(12, "float32", element_shape=[2], clear_after_read=False)
    scatter(forward, np.arange(12), f32(np.arange(24).reshape(12, 2)))
    g = grad(forward)
    scatter(g, np.arange(12), f32(np.ones((12, 2))))
    dynamic, _ = new(0, "float32", dynamic_size=True, element_shape=[2])
    return forward, g, dynamic


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_random_interrupts_over_loops_of_ops(backend):
    """SIGALRM at a random moment, its handler raising KeyboardInterrupt exactly as SIGINT's
    default handler does (signal.default_int_handler), over endless random ops."""
    rng = random.Random(24)
    armed = [False]

    def interrupt(signum, frame):
        if armed[0]:
            armed[0] = False
            signal.default_int_handler(signum, frame)       # raises KeyboardInterrupt

    def lost(report):
        # An interrupt that lands in a callback (a weak reference's) is lost: Python
        # reports it as "ignored", as it does outside tests. The next tick tries again.
        if isinstance(report.exc_value, KeyboardInterrupt):
            armed[0] = True
        else:
            sys.__unraisablehook__(report)

    previous = signal.signal(signal.SIGALRM, interrupt)
    unraisable, sys.unraisablehook = sys.unraisablehook, lost
    inside = 0
    try:
        for _ in range(_TRIALS):
            handles = _fresh_handles()
            armed[0] = True
            try:
                # Inside the try: the first tick may come before the next line runs, and the
                # timer must be stopped whatever it interrupts.
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.0005, 0.004), 0.002)
                _random_ops(rng, handles)
                pytest.fail("no interrupt came")
            except KeyboardInterrupt as interrupt:
                tb = interrupt.__traceback__
                while tb is not None and not tb.tb_frame.f_code.co_filename.startswith(PACKAGE):
                    tb = tb.tb_next
                inside += tb is not None
            finally:
                armed[0] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
            for handle in handles:
                array = registry.lookup(handle)
                assert not consistency(array), (handle.name, consistency(array))
                size(handle)                    # usable: its lock is free
    finally:
        armed[0] = False
        signal.setitimer(signal.ITIMER_REAL, 0)     # before SIGALRM's default action (exit) is back
        signal.signal(signal.SIGALRM, previous)
        sys.unraisablehook = unraisable
    assert inside > _TRIALS // 10, f"only {inside} of {_TRIALS} interrupts landed inside an op"


# -- 3. asynchronous exceptions into worker threads ---------------------------------------------
def _async_raise(thread, exception):
    return ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(exception))


def test_asynchronous_exceptions_into_worker_threads(backend):
    """Worker threads run ops on one shared array, some waiting for its lock (a holder
    thread keeps taking it); the main thread raises KeyboardInterrupt in them at random.
    No thread may hang, and the array ends consistent with a free lock."""
    rng = random.Random(2024)
    handle, _ = new(0, "float32", dynamic_size=True, element_shape=[2], clear_after_read=False)
    array = registry.lookup(handle)
    stop = threading.Event()
    caught = [0]
    started = threading.Semaphore(0)

    def guarded(loop):
        """Run ``loop`` until stop, in a try from its first bytecode on: an exception that
        lands between ops (the loop's own bytecode: its back edge, its handler) starts the
        loop again, so that the threads live to receive the rest (they ended, and a run
        where all four had ended early sent too few), and none escapes into the thread's
        exception hook."""
        def run(*args):
            try:
                started.release()
                while True:
                    try:
                        loop(*args)
                        return
                    except KeyboardInterrupt:
                        caught[0] += 1
            except KeyboardInterrupt:
                caught[0] += 1
        return run

    def worker(k):
        index = k
        while True:
            try:
                if stop.is_set():
                    return
                write(handle, index, f32([index, k]))
                index += 4
                read(handle, index - 4)
                gather(handle, range(size(handle)))
            except KeyboardInterrupt:
                caught[0] += 1
            except errors.OpError:
                index += 4              # the interrupted write finished: the slot is written

    def holder():
        while True:
            try:
                if stop.is_set():
                    return
                with array._lock:
                    time.sleep(0.0005)
                time.sleep(0.0005)
            except KeyboardInterrupt:
                caught[0] += 1

    threads = [threading.Thread(target=guarded(worker), args=(k,), daemon=True) for k in range(3)]
    threads.append(threading.Thread(target=guarded(holder), daemon=True))
    for thread in threads:
        thread.start()
    for _ in threads:
        started.acquire()               # every thread inside its try before the first exception
    sent = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        sent += _async_raise(rng.choice(threads), KeyboardInterrupt)
        time.sleep(rng.uniform(0, 0.002))
    time.sleep(0.05)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    alive = [thread for thread in threads if thread.is_alive()]
    assert not alive, f"{len(alive)} threads hang (a lock left held?)"
    assert not consistency(array), consistency(array)
    written = gather(handle, range(size(handle)))
    assert host(written).shape == (size(handle), 2)
    assert sent > 100, sent


# -- 4. a fork while another thread is inside an op ---------------------------------------------
def _fork_while_held(*locks):
    """Fork while another thread holds ``locks`` (inside an op, as it were) -> (os.fork()'s pid,
    in the parent ``finish()``: the thread lets go and ends, and the child's exit status comes back)."""
    held, release = threading.Event(), threading.Event()

    def hold():
        with contextlib.ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            held.set()
            release.wait(30)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert held.wait(10)
    pid = os.fork()

    def finish():
        release.set()
        thread.join(10)
        return _child_exit_code(pid)
    return pid, finish


def _child_exit_code(pid, limit_s=60):
    """The forked child's exit status; a child still running after ``limit_s`` hangs: killed, failed."""
    deadline = time.monotonic() + limit_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung")
        time.sleep(0.02)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_thread_is_inside_a_tf2_op_refuses_that_list_and_finishes(backend):
    """A mode tf2 list's op holds the list's lock: in a child forked meanwhile that op may be half
    done and its thread gone, so the list refuses every op with AbortedError (as a V3 array does)
    and others, old and new, work: no op waits for the lock forever."""
    import gpu_tensorarray as gta
    busy = gta.TensorArray("float32", size=2, element_shape=[2], mode="tf2").write(0, [1.0, 2.0])
    idle = gta.TensorArray("float32", size=2, element_shape=[2], mode="tf2").write(0, [3.0, 4.0])
    pid, finish = _fork_while_held(busy._contents.lock)
    if pid == 0:
        code = 10
        try:
            if backend.unusable_after_fork:          # a GPU's arrays: the V3 storage says why
                code = 0
            else:
                assert host(idle.read(0)).tolist() == [3.0, 4.0]
                code = 11
                try:
                    busy.read(0)
                except errors.AbortedError as error:
                    assert "forked" in str(error)
                    code = 12
                    fresh = gta.TensorArray("float32", size=1, mode="tf2").write(0, [5.0])
                    code = 0 if host(fresh.read(0)).tolist() == [5.0] else 13
        finally:
            os._exit(code)
    code = finish()
    assert code == 0, f"the child failed at step {code}"
    assert host(busy.read(0)).tolist() == [1.0, 2.0]        # the parent's list is as it was


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_the_automatic_backend_choice_creates_arrays(monkeypatch):
    """Another thread was choosing the default backend (trying CuPy, which can take seconds) when
    the process forked: the child, where that thread does not exist, creates arrays on numpy."""
    from gpu_tensorarray import backends
    choosing, release = threading.Event(), threading.Event()

    def slow_choice():
        choosing.set()
        release.wait(30)
        return "numpy", "test"
    monkeypatch.setattr(backends, "_auto", None)
    monkeypatch.setattr(backends, "_choose_automatically", slow_choice)
    monkeypatch.delenv(backends.BACKEND_ENV, raising=False)
    thread = threading.Thread(target=backends.default_backend, daemon=True)
    thread.start()
    assert choosing.wait(10)
    pid = os.fork()
    if pid == 0:
        code = 10
        try:
            handle, _ = new(2, "float32")
            write(handle, 0, f32([5]))
            code = 0 if handle.array.backend.name == "numpy" else 11
        finally:
            os._exit(code)
    release.set()
    thread.join(10)
    assert _child_exit_code(pid) == 0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_thread_holds_locks_finishes(backend):
    busy, _ = new(3, "float32", element_shape=[2])
    idle, _ = new(3, "float32", element_shape=[2])
    write(idle, 0, f32([1, 2]))
    pid, finish = _fork_while_held(registry.lookup(busy)._lock, registry._lock)
    if pid == 0 and backend.unusable_after_fork:    # a GPU's arrays: each op says why, none hangs
        code = 20
        try:
            for op in (lambda: read(idle, 0), lambda: write(busy, 0, f32([1, 2])),
                       lambda: write(new(2, "float32")[0], 0, f32([5]))):
                try:
                    op()
                except errors.AbortedError as error:
                    assert "fork" in str(error), error
                    code += 1
            code = 0 if code == 23 else code
        finally:
            os._exit(code)
    if pid == 0:                                    # the child: report by exit code, never return
        code = 10
        try:
            assert (host(read(idle, 0)) == [1, 2]).all()
            code = 11
            write(idle, 1, f32([3, 4]))
            code = 12
            try:
                write(busy, 0, f32([1, 2]))
            except errors.AbortedError as error:
                assert busy.name in str(error) and "forked" in str(error)
                code = 13
                fresh, _ = new(2, "float32")        # the registry's lock was held too
                write(fresh, 0, f32([5]))
                code = 0
        finally:
            os._exit(code)
    code = finish()
    assert code == 0, f"the child failed at step {code}"
    write(busy, 0, f32([1, 2]))                     # the parent's arrays are as they were


# -- 5. the device step (the cupy backend's), over a fake device ----------------------------------
class _FakeDevice:
    def __init__(self):
        self.current, self.log = 0, []

    def activate(self):
        previous, self.current = self.current, 1
        return previous

    def restore(self, previous):
        if previous is not None:            # None: nothing to restore (as the cupy backend's)
            self.current = previous

    def current_stream(self):
        return self

    def per_thread(self, stream):
        return False

    def wait_event(self, event):
        self.log.append("wait")

    def new_event(self):
        return self

    def record(self, stream):
        self.log.append("record")

    def synchronize(self):
        self.log.append("synchronize")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_during_a_torch_backward_pass_ends_that_pass_and_runs_its_own():
    """A thread of the parent was inside a torch bridge backward pass, holding the bridge's locks,
    when the process forked: in the child, where that thread does not exist, the pass is ended
    (its gradient arrays closed) and a backward pass of the child's own runs and ends."""
    torch = pytest.importorskip("torch")
    import gpu_tensorarray as gta
    from gpu_tensorarray.torch import TensorArray as TorchTensorArray
    from gpu_tensorarray.torch import autograd

    def step():
        x = torch.ones(3, dtype=torch.float64, requires_grad=True)
        ta = TorchTensorArray(torch.float64, size=2).write(0, x * 2).write(1, x * 3)
        ta.stack().sum().backward()
        return x.grad.tolist()

    with gta.device("numpy"):
        x = torch.ones(3, dtype=torch.float64, requires_grad=True)
        written = x * 2
        inside, release = threading.Event(), threading.Event()
        written.register_hook(lambda grad: (inside.set(), release.wait(30)) and None)
        loss = TorchTensorArray(torch.float64, size=1).write(0, written).stack().sum()
        thread = threading.Thread(target=loss.backward, daemon=True)
        thread.start()
        assert inside.wait(10) and autograd.open_passes() == 1     # its gradient array exists
        pid, finish = _fork_while_held(autograd._passes_lock, autograd.state_lock)
        if pid == 0:
            code = 10
            try:
                code = 11 if autograd.open_passes() else 12
                code = 13 if step() != [5.0, 5.0, 5.0] else 14
                code = 0 if autograd.open_passes() == 0 else 15
            finally:
                os._exit(code)
        code = finish()
        release.set()
        thread.join(10)
    assert code == 0, f"the child failed at step {code}"
    assert x.grad.tolist() == [2.0, 2.0, 2.0] and autograd.open_passes() == 0


def test_an_interrupt_in_the_device_step_never_keeps_the_lock_or_loses_the_order():
    from gpu_tensorarray.backends.device_guard import DeviceScope

    at = 0
    while True:
        at += 1
        device = _FakeDevice()
        lock, scope = threading.Lock(), DeviceScope(device)

        def op():
            with lock, scope:
                device.log.append("op")

        op()                                        # an earlier op: the array has an event
        del device.log[:]
        interrupt = Interrupt(at)
        if not interrupt.run(op):
            break
        assert not lock.locked(), interrupt.where
        done = device.log.index("op") if "op" in device.log else None
        device.current = 0          # an interrupt may leave the caller's device changed (DeviceScope)
        worker = threading.Thread(target=op)        # the next op, from another thread
        worker.start()
        worker.join()
        assert not lock.locked() and device.current == 0, interrupt.where
        # Its work is ordered after the interrupted op's: it synchronises, or it waits on
        # an event recorded after that op's work.
        nxt = len(device.log) - 1 - device.log[::-1].index("op")
        before = device.log[:nxt]
        recorded_after = done is None or "record" in device.log[done:nxt]
        assert "synchronize" in before or ("wait" in before and recorded_after), (interrupt.where, device.log)
    assert at > 5


# -- 3. mode tf2: a write that moves the list's values to a fresh storage ----------------------------

def _moving_write(make, row):
    """(a list of 4 slots whose next write moves its values, that write): slots 0-2 written once,
    slot 3 overwritten until the storage holds 2 * (4 + 1) + 16 physical slots."""
    ta = make()
    for index in range(3):
        ta = ta.write(index, row(index))
    for value in range(3, 3 + 23):
        ta = ta.write(3, row(value))
    return ta, lambda: ta.write(0, row(9))


def _contents(ta):
    """The list's rows as a plain list, whether or not an op superseded ``ta`` (read through a
    TensorArray of the same contents at their current version)."""
    current = ta._next(ta._contents, bump=False)
    return np.asarray(host(current.stack())).tolist()


@pytest.mark.parametrize("bridge", ["library", "torch"])
def test_an_interrupt_in_a_moving_tf2_write_leaves_the_list_before_or_after(backend, bridge):
    """At every point an interrupt can land in a mode tf2 write that moves the values (once
    overwrites have used twice the list's slots): the list holds its values as before the write
    or as after it, and the TensorArray the caller has goes on being usable, except at the last
    points (the returns of _next and of the op, and the library's release of the contents' lock
    between them), where the new one was made and the interrupt drops it."""
    import gpu_tensorarray as gta
    if bridge == "torch":
        torch = pytest.importorskip("torch")
        from gpu_tensorarray.torch import TensorArray as TorchTensorArray
        make = lambda: TorchTensorArray(torch.float64, size=4, mode="tf2", element_shape=(2,))  # noqa: E731
        row = lambda value: torch.full((2,), float(value), dtype=torch.float64)             # noqa: E731
    else:
        make = lambda: gta.TensorArray("float64", size=4, mode="tf2", element_shape=(2,))   # noqa: E731
        row = lambda value: np.full(2, float(value))                                       # noqa: E731
    ta, op = _moving_write(make, row)
    before = _contents(ta)
    after = np.asarray(host(op().stack())).tolist()
    at, dropped, failures = 0, [], []
    while True:
        at += 1
        ta, op = _moving_write(make, row)
        interrupt = Interrupt(at)
        if not interrupt.run(op):
            break
        now = _contents(ta)
        if now not in (before, after):
            failures.append((at, interrupt.where, now))
        try:
            ta.stack()
        except errors.InvalidArgumentError:
            dropped.append(at)                     # superseded: the op's result was made, then dropped
    points = at - 1
    assert points > 20 and not failures, failures[:5]
    assert all(point > points - 3 for point in dropped), (points, dropped)     # _next's and the op's returns


def test_an_interrupt_anywhere_in_a_gradient_leaves_no_source_taken():
    """At every point an interrupt can land in GradientTape.gradient over an array that lives on:
    once the interrupted call is gone, the next computation on that array takes the first source
    ("gradients") again: none was left taken, nor a gradient array left in its grads."""
    import gc

    import gpu_tensorarray as gta

    x = np.ones((2, 3))
    with gta.device("numpy"):
        with gta.GradientTape(persistent=True) as tape:
            ta = gta.TensorArray("float64", size=2).unstack(x)
            gathered = ta.gather([0, 1])
    array = registry.lookup(ta.handle)

    def fresh_gradient():
        with gta.GradientTape() as fresh:
            again = gta.TensorArray("float64", size=2).unstack(x).gather([0, 1])
        fresh.gradient(again, x)
        return fresh.sources_used

    at, points = 0, 0
    while True:
        at += 1
        interrupt = Interrupt(at)
        calls = tape._calls
        with gta.device("numpy"):
            interrupted = interrupt.run(lambda: tape.gradient(gathered, x))
        gc.collect()                        # the interrupted call's frames, and its _Ending
        tape._calls = calls                 # the next computation asks for the interrupted one's source first
        assert host(tape.gradient(gathered, x)).tolist() == np.ones((2, 3)).tolist()
        expected = "gradients" if calls == 0 else f"gradients_{calls}"
        assert tape.sources_used[-1] == expected, (at, interrupt.where, tape.sources_used[-1])
        assert array.grads == {}, (at, interrupt.where)
        if not interrupted:
            break
        points += 1
    assert points > 20 and fresh_gradient() == ["gradients"]


def test_an_interrupt_anywhere_in_a_tape_step_leaves_no_tape_recording():
    """At every point an interrupt can land in a GradientTape's step (entering it, the ops inside,
    leaving it, its gradient): once the caller has dropped the tape, no tape records, the recorder
    hook is off after the next op, and arrays made later are freed as usual (a tape left in the
    thread's recording set by an interrupt in __enter__ or __exit__ kept recording every later op,
    and with it every later array)."""
    import gc
    import weakref

    import gpu_tensorarray as gta
    from gpu_tensorarray import raw_ops, tape as tape_module

    def step():
        x = np.ones((2, 3))
        with gta.GradientTape() as tape:
            gathered = gta.TensorArray("float64", size=2).unstack(x).gather([0, 1])
        assert host(tape.gradient(gathered, x)).tolist() == np.ones((2, 3)).tolist()

    at, points = 0, 0
    while True:                             # (the tape's code is the same on every backend)
        at += 1
        interrupt = Interrupt(at)
        with gta.device("numpy"):
            interrupted = interrupt.run(step)
            gc.collect()                    # the interrupted step's frames and tape
            later = gta.TensorArray("float64", size=1).write(0, np.ones(2))      # an op after the step
        alive = weakref.ref(registry.lookup(later.handle))
        del later
        assert not tape_module._recording and not getattr(tape_module._local, "tapes", None), (at, interrupt.where)
        assert not raw_ops.recording(), (at, interrupt.where)
        assert alive() is None, (at, interrupt.where)      # no tape kept it
        if not interrupted:
            break
        points += 1
    assert points > 20


def test_an_interrupt_as_the_last_view_goes_keeps_no_storage():
    """The storage a read's view keeps alive goes with the last view, whatever lands then: the
    release was a Python callback, where an interrupt was lost ("Exception ignored") and the
    whole slab kept for the life of the process (a signal at random moments leaked 3-4 MiB per
    1000 loops of two 512 KiB reads)."""
    import gc

    import gpu_tensorarray as gta
    from gpu_tensorarray.backends import numpy as numpy_backend

    def interrupt(frame, event, arg):
        if event in ("call", "return", "c_return"):    # where CPython delivers one
            sys.setprofile(None)
            raise KeyboardInterrupt("injected as the view goes")

    gc.collect()
    before = len(numpy_backend._kept)
    with gta.device("numpy"):
        handle, flow = gta.raw_ops.TensorArrayV3(size=1, dtype="float64", element_shape=[4])
        flow = gta.raw_ops.TensorArrayWriteV3(handle=handle, index=0, value=np.ones(4), flow_in=flow)
        value = gta.raw_ops.TensorArrayReadV3(handle=handle, index=0, flow_in=flow, dtype="float64")
        gta.raw_ops.TensorArrayCloseV3(handle=handle)
    assert len(numpy_backend._kept) == before + 1
    swallowed = []
    unraisable, sys.unraisablehook = sys.unraisablehook, swallowed.append
    sys.setprofile(interrupt)
    try:
        del value
    finally:
        sys.setprofile(None)
        sys.unraisablehook = unraisable
    assert len(numpy_backend._kept) == before and not swallowed, swallowed
