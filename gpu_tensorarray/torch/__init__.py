"""PyTorch autograd through TensorArrays.

    import torch
    from gpu_tensorarray.torch import TensorArray

    states = TensorArray(torch.float32, size=0, dynamic_size=True)
    states = states.write(0, h)          # h: a torch tensor, requires_grad welcome
    loss = states.stack().sum()
    loss.backward()                      # h.grad, through TensorArrayGradV3 arrays

``TensorArray`` has the class API of ``gpu_tensorarray.TensorArray`` (TF1 V3 rules:
write returns a new TensorArray sharing the handle; ``mode="tf2"``: a list's rules);
values go in and come out as torch tensors, on the array's device. Outputs of
read/gather/stack/concat are tracked by autograd; values given to write/scatter/
unstack/split receive gradients, computed by TensorFlow's gradient rules through
gradient arrays of a source unique to each backward pass, at any order
(create_graph=True). docs/torch.md is the guide.

Needs PyTorch (``pip install "gpu_tensorarray[torch]"``; README, "PyTorch autograd");
``import gpu_tensorarray`` never imports torch, only this module does.
"""

try:
    import torch as _torch  # noqa: F401
except ModuleNotFoundError as error:       # say what to install, not just what is missing
    if error.name != "torch":
        raise
    # ModuleNotFoundError, as Python's own for a missing module (pytest.importorskip skips on it).
    raise ModuleNotFoundError(
        "gpu_tensorarray.torch needs PyTorch: pip install 'gpu_tensorarray[torch]' (on Linux, a CPU build: "
        "pip install torch --index-url https://download.pytorch.org/whl/cpu)", name="torch") from error

import importlib.util  # noqa: E402
import sys  # noqa: E402

from .crossing import as_dtype, torch_dtype  # noqa: E402
from .tensor_array import TensorArray  # noqa: E402

__all__ = ["TensorArray", "as_dtype", "torch_dtype"]


# torch.compile: Dynamo must run the package's code as it is, each op a graph break,
# not trace it (it would turn the library's NumPy calls into torch ops). Dynamo skips
# the files of the packages its trace_rules.add names; importing Dynamo here would cost
# seconds on every import, so the package is added when torch.compile first loads it.

def _skip_in(trace_rules):
    trace_rules.add(__name__.partition(".")[0])


class _WhenDynamoLoads:
    """A meta path finder that only watches for torch._dynamo.trace_rules, once."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torch._dynamo.trace_rules":
            return None
        sys.meta_path.remove(cls)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run = spec.loader.exec_module

            def exec_module(module):
                run(module)
                _skip_in(module)
            spec.loader.exec_module = exec_module
        return spec


if "torch._dynamo.trace_rules" in sys.modules:
    _skip_in(sys.modules["torch._dynamo.trace_rules"])
elif _WhenDynamoLoads not in sys.meta_path:
    sys.meta_path.insert(0, _WhenDynamoLoads)
