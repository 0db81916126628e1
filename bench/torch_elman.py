"""An Elman RNN's training step (forward + backward of a loss on the stacked states) through
gpu_tensorarray.torch, against the same model with a Python list and torch.stack, with
torch_floor.py's FloorTensorArray (the least a TensorArray of this design costs: the same
copies and autograd nodes, none of the checks), and with TensorFlow 2's tf.function +
tf.TensorArray and JAX's jit(grad(lax.scan)) where installed.

    python bench/torch_elman.py                     T=20 and T=200, a table
    python bench/torch_elman.py --json out.json     the same, and the figures as JSON

One torch thread (torch.set_num_threads(1)), hidden 32, batch 16, 4 features, float32. Each
figure is the median of ``--repeats`` timed steps; the peers run alternately, round by round,
in one process, so a slower moment of the machine falls on all of them. The per-op cost is
(ours - list) / (TensorArray ops per step): what one TensorArray op adds, forward and
backward together, over the list's append and index (and the same for the floor).
"""

import argparse
import json
import pathlib
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import gpu_tensorarray as gta  # noqa: E402
from gpu_tensorarray.torch import TensorArray  # noqa: E402
from bench.torch_floor import FloorTensorArray  # noqa: E402

HIDDEN, BATCH, FEATURES = 32, 16, 4


class Elman(torch.nn.Module):
    """h_t = tanh(W x_t + U h_{t-1} + b); the inputs read from a TensorArray, the states written to one."""

    def __init__(self, tensor_array=TensorArray):
        super().__init__()
        self.cell = torch.nn.RNNCell(FEATURES, HIDDEN)
        self.tensor_array = tensor_array

    def forward(self, x):
        steps = x.shape[0]
        inputs = self.tensor_array(x.dtype, size=steps).unstack(x)
        states = self.tensor_array(x.dtype, size=steps)
        h = x.new_zeros((x.shape[1], HIDDEN))
        for t in range(steps):
            h = self.cell(inputs.read(t), h)
            states = states.write(t, h)
        return states.stack()

    def forward_list(self, x):
        h = x.new_zeros((x.shape[1], HIDDEN))
        states = []
        for x_t in x.unbind(0):
            h = self.cell(x_t, h)
            states.append(h)
        return torch.stack(states)


def loss_of(states):
    return (states ** 2).mean()


def ops_per_step(steps):
    """TensorArray ops in one forward: unstack, T reads, T writes, stack."""
    return 2 * steps + 2


def torch_step(model, x, forward, split):
    """One training step of ``forward`` (the model, or its forward_list); it adds its
    forward's and backward's seconds to ``split``."""

    def step():
        model.zero_grad(set_to_none=True)
        start = time.perf_counter()
        loss = loss_of(forward(x))
        middle = time.perf_counter()
        loss.backward()
        split.append((middle - start, time.perf_counter() - middle))
    return step


def tensorflow_step(model, x):
    """The same weights in TensorFlow 2: tf.function over a tf.while_loop writing a tf.TensorArray."""
    try:
        import tensorflow as tf
    except ImportError:
        return None
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    w_ih = tf.Variable(model.cell.weight_ih.detach().numpy().T)
    w_hh = tf.Variable(model.cell.weight_hh.detach().numpy().T)
    bias = tf.Variable((model.cell.bias_ih + model.cell.bias_hh).detach().numpy())
    xs = tf.constant(x.numpy())
    steps = x.shape[0]

    @tf.function
    def train_step(xs):
        with tf.GradientTape() as tape:
            inputs = tf.TensorArray(tf.float32, size=steps).unstack(xs)
            states = tf.TensorArray(tf.float32, size=steps)
            h = tf.zeros((BATCH, HIDDEN))
            for t in tf.range(steps):
                h = tf.tanh(tf.matmul(inputs.read(t), w_ih) + tf.matmul(h, w_hh) + bias)
                states = states.write(t, h)
            loss = tf.reduce_mean(states.stack() ** 2)
        return tape.gradient(loss, [w_ih, w_hh, bias])

    train_step(xs)                                   # trace once, outside the timing
    return lambda: [g.numpy() for g in train_step(xs)]


def jax_step(model, x):
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    params = (jnp.asarray(model.cell.weight_ih.detach().numpy().T), jnp.asarray(model.cell.weight_hh.detach().numpy().T),
              jnp.asarray((model.cell.bias_ih + model.cell.bias_hh).detach().numpy()))
    xs = jnp.asarray(x.numpy())

    def loss(params, xs):
        w_ih, w_hh, bias = params

        def cell(h, x_t):
            h = jnp.tanh(x_t @ w_ih + h @ w_hh + bias)
            return h, h
        _, states = jax.lax.scan(cell, jnp.zeros((BATCH, HIDDEN)), xs)
        return jnp.mean(states ** 2)

    grad = jax.jit(jax.grad(loss))
    jax.block_until_ready(grad(params, xs))
    return lambda: jax.block_until_ready(grad(params, xs))


PEERS = ("list", "ours", "floor", "tensorflow", "jax")


def measure(steps, repeats, peers=PEERS):
    torch.manual_seed(0)
    model = Elman()
    floor = Elman(FloorTensorArray)
    floor.load_state_dict(model.state_dict())
    x = torch.randn(steps, BATCH, FEATURES, generator=torch.Generator().manual_seed(0))
    splits = {"list": [], "ours": [], "floor": []}
    makers = {"list": lambda: torch_step(model, x, model.forward_list, splits["list"]),
              "ours": lambda: torch_step(model, x, model, splits["ours"]),
              "floor": lambda: torch_step(floor, x, floor, splits["floor"]),
              "tensorflow": lambda: tensorflow_step(model, x), "jax": lambda: jax_step(model, x)}
    runs = {name: makers[name]() for name in peers}
    runs = {name: run for name, run in runs.items() if run is not None}
    for run in runs.values():                        # warm up
        for _ in range(3):
            run()
    times = {name: [] for name in runs}
    for _ in range(repeats):                         # alternately, round by round
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    medians = {name: statistics.median(t) for name, t in times.items()}
    ops = ops_per_step(steps)
    timed = [name for name in splits if splits[name]]
    forward = {name: statistics.median(pair[0] for pair in splits[name][-repeats:]) for name in timed}
    backward = {name: statistics.median(pair[1] for pair in splits[name][-repeats:]) for name in timed}
    row = {"T": steps, "seconds": medians,
           "ratio_to_list": {name: medians[name] / medians["list"] for name in medians},
           "tensorarray_ops_per_step": ops,
           "us_per_tensorarray_op": (medians["ours"] - medians["list"]) / ops * 1e6,
           "us_per_tensorarray_op_forward": (forward["ours"] - forward["list"]) / ops * 1e6,
           "us_per_tensorarray_op_backward": (backward["ours"] - backward["list"]) / ops * 1e6}
    if "floor" in medians:
        row["us_per_tensorarray_op_floor"] = (medians["floor"] - medians["list"]) / ops * 1e6
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[20, 200], help="sequence lengths (default 20 200)")
    parser.add_argument("--repeats", type=int, default=0, help="timed steps per peer (default: 200 at T=20, 40 at T=200)")
    parser.add_argument("--peers", nargs="+", default=list(PEERS), choices=PEERS,
                        help="what to time beside the list model (default: all; a peer not installed is left out)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = []
    with gta.device("numpy"):
        for steps in args.steps:
            repeats = args.repeats or max(20, 4000 // steps)
            row = measure(steps, repeats, ["list"] + [p for p in args.peers if p != "list"])
            rows.append(row)
            cells = "  ".join(f"{name} {row['seconds'][name] * 1e3:.3f} ms ({row['ratio_to_list'][name]:.2f}x)"
                              for name in row["seconds"])
            print(f"Elman T={steps}: {cells}  |  per TensorArray op: {row['us_per_tensorarray_op']:.2f} us "
                  f"(forward {row['us_per_tensorarray_op_forward']:.2f}, backward "
                  f"{row['us_per_tensorarray_op_backward']:.2f})"
                  + (f"; the floor's {row['us_per_tensorarray_op_floor']:.2f} us" if "floor" in row["seconds"] else ""))
    if args.json:
        report = {"benchmark": "torch_elman", "hidden": HIDDEN, "batch": BATCH, "features": FEATURES,
                  "torch_threads": 1, "torch": torch.__version__, "python": platform.python_version(),
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rows": rows}
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
