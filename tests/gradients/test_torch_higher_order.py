"""gpu_tensorarray.torch at second and third order: with create_graph=True the backward runs
as bridge ops that are themselves differentiable, so gradient penalties, Hessian-vector
products and torch.autograd.gradgradcheck through every op (read, gather with repeated
indices, stack, concat of ragged rows, unstack, scatter, split, dynamic growth, a split the
array then outgrew, clear-after-read) equal the same program written with a Python list
(float64, 1e-10 relative). On every backend of the ``backend`` fixture, the tensors built
where the bridge's come out (``torch_device``).

Needs torch: skipped without it, except under CI=true, where a missing torch fails."""


import pytest

from gpu_tensorarray.testing import import_torch, open_array_names

torch = import_torch()
from torch_helpers import opened_since, torch_device  # noqa: E402
from gpu_tensorarray.torch import TensorArray  # noqa: E402
from gpu_tensorarray.torch.autograd import open_passes  # noqa: E402

F64 = torch.float64
RTOL = 1e-10


def weights(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64).to(torch_device())


def curved(value, seed=1):
    """A loss term with a non-zero, element-distinct second derivative."""
    w = weights(*value.shape, seed=seed)
    return (torch.sin(value) * w).sum() + (value ** 3).sum() / 3


# Each program: (ours, reference, input shapes). Both take a parameter tensor ``p`` (whose
# functions are written into the arrays) and return a scalar.

def _read(p):
    ta = TensorArray(F64, size=3, clear_after_read=False)
    ta = ta.write(0, p[0] * 2).write(1, torch.tanh(p[1])).write(2, p[0] * p[1])
    return sum(curved(ta.read(i), seed=i) for i in (2, 0, 1, 2))


def _read_ref(p):
    rows = [p[0] * 2, torch.tanh(p[1]), p[0] * p[1]]
    return sum(curved(rows[i], seed=i) for i in (2, 0, 1, 2))


GATHER = [2, 2, 0, 3, 2, 1, 2]


def _gather(p):
    ta = TensorArray(F64, size=4, clear_after_read=False).scatter([3, 0, 2, 1], torch.sin(p))
    return curved(ta.gather(GATHER))


def _gather_ref(p):
    rows = [None] * 4
    for k, i in enumerate([3, 0, 2, 1]):
        rows[i] = torch.sin(p)[k]
    return curved(torch.stack([rows[i] for i in GATHER]))


def _stack(p):
    ta = TensorArray(F64, size=3)
    for t in range(3):
        ta = ta.write(t, p[t] ** 2 + t)
    return curved(ta.stack())


def _stack_ref(p):
    return curved(torch.stack([p[t] ** 2 + t for t in range(3)]))


LENGTHS = [2, 0, 1, 3]


def _concat_ragged(p):
    ta = TensorArray(F64, size=4, infer_shape=False)
    start = 0
    for i, length in enumerate(LENGTHS):
        ta = ta.write(i, torch.exp(p[start:start + length] / 3))
        start += length
    return curved(ta.concat())


def _concat_ragged_ref(p):
    pieces, start = [], 0
    for length in LENGTHS:
        pieces.append(torch.exp(p[start:start + length] / 3))
        start += length
    return curved(torch.cat(pieces))


def _unstack(p):
    ta = TensorArray(F64, size=3, clear_after_read=False).unstack(p * p)
    return curved(ta.read(1)) + curved(ta.stack(), seed=2)


def _unstack_ref(p):
    rows = list((p * p).unbind(0))
    return curved(rows[1]) + curved(torch.stack(rows), seed=2)


def _split(p):
    ta = TensorArray(F64, size=4, infer_shape=False, clear_after_read=False).split(torch.cos(p), LENGTHS)
    return curved(ta.read(3)) + curved(ta.concat(), seed=3)


def _split_ref(p):
    pieces = torch.split(torch.cos(p), LENGTHS)
    return curved(pieces[3]) + curved(torch.cat(pieces), seed=3)


def _dynamic(p):
    ta = TensorArray(F64, size=0, dynamic_size=True, element_shape=(3,))
    ta = ta.write(0, p[0] ** 2).write(4, p[1] * p[0])     # slots 1-3 read as zeros
    ta = ta.write(6, torch.sinh(p[1]))
    return curved(ta.stack())


def _dynamic_ref(p):
    zeros = torch.zeros(3, dtype=F64, device=torch_device())
    return curved(torch.stack([p[0] ** 2, zeros, zeros, zeros, p[1] * p[0], zeros, torch.sinh(p[1])]))


def _clear_after_read(p):
    ta = TensorArray(F64, size=2).unstack(p ** 2)            # clear_after_read: each slot read once
    first = ta.read(1)
    return curved(first) * curved(ta.read(0), seed=4)


def _clear_after_read_ref(p):
    rows = (p ** 2).unbind(0)
    return curved(rows[1]) * curved(rows[0], seed=4)


def _recurrence(p):
    """Each step reads back what the previous one wrote (a node per write)."""
    ta = TensorArray(F64, size=4, clear_after_read=False).write(0, p[0])
    for t in range(1, 4):
        ta = ta.write(t, torch.tanh(ta.read(t - 1) * p[1] + t))
    return curved(ta.stack())


def _recurrence_ref(p):
    rows = [p[0]]
    for t in range(1, 4):
        rows.append(torch.tanh(rows[t - 1] * p[1] + t))
    return curved(torch.stack(rows))


def _split_then_growth(p):
    """A split's gradient is a concat of the gradient array covering the split's slots only; the
    array then grew, so the next order's gradient array has more slots than that concat has pieces."""
    ta = TensorArray(F64, size=0, dynamic_size=True, infer_shape=False).split(torch.sin(p[:3]), [1, 2])
    ta = ta.write(2, p[3:] * p[0])
    return curved(ta.concat())


def _split_then_growth_ref(p):
    return curved(torch.cat([torch.sin(p[:3]), p[3:] * p[0]]))


def _split_then_growth_reads(p):
    ta = TensorArray(F64, size=0, dynamic_size=True, clear_after_read=False).split(torch.sin(p[:3]), [1, 1, 1])
    ta = ta.write(3, p[3:] * p[0])
    return curved(ta.read(0)) + curved(ta.read(3), seed=2) + curved(ta.read(0), seed=3)


def _split_then_growth_reads_ref(p):
    rows = [torch.sin(p[:3])[0:1], p[3:] * p[0]]
    return curved(rows[0]) + curved(rows[1], seed=2) + curved(rows[0], seed=3)


PROGRAMS = {
    "read": (_read, _read_ref, (2, 3)),
    "gather_repeated": (_gather, _gather_ref, (4, 2)),
    "stack": (_stack, _stack_ref, (3, 2)),
    "concat_ragged": (_concat_ragged, _concat_ragged_ref, (6, 2)),
    "unstack": (_unstack, _unstack_ref, (3, 2)),
    "split": (_split, _split_ref, (6, 2)),
    "dynamic_growth": (_dynamic, _dynamic_ref, (2, 3)),
    "clear_after_read": (_clear_after_read, _clear_after_read_ref, (2, 3)),
    "recurrence": (_recurrence, _recurrence_ref, (2, 3)),
    "split_then_growth": (_split_then_growth, _split_then_growth_ref, (4, 2)),
    "split_then_growth_reads": (_split_then_growth_reads, _split_then_growth_reads_ref, (4, 2)),
}


def _leaf(shape, seed=0):
    value = torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)
    return value.to(torch_device()).requires_grad_()


def assert_close(mine, theirs):
    assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
    scale = max(float(theirs.abs().max()), 1e-300)
    assert float((mine - theirs).abs().max()) <= RTOL * scale, (mine, theirs)


def penalty_grad(program, p):
    """A gradient penalty: d/dp [out + (|d out/dp| - 1)^2]."""
    out = program(p)
    g, = torch.autograd.grad(out, p, create_graph=True)
    total = out + (g.norm() - 1) ** 2
    return torch.autograd.grad(total, p)[0]


def hvp(program, p, v):
    g, = torch.autograd.grad(program(p), p, create_graph=True)
    return torch.autograd.grad((g * v).sum(), p)[0]


def third(program, p, v):
    """d/dp of v . H(p) v: a third derivative, through the second-order graph."""
    g, = torch.autograd.grad(program(p), p, create_graph=True)
    hv, = torch.autograd.grad((g * v).sum(), p, create_graph=True)
    return torch.autograd.grad((hv * v).sum(), p)[0]


@pytest.mark.parametrize("name", PROGRAMS)
def test_gradient_penalty_equals_the_list_model(backend, name):
    ours, reference, shape = PROGRAMS[name]
    p = _leaf(shape)
    assert_close(penalty_grad(ours, p), penalty_grad(reference, p))
    assert open_passes() == 0


@pytest.mark.parametrize("name", PROGRAMS)
def test_hessian_vector_product_equals_the_list_model(backend, name):
    ours, reference, shape = PROGRAMS[name]
    p, v = _leaf(shape), _leaf(shape, seed=7).detach()
    assert_close(hvp(ours, p, v), hvp(reference, p, v))


@pytest.mark.parametrize("name", ["read", "gather_repeated", "split", "recurrence", "split_then_growth"])
def test_third_derivative_equals_the_list_model(backend, name):
    ours, reference, shape = PROGRAMS[name]
    p, v = _leaf(shape), _leaf(shape, seed=7).detach()
    assert_close(third(ours, p, v), third(reference, p, v))


@pytest.mark.parametrize("name", PROGRAMS)
def test_gradgradcheck(backend, name):
    ours, _, shape = PROGRAMS[name]
    p = _leaf(shape)
    assert torch.autograd.gradgradcheck(lambda q: ours(q), (p,), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_weight_gradient_of_an_rnn_with_a_penalty(backend):
    """The issue's example: a gradient penalty on a model whose states go through an array."""
    generator = torch.Generator().manual_seed(0)
    w = torch.randn(3, 3, generator=generator, dtype=F64).to(torch_device()).requires_grad_()
    x = torch.randn(5, 3, generator=generator, dtype=F64).to(torch_device()).requires_grad_()

    def run(use_array):
        h = torch.zeros(3, dtype=F64, device=torch_device())
        states = TensorArray(F64, size=5) if use_array else []
        for t in range(5):
            h = torch.tanh(w @ h + x[t])
            states = states.write(t, h) if use_array else states + [h]
        out = (states.stack() if use_array else torch.stack(states)).pow(2).sum()
        g, = torch.autograd.grad(out, x, create_graph=True)
        return torch.autograd.grad(out + (g.norm() - 1) ** 2, w)[0]

    assert_close(run(True), run(False))


def test_create_graph_passes_close_their_arrays(backend):
    before = open_array_names()
    p = _leaf((2, 3))
    for _ in range(3):
        penalty_grad(_read, p)
        hvp(_split, p.detach().reshape(6, 1).requires_grad_(), torch.ones(6, 1, dtype=F64, device=torch_device()))
    assert open_passes() == 0
    assert not opened_since(before)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
@pytest.mark.parametrize("name", PROGRAMS)
def test_a_gradient_penalty_passes_anomaly_mode(backend, name):
    """Flows carry no value, but anomaly mode checks every gradient a node returns, flows
    included: none may be uninitialised memory, which deterministic mode fills with NaN."""
    ours, reference, shape = PROGRAMS[name]
    p = _leaf(shape)
    deterministic = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with torch.autograd.detect_anomaly(check_nan=True):
            assert_close(penalty_grad(ours, p), penalty_grad(reference, p))
    finally:
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
    assert open_passes() == 0


@pytest.mark.parametrize("op", ["split", "unstack"])
def test_an_empty_piece_differentiates_to_zeros_at_second_order(backend, op):
    """A value the array holds nothing of (an empty split piece, an unstack of no rows) gets zeros,
    which a further order differentiates, as it does the list model's: never torch's "does not
    require grad"."""
    def run(use_array):
        p = _leaf((3,))
        v = (p * 2)[:0]
        if op == "split":
            r = TensorArray(F64, size=1, infer_shape=False).split(v, [0]).read(0) if use_array else v.split([0])[0]
        else:
            r = TensorArray(F64, size=0, element_shape=[3]).unstack(v.reshape(0, 3)).stack() if use_array \
                else v.reshape(0, 3)
        g, = torch.autograd.grad((r ** 3).sum(), p, create_graph=True)
        return torch.autograd.grad(g.sum(), p)[0]

    assert_close(run(True), run(False))
    assert open_passes() == 0
