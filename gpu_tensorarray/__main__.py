"""Command line: ``python -m gpu_tensorarray info | demo``."""

import argparse
import platform
import sys

import numpy as np

import gpu_tensorarray as gta
from gpu_tensorarray import raw_ops


def info(args):
    print(f"gpu_tensorarray {gta.__version__} (Python {platform.python_version()}, NumPy {np.__version__})")
    print("backends:")
    for name, problem in gta.available_backends().items():
        print(f"  {name:9s} {'available' if problem is None else 'unavailable: ' + problem}")
    name, reason = gta.default_backend()
    print(f"default backend: {name} ({reason})")
    print(f"accumulation: {gta.get_accumulation()}")
    return 0


def demo(args):
    """A dynamic loop written forward, then two gradient computations that each
    accumulate into their own gradient array."""
    backend = gta.get_backend(args.backend)
    with gta.device(backend):
        print(f"backend: {backend.name} on {backend.device}")
        # Forward: a loop whose trip count depends on the data, into a dynamic array.
        ta = gta.TensorArray("float32", size=0, dynamic_size=True, clear_after_read=False, element_shape=(4,))
        state = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
        steps = 0
        while np.abs(state).sum() < 100.0:
            state = (1.5 * state + 1.0).astype(np.float32)
            ta = ta.write(steps, state)
            steps += 1
        size = int(gta.to_numpy(ta.size()))
        print(f"forward: the loop ran {steps} steps; the dynamic array grew to size {size}")

        # Gradient computation 1 (source "gradients"): loss1 = sum_t (t + 1) * sum(h_t).
        # Each forward read's gradient writes d loss1 / d read into the grad array.
        grad1 = ta.grad("gradients")
        for t in range(size):
            grad1 = grad1.write(t, np.full(4, t + 1.0, np.float32))
        print(f"grad array {grad1.handle.name!r} created; forward dynamic_size is now "
              f"{gta.registry.lookup(ta.handle).dynamic_size} (size locked at {size})")
        try:
            ta.write(size, state)
        except gta.errors.InvalidArgumentError as error:
            print(f"  a forward write past the locked size fails: {error}")

        # Gradient computation 2 (source "gradients_1"): loss2 = sum(h_0) + sum(h_0) + 2 * sum(h_last).
        # Two reads of slot 0 mean two gradient writes there: they aggregate (add).
        grad2 = ta.grad("gradients_1")
        grad2 = grad2.write(0, np.ones(4, np.float32))
        grad2 = grad2.write(0, np.ones(4, np.float32))
        grad2 = grad2.write(size - 1, np.full(4, 2.0, np.float32))
        same = ta.grad("gradients").handle is grad1.handle
        print(f"grad array {grad2.handle.name!r} is separate; asking for 'gradients' again returns the same "
              f"array: {same}")

        # The forward writes' gradients read each accumulator once.
        d1 = gta.to_numpy(grad1.stack())[:, 0]
        d2 = gta.to_numpy(grad2.stack())[:, 0]
        expected1 = np.arange(1, size + 1, dtype=np.float32)
        expected2 = np.zeros(size, np.float32)
        expected2[0] += 2.0
        expected2[-1] += 2.0
        print(f"d loss1 / d h_t (first column), accumulator 'gradients':   {d1}")
        print(f"d loss2 / d h_t (first column), accumulator 'gradients_1': {d2}")
        ok = np.array_equal(d1, expected1) and np.array_equal(d2, expected2)
        print(f"nothing double counted: {ok} (each accumulator holds only its own computation's writes; "
              f"slot 0 of 'gradients_1' summed its two writes to {d2[0]})")
        for handle in (grad1.handle, grad2.handle, ta.handle):
            raw_ops.TensorArrayCloseV3(handle)
        print(f"after close: {gta.stats()['live_arrays']} arrays open")
        return 0 if ok else 1


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpu_tensorarray", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("info", help="version, backends available, the default and why").set_defaults(run=info)
    demo_parser = commands.add_parser("demo", help="a dynamic loop and two gradient computations")
    demo_parser.add_argument("--backend", default=None, help="numpy | emulated | cupy (default: automatic)")
    demo_parser.set_defaults(run=demo)
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except gta.errors.OpError as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
