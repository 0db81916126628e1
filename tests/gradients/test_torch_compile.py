"""torch.compile over a model that uses gpu_tensorarray.torch: Dynamo runs the bridge's ops
as they are (a graph break around each) and compiles the torch code between them; the
gradients equal the uncompiled list model's. Importing the bridge never imports Dynamo.

Needs torch: skipped without it, except under CI=true, where a missing torch fails."""

import subprocess
import sys

import pytest

from gpu_tensorarray.testing import import_torch

torch = import_torch()
from torch_helpers import torch_device  # noqa: E402
from gpu_tensorarray.torch import TensorArray  # noqa: E402
from torch._dynamo import trace_rules  # noqa: E402

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


def test_importing_the_bridge_does_not_import_dynamo():
    code = ("import sys, gpu_tensorarray.torch; assert 'torch._dynamo' not in sys.modules; "
            "import torch._dynamo.trace_rules as rules, gpu_tensorarray; "
            "assert rules.check_file(gpu_tensorarray.__file__).skipped")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
