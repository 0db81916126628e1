"""T. torch autograd: examples/rnn_torch.py's forward+backward per training step (GRU,
hidden 32, T=20, batch 16, float32) through TensorArrays against the same model with a
Python list and torch.stack, in the same run; and what copy-on-export costs a read and a
stack of the torch TensorArray against the library's own (which returns a view).

    python bench/bench_torch_rnn.py [--backend numpy|emulated|cupy]     prints both rows
    python -m pytest bench/bench_torch_rnn.py --benchmark-only            pytest-benchmark

``rnn_step_row(backend)`` and ``export_cost_row(backend)`` return the figures as dicts
(seconds), for the benchmark runner's table. Without torch the pytest rows skip.
"""

import argparse
import importlib.util
import pathlib
import sys
import time

import numpy as np
import pytest

_ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:            # run as a script from a source checkout
    sys.path.insert(0, str(_ROOT))

import gpu_tensorarray as gta  # noqa: E402

STEPS, BATCH = 20, 16


def _example():
    spec = importlib.util.spec_from_file_location("rnn_torch_example", _ROOT / "examples" / "rnn_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _step_case(rnn, backend):
    """(model, x, target) of the timed step, on the backend's torch device."""
    import torch

    torch.manual_seed(0)
    device = rnn.torch_device(backend)
    model = rnn.RunningMeanModel().to(device)
    generator = torch.Generator().manual_seed(0)
    x, target = (v.to(device) for v in rnn.make_batch(generator, batch=BATCH, min_steps=STEPS, max_steps=STEPS))
    return model, x, target


def rnn_step_row(backend="numpy", repeats=20):
    """Best-of-``repeats`` seconds per forward+backward: {"tensorarray", "list_stack", "ratio"},
    and on the numpy backend the same model on torch_floor.py's FloorTensorArray (the least
    a TensorArray of this design costs): "floor", "floor_ratio"."""
    rnn = _example()
    if backend != "numpy":
        ours, reference = rnn.time_both(backend, steps=STEPS, batch=BATCH, repeats=repeats)
        return {"tensorarray": ours, "list_stack": reference, "ratio": ours / reference}
    import torch
    from bench.torch_floor import FloorTensorArray

    model, x, target = _step_case(rnn, backend)
    floor = rnn.RunningMeanModel(tensor_array=FloorTensorArray)
    floor.load_state_dict(model.state_dict())
    runs = {"tensorarray": lambda: rnn.time_step(model, x, target, True),
            "list_stack": lambda: rnn.time_step(model, x, target, False),
            "floor": lambda: rnn.time_step(floor, x, target, True)}
    times = {name: [] for name in runs}
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with gta.device(backend):
            for round_ in range(repeats + 1):       # alternately, so a slow moment hits all; round 0 warms up
                for name, run in runs.items():
                    seconds = run()
                    if round_:
                        times[name].append(seconds)
    finally:
        torch.set_num_threads(previous)
    row = {name: min(seconds) for name, seconds in times.items()}
    row["ratio"] = row["tensorarray"] / row["list_stack"]
    row["floor_ratio"] = row["floor"] / row["list_stack"]
    return row


def _best(fn, number, repeats=7, synchronize=lambda: None):
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        synchronize()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def export_cost_row(backend="numpy"):
    """Seconds per read of a (64,) float32 element and per stack of 1000 of them: the
    library's (a read-only view), the torch TensorArray's (a copy into a torch tensor),
    and the copy alone."""
    import torch

    torch.set_num_threads(1)
    from gpu_tensorarray.torch import TensorArray

    values = np.random.default_rng(0).random((1000, 64), np.float32)
    with gta.device(backend) as selected:
        library = gta.TensorArray("float32", size=1000, clear_after_read=False).unstack(values)
        ours = TensorArray(torch.float32, size=1000, clear_after_read=False).unstack(torch.from_numpy(values))
        row = {
            "read_library": _best(lambda: library.read(3), 5000, synchronize=selected.synchronize),
            "read_torch": _best(lambda: ours.read(3), 5000, synchronize=selected.synchronize),
            "stack_library": _best(library.stack, 500, synchronize=selected.synchronize),
            "stack_torch": _best(ours.stack, 500, synchronize=selected.synchronize),
        }
        row_view, stack_view = library.read(3), library.stack()     # what the export copies
        row["read_copy"] = _best(row_view.copy, 5000, synchronize=selected.synchronize)
        row["stack_copy"] = _best(stack_view.copy, 500, synchronize=selected.synchronize)
        library.close()
        ours.close()
    return row


# -- pytest-benchmark --------------------------------------------------------------------------

def _torch():
    from gpu_tensorarray.testing import import_torch

    return import_torch()


@pytest.mark.parametrize("variant", ["tensorarray", "list_stack"])
def test_rnn_forward_backward_step(benchmark, backend, variant):
    _torch()
    rnn = _example()
    model, x, target = _step_case(rnn, backend)
    forward = model if variant == "tensorarray" else model.forward_list

    def step():
        model.zero_grad()
        rnn.loss_of(*forward(x), target).backward()
        if x.is_cuda:
            import torch
            torch.cuda.synchronize(x.device)

    benchmark.group = f"torch rnn step: GRU hidden 32, T={STEPS}, batch {BATCH}"
    benchmark.extra_info.update(provider=variant, backend=backend.name)
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with gta.device(backend):
            benchmark(step)
    finally:
        torch.set_num_threads(previous)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="numpy")
    args = parser.parse_args(argv)
    try:
        gta.get_backend(args.backend)
    except gta.errors.OpError as error:
        parser.error(f"--backend {args.backend}: {str(error).splitlines()[0]}")
    step = rnn_step_row(args.backend)
    print(f"torch rnn step (backend {args.backend}; GRU hidden 32, T={STEPS}, batch {BATCH}, float32, 1 thread, forward+"
          f"backward): TensorArrays {step['tensorarray'] * 1e3:.2f} ms, list+torch.stack "
          f"{step['list_stack'] * 1e3:.2f} ms, ratio {step['ratio']:.2f}"
          + (f" (FloorTensorArray {step['floor'] * 1e3:.2f} ms, ratio {step['floor_ratio']:.2f})" if "floor" in step else ""))
    cost = export_cost_row(args.backend)
    print(f"copy-on-export (backend {args.backend}, float32): read of (64,): library {cost['read_library'] * 1e6:.2f} us, "
          f"torch {cost['read_torch'] * 1e6:.2f} us (the copy {cost['read_copy'] * 1e6:.2f} us); stack of (1000, 64): "
          f"library {cost['stack_library'] * 1e6:.2f} us, torch {cost['stack_torch'] * 1e6:.2f} us (the copy "
          f"{cost['stack_copy'] * 1e6:.2f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
