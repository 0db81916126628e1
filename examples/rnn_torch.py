"""A GRU trained through TensorArrays with torch autograd: no hand-written backward.

The task: read a sequence of unknown length and, at every step, predict the running
mean of the first input feature seen so far. Each training batch has its own length
(drawn at random); the model never knows it: it unstacks the inputs into a dynamic
TensorArray and steps until that array is exhausted (asking the array for its size,
as TensorFlow's dynamic_rnn does), writing each state and each prediction into two
more dynamic TensorArrays, stacked at the end. loss.backward() differentiates the
whole program: torch.nn for the cell, TensorFlow's gradient functions for the arrays.

    python examples/rnn_torch.py                      train 300 steps, print the loss
    python examples/rnn_torch.py --backend emulated   the same with the emulated kernels
    python examples/rnn_torch.py --time               forward+backward per step: ours vs list+stack
"""

import argparse
import pathlib
import sys
import time

import torch
from torch import nn

try:
    import gpu_tensorarray as gta
except ImportError:          # run from a source checkout that is not installed
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    import gpu_tensorarray as gta
from gpu_tensorarray.torch import TensorArray


class RunningMeanModel(nn.Module):
    """A GRU cell and a linear head: [T, B, F] inputs -> ([T, B] predictions, [T, B, H] states)."""

    def __init__(self, features=4, hidden=32, tensor_array=TensorArray):
        super().__init__()
        self.hidden = hidden
        self.tensor_array = tensor_array        # the class the forward uses (a benchmark swaps it)
        self.cell = nn.GRUCell(features, hidden)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        """Through TensorArrays, for a sequence length only the input array knows."""
        dtype = x.dtype
        inputs = self.tensor_array(dtype, size=0, dynamic_size=True).unstack(x)
        states = self.tensor_array(dtype, size=0, dynamic_size=True)
        predictions = self.tensor_array(dtype, size=0, dynamic_size=True)
        h = x.new_zeros((x.shape[1], self.hidden))
        t = 0
        while t < int(inputs.size()):             # until the input array is exhausted
            h = self.cell(inputs.read(t), h)
            states = states.write(t, h)
            predictions = predictions.write(t, self.head(h).squeeze(-1))
            t += 1
        return predictions.stack(), states.stack()

    def forward_list(self, x):
        """The same model with a Python list and torch.stack (the reference)."""
        h = x.new_zeros((x.shape[1], self.hidden))
        states, predictions = [], []
        for x_t in x.unbind(0):
            h = self.cell(x_t, h)
            states.append(h)
            predictions.append(self.head(h).squeeze(-1))
        return torch.stack(predictions), torch.stack(states)


def torch_device(backend):
    """Where the model runs: the GPU of a cupy array (when torch has CUDA), else the CPU."""
    backend = gta.get_backend(backend)
    if backend.name == "cupy" and torch.cuda.is_available():
        return torch.device(backend.device)
    return torch.device("cpu")


def make_batch(generator, batch=16, features=4, min_steps=5, max_steps=20, dtype=torch.float32):
    """(x [T, B, F], target [T, B]): a random length T, target_t = mean of x[:t+1, :, 0]."""
    steps = int(torch.randint(min_steps, max_steps + 1, (), generator=generator))
    x = torch.randn(steps, batch, features, generator=generator, dtype=dtype)
    counts = torch.arange(1, steps + 1, dtype=dtype).unsqueeze(1)
    return x, x[:, :, 0].cumsum(0) / counts


def loss_of(predictions, states, target):
    """Mean squared error of the predictions, plus a small penalty on the states."""
    return ((predictions - target) ** 2).mean() + 1e-3 * (states ** 2).mean()


def train(steps=300, seed=0, backend="numpy", report_every=25, dtype=torch.float32, lr=1e-2):
    """Train with Adam; returns the loss of every step (printing every ``report_every``)."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    device = torch_device(backend)
    model = RunningMeanModel().to(device, dtype)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    losses = []
    with gta.device(backend):
        for step in range(steps):
            x, target = (v.to(device) for v in make_batch(generator, dtype=dtype))
            optimizer.zero_grad()
            loss = loss_of(*model(x), target)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if report_every and (step % report_every == 0 or step == steps - 1):
                print(f"step {step:4d}  T={x.shape[0]:2d}  loss {losses[-1]:.5f}")
    return losses


def gradients(model, x, target, use_tensorarray):
    """d loss / d every parameter and d loss / d x, as a list of tensors."""
    model.zero_grad()
    x = x.detach().clone().requires_grad_()
    forward = model if use_tensorarray else model.forward_list
    loss_of(*forward(x), target).backward()
    return [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]


def max_relative_difference(seed=0, backend="numpy", steps=None):
    """max |ours - list+stack| / max |list+stack| over every gradient, in float64."""
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    device = torch_device(backend)
    model = RunningMeanModel().to(device, torch.float64)
    x, target = (v.to(device) for v in make_batch(generator, dtype=torch.float64, min_steps=steps or 5,
                                                   max_steps=steps or 20))
    with gta.device(backend):
        ours = gradients(model, x, target, True)
    reference = gradients(model, x, target, False)
    return max(float((a - b).abs().max() / b.abs().max()) for a, b in zip(ours, reference))


def time_step(model, x, target, use_tensorarray):
    """Seconds for one forward+backward."""
    forward = model if use_tensorarray else model.forward_list
    start = time.perf_counter()
    model.zero_grad()
    loss_of(*forward(x), target).backward()
    if x.is_cuda:
        torch.cuda.synchronize(x.device)
    return time.perf_counter() - start


def time_both(backend="numpy", steps=20, batch=16, repeats=20, threads=1):
    """(ours, list+stack): the best forward+backward seconds per training step of ``repeats``,
    the two timed alternately, same model and batch, with ``threads`` torch threads (one suits
    these small tensors and a shared machine)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return _time_both(backend, steps, batch, repeats)
    finally:
        torch.set_num_threads(previous)


def _time_both(backend, steps, batch, repeats):
    torch.manual_seed(0)
    device = torch_device(backend)
    model = RunningMeanModel().to(device)
    generator = torch.Generator().manual_seed(0)
    x, target = (v.to(device) for v in make_batch(generator, batch=batch, min_steps=steps, max_steps=steps))
    ours, reference = [], []
    with gta.device(backend):
        for round_ in range(repeats + 1):          # alternately, so a slow moment hits both; round 0 warms up
            mine, theirs = time_step(model, x, target, True), time_step(model, x, target, False)
            if round_:
                ours.append(mine)
                reference.append(theirs)
    return min(ours), min(reference)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="numpy", help="numpy | emulated | cupy (default numpy)")
    parser.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    parser.add_argument("--time", action="store_true", help="time forward+backward per step instead of training")
    args = parser.parse_args(argv)
    if args.time:
        ours, reference = time_both(args.backend)
        print(f"backend {args.backend}: GRU hidden 32, T=20, batch 16, float32, 1 torch thread: forward+backward per step "
              f"{ours * 1e3:.2f} ms with TensorArrays, {reference * 1e3:.2f} ms with a list and torch.stack "
              f"({ours / reference:.2f}x)")
        return 0
    losses = train(args.steps, backend=args.backend)
    print(f"loss: first {losses[0]:.5f}, last {losses[-1]:.5f}")
    difference = max_relative_difference(backend=args.backend)
    print(f"gradients vs the list+torch.stack model (float64): max relative difference {difference:.2e}")
    return 0 if losses[-1] < losses[0] and difference <= 1e-10 else 1


if __name__ == "__main__":
    sys.exit(main())
