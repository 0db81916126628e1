"""torch.compile over a model that uses gpu_tensorarray.torch: Dynamo runs the bridge's ops
as they are (a graph break around each) and compiles the torch code between them (outside
loops: a frame with a graph break in a loop runs eagerly, Dynamo's rule); fullgraph=True is
refused at compile time, before any op runs; the
gradients equal the uncompiled list model's, also when compiled autograd runs the backward
pass. Importing the bridge never imports Dynamo.

Needs torch: skipped without it, except under CI=true, where a missing torch fails."""

import subprocess
import sys

import pytest

from gpu_tensorarray.errors import UnimplementedError
from gpu_tensorarray.testing import import_torch

torch = import_torch()
from torch_helpers import torch_device  # noqa: E402
from gpu_tensorarray.torch import TensorArray  # noqa: E402
from gpu_tensorarray.torch import autograd  # noqa: E402
from gpu_tensorarray.torch.autograd import open_passes  # noqa: E402
from torch._dynamo import compiled_autograd, trace_rules  # noqa: E402

# CuPy's arrays are compiled code, which Dynamo runs rather than traces; the CuPy stand-in
# (tests/cupy_standin.py) is Python, so it is skipped to stay as opaque as the real one.
trace_rules.add("cupy_standin")

F64 = torch.float64


def _model(cell, x, use_array):
    h = x.new_zeros((x.shape[1], cell.hidden_size))
    if not use_array:
        states = []
        for t in range(x.shape[0]):
            h = cell(x[t], h)
            states.append(h)
        return (torch.stack(states) ** 2).mean()
    inputs = TensorArray(x.dtype, size=x.shape[0]).unstack(x)
    states = TensorArray(x.dtype, size=x.shape[0])
    for t in range(x.shape[0]):
        h = cell(inputs.read(t), h)
        states = states.write(t, h)
    return (states.stack() ** 2).mean()


@pytest.mark.parametrize("compiler", ["eager", "aot_eager", "inductor"])
def test_compiled_model_has_the_list_models_gradients(backend, compiler):
    torch.manual_seed(0)
    cell = torch.nn.RNNCell(4, 8).to(torch_device(), F64)
    x = torch.randn(5, 3, 4, dtype=F64, generator=torch.Generator().manual_seed(1)).to(torch_device())
    reference = torch.autograd.grad(_model(cell, x, False), list(cell.parameters()))
    compiled = torch.compile(lambda x: _model(cell, x, True), backend=compiler)
    for _ in range(2):                           # compiled, then from the cache
        grads = torch.autograd.grad(compiled(x), list(cell.parameters()))
        for mine, theirs in zip(grads, reference):
            assert float((mine - theirs).abs().max()) <= 1e-12 * float(theirs.abs().max())


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_torchscript_tracing_and_torch_export_are_refused_with_the_librarys_errors(mode):
    """torch.jit.trace records none of the array's ops (a traced module, unchecked, returned the example
    input's values for every input): refused as the array is made. torch.export traces with FakeTensors,
    which hold no data: refused as such a tensor is written, as sparse and meta tensors are."""
    import gpu_tensorarray as gta

    class Stacked(torch.nn.Module):
        def forward(self, x):
            return TensorArray(x.dtype, size=x.shape[0], mode=mode).unstack(x * 2).stack()

    x = torch.ones(2, 3, dtype=F64)
    with pytest.raises(UnimplementedError, match="torch.jit.trace"):
        torch.jit.trace(Stacked(), (x,), check_trace=False)
    with pytest.raises(gta.errors.InvalidArgumentError, match="tensor subclass .*cannot be stored"):
        torch.export.export(Stacked(), (x,))
    assert torch.equal(Stacked()(x), x * 2)


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
def test_fullgraph_is_refused_at_compile_time_before_any_op_runs(backend, mode):
    ta = TensorArray(F64, size=2, mode=mode)
    value = torch.ones(3, dtype=F64, device=torch_device())

    def step(value):
        return ta.write(0, value * 2).read(0) + 1

    with pytest.raises(torch._dynamo.exc.Unsupported, match="marked as skipped"):
        torch.compile(step, fullgraph=True, backend="eager")(value)
    assert float(step(value).sum()) == 9.0      # under TF1 rules: slot 0 was never written (else refused)


def _inputs_model(w, x, use_array, mode="tf1"):
    """An Elman recurrence whose inputs are read step by step (each input flow followed by
    several reads), then a ragged split and its concat: list + torch.stack / torch.cat, or arrays."""
    h = x.new_zeros(x.shape[1])
    if not use_array:
        states = []
        for t in range(x.shape[0]):
            h = torch.tanh(h @ w + x[t])
            states.append(h)
        flat = torch.stack(states).reshape(-1)
        return (torch.stack(states) ** 2).mean() + (torch.cat([flat[:5] * 2, flat[5:] * 3]) ** 3).sum()
    inputs = TensorArray(x.dtype, size=x.shape[0], mode=mode).unstack(x)
    states = TensorArray(x.dtype, size=x.shape[0], mode=mode)
    for t in range(x.shape[0]):
        h = torch.tanh(h @ w + inputs.read(t))
        states = states.write(t, h)
    stacked = states.stack()
    pieces = TensorArray(x.dtype, size=2, mode=mode, infer_shape=False).split(stacked.reshape(-1), [5, 7])
    return (stacked ** 2).mean() + (torch.cat([pieces.read(0) * 2, pieces.read(1) * 3]) ** 3).sum()


@pytest.mark.parametrize("mode", ["tf1", "tf2"])
@pytest.mark.parametrize("enable", ["context", "config"])
def test_compiled_autograd_gives_the_list_models_gradients(enable, mode):
    """Compiled autograd sums the flow gradients of reads that follow one flow with torch.add
    (a bare TypeError on None before), and each bridge node's backward runs as it is. On the
    default backend only: each capture takes seconds (a graph break per bridge node)."""
    generator = torch.Generator().manual_seed(2)
    w = torch.randn(3, 3, dtype=F64, generator=generator).to(torch_device()).requires_grad_()
    x = torch.randn(4, 3, dtype=F64, generator=generator).to(torch_device()).requires_grad_()
    reference = torch.autograd.grad(_inputs_model(w, x, False), (w, x))
    torch._dynamo.reset()
    captures = torch._dynamo.utils.counters["compiled_autograd"]
    captured = captures["captures"]
    if enable == "context":                      # the context manager: one capture
        with compiled_autograd._enable(torch.compile(backend="eager")):
            _inputs_model(w, x, True, mode).backward()
        runs = [(w.grad, x.grad)]
    else:                                        # the config flag: captured, then from the cache
        with torch._dynamo.config.patch(compiled_autograd=True):
            step = torch.compile(lambda: _inputs_model(w, x, True, mode).backward(), backend="aot_eager")
            runs = []
            for _ in range(2):
                w.grad = x.grad = None
                step()
                runs.append((w.grad, x.grad))
    assert captures["captures"] > captured       # the backward ran as a compiled autograd graph
    for grads in runs:
        for mine, theirs in zip(grads, reference):
            assert float((mine - theirs).abs().max()) <= 1e-12 * float(theirs.abs().max())
    assert open_passes() == 0


def test_a_node_failing_under_compiled_autograd_raises_the_librarys_error(monkeypatch):
    """Should a bridge node's backward fail under compiled autograd with an error of torch or
    Python (a torch whose compiled autograd ran it on fake tensors), UnimplementedError names the
    array and the op and says what to do, the bare error its cause; an eager pass lets it through."""
    def broken(*args):
        raise TypeError("simulated")

    monkeypatch.setattr(autograd, "_value_grads", broken)
    x = torch.ones(2, 3, dtype=F64, requires_grad=True)

    def loss():
        ta = TensorArray(F64, size=2, tensor_array_name="states").unstack(x * 2)
        return ta, (ta.stack() ** 2).sum()

    torch._dynamo.reset()
    ta, out = loss()
    with compiled_autograd._enable(torch.compile(backend="eager")):
        with pytest.raises(UnimplementedError, match=rf"TensorArray {ta.handle.name}'s scatter\(\[0, 1\], \.\.\.\) "
                                                     r"or unstack\(\.\.\.\) failed under compiled autograd "
                                                     r"\(TypeError: simulated\).*without compiled autograd") as caught:
            out.backward()
    assert isinstance(caught.value.__cause__, TypeError)
    assert open_passes() == 0
    with pytest.raises(TypeError, match="simulated"):
        loss()[1].backward()
    assert open_passes() == 0


def test_importing_the_bridge_does_not_import_dynamo():
    code = ("import sys, gpu_tensorarray.torch; assert 'torch._dynamo' not in sys.modules; "
            "import torch._dynamo.trace_rules as rules, gpu_tensorarray; "
            "assert rules.check_file(gpu_tensorarray.__file__).skipped")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
