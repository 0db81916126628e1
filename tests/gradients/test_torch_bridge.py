"""gpu_tensorarray.torch: every op's gradient equals torch autograd's on the same program
written with a Python list (torch.stack, torch.cat, indexing), in float64; repeated
gather indices add up as a sequential float32 loop does, bitwise; each backward pass
has its own gradient arrays and closes them; nothing done to a returned tensor changes
the array. On every backend (numpy, emulated, cupy where a GPU is usable); the tensors a
test mixes with the bridge's are built where the bridge's come out (``torch_device``).

Needs torch: skipped without it, except under CI=true, where a missing torch fails."""

import contextlib
import gc
import re

import numpy as np
import pytest

import gpu_tensorarray as gta
from gpu_tensorarray.errors import FailedPreconditionError, InvalidArgumentError
from gpu_tensorarray.testing import import_torch, open_array_names

torch = import_torch()
from torch_helpers import opened_since, settle_autograd, torch_device  # noqa: E402
from gpu_tensorarray.torch import TensorArray, as_dtype, torch_dtype  # noqa: E402
from gpu_tensorarray.torch.autograd import open_passes  # noqa: E402

F64 = torch.float64


def leaves(*shapes, seed=0, dtype=F64):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*shape, generator=generator, dtype=dtype).to(torch_device()).requires_grad_()
            for shape in shapes]


def clones(tensors):
    return [t.detach().clone().requires_grad_() for t in tensors]


def grads_of(loss_fn, inputs):
    """d loss / d inputs by autograd; zeros for an input the loss does not reach."""
    loss = loss_fn(*inputs)
    grads = torch.autograd.grad(loss, inputs, allow_unused=True)
    return loss, [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


def assert_same_gradients(ours_fn, reference_fn, inputs, rtol=1e-12):
    """Gradients of our program and of the list-based one agree to ``rtol`` (relative to the largest)."""
    loss, ours = grads_of(ours_fn, clones(inputs))
    reference_loss, reference = grads_of(reference_fn, clones(inputs))
    assert loss.item() == pytest.approx(reference_loss.item(), rel=1e-12)
    for mine, theirs in zip(ours, reference):
        assert mine.dtype == theirs.dtype and mine.shape == theirs.shape
        scale = max(float(theirs.abs().max()), 1e-300)
        assert float((mine - theirs).abs().max()) <= rtol * scale, (mine, theirs)
    return ours


def nonlinear(value, weight):
    """A loss term that makes every element's gradient distinct."""
    return (torch.sin(value) * weight).sum() + (value ** 2).sum() * 0.5


def weights(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(torch_device())


# -- every op against the list-based program --------------------------------------------------

def test_write_read(backend):
    w = weights(5, 3)

    def ours(a, b, c):
        ta = TensorArray(F64, size=3, clear_after_read=False)
        ta = ta.write(0, a).write(1, b * 2).write(2, c)
        # Index 1 read twice: its gradients add up in the gradient array.
        return sum(nonlinear(ta.read(i), w[k]) for k, i in enumerate((0, 1, 2, 1, 0)))

    def reference(a, b, c):
        rows = [a, b * 2, c]
        return sum(nonlinear(rows[i], w[k]) for k, i in enumerate((0, 1, 2, 1, 0)))

    assert_same_gradients(ours, reference, leaves((3,), (3,), (3,)))


def test_unstack_stack(backend):
    w = weights(4, 2, 3)

    def ours(x):
        return nonlinear(TensorArray(F64, size=4).unstack(x * 3).stack(), w)

    def reference(x):
        return nonlinear(torch.stack(list((x * 3).unbind(0))), w)

    assert_same_gradients(ours, reference, leaves((4, 2, 3)))


def test_scatter_gather_with_repeated_indices(backend):
    w = weights(7, 2)

    def ours(x):
        ta = TensorArray(F64, size=5, clear_after_read=False).scatter([4, 0, 2, 1, 3], x)
        return nonlinear(ta.gather([2, 2, 0, 4, 2, 1, 2]), w)

    def reference(x):
        rows = [None] * 5
        for k, i in enumerate([4, 0, 2, 1, 3]):
            rows[i] = x[k]
        return nonlinear(torch.stack([rows[i] for i in [2, 2, 0, 4, 2, 1, 2]]), w)

    grad = assert_same_gradients(ours, reference, leaves((5, 2)))[0]
    assert float(grad[4].abs().max()) == 0.0            # row 4 went to slot 3, never gathered


def test_gather_with_torch_indices(backend):
    w = weights(4, 3)
    indices = torch.tensor([3, 1, 3, 0], device=torch_device())

    def ours(x):
        return nonlinear(TensorArray(F64, size=4, clear_after_read=False).unstack(x).gather(indices), w)

    def reference(x):
        return nonlinear(x[indices], w)

    assert_same_gradients(ours, reference, leaves((4, 3)))


def test_split_concat_ragged(backend):
    lengths = [3, 0, 1, 4]
    w = weights(8, 2)

    def ours(x):
        ta = TensorArray(F64, size=4, infer_shape=False).split(x, lengths)
        return nonlinear(ta.concat(), w)

    def reference(x):
        return nonlinear(torch.cat(torch.split(x, lengths)), w)

    assert_same_gradients(ours, reference, leaves((8, 2)))


def test_split_then_read_pieces_and_write_concat(backend):
    lengths = torch.tensor([2, 1, 3], device=torch_device())
    w = weights(6, 2)

    def ours(x, y):
        pieces = TensorArray(F64, size=3, clear_after_read=False, infer_shape=False).split(x, lengths)
        joined = TensorArray(F64, size=3, infer_shape=False)
        for i in (2, 0, 1):
            joined = joined.write(i, pieces.read(i) * (i + 1) + y[: int(lengths[i])])
        return nonlinear(joined.concat(), w) + nonlinear(pieces.read(2), w[:3])

    def reference(x, y):
        pieces = torch.split(x, lengths.tolist())
        rows = [pieces[i] * (i + 1) + y[: int(lengths[i])] for i in range(3)]
        return nonlinear(torch.cat(rows), w) + nonlinear(pieces[2], w[:3])

    assert_same_gradients(ours, reference, leaves((6, 2), (3, 2)))


def test_dynamic_growth_and_unwritten_slots(backend):
    w = weights(7, 2)

    def ours(a, b):
        ta = TensorArray(F64, size=0, dynamic_size=True, element_shape=(2,))
        ta = ta.write(0, a).write(4, b)           # grows to 5; slots 1-3 read as zeros
        ta = ta.write(6, a * b)                   # grows to 7
        return nonlinear(ta.stack(), w)

    def reference(a, b):
        zeros = torch.zeros(2, dtype=F64, device=torch_device())
        return nonlinear(torch.stack([a, zeros, zeros, zeros, b, zeros, a * b]), w)

    assert_same_gradients(ours, reference, leaves((2,), (2,)))


def test_recurrence_reads_what_it_wrote(backend):
    """Each step reads the previous step's output back from the array (a chain of flows)."""
    def ours(h0, u):
        ta = TensorArray(F64, size=0, dynamic_size=True, clear_after_read=False).write(0, h0)
        for t in range(1, 6):
            ta = ta.write(t, torch.tanh(ta.read(t - 1) * u + t))
        return nonlinear(ta.stack(), weights(6, 3))

    def reference(h0, u):
        rows = [h0]
        for t in range(1, 6):
            rows.append(torch.tanh(rows[t - 1] * u + t))
        return nonlinear(torch.stack(rows), weights(6, 3))

    assert_same_gradients(ours, reference, leaves((3,), (3,)))


def test_reads_from_an_older_flow(backend):
    """A TensorArray object keeps its flow: reading through an older one sees the same storage."""
    def ours(a, b):
        first = TensorArray(F64, size=2, clear_after_read=False).write(0, a)
        second = first.write(1, b)
        return nonlinear(first.read(0), weights(3)) + nonlinear(second.stack(), weights(2, 3, seed=2))

    def reference(a, b):
        return nonlinear(a, weights(3)) + nonlinear(torch.stack([a, b]), weights(2, 3, seed=2))

    assert_same_gradients(ours, reference, leaves((3,), (3,)))


def test_complex_values(backend):
    c128 = torch.complex128

    def ours(x):
        ta = TensorArray(c128, size=3, clear_after_read=False).unstack(x)
        value = ta.gather([2, 0, 2]) * (1 + 2j)
        return (value * value.conj()).real.sum() + ta.read(1).imag.sum()

    def reference(x):
        value = x[[2, 0, 2]] * (1 + 2j)
        return (value * value.conj()).real.sum() + x[1].imag.sum()

    x = torch.randn(3, 2, dtype=c128, generator=torch.Generator().manual_seed(3))
    x = x.to(torch_device()).requires_grad_()
    assert_same_gradients(ours, reference, [x])


def test_empty_scatter_and_split(backend):
    x = torch.zeros(0, 2, dtype=F64, device=torch_device(), requires_grad=True)
    y = leaves((2,))[0]
    scattered = TensorArray(F64, size=2, element_shape=(2,)).scatter([], x).write(0, y).write(1, y * 2)
    split = TensorArray(F64, size=0, dynamic_size=True).split(x, []).write(0, y)
    loss = scattered.stack().sum() + split.stack().sum() - y.sum() * 3
    loss.backward()
    assert x.grad.shape == (0, 2) and y.grad.tolist() == [1.0, 1.0]


# -- aggregation order ------------------------------------------------------------------------

def test_repeated_gather_indices_add_in_order_bitwise(backend):
    """float32 rows whose sum depends on the order: the gradient array adds a gather's
    rows for one slot in the gather's order, bitwise equal to a sequential loop."""
    rows = np.array([[1e8, 1.0], [1.0, 3.0], [-1e8, 1e-3], [0.5, -3.0], [3.0, 1e7]], np.float32)
    indices = [1, 0, 1, 1, 1]
    x = torch.zeros(2, 2, dtype=torch.float32, device=torch_device(), requires_grad=True)
    ta = TensorArray(torch.float32, size=2, clear_after_read=False).unstack(x)
    ta.gather(indices).backward(torch.from_numpy(rows).to(torch_device()))
    expected = np.zeros((2, 2), np.float32)
    for k, index in enumerate(indices):
        expected[index] = rows[k] if k == indices.index(index) else expected[index] + rows[k]
    grad = x.grad.cpu().numpy()
    assert np.array_equal(grad, expected)
    assert grad[1].tobytes() == ((rows[0] + rows[2]) + rows[3] + rows[4]).tobytes()


def test_repeated_gather_indices_match_raw_ops(backend):
    """Same bits as the library's gather_grad on the raw ops (TensorFlow's gradient function)."""
    grad_rows = np.random.default_rng(5).standard_normal((6, 3)).astype(np.float32) * 1e4
    indices = [2, 2, 0, 2, 0, 2]
    x = torch.zeros(3, 3, dtype=torch.float32, device=torch_device(), requires_grad=True)
    TensorArray(torch.float32, size=3, clear_after_read=False).unstack(x).gather(indices).backward(
        torch.from_numpy(grad_rows).to(torch_device()))

    handle, flow = gta.raw_ops.TensorArrayV3(3, "float32", clear_after_read=False)
    flow = gta.raw_ops.TensorArrayScatterV3(handle, [0, 1, 2], np.zeros((3, 3), np.float32), flow)
    op = gta.gradients.Op("TensorArrayGatherV3", (handle, np.array(indices), flow), (None,), {"dtype": "float32"})
    flow_g = gta.gradients.gather_grad(op, gta.get_backend().asarray(grad_rows), grad_name="gradients")[-1]
    scatter = gta.gradients.Op("TensorArrayScatterV3", (handle, np.arange(3), None, flow), (flow,),
                               {"T": "float32"})
    expected = gta.to_numpy(gta.gradients.scatter_grad(scatter, flow_g, grad_name="gradients")[2])
    gta.raw_ops.TensorArrayCloseV3(handle)
    assert x.grad.cpu().numpy().tobytes() == expected.tobytes()


# -- backward passes --------------------------------------------------------------------------

def _program(x):
    ta = TensorArray(F64, size=3, clear_after_read=False).unstack(x)
    return nonlinear(ta.gather([0, 2, 2]), weights(3, 4)) + nonlinear(ta.read(1), weights(4, seed=2))


def test_two_backward_passes_with_retain_graph(backend):
    x = leaves((3, 4))[0]
    loss = _program(x)
    loss.backward(retain_graph=True)
    first = x.grad.clone()
    loss.backward()
    assert torch.equal(x.grad, first * 2)       # each pass its own accumulator: no double count
    _, reference = grads_of(lambda x: nonlinear(x[[0, 2, 2]], weights(3, 4)) + nonlinear(x[1], weights(4, seed=2)),
                            clones([x]))
    assert float((first - reference[0]).abs().max()) <= 1e-12 * float(reference[0].abs().max())
    assert open_passes() == 0


@pytest.mark.parametrize("reentrant", [False, True])
@pytest.mark.parametrize("made", ["outside, clear_after_read=False", "outside, mode tf2", "inside"])
def test_checkpointed_steps_match_the_list_model(backend, made, reentrant):
    """torch.utils.checkpoint recomputes a step in the backward pass, its reads included (docs/torch.md
    §8): a mode tf1 array made outside the function needs reads that do not clear, and the
    non-reentrant variant (the reentrant one's second pass finds the array's nodes freed by the
    first); a mode tf2 array, or one made inside, works with either."""
    from torch.utils.checkpoint import checkpoint

    cell = torch.nn.GRUCell(3, 4).double().to(torch_device())
    x, h0 = leaves((4, 2, 3), (2, 4))

    def model(x, h, read_from_array):
        if made == "inside":
            def step(h, x_t):
                if not read_from_array:
                    return cell(x_t, h)
                return TensorArray(F64, size=1).write(0, cell(x_t, h)).read(0)
            for x_t in x.unbind(0):
                h = checkpoint(step, h, x_t, use_reentrant=reentrant)
            return h
        mode = "tf2" if made.endswith("tf2") else "tf1"
        inputs = TensorArray(F64, size=4, clear_after_read=False, mode=mode).unstack(x) if read_from_array else None
        for t in range(4):
            h = checkpoint(lambda h, t: cell(inputs.read(t) if read_from_array else x[t], h), h, t,
                           use_reentrant=reentrant)
        return h

    def gradients(read_from_array):          # by backward(): the reentrant variant refuses autograd.grad
        cell.zero_grad()
        inputs = clones([x, h0])
        nonlinear(model(*inputs, read_from_array), weights(2, 4)).backward()
        return [t.grad for t in inputs] + [p.grad.clone() for p in cell.parameters()]

    if reentrant and made == "outside, clear_after_read=False":
        with pytest.raises(FailedPreconditionError, match="backward through the graph a second time"):
            gradients(True)
        return
    for ours, reference in zip(gradients(True), gradients(False)):
        assert torch.allclose(ours, reference, rtol=1e-12, atol=1e-300), (ours, reference)


def test_a_checkpointed_read_of_an_array_that_clears_says_how_to_keep_the_slots(backend):
    from torch.utils.checkpoint import checkpoint

    cell = torch.nn.GRUCell(3, 4).double().to(torch_device())
    x, h = leaves((2, 2, 3), (2, 4))
    inputs = TensorArray(F64, size=2).unstack(x)
    for t in range(2):
        h = checkpoint(lambda h, t: cell(inputs.read(t), h), h, t, use_reentrant=False)
    with pytest.raises(InvalidArgumentError, match=r"Could not read index 1 twice .*clear_after_read = false"):
        h.sum().backward()


def test_two_losses_through_one_array(backend):
    x = leaves((3, 4))[0]
    ta = TensorArray(F64, size=3, clear_after_read=False).unstack(x)
    loss_a = nonlinear(ta.read(0), weights(4))
    loss_b = nonlinear(ta.gather([0, 1]), weights(2, 4, seed=3))
    grad_a, = torch.autograd.grad(loss_a, x, retain_graph=True)
    grad_b, = torch.autograd.grad(loss_b, x)
    y = x.detach().clone().requires_grad_()
    ref_a, = torch.autograd.grad(nonlinear(y[0], weights(4)), y)
    ref_b, = torch.autograd.grad(nonlinear(y[[0, 1]], weights(2, 4, seed=3)), y)
    assert torch.allclose(grad_a, ref_a, rtol=1e-12, atol=0) and torch.allclose(grad_b, ref_b, rtol=1e-12, atol=0)


def test_grad_arrays_are_closed_after_backward(backend):
    before = open_array_names()
    x = leaves((3, 4))[0]
    inputs = TensorArray(F64, size=3, clear_after_read=False).unstack(x)
    outputs = TensorArray(F64, size=2).write(0, inputs.read(2)).write(1, inputs.read(0))
    loss = nonlinear(outputs.stack(), weights(2, 4))
    loss.backward()
    # The two forward arrays stay open (the caller's); their gradient arrays are closed and
    # have left the forward arrays' grads (the pass has ended: nothing refers to them).
    assert open_array_names() - before == {inputs.handle.name, outputs.handle.name}
    assert open_passes() == 0
    for forward in (inputs, outputs):
        assert not gta.registry.lookup(forward.handle).grads
    del inputs, outputs, loss, forward
    assert not opened_since(before)


def test_a_failing_backward_pass_closes_its_grad_arrays(backend):
    x = leaves((2, 3))[0]
    ta = TensorArray(F64, size=2).unstack(x)
    loss = ta.stack().sum()
    ta.close()                                  # TensorArrayGradV3 on a closed array fails
    with pytest.raises(InvalidArgumentError, match="closed"):
        loss.backward()
    assert open_passes() == 0


class _Boom(torch.autograd.Function):
    """Identity forward; its backward raises an error of the class it is given."""

    @staticmethod
    def forward(ctx, x, error):
        ctx.error = error                       # the class: an instance would hold its own traceback
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise ctx.error("boom")


def _failing_pass(make_failure):
    """A backward pass in which our nodes run (and open the pass) before another node fails."""
    x = leaves((2, 3))[0]
    early = make_failure(x)                     # made first: autograd runs it last
    ta = TensorArray(F64, size=2, clear_after_read=False).unstack(x * 2)
    loss = ta.stack().sum() + ta.read(1).sum() + early
    return x, ta, loss


@pytest.mark.parametrize("failure", ["anomaly_nan", "custom_function", "keyboard_interrupt"])
def test_a_pass_that_fails_elsewhere_closes_its_grad_arrays(backend, failure):
    before = open_array_names()
    if failure == "anomaly_nan":
        def make(x):
            return torch.sqrt(x[0, 0] * 0)      # backward: 0 * inf = nan
        expected, context = RuntimeError, torch.autograd.detect_anomaly(check_nan=True)
    else:
        error = ValueError if failure == "custom_function" else KeyboardInterrupt
        expected, context = error, contextlib.nullcontext()

        def make(x):
            return _Boom.apply(x[0, 0], error)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # anomaly mode's own warnings
        with context:
            x, ta, loss = _failing_pass(make)
            with pytest.raises(expected):
                loss.backward()
    # The pass ends when torch frees its graph task. On a GPU, torch's device thread holds
    # the failed task until its loop turn ends, which can come after backward() has raised.
    settle_autograd()
    assert open_passes() == 0
    forward = gta.registry.lookup(ta.handle)
    assert not forward.grads          # ended: its gradient arrays closed and gone from grads
    assert open_array_names() - before == {forward.name}        # the forward array only
    del x, ta, loss, forward
    assert not opened_since(before)


def test_retained_graph_passes_leave_no_open_arrays(backend):
    x = leaves((3, 4))[0]
    loss = _program(x)
    before = open_array_names()
    for _ in range(20):
        loss.backward(retain_graph=True)
    assert not opened_since(before) and open_passes() == 0


def test_retained_graph_passes_leave_no_closed_grad_arrays_behind(backend):
    x = leaves((3, 4))[0]
    ta = TensorArray(F64, size=3, clear_after_read=False).unstack(x)
    loss = nonlinear(ta.stack(), weights(3, 4))
    for _ in range(20):
        loss.backward(retain_graph=True)
    assert len(gta.registry.lookup(ta.handle).grads) == 0


def test_an_interrupt_while_writes_become_a_node_loses_none_of_them(backend, monkeypatch):
    from gpu_tensorarray.torch import autograd
    made = autograd._write_run

    def interrupted(*args):
        made(*args)
        raise KeyboardInterrupt
    w = weights(2, 3)

    def ours(x):
        ta = TensorArray(F64, size=2).write(0, x[0] * 2).write(1, x[1] * 3)
        monkeypatch.setattr(autograd, "_write_run", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ta.stack()
        monkeypatch.setattr(autograd, "_write_run", made)
        return nonlinear(ta.stack(), w)

    def reference(x):
        return nonlinear(torch.stack([x[0] * 2, x[1] * 3]), w)

    assert_same_gradients(ours, reference, leaves((2, 3)))


class _Failing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, value):
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError("a failing node")


def test_an_interrupt_in_a_failed_pass_s_finaliser_leaves_no_pass_open(backend):
    """A pass that fails after the array's nodes ran is ended by its finaliser alone; an interrupt
    landing there is lost ("Exception ignored"), and the pass, with its gradient array and the
    forward array, stayed open for the life of the process. The next pass ends it."""
    import sys

    from gpu_tensorarray.torch import autograd
    from ta_conformance_util import interrupt_at

    before = open_array_names()
    x = leaves((2, 3))[0]
    failing = _Failing.apply(x * 5)                 # made first: autograd runs it last
    loss = TensorArray(F64, size=2).write(0, x[0] * 2).write(1, x[1] * 3).stack().sum() + failing.sum()
    swallowed = []      # the classes only: a report's traceback would keep the _PassEnd alive
    unraisable, sys.unraisablehook = sys.unraisablehook, lambda report: swallowed.append(type(report.exc_value))
    try:
        with interrupt_at(autograd._end_pass.__code__, "call"), pytest.raises(RuntimeError, match="a failing node"):
            loss.backward()
        del loss, failing
        gc.collect()
    finally:
        sys.unraisablehook = unraisable
    assert swallowed == [KeyboardInterrupt]                                             # it landed there
    x.grad = None
    TensorArray(F64, size=2).unstack(x[:2] * 1).stack().sum().backward()              # the next pass
    assert not opened_since(before) and open_passes() == 0
    assert torch.equal(x.grad, torch.ones_like(x))


def test_a_graph_kept_after_its_backward_pass_holds_no_array_and_no_value(backend):
    """As torch frees saved tensors at the end of a pass that does not keep its graph: a loss kept
    for logging (or compiled code's cache) kept every array and every value written for good. A
    second pass through that graph is torch's error, and retain_graph=True keeps them."""
    import weakref
    before = open_array_names()
    x = leaves((2, 3))[0]
    written = x * 2
    alive = weakref.ref(written)
    loss = TensorArray(F64, size=2).write(0, written).write(1, x.flip(0) * 3).stack().sum()
    del written
    loss.backward()
    assert not opened_since(before) and alive() is None
    with pytest.raises(gta.errors.FailedPreconditionError, match="^Trying to backward through the graph a second "
                                                                 "time: TensorArray .*retain_graph=True"):
        loss.backward()
    assert isinstance(gta.errors.FailedPreconditionError("x"), RuntimeError)      # torch's class too
    x.grad = None
    kept = TensorArray(F64, size=1).write(0, x * 2).stack().sum()
    kept.backward(retain_graph=True)
    assert opened_since(before)
    kept.backward()
    assert torch.equal(x.grad, torch.full_like(x, 4.0)) and not opened_since(before)


def test_a_pass_s_finaliser_run_where_its_thread_holds_the_passes_lock_ends_the_pass():
    """The cycle collector may finalise a _PassEnd at any allocation, also one made while this
    thread holds the passes' lock; and another thread may drop the engine's reference while the
    sweep of abandoned passes holds a temporary one. The finaliser then ended its pass under a
    held, non-reentrant lock: a deadlock (seen with two threads, within a minute)."""
    import threading
    import weakref

    from gpu_tensorarray.torch import autograd
    task, done = -12345, threading.Event()

    def finalise_under_the_lock():
        end = autograd._PassEnd(task)
        with autograd._passes_lock:
            autograd._passes[task] = autograd._Pass(0, weakref.ref(end))
            del end                         # the last reference: its finaliser runs here
            done.set()

    threading.Thread(target=finalise_under_the_lock, daemon=True).start()
    assert done.wait(20), "the finaliser deadlocked on the passes' lock"
    assert task not in autograd._passes and open_passes() == 0


@pytest.mark.parametrize("where", ["grad_array_made", "release_begins"])
def test_an_interrupt_in_a_backward_pass_leaves_no_gradient_array_open(backend, where):
    """Ctrl-C as TensorArrayGradV3 returns (its array registered, the pass not yet told), or
    as the pass's end begins to close its arrays: they are closed all the same."""
    from gpu_tensorarray import raw_ops
    from gpu_tensorarray.registry import Registry
    from ta_conformance_util import interrupt_at
    x = leaves((3, 2))[0]
    ta = TensorArray(F64, size=3).unstack(x)
    loss = ta.stack().sum()
    forward, before = gta.registry.lookup(ta.handle), open_array_names()
    # TensorArrayGradV3 makes the gradient array's flow (_new_flow) once the array is registered.
    at = (raw_ops._new_flow.__code__ if where == "grad_array_made" else Registry.end_gradients.__code__, "call")
    for _ in range(3):
        with interrupt_at(*at), pytest.raises(KeyboardInterrupt):
            loss.backward(retain_graph=True)
        settle_autograd()
    assert open_passes() == 0 and not forward.grads and not opened_since(before)
    x.grad = None
    loss.backward()
    assert torch.equal(x.grad, torch.ones_like(x))


def test_a_read_through_a_superseded_array_raises(backend):
    x = leaves((3,))[0]
    ta = TensorArray(F64, size=2)
    ta.write(0, x * 2)                           # the returned arrays dropped: the user's slip
    ta.write(1, x * 3)
    with pytest.raises(InvalidArgumentError, match="Use the TensorArray the write returned"):
        ta.stack()
    with pytest.raises(InvalidArgumentError, match="slot 1"):
        ta.read(1)
    with torch.no_grad():                        # no gradient to lose: the values, as TF1 gives them
        assert torch.equal(ta.stack(), torch.stack([x * 2, x * 3]).detach())


def test_a_flow_asked_for_under_no_grad_loses_no_write(backend):
    x = leaves((3,))[0]
    ta = TensorArray(F64, size=2, clear_after_read=False).write(0, x * 2).write(1, x * 3)
    with torch.no_grad():
        ta.flow
        assert not ta.read(0).requires_grad
    ta.stack().sum().backward()
    assert x.grad.tolist() == [5.0] * 3


def test_torch_func_transforms_are_refused_by_name(backend):
    def program(x):
        return TensorArray(F64, size=2).write(0, x * 2).write(1, x).stack().sum()

    with pytest.raises(gta.errors.UnimplementedError, match="torch.func transforms"):
        torch.func.grad(program)(torch.ones(3, dtype=F64, device=torch_device()))
    x = leaves((3,))[0]
    tracked = TensorArray(F64, size=1).write(0, x)
    with pytest.raises(gta.errors.UnimplementedError, match="torch.func transforms"):
        torch.func.vmap(lambda row: tracked.read(0) * row)(torch.ones(2, 3, dtype=F64, device=torch_device()))


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("op", ["write", "unstack", "scatter", "split"])
def test_forward_mode_ad_is_refused_by_name(backend, mode, op):
    """A dual tensor (torch.autograd.forward_ad) written into an array would lose its tangent (the
    ops are recorded for reverse mode only): UnimplementedError naming the array, saying to use
    reverse mode, whose JVP (torch.autograd.functional.jvp) equals the list model's."""
    import torch.autograd.forward_ad as forward_ad

    def run(ta, value):
        return {"write": lambda: ta.write(0, value[0]).write(1, value[1]).stack(), "unstack": lambda: ta.unstack(value),
                "scatter": lambda: ta.scatter([1, 0], value.flip(0)).stack(),
                "split": lambda: ta.split(value.reshape(-1), [2, 2]).concat().reshape(2, 2)}[op]()

    primal, tangent = weights(2, 2), weights(2, 2, seed=2)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(primal, tangent)
        ta = TensorArray(F64, size=2, mode=mode)
        before = ta.element_shape
        with pytest.raises(gta.errors.UnimplementedError, match="forward-mode AD.*reverse mode") as error:
            run(ta, torch.sin(dual))
        assert f"TensorArray {ta.handle.name}:" in str(error.value)
        assert ta.element_shape == before           # the refused op changed nothing
        # Values without a tangent are fine inside a dual level: their tangent is zero.
        plain = TensorArray(F64, size=2, mode=mode, clear_after_read=False).unstack(primal)
        assert torch.equal(forward_ad.unpack_dual(plain.read(1) * dual[1]).tangent, primal[1] * tangent[1])

    def ours(x):
        out = run(TensorArray(F64, size=2, mode=mode), torch.sin(x))
        return out.stack() if op == "unstack" else out

    ours_jvp = torch.autograd.functional.jvp(ours, primal, tangent)[1]
    assert torch.allclose(ours_jvp, torch.cos(primal) * tangent, rtol=1e-12, atol=0)


def test_forward_over_reverse_is_refused_by_name(backend):
    """A dual gradient given to a backward pass reaches the gradient array's write: refused, the pass closed."""
    import torch.autograd.forward_ad as forward_ad

    x = leaves((2, 3))[0]
    ta = TensorArray(F64, size=2).unstack(x * 2)
    stacked = ta.stack()
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(torch.ones_like(stacked), torch.ones_like(stacked))
        with pytest.raises(gta.errors.UnimplementedError,
                           match=f"TensorArray {ta.handle.name}'s gradient array: forward-mode AD"):
            torch.autograd.grad(stacked, x, dual)
    assert open_passes() == 0


def _failing_backward(failure, mode, x):
    """A backward pass through an array named "states" that fails in a bridge node, as ``failure``
    makes it fail; (the array, the op whose backward fails, the error expected)."""
    import torch.autograd.forward_ad as forward_ad

    ta = TensorArray(F64, size=2, tensor_array_name="states", mode=mode, clear_after_read=False).unstack(x * 2)
    if failure == "forward_over_reverse":                  # a dual gradient reaches the gradient array
        stacked = ta.stack()

        def run():
            with forward_ad.dual_level():
                dual = forward_ad.make_dual(torch.ones_like(stacked), torch.ones_like(stacked))
                torch.autograd.grad(stacked, x, dual)
        return ta, run, "stack()", gta.errors.UnimplementedError
    if failure == "batched_gradients":
        out = ta.read(1)
        batch = torch.eye(3, dtype=F64, device=torch_device())
        return ta, lambda: torch.autograd.grad(out, x, batch, is_grads_batched=True), "read(1)", \
            gta.errors.UnimplementedError
    if failure == "closed_before_backward":                # TensorArrayGradV3 of a closed array
        out = ta.gather([1, 0]).sum()
        ta.close()
        return ta, out.backward, "gather([1, 0])", InvalidArgumentError
    if failure == "closed_before_second_order":            # the same, for the gradient's own gradient
        grad, = torch.autograd.grad((ta.stack() ** 3).sum(), x, create_graph=True)
        ta.close()
        return ta, grad.sum().backward, "gradient rule gather([0, 1]), differentiated again", InvalidArgumentError
    grad_array = ta.grad("mine").write(0, x[0] * 2)        # a user's gradient array has none of its own
    return grad_array, grad_array.read(0).sum().backward, "read(0)", InvalidArgumentError


# Mode tf2 has no closing (close() does nothing) and no grad(), as in TensorFlow 2.
@pytest.mark.parametrize("mode, failure", [
    (mode, failure) for failure in ["forward_over_reverse", "batched_gradients", "closed_before_backward",
                                    "closed_before_second_order", "users_gradient_array"]
    for mode in ["tf1", "tf2"] if mode == "tf1" or not failure.startswith(("closed", "users"))])
def test_errors_in_a_backward_pass_name_the_users_array_and_op(backend, mode, failure):
    """A bridge node's backward that fails says which of the user's arrays (its TensorFlow name,
    from tensor_array_name; in mode tf2 too) and which forward op: never the pass's gradient array
    by its internal source, whose tag no user chose. TensorFlow's text stays as it is."""
    from gpu_tensorarray.torch import autograd

    x = leaves((2, 3))[0]
    ta, run, op, expected = _failing_backward(failure, mode, x)
    with pytest.raises(expected) as caught:
        run()
    text = str(caught.value)
    name = ta.handle.name
    assert name.startswith("states_")
    if mode == "tf2":
        op = "read/gather/stack/concat (mode 'tf2')"
    assert text.endswith(f" (in the backward pass of TensorArray {name}'s {op})"), text
    assert "gradients_torch" not in text and autograd._SOURCE_TAG not in text, text
    if failure.startswith("closed"):
        assert text.startswith(f"TensorArray {name} has already been closed. "), text
    elif failure == "users_gradient_array":
        assert text.startswith(f"Wrong input container. _tensor_array_grads{name} "), text
    else:
        assert f"TensorArray {name.partition('@')[0]}'s gradient array" in text, text
    assert open_passes() == 0


@pytest.mark.parametrize("read", ["read", "stack", "concat"])
def test_batched_gradients_are_refused_by_name(backend, read):
    """torch.autograd.grad(is_grads_batched=True) and torch.autograd.functional's vectorize=True
    run the backward under legacy vmap: each read's gradient rule (write, scatter, split into the
    gradient array) refuses the batched gradient as the torch.func transforms are refused."""
    def program(x):
        ta = TensorArray(F64, size=3, infer_shape=False).unstack(x * 2)
        return ta.read(1) if read == "read" else ta.stack() if read == "stack" else ta.concat()

    x = leaves((3, 2))[0]
    ta = TensorArray(F64, size=3, infer_shape=False).unstack(x * 2)
    out = ta.read(1) if read == "read" else ta.stack() if read == "stack" else ta.concat()
    batch = torch.eye(out.numel(), dtype=F64, device=torch_device()).reshape((out.numel(),) + out.shape)
    with pytest.raises(gta.errors.UnimplementedError, match=r"is_grads_batched=True.*" + ta.handle.name):
        torch.autograd.grad(out, x, batch, is_grads_batched=True)
    assert open_passes() == 0
    with pytest.raises(gta.errors.UnimplementedError, match="batched gradients"):
        torch.autograd.functional.jacobian(program, x, vectorize=True)
    assert open_passes() == 0
    expected = torch.autograd.functional.jacobian(lambda x: torch.stack(list((x * 2).unbind(0))), x)
    reference = {"read": expected[1], "stack": expected, "concat": expected.reshape(6, 3, 2)}[read]
    assert torch.equal(torch.autograd.functional.jacobian(program, x), reference)    # one gradient at a time


class _Wrapped(torch.Tensor):
    """A __torch_dispatch__ wrapper subclass whose ops give wrapped results (as FakeTensor's and
    torch.export's tensors do): no memory of its own, whatever is done to it."""

    @staticmethod
    def __new__(cls, inner):
        return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

    def __init__(self, inner):
        self.inner = inner

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(value):
            return value.inner if isinstance(value, _Wrapped) else value
        result = func(*[unwrap(arg) for arg in args], **{key: unwrap(arg) for key, arg in (kwargs or {}).items()})
        return _Wrapped(result) if isinstance(result, torch.Tensor) else result


def _odd_tensor(kind):
    dense = torch.eye(2, dtype=F64)
    return {"meta": lambda: torch.empty(2, 2, dtype=F64, device="meta"), "sparse_coo": dense.to_sparse,
            "sparse_csr": dense.to_sparse_csr, "sparse_coo_requiring_grad": lambda: dense.to_sparse().requires_grad_(),
            "nested": lambda: torch.nested.nested_tensor(list(dense)), "dispatch_subclass": lambda: _Wrapped(dense)}[kind]()


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("op", ["write", "unstack", "scatter", "split"])
@pytest.mark.parametrize("kind", ["meta", "sparse_coo", "sparse_csr", "sparse_coo_requiring_grad", "nested",
                                  "dispatch_subclass"])
def test_tensors_without_dense_data_are_refused_by_name(backend, mode, op, kind):
    """Sparse, meta and nested tensors, and __torch_dispatch__ subclasses, are InvalidArgumentError
    naming the array (as a dtype the library lacks is), not torch's TypeError, NotImplementedError
    or RuntimeError; the array takes a dense value in their place."""
    ta = TensorArray(F64, size=2, mode=mode)
    run = {"write": lambda value: ta.write(0, value), "unstack": lambda value: ta.unstack(value),
           "scatter": lambda value: ta.scatter([0, 1], value), "split": lambda value: ta.split(value, [1, 1])}[op]
    with pytest.raises(InvalidArgumentError, match="cannot be stored: a TensorArray holds dense tensors") as error:
        run(_odd_tensor(kind))
    assert f"TensorArray {ta.handle.name}" in str(error.value)
    dense = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64, device=torch_device())
    after = run(dense)
    assert torch.equal(after.read(0) if op == "write" else after.concat() if op == "split" else after.stack(), dense)


def test_torch_running_out_of_memory_for_a_values_copy_is_the_librarys_error(monkeypatch):
    """On a GPU a value torch must copy first (a strided one made contiguous, one on another device)
    may find no memory: torch's OutOfMemoryError is ResourceExhaustedError naming the array, as
    the library's own allocations' is, and the op changes nothing."""
    from gpu_tensorarray.torch import crossing

    def no_memory(value):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 MiB")
    ta = TensorArray(F64, size=1, device="cuda")            # the cupy backend (the CuPy stand-in without a GPU)
    monkeypatch.setattr(crossing, "torch_bits_resolved", no_memory)
    with pytest.raises(gta.errors.ResourceExhaustedError, match=f"^OOM when copying .*TensorArray {ta.handle.name}"):
        ta.write(0, torch.ones(2, dtype=F64))
    monkeypatch.undo()
    assert ta.write(0, torch.ones(2, dtype=F64)).read(0).tolist() == [1.0, 1.0]


class _Plain(torch.Tensor):
    """A subclass with the memory of a tensor (no __torch_dispatch__)."""


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_plain_tensor_subclasses_are_stored_as_tensors(backend, mode):
    x = leaves((2,))[0]
    parameter = torch.nn.Parameter(torch.full((2,), 3.0, dtype=F64, device=torch_device()))
    plain = (x * 2).as_subclass(_Plain)
    rows = TensorArray(F64, size=2, mode=mode).write(0, plain).write(1, parameter).stack()
    assert rows.tolist() == [(x * 2).tolist(), [3.0, 3.0]]
    rows.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0] and parameter.grad.tolist() == [1.0, 1.0]


def test_reads_of_slots_written_before_stay_allowed(backend):
    x = leaves((3,))[0]
    first = TensorArray(F64, size=3, clear_after_read=False).write(0, x * 2)
    second = first.write(1, x * 3)
    first.write(2, x * 4)                        # supersedes both, for slot 2 only
    (first.read(0).sum() + second.read(1).sum()).backward()
    assert x.grad.tolist() == [5.0] * 3


def test_only_requires_grad_values_get_gradients(backend):
    a, b = leaves((3,), (3,))
    plain = torch.ones(3, dtype=F64)
    ta = TensorArray(F64, size=4).write(0, a).write(1, plain).write(2, [1.0, 2.0, 3.0]).write(3, b.detach())
    ta.stack().sum().backward()
    assert a.grad.tolist() == [1.0] * 3 and b.grad is None and plain.grad is None


def test_untracked_arrays_build_no_graph(backend):
    ta = TensorArray(F64, size=2).write(0, torch.ones(2, dtype=F64)).write(1, torch.ones(2, dtype=F64))
    assert not ta.flow.requires_grad and not ta.stack().requires_grad
    x = leaves((2,))[0]
    with torch.no_grad():
        tracked = TensorArray(F64, size=1).write(0, x)
        assert tracked.read(0).grad_fn is None


def test_clear_after_read(backend):
    x = leaves((2, 3))[0]
    ta = TensorArray(F64, size=2).unstack(x)
    first = ta.read(0)
    with pytest.raises(InvalidArgumentError, match="cleared after a previous read"):
        ta.read(0)
    (first * 3).sum().backward()
    assert x.grad.tolist() == [[3.0] * 3, [0.0] * 3]


# -- aliasing ---------------------------------------------------------------------------------

def test_inplace_on_returned_tensors_never_changes_the_array(backend):
    x = torch.arange(12, dtype=F64, device=torch_device()).reshape(4, 3)
    ta = TensorArray(F64, size=4, clear_after_read=False).unstack(x)
    ragged = TensorArray(F64, size=2, clear_after_read=False, infer_shape=False).split(x, [1, 3])
    for out in (ta.read(2), ta.gather([3, 1]), ta.gather(range(4)), ta.stack(), ragged.concat(), ragged.read(1)):
        out.mul_(7)
    assert torch.equal(ta.stack(), x) and torch.equal(ragged.concat(), x)
    assert torch.equal(ta.read(2), x[2])


def test_inplace_on_written_tensors_never_changes_the_array(backend):
    x = torch.arange(6, dtype=F64, device=torch_device()).reshape(2, 3)
    kept = x.clone()
    ta = TensorArray(F64, size=2, clear_after_read=False).write(0, x[0]).write(1, x[1])
    scattered = TensorArray(F64, size=2, clear_after_read=False).unstack(x)
    x.mul_(7)
    assert torch.equal(ta.stack(), kept) and torch.equal(scattered.stack(), kept)


def test_a_flow_changed_in_place_changes_no_other_array(backend):
    x = torch.ones(2, dtype=F64, device=torch_device())
    flow = TensorArray(F64, size=1).write(0, x).flow
    flow.add_(3)
    flow.requires_grad_()
    other = TensorArray(F64, size=1).write(0, x)
    assert float(other.flow) == 0.0
    value = other.read(0)
    assert not value.requires_grad and value.grad_fn is None


def _indices(kind, values):
    """``values`` as a caller passes them: a list, an int64 array, or a torch tensor (0-d for one index)."""
    if kind == "list":
        return list(values)
    if kind == "numpy":
        return np.array(values, np.int64)
    return torch.tensor(values, device=torch_device())


def _overwrite(indices, value):
    """What a caller's loop may do to its indices after the op: change them in place."""
    if isinstance(indices, list) or indices.ndim:
        indices[0] = value
    else:
        indices[...] = value            # a 0-d index (a loop counter), in place


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("kind", ["list", "numpy", "torch"])
@pytest.mark.parametrize("op", ["read", "gather", "scatter", "split"])
def test_indices_changed_after_the_op_do_not_move_its_gradient(backend, mode, kind, op):
    w = weights(3, 2)

    def ours(x):
        if op == "read":
            ta = TensorArray(F64, size=3, mode=mode).unstack(x)
            index = _indices(kind, [0]) if kind == "list" else _indices(kind, 0)
            value = ta.read(index[0] if kind == "list" else index)
            _overwrite(index, 2)
            return nonlinear(value, w[0])
        if op == "gather":
            ta = TensorArray(F64, size=3, mode=mode).unstack(x)
            indices = _indices(kind, [0, 1])
            value = ta.gather(indices)
            _overwrite(indices, 2)
            return nonlinear(value, w[:2])
        if op == "scatter":
            indices = _indices(kind, [0, 1, 2])
            ta = TensorArray(F64, size=3, mode=mode).scatter(indices, x)
            _overwrite(indices, 2)
            return nonlinear(ta.stack(), w)
        lengths = _indices(kind, [1, 2])
        ta = TensorArray(F64, size=2, mode=mode, infer_shape=False).split(x.reshape(-1), lengths)
        _overwrite(lengths, 3)
        return nonlinear(ta.concat(), w.reshape(-1)[:3])

    def reference(x):
        if op == "read":
            return nonlinear(x[0], w[0])
        if op == "gather":
            return nonlinear(x[:2], w[:2])
        if op == "scatter":
            return nonlinear(x, w)
        return nonlinear(x.reshape(-1), w.reshape(-1)[:3])

    shape = (3, 1) if op == "split" else (3, 2)
    assert_same_gradients(ours, reference, leaves(shape))


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_a_parameter_written_as_it_is_gets_its_gradient(backend, mode):
    """An nn.Parameter (a torch.Tensor subclass) written or unstacked as it is: a learned initial state."""
    w = weights(3, 2)

    def gradients(use_array):
        h0 = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=F64, device=torch_device()))
        u = torch.nn.Parameter(torch.tensor([[0.5, 1.5], [2.0, -1.0]], dtype=F64, device=torch_device()))
        if use_array:
            ta = TensorArray(F64, size=3, mode=mode).write(0, h0).write(1, h0 * 3)
            stacked = ta.write(2, TensorArray(F64, size=2, mode=mode).unstack(u).stack().sum(0)).stack()
        else:
            stacked = torch.stack([h0, h0 * 3, u.sum(0)])
        nonlinear(stacked, w).backward()
        return h0.grad, u.grad

    for ours, reference in zip(gradients(True), gradients(False)):
        assert torch.allclose(ours, reference, rtol=1e-12, atol=0), (ours, reference)


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("op", ["write", "unstack", "scatter", "split"])
def test_a_value_changed_in_place_before_its_first_read_is_refused(backend, mode, op):
    """The array holds the value as written; the gradient would be the changed tensor's (the
    node that carries it is made at the first read), so that read refuses, as torch refuses a
    saved tensor changed in place."""
    x = leaves((2,))[0]
    y = x * 2
    written = y.detach().clone()
    ta = TensorArray(F64, size=1, mode=mode)
    ta = {"write": lambda: ta.write(0, y), "unstack": lambda: ta.unstack(y[None]),
          "scatter": lambda: ta.scatter([0], y[None]), "split": lambda: ta.split(y, [2])}[op]()
    y.mul_(3)
    read = ta.concat if op == "split" else ta.stack
    with pytest.raises(InvalidArgumentError, match="modified in place after the write"):
        read()
    with torch.no_grad():
        assert torch.equal(read().reshape(-1), written)


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_rows_of_a_buffer_filled_in_place_are_refused_saying_so(backend, mode):
    """Rows of one buffer written as it fills: views share one version counter, so a later row's
    change counts for the earlier rows too (as for tensors autograd saves). The error says so and
    how to write them; clones of the rows give the list model's gradient."""
    x = leaves((3, 2))[0]
    for clone in (False, True):
        buffer = torch.zeros(3, 2, dtype=F64, device=torch_device())
        ta = TensorArray(F64, size=3, mode=mode)
        for t in range(3):
            buffer[t] = x[t] * 2
            ta = ta.write(t, buffer[t].clone() if clone else buffer[t])
        if not clone:
            with pytest.raises(InvalidArgumentError, match="or another view of its memory.*row of a buffer"):
                ta.stack()
            continue
        (grad,) = torch.autograd.grad(ta.stack().sum(), x)
        assert grad.tolist() == [[2.0, 2.0]] * 3


def test_a_tf2_value_changed_in_place_is_named_by_the_list_not_its_storage(backend):
    """In mode tf2 the array named in the error is the user's (tensor_array_name), and no slot of
    its storage is given as the list's: logical slot 0, written twice, is storage slot 1."""
    x = leaves((2,))[0]
    y = x * 2
    ta = TensorArray(F64, size=1, mode="tf2", tensor_array_name="states").write(0, x * 3).write(0, y)
    y.mul_(3)
    with pytest.raises(InvalidArgumentError, match=r"^TensorArray states_\d+: the tensor written to it \(mode 'tf2'\) "
                                                   r"was modified in place after the write"):
        ta.stack()


def test_gradients_are_owned_tensors(backend):
    """Gradients handed to torch are no views of a gradient array: changing them changes nothing."""
    x = leaves((3, 2))[0]
    ta = TensorArray(F64, size=3, clear_after_read=False).unstack(x)
    loss = ta.stack().sum() + ta.read(1).sum()
    loss.backward(retain_graph=True)
    x.grad.mul_(100)
    x.grad = None
    loss.backward()
    assert x.grad.tolist() == [[1.0, 1.0], [2.0, 2.0], [1.0, 1.0]]


# -- dtypes, devices, conversions -------------------------------------------------------------

ALL_DTYPES = [torch.bool, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16,
              torch.uint32, torch.uint64, torch.float16, torch.float32, torch.float64, torch.complex64,
              torch.complex128]


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_every_torch_dtype_round_trips(backend, dtype):
    values = torch.tensor([[0, 1, 1], [1, 0, 1]]).to(dtype)
    ta = TensorArray(dtype, size=2, clear_after_read=False).unstack(values)
    assert ta.dtype is dtype and as_dtype(dtype) == np.dtype(str(dtype).split(".")[1])
    assert torch_dtype(as_dtype(dtype)) is dtype
    # The library itself takes torch dtypes wherever it takes a dtype.
    assert gta.TensorArray(dtype, size=1).dtype == as_dtype(dtype) == gta.dtypes.as_dtype(dtype)
    for out in (ta.stack(), ta.read(1), ta.gather([1, 0])):
        assert out.dtype is dtype and out.device == ta.device
    # values stays on the CPU (the array copies it in): the outputs come back to it to compare.
    assert torch.equal(ta.stack().cpu(), values) and torch.equal(ta.gather([1, 0]).cpu(), values[[1, 0]])


def test_dtype_spellings_and_errors(backend):
    assert TensorArray("float32", size=1).dtype is torch.float32
    assert TensorArray(np.float16, size=1).dtype is torch.float16
    for mode in ("tf1", "tf2"):
        # Spellings the library takes of strings, which torch has no dtype for, refused at once.
        for spelling in ("string", np.object_):
            with pytest.raises(InvalidArgumentError, match=f"Unsupported dtype .*{spelling}"):
                TensorArray(spelling, size=1, mode=mode)
    ta = TensorArray(torch.float64, size=1)
    with pytest.raises(InvalidArgumentError, match="dtype is double but Op is trying to write dtype bfloat16"):
        ta.write(0, torch.ones(2, dtype=torch.bfloat16))
    with pytest.raises(InvalidArgumentError, match="A torch tensor of dtype torch.float8_e4m3fn cannot be stored"):
        ta.write(0, torch.ones(2).to(torch.float8_e4m3fn))
    with pytest.raises(InvalidArgumentError):
        ta.write(0, torch.ones(2, dtype=torch.float32, requires_grad=True))
    assert ta.write(0, torch.ones(2, dtype=F64)).read(0).tolist() == [1.0, 1.0]   # the failed write changed nothing


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("kind", ["sparse", "meta", "nested", "bfloat16"])
def test_indices_lengths_and_sizes_that_are_no_dense_tensors_are_invalid_arguments(backend, mode, kind):
    """A sparse, meta or nested tensor, or one of a dtype NumPy lacks, where an index, indices,
    lengths or a size go: the library's InvalidArgumentError naming the argument, not torch's
    conversion error."""
    def made(values):
        if kind == "sparse":
            return torch.tensor(values).to_sparse()
        if kind == "meta":
            return torch.tensor(values, device="meta")
        if kind == "bfloat16":
            return torch.tensor(values, dtype=torch.bfloat16)
        return torch.nested.nested_tensor([torch.tensor(values if isinstance(values, list) else [values])])

    ta = TensorArray(F64, size=2, clear_after_read=False, mode=mode).unstack(torch.ones(2, 3, dtype=F64))
    calls = {"index": lambda: ta.read(made(1)), "write index": lambda: ta.write(made(1), torch.ones(3, dtype=F64)),
             "indices": lambda: ta.gather(made([1, 0])),
             "scatter indices": lambda: ta.scatter(made([1, 0]), torch.ones(2, 3, dtype=F64)),
             "lengths": lambda: TensorArray(F64, size=2, mode=mode).split(torch.ones(2, 3, dtype=F64), made([1, 1])),
             "size": lambda: TensorArray(F64, size=made(2), mode=mode)}
    for what, call in calls.items():
        with pytest.raises(InvalidArgumentError, match="index|indices|lengths|size|Size"):
            call()
    assert ta.stack().tolist() == [[1.0] * 3] * 2          # nothing changed


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("tracked", [False, True])
def test_gather_of_none_is_the_library_class_s_error(backend, mode, tracked):
    """None for indices: the library class's error (mode tf1 took it for a stack's own marker)."""
    with pytest.raises(InvalidArgumentError) as expected:
        gta.TensorArray("float64", size=2, mode=mode).unstack(np.ones((2, 3))).gather(None)
    values = torch.ones(2, 3, dtype=F64, device=torch_device(), requires_grad=tracked)
    ta = TensorArray(F64, size=2, mode=mode).unstack(values)
    with pytest.raises(InvalidArgumentError) as caught:
        ta.gather(None)
    def unnamed(error):
        return re.sub(r"TensorArrayV[23]_\d+", "NAME", str(error.value))
    assert "int32" in unnamed(expected) and unnamed(caught) == unnamed(expected)
    assert ta.stack().shape == (2, 3)


@pytest.mark.parametrize("dynamic, index", [(False, 5), (True, -1)])
def test_a_write_wrong_twice_raises_the_library_class_error(backend, dynamic, index):
    """A write with a wrong shape and a wrong index, once the element shape is known: the
    library class's error (the shape first, as TF1's Python layer checks it before the op)."""
    def failure(ta, value):
        with pytest.raises(InvalidArgumentError) as raised:
            ta.write(index, value)
        return str(raised.value)

    library = gta.TensorArray("float64", size=2, dynamic_size=dynamic).write(0, np.ones(3))
    ours = TensorArray(F64, size=2, dynamic_size=dynamic).write(0, torch.ones(3, dtype=F64, device=torch_device()))
    expected = failure(library, np.ones(2))
    assert "incompatible" in expected
    text = failure(ours, torch.ones(2, dtype=F64, device=torch_device()))
    assert text.replace(ours.handle.name, "NAME") == expected.replace(library.handle.name, "NAME")
    assert ours.write(1, torch.ones(3, dtype=F64, device=torch_device())).stack().shape == (2, 3)   # nothing changed


def test_size_and_indices_from_tensors(backend):
    ta = TensorArray(torch.int32, size=0, dynamic_size=True).write(torch.tensor(2), torch.tensor([5], dtype=torch.int32))
    size = ta.size()
    assert size.dtype is torch.int32 and size.device.type == "cpu" and int(size) == 3
    assert ta.gather(torch.tensor([2])).tolist() == [[5]]


def test_cpu_values_share_memory_on_the_way_in(backend):
    """A CPU tensor crosses without a copy: its NumPy view is what the library copies from."""
    from gpu_tensorarray.torch.crossing import to_backend

    if backend.name == "cupy":
        pytest.skip("a CPU tensor goes to the GPU by a copy")
    x = torch.arange(4, dtype=torch.float32)
    assert np.shares_memory(to_backend(x, backend), x.numpy())


def test_handle_wrapping_and_grad_array(backend):
    ta = TensorArray(F64, size=2).write(0, torch.ones(3, dtype=F64))
    same = TensorArray(F64, handle=ta.handle, flow=ta.flow)
    assert same.handle is ta.handle and same.flow is ta.flow
    grad = ta.grad("gradients")
    assert grad.dtype is F64 and gta.registry.lookup(grad.handle).is_grad
    grad.close()


@pytest.mark.parametrize("flow, text", [
    ([1.0, 2.0], "flow_in must be a scalar, but had shape: [2]"), ("x", "flow_in must be a float scalar, got 'x'"),
    (torch.ones(2), "flow must be a float scalar tensor"), (torch.tensor(1), "flow must be a float scalar tensor"),
], ids=["list", "str", "vector-tensor", "int-tensor"])
def test_grad_with_a_refused_flow_changes_nothing(backend, flow, text):
    ta = TensorArray(F64, size=0, dynamic_size=True).write(0, torch.ones(3, dtype=F64))
    with pytest.raises(InvalidArgumentError, match=re.escape(text)) as caught:
        ta.grad("gradients", flow=flow)
    assert str(caught.value).endswith(f"(TensorArray {ta.handle.name})")
    assert not gta.registry.lookup(ta.handle).grads         # no gradient array, the size not locked
    ta = ta.write(4, torch.ones(3, dtype=F64))
    grad = ta.grad("gradients", flow=2.5)
    assert float(grad.flow) == 2.5 and int(grad.size()) == 5
    grad.close()


def test_a_wrapper_that_infers_a_shape_leaves_a_ragged_arrays_gradients_alone(backend):
    """A ragged array (infer_shape=False) wrapped afresh (infer_shape=True, TensorFlow's default) and
    written through the wrapper: the wrapper's inferred shape is its own, as in TensorFlow, whose
    gradient functions wrap the handle afresh; the backward takes every slot's shape (it refused the
    other slots' gradients for the wrapper's shape)."""
    x, y, z = leaves((5, 3), (1, 3), (1, 3, 3))
    w1, w3 = weights(2, 3), weights(1, 3, seed=2)

    def program(x, y, z, use_array):
        if not use_array:
            pieces = torch.split(x * 2, [3, 2])
            return nonlinear(pieces[1], w1) + nonlinear(y * 5, w3) + (z * 0).sum()
        ta = TensorArray(F64, size=1, dynamic_size=True, infer_shape=False, element_shape=(None, 3))
        ta = ta.split(x * 2, [3, 2])
        first = ta.read(1)
        ta = ta.write(3, y * 5)
        wrapper = TensorArray(F64, handle=ta.handle, flow=ta.flow).scatter([5], z * 3)   # infers (3, 3)
        return nonlinear(first, w1) + nonlinear(wrapper.read(3), w3)

    assert_same_gradients(lambda *v: program(*v, True), lambda *v: program(*v, False), [x, y, z])


def test_a_handle_wrapped_at_the_current_flow_shares_the_arrays_chain(backend):
    """TensorArray(handle=ta.handle, flow=ta.flow) continues ta's chain (one state per array): its
    writes and ta's are one run, read through either's successor with the list model's gradients;
    a read through the TensorArray that either's later write superseded raises, as through ta."""
    a, b, c = leaves((3,), (3,), (3,))
    w = weights(3, 3)

    def program(a, b, c, use_array):
        if not use_array:
            return nonlinear(torch.stack([a * 2, b * 3, c * 4]), w)
        first = TensorArray(F64, size=3, tensor_array_name="states").write(0, a * 2)
        wrapped = TensorArray(F64, handle=first.handle, flow=first.flow).write(1, b * 3)
        with pytest.raises(InvalidArgumentError, match="slot 1.*Use the TensorArray the write returned"):
            first.read(1)                        # written through the wrapper, after first's flow
        last = TensorArray(F64, handle=wrapped.handle, flow=wrapped.flow).write(2, c * 4)
        with pytest.raises(InvalidArgumentError, match="slot 2"):
            wrapped.gather([2])
        return nonlinear(last.stack(), w)

    assert_same_gradients(lambda *v: program(*v, True), lambda *v: program(*v, False), [a, b, c])


def test_a_handle_wrapped_at_an_older_flow_reads_what_was_written_before_it(backend):
    """At a flow a later write has passed: reading a slot written before that flow is allowed
    (its gradient is right); a slot written after it raises, the wrapper being older than the write."""
    a, b = leaves((3,), (3,))

    def program(a, b, use_array):
        if not use_array:
            return (a * 2).sin().sum() + (b * 3).sum()
        first = TensorArray(F64, size=2, clear_after_read=False).write(0, a * 2)
        flow = first.flow
        second = first.write(1, b * 3)               # pending: flow is still the array's last flow
        older = TensorArray(F64, handle=first.handle, flow=flow)
        with pytest.raises(InvalidArgumentError, match="slot 1"):
            older.read(1)
        return older.read(0).sin().sum() + second.read(1).sum()

    assert_same_gradients(lambda *v: program(*v, True), lambda *v: program(*v, False), [a, b])


def test_a_handle_wrapped_under_no_grad_continues_after_the_pending_writes(backend):
    """Under torch.no_grad a flow asked for leaves the tracked writes pending (no node is made):
    a wrapper at that flow sits after them, as ta does. Its reads of what they wrote have the list
    model's gradients; a wrapper at a flow asked for before them still raises for their slots."""
    a, b = leaves((3,), (3,))

    def program(a, b, use_array):
        if not use_array:
            return (a * 2).sin().sum() + (b * 3).cos().sum()
        ta = TensorArray(F64, size=2, clear_after_read=False)
        before = ta.flow
        ta = ta.write(0, a * 2).write(1, b * 3)
        with torch.no_grad():
            handle, flow = ta.handle, ta.flow
            wrapped = TensorArray(F64, handle=handle, flow=flow)
            older = TensorArray(F64, handle=handle, flow=before)
        with pytest.raises(InvalidArgumentError, match="slot 1"):
            older.read(1)
        return wrapped.read(0).sin().sum() + wrapped.read(1).cos().sum()

    assert_same_gradients(lambda *v: program(*v, True), lambda *v: program(*v, False), [a, b])


def test_device_argument(backend):
    ta = TensorArray(torch.float32, size=1, device="cpu")
    assert gta.registry.lookup(ta.handle).backend.name == "numpy" and ta.device == torch.device("cpu")
    ta = TensorArray(torch.float32, size=1, device=torch.device("cpu"))
    assert gta.registry.lookup(ta.handle).backend.name == "numpy"


def test_cuda_tensors_stay_on_device_and_stream():
    if not torch.cuda.is_available():
        pytest.skip("torch has no usable CUDA device here")
    try:
        gta.get_backend("cupy")
    except gta.errors.UnavailableError as error:
        pytest.skip(f"cupy backend unavailable: {error}")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x = torch.randn(4, 3, device="cuda", dtype=F64, requires_grad=True)
        ta = TensorArray(F64, size=4, clear_after_read=False, device="cuda:0").unstack(x * 2)
        out = ta.gather([1, 1, 3])
        assert out.device == x.device
        out.mul_(7)
        assert torch.equal(ta.stack(), x.detach() * 2)
        ta.gather([1, 1, 3]).sum().backward()
    torch.cuda.synchronize()
    expected = torch.zeros(4, 3, dtype=F64)
    expected[1], expected[3] = 4.0, 2.0
    assert torch.equal(x.grad.cpu(), expected)
    if torch.cuda.device_count() > 1:
        y = torch.ones(2, device="cuda:0", dtype=F64)
        on_one = TensorArray(F64, size=1, device="cuda:1").write(0, y)
        assert on_one.read(0).device == torch.device("cuda:1")


def test_size_zero_concat_of_scalar_elements(backend):
    """A known scalar element shape is passed on as element_shape_except0 [] (known), as
    TensorFlow's class does: a size-0 concat is an empty vector, not an error."""
    ta = TensorArray(torch.float32, size=0, element_shape=[], infer_shape=False)
    value = ta.concat()
    assert value.dtype == torch.float32 and tuple(value.shape) == (0,)


def test_a_users_own_gradient_source_is_never_a_passs(backend):
    """A gradient array the user makes (ta.grad) with a source named like the bridge's, for the
    next passes, is not the one a pass adds into: x gets the list model's gradient."""
    from gpu_tensorarray.torch import autograd

    x = torch.ones(2, dtype=F64, requires_grad=True)
    ta = TensorArray(F64, size=2).write(0, x * 1).write(1, x * 2)
    upcoming = next(autograd._pass_numbers) + 1
    for number in range(upcoming, upcoming + 3):
        ta.grad(f"gradients_torch_{number}").write(0, torch.full((2,), 100.0, dtype=F64))
    ta.stack().sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_deep_copies_are_refused_naming_the_array(backend, mode):
    """copy.deepcopy of a module holding a TensorArray: TypeError naming the array, not
    __new__'s missing argument; copy.copy shares the array."""
    import copy

    class Decoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)
            self.cache = TensorArray(F64, size=2, mode=mode).write(0, torch.ones(2, dtype=F64))

    decoder = Decoder()
    name = decoder.cache._contents.storage._ta.handle.name if mode == "tf2" else decoder.cache.handle.name
    for refused in (lambda: copy.deepcopy(decoder), lambda: copy.deepcopy(decoder.cache)):
        with pytest.raises(TypeError, match=f"TensorArray {name} cannot be deep-copied"):
            refused()
    assert copy.copy(decoder.cache).read(0).tolist() == [1.0, 1.0]


def test_a_write_past_a_size_that_a_backward_pass_fixed_says_why(backend):
    """A backward pass makes the array's gradient array (TensorArrayGradV3), which fixes a dynamic
    array's size, as in TensorFlow: a later write past it raises TensorFlow's error, saying why,
    once (the write's fast path does not chain the op's error to the class's)."""
    x = torch.ones(2, dtype=F64, requires_grad=True)
    ta = TensorArray(F64, size=0, dynamic_size=True).write(0, x * 2)
    ta.stack().sum().backward()
    with pytest.raises(InvalidArgumentError, match="Tried to write to index 1 but array is not resizeable and size "
                                                   "is: 1 .*dynamic_size=True: a gradient array") as raised:
        ta.write(1, x * 3)
    assert raised.value.__context__ is None


def test_an_op_of_the_array_from_a_handler_inside_its_autograd_record_is_refused(backend, monkeypatch):
    """A signal handler or a finaliser that runs while its thread records an op of an array for
    autograd (turning a run of writes into a node, or adding a write to the run) and writes the
    same array, or reads it through its pending writes, is refused before it changes anything
    (FailedPreconditionError): it would break the record (a lost gradient, a wrong one, or torch's
    count error), and must not wait for its own thread (a hang). An op of another array goes on."""
    from gpu_tensorarray.errors import FailedPreconditionError
    from gpu_tensorarray.torch import autograd

    x = torch.ones(4, 2, dtype=F64, requires_grad=True)
    ta = TensorArray(F64, size=4, clear_after_read=False).write(0, x[0] * 1.0).write(1, x[1] * 2.0)
    other = TensorArray(F64, size=2)
    handled = []

    def handler():                                 # what a handler might do, in the recording thread
        with pytest.raises(FailedPreconditionError, match="while this thread was recording another op of it"):
            ta.write(3, x[3] * 5.0)
        with pytest.raises(FailedPreconditionError, match="while this thread was recording another op of it"):
            ta.read(0)
        handled.append(other.write(len(handled), x[3] * 7.0))     # another array: fine

    real = autograd._write_run

    def node_with_a_handler(*args):
        if not handled:
            handler()
        return real(*args)
    monkeypatch.setattr(autograd, "_write_run", node_with_a_handler)
    first = ta.read(0)                           # the run of two writes becomes a node
    monkeypatch.undo()

    class HandlerInAppend(list):                 # a handler among a write's appends
        def append(self, value):
            super().append(value)
            if len(handled) == 1:
                handler()
    later = ta.write(2, x[2] * 3.0)              # pending: a read would make it a node
    later._state.kinds = HandlerInAppend(later._state.kinds)
    later = later.write(3, x[3] * 4.0)
    assert len(handled) == 2
    loss = first.sum() + 10 * later.read(1).sum() + 100 * later.read(2).sum() + 1000 * later.read(3).sum()
    (loss + handled[1].stack().sum()).backward()
    assert x.grad.tolist() == [[1.0, 1.0], [20.0, 20.0], [300.0, 300.0], [4000.0 + 14.0, 4000.0 + 14.0]]
