"""What a few microseconds of Python cost inside an RNN's loop, against the same work timed alone.

    python bench/in_loop_cost.py

The Elman cell of bench/torch_elman.py (hidden 32, batch 16, 4 features, one torch thread)
steps T=200 times with a list, four ways, alternated round by round in one process (the
median of 80 rounds): as it is; calling a pure-Python function (40 dict stores) after each
cell; copying each input into a new tensor through NumPy before the cell (a bridge read's
work); copying each state into a NumPy row after the cell (a write's). The same three
pieces of work are then timed alone, in a tight loop. A step's cost over the plain loop,
per time step, against the work's cost alone, says how much dearer per-op Python work is
between a model's torch ops than in a microbenchmark: what the TensorArray ops of a training
step pay (docs/performance.md).
"""

import argparse
import statistics
import time

import numpy as np
import torch

STEPS, BATCH, FEATURES, HIDDEN = 200, 16, 4, 32


def dict_stores():
    stored = {}
    for i in range(40):
        stored[i] = i


def main(argv=None):
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    cell = torch.nn.RNNCell(FEATURES, HIDDEN)
    x = torch.randn(STEPS, BATCH, FEATURES)
    rows = np.zeros((STEPS, BATCH, HIDDEN), np.float32)
    h0 = torch.randn(BATCH, HIDDEN, requires_grad=True)
    x0 = x[0]

    def copy_in(x_t):
        return torch.from_numpy(x_t.numpy().copy())

    def copy_out(t, h):
        rows[t] = h.numpy(force=True)

    def forward(how):
        h = x.new_zeros((BATCH, HIDDEN))
        states = []
        for t, x_t in enumerate(x.unbind(0)):
            if how == "copy in":
                x_t = copy_in(x_t)
            h = cell(x_t, h)
            states.append(h)
            if how == "dict stores":
                dict_stores()
            elif how == "copy out":
                copy_out(t, h)
        return torch.stack(states)

    ways = ("plain", "dict stores", "copy in", "copy out")
    times = {how: [] for how in ways}
    for _ in range(81):                              # round 0 warms up
        for how in ways:
            start = time.perf_counter()
            forward(how)
            times[how].append(time.perf_counter() - start)
    step = {how: statistics.median(t[1:]) / STEPS for how, t in times.items()}
    alone = {"dict stores": dict_stores, "copy in": lambda: copy_in(x0), "copy out": lambda: copy_out(0, h0)}
    print(f"plain loop: {step['plain'] * 1e6:.1f} us per time step (cell and append)")
    for how, work in alone.items():
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(10000):
                work()
            best = min(best, (time.perf_counter() - start) / 10000)
        added = step[how] - step["plain"]
        print(f"{how:12s} alone {best * 1e6:5.2f} us; in the loop +{added * 1e6:5.2f} us per time step "
              f"({added / best:.1f}x)")


if __name__ == "__main__":
    main()
