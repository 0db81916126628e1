"""Old against new in one process: two checkouts of the library imported side by side, each
under its own ``gpu_tensorarray`` modules, swapped in turn and timed alternately, round by
round, so that a slower moment of the machine falls on both. Three runs; each prints every
case's old and new figure and new/old, then the spread of new/old over the runs.

    python bench/compare_ops.py OLD_CHECKOUT NEW_CHECKOUT
    python bench/compare_ops.py OLD NEW --backend cupy --only raw_write raw_read grad_scatter_add
    old=$(mktemp -d)/old && git worktree add "$old" main && python bench/compare_ops.py "$old" .

Cases (the call forms users write: keyword raw ops, ``np.int32`` indices, whole steps):
- raw_write, raw_write_np_int32, raw_read, raw_read_np_int32: one keyword raw op on a
  (64,) float32 element of a 2000-slot array, per call (the minimum of the rounds);
- raw_stack: a gather of range(2000) from that array written in full (a stack), per call;
- scatter_small: TensorArrayV3, a scatter of 2 rows of (16, 4), TensorArrayCloseV3, per cycle;
- grad_scatter_add: 200 deterministic scatter-adds of 1024 rows of (64,) float32, int32
  indices, into one gradient array, per scatter;
- grad_scatter_first: a scatter of range(20) rows of (16, 32) into a fresh gradient array
  (a stack's gradient), per scatter;
- grad_scatter_first_repeats: a scatter of 1024 rows of (64,) float32 with random int32 indices
  (repeats, lone ones) into a fresh gradient array (a gather's gradient), per scatter;
- torch_read, torch_write: gpu_tensorarray.torch's untracked read and tracked write of a
  (16, 4) / (16, 32) float32 element, per call (numpy backend only);
- torch_write_growing: 20 tracked writes of (16, 32) into a new dynamic_size array (size 0),
  its creation included, per write (numpy backend only);
- raw_write_np_int32_over_int, raw_read_np_int32_over_int, raw_write_np_int64_over_int,
  raw_read_np_int64_over_int: what a NumPy integer scalar index costs over a Python int, both
  forms timed in every round (the difference of their minimums over the rounds, in ns);
- elman_T20_backward: the backward pass alone of the Elman step below at T=20 (each forward
  untimed), the median of 25 passes per round (numpy backend only);
- elman_T20, elman_T200, gru_T20: a training step of bench/torch_elman.py's Elman RNN and of
  examples/rnn_torch.py's GRU, each version's and a list + torch.stack model's, the
  median step; figures are the ratio to the list's step (numpy backend only).
"""

import argparse
import importlib
import importlib.util
import pathlib
import statistics
import sys
import time
import warnings

import numpy as np

PACKAGE = "gpu_tensorarray"
HERE = pathlib.Path(__file__).resolve().parent


def _ours(name):
    return name == PACKAGE or name.startswith(PACKAGE + ".")


def _forget():
    for name in [name for name in sys.modules if _ours(name)]:
        del sys.modules[name]


class Checkout:
    """One checkout of the library. ``with checkout as lib:`` puts its modules in
    sys.modules (and keeps what the block imports lazily, for the next time)."""

    def __init__(self, path, label):
        self.path, self.label = str(pathlib.Path(path).resolve()), label
        package = pathlib.Path(self.path) / PACKAGE
        if not (package / "__init__.py").is_file():
            raise SystemExit(f"error: {path!r} is not a checkout: it has no {PACKAGE}/__init__.py")
        _forget()
        sys.path.insert(0, self.path)
        try:
            self.lib = importlib.import_module(PACKAGE)
            importlib.import_module(PACKAGE + ".raw_ops")
        finally:
            sys.path.remove(self.path)
        if pathlib.Path(self.lib.__file__).resolve().parent != package.resolve():
            # sys.path's first entry ('' for python -c, the script's folder) found another copy first
            raise SystemExit(f"error: {PACKAGE} came from {self.lib.__file__}, not from the checkout {path!r}")
        self.modules = {name: module for name, module in sys.modules.items() if _ours(name)}

    def __enter__(self):
        _forget()
        sys.modules.update(self.modules)
        return self.lib

    def __exit__(self, *exc):
        self.modules = {name: module for name, module in sys.modules.items() if _ours(name)}

    def example(self):
        """This checkout's examples/rnn_torch.py, imported under a name of its own."""
        spec = importlib.util.spec_from_file_location(f"rnn_torch_{self.label}",
                                                      pathlib.Path(self.path) / "examples" / "rnn_torch.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module


# -- cases: each makes, for one checkout, a function timing one round ---------------------------
SLOTS = 2000


def _timed(calls):
    def round_():
        start = time.perf_counter()
        count = calls()
        return (time.perf_counter() - start) / count
    return round_


def raw_write(lib, backend, index_type=int):
    R = lib.raw_ops
    value = backend.asarray(np.ones(64, np.float32))
    indices = [index_type(i) for i in range(SLOTS)]

    def calls():
        handle, flow = R.TensorArrayV3(size=SLOTS, dtype=np.float32, element_shape=[64])
        for i in indices:
            R.TensorArrayWriteV3(handle=handle, index=i, value=value, flow_in=flow)
        backend.synchronize()
        R.TensorArrayCloseV3(handle=handle)
        return SLOTS
    return _timed(calls)


def raw_read(lib, backend, index_type=int):
    R = lib.raw_ops
    value = backend.asarray(np.ones(64, np.float32))
    handle, flow = R.TensorArrayV3(size=SLOTS, dtype=np.float32, element_shape=[64], clear_after_read=False)
    for i in range(SLOTS):
        flow = R.TensorArrayWriteV3(handle=handle, index=i, value=value, flow_in=flow)
    indices = [index_type(i) for i in range(SLOTS)]

    def calls():
        for i in indices:
            R.TensorArrayReadV3(handle=handle, index=i, flow_in=flow, dtype=np.float32)
        backend.synchronize()
        return SLOTS
    return _timed(calls)


def raw_stack(lib, backend):
    R = lib.raw_ops
    handle, flow = R.TensorArrayV3(size=SLOTS, dtype=np.float32, element_shape=[64], clear_after_read=False)
    flow = R.TensorArrayScatterV3(handle=handle, indices=np.arange(SLOTS, dtype=np.int32),
                                  value=backend.asarray(np.ones((SLOTS, 64), np.float32)), flow_in=flow)

    def calls():
        for _ in range(100):
            R.TensorArrayGatherV3(handle=handle, indices=range(SLOTS), flow_in=flow, dtype=np.float32)
        backend.synchronize()
        return 100
    return _timed(calls)


def scatter_small(lib, backend):
    R = lib.raw_ops
    rows = backend.asarray(np.random.default_rng(0).random((2, 16, 4), np.float32))
    indices = np.arange(2, dtype=np.int32)

    def calls():
        for _ in range(100):
            handle, flow = R.TensorArrayV3(size=2, dtype=np.float32)
            R.TensorArrayScatterV3(handle=handle, indices=indices, value=rows, flow_in=flow)
            R.TensorArrayCloseV3(handle=handle)
        backend.synchronize()
        return 100
    return _timed(calls)


def grad_scatter_add(lib, backend):
    R = lib.raw_ops
    rows = backend.asarray(np.ones((1024, 64), np.float32))
    indices = np.random.default_rng(0).integers(0, 1024, 1024).astype(np.int32)

    def calls():
        handle, flow = R.TensorArrayV3(size=1024, dtype=np.float32, element_shape=[64])
        flow = R.TensorArrayScatterV3(handle=handle, indices=np.arange(1024, dtype=np.int32), value=rows, flow_in=flow)
        grad, grad_flow = R.TensorArrayGradV3(handle=handle, flow_in=flow, source="gradients")
        backend.synchronize()
        start = time.perf_counter()
        for _ in range(200):
            grad_flow = R.TensorArrayScatterV3(handle=grad, indices=indices, value=rows, flow_in=grad_flow)
        backend.synchronize()
        seconds = time.perf_counter() - start
        R.TensorArrayCloseV3(handle=grad)
        R.TensorArrayCloseV3(handle=handle)
        return seconds / 200

    return calls


def _first_scatters(lib, backend, rows, indices, repeats):
    """Seconds per scatter of ``rows`` at ``indices`` into a fresh gradient array of an array
    holding ``rows``, ``repeats`` times per round."""
    R = lib.raw_ops
    handle, flow = R.TensorArrayV3(size=len(rows), dtype=np.float32)
    flow = R.TensorArrayScatterV3(handle=handle, indices=np.arange(len(rows)), value=rows, flow_in=flow)
    sources = iter(range(10**9))

    def calls():
        seconds = 0.0
        for _ in range(repeats):
            grad, grad_flow = R.TensorArrayGradV3(handle=handle, flow_in=flow, source=f"s{next(sources)}")
            start = time.perf_counter()
            R.TensorArrayScatterV3(handle=grad, indices=indices, value=rows, flow_in=grad_flow)
            backend.synchronize()
            seconds += time.perf_counter() - start
            R.TensorArrayCloseV3(handle=grad)
        return seconds / repeats
    return calls


def grad_scatter_first(lib, backend, steps=20):
    rows = backend.asarray(np.random.default_rng(0).random((steps, 16, 32), np.float32))
    return _first_scatters(lib, backend, rows, range(steps), 20)


def grad_scatter_first_repeats(lib, backend):
    rows = backend.asarray(np.random.default_rng(0).random((1024, 64), np.float32))
    return _first_scatters(lib, backend, rows, np.random.default_rng(1).integers(0, 1024, 1024).astype(np.int32), 10)


def torch_read(lib, backend):
    import torch
    from gpu_tensorarray.torch import TensorArray
    x = torch.randn(200, 16, 4)
    inputs = TensorArray(torch.float32, size=200, clear_after_read=False).unstack(x)

    def calls():
        for i in range(200):
            inputs.read(i)
        return 200
    return _timed(calls)


def torch_write(lib, backend):
    import torch
    from gpu_tensorarray.torch import TensorArray
    h = torch.randn(16, 32, requires_grad=True) * 1

    def calls():
        states = TensorArray(torch.float32, size=200).write(0, h)     # the slab exists: time the writes
        start = time.perf_counter()
        for i in range(1, 200):
            states = states.write(i, h)
        return (time.perf_counter() - start) / 199
    return calls


def torch_write_growing(lib, backend, steps=20):
    import torch
    from gpu_tensorarray.torch import TensorArray
    h = torch.randn(16, 32, requires_grad=True) * 1

    def calls():
        for _ in range(10):
            states = TensorArray(torch.float32, size=0, dynamic_size=True)
            for i in range(steps):
                states = states.write(i, h)
        return 10 * steps
    return _timed(calls)


def _elman_model(steps):
    """(bench/torch_elman.py, its cell, the forward through this checkout's TensorArrays, the
    list model's forward) for ``steps`` time steps."""
    import torch
    sys.path.insert(0, str(HERE))
    try:
        elman = importlib.import_module("torch_elman")
    finally:
        sys.path.remove(str(HERE))
    from gpu_tensorarray.torch import TensorArray
    torch.manual_seed(0)
    cell = torch.nn.RNNCell(elman.FEATURES, elman.HIDDEN)
    x = torch.randn(steps, elman.BATCH, elman.FEATURES)

    def forward():
        inputs = TensorArray(x.dtype, size=steps).unstack(x)
        states = TensorArray(x.dtype, size=steps)
        h = x.new_zeros((elman.BATCH, elman.HIDDEN))
        for t in range(steps):
            h = cell(inputs.read(t), h)
            states = states.write(t, h)
        return states.stack()

    def forward_list():
        h = x.new_zeros((elman.BATCH, elman.HIDDEN))
        states = []
        for x_t in x.unbind(0):
            h = cell(x_t, h)
            states.append(h)
        return torch.stack(states)
    return elman, cell, forward, forward_list


def elman_backward(lib, backend, steps=20, passes=25):
    """The Elman T=20 step's backward pass alone (each forward untimed): the median of ``passes``."""
    elman, cell, forward, _ = _elman_model(steps)

    def calls():
        seconds = []
        for _ in range(passes):
            cell.zero_grad(set_to_none=True)
            loss = elman.loss_of(forward())
            start = time.perf_counter()
            loss.backward()
            seconds.append(time.perf_counter() - start)
        return statistics.median(seconds)
    return calls


def _elman(steps):
    def make(lib, backend, checkout):
        elman, cell, forward, forward_list = _elman_model(steps)

        def step(forward):
            def round_():
                start = time.perf_counter()
                cell.zero_grad(set_to_none=True)
                elman.loss_of(forward()).backward()
                return time.perf_counter() - start
            return round_
        return step(forward), step(forward_list)
    return make


def gru_t20(lib, backend, checkout):
    import torch
    example = checkout.example()
    torch.manual_seed(0)
    model = example.RunningMeanModel()
    x, target = example.make_batch(torch.Generator().manual_seed(0), batch=16, min_steps=20, max_steps=20)
    return (lambda: example.time_step(model, x, target, True)), (lambda: example.time_step(model, x, target, False))


PER_CALL = {"raw_write": raw_write, "raw_write_np_int32": lambda lib, b: raw_write(lib, b, np.int32),
            "raw_read": raw_read, "raw_read_np_int32": lambda lib, b: raw_read(lib, b, np.int32),
            "raw_stack": raw_stack, "scatter_small": scatter_small, "grad_scatter_add": grad_scatter_add,
            "grad_scatter_first": grad_scatter_first, "grad_scatter_first_repeats": grad_scatter_first_repeats,
            "torch_read": torch_read, "torch_write": torch_write,
            "torch_write_growing": torch_write_growing, "elman_T20_backward": elman_backward}


def _over_int(case, index_type):
    def make(lib, backend):
        return case(lib, backend), case(lib, backend, index_type)
    return make


# Per-call pairs (the int form, the form timed against it): their difference per call.
PAIRS = {f"{case.__name__}_np_{index_type.__name__}_over_int": _over_int(case, index_type)
         for index_type in (np.int32, np.int64) for case in (raw_write, raw_read)}
STEPS = {"elman_T20": _elman(20), "elman_T200": _elman(200), "gru_T20": gru_t20}
ROUNDS = {"elman_T200": 30, "gru_T20": 60, "elman_T20": 100}
PER_CALL_ROUNDS, PAIR_ROUNDS = 15, 201       # a pair's difference is tens of ns: more rounds
NUMPY_ONLY = {"torch_read", "torch_write", "torch_write_growing", "elman_T20_backward", *STEPS}


def measure(old, new, names, backend_name, rounds, runs=3):
    """{case: [(old, new) per run]}: per-call cases the minimum of ``rounds`` alternated
    rounds; pairs the difference of their two forms' minimums; step cases (the ratio to the
    list model's step) the median."""
    checkouts = (old, new)
    results = {name: [] for name in names}
    for name in names:
        rounds_here = ROUNDS.get(name) or rounds or (PAIR_ROUNDS if name in PAIRS else PER_CALL_ROUNDS)
        for _ in range(runs):
            made, times = {}, {old.label: [], new.label: [], "list": []}
            for checkout in checkouts:
                with checkout as lib, lib.device(backend_name):
                    backend = lib.get_backend(backend_name)
                    made[checkout.label] = STEPS[name](lib, backend, checkout) if name in STEPS \
                        else (PAIRS.get(name) or PER_CALL[name])(lib, backend)
            for _ in range(rounds_here + 1):             # round 0 warms up
                for checkout in checkouts:
                    with checkout as lib, lib.device(backend_name):
                        if name in STEPS:
                            ours, reference = made[checkout.label]
                            times[checkout.label].append(ours())
                            if checkout is new:
                                times["list"].append(reference())
                        elif name in PAIRS:
                            times[checkout.label].append(tuple(form() for form in made[checkout.label]))
                        else:
                            times[checkout.label].append(made[checkout.label]())
            if name in STEPS:
                listed = statistics.median(times["list"][1:])
                figures = tuple(statistics.median(times[c.label][1:]) / listed for c in checkouts)
            elif name in PAIRS:
                figures = tuple(_difference(times[c.label][1:]) for c in checkouts)
            else:
                figures = tuple(min(times[c.label][1:]) for c in checkouts)
            results[name].append(figures)
            change = f"new-old {(figures[1] - figures[0]) * 1e9:+.0f} ns" if name in PAIRS \
                else f"new/old {figures[1] / figures[0]:.3f}"
            print(f"  {name:28s} old {_show(name, figures[0])}  new {_show(name, figures[1])}  {change}", flush=True)
    return results


def _difference(pairs):
    """The second form's minimum over the rounds less the first's."""
    return min(other for _, other in pairs) - min(first for first, _ in pairs)


def _show(name, figure):
    if name in PAIRS:
        return f"{figure * 1e9:+6.0f} ns"
    return f"{figure:.2f}x list" if name in STEPS else f"{figure * 1e6:8.2f} us"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", help="the old checkout (a directory holding gpu_tensorarray/)")
    parser.add_argument("new", help="the new checkout")
    parser.add_argument("--backend", default="numpy", help="numpy | emulated | cupy (default numpy)")
    parser.add_argument("--only", nargs="+", choices=[*PER_CALL, *PAIRS, *STEPS], help="these cases (default: "
                        "every one the backend runs)")
    parser.add_argument("--rounds", type=int, help=f"alternated rounds per run of a per-call case or pair (default "
                        f"{PER_CALL_ROUNDS}; {PAIR_ROUNDS} for a pair)")
    args = parser.parse_args(argv)
    names = args.only or [name for name in [*PER_CALL, *PAIRS, *STEPS]
                          if args.backend == "numpy" or name not in NUMPY_ONLY]
    warnings.simplefilter("ignore")          # the CuPy-without-a-GPU warning, once per checkout
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        names = [name for name in names if name not in NUMPY_ONLY]
    old, new = Checkout(args.old, "old"), Checkout(args.new, "new")
    print(f"old: {old.path}\nnew: {new.path}\nbackend {args.backend}, three runs:")
    results = measure(old, new, names, args.backend, args.rounds)
    print("new/old over the three runs (median [min-max]; pairs: the differences):")
    for name, runs in results.items():
        if name in PAIRS:                   # differences, not ratios: each side's
            news = sorted(new_ * 1e9 for _, new_ in runs)
            olds = sorted(old_ * 1e9 for old_, _ in runs)
            print(f"  {name:28s} new {news[1]:+.0f} ns [{news[0]:+.0f} to {news[-1]:+.0f}], "
                  f"old {olds[1]:+.0f} ns [{olds[0]:+.0f} to {olds[-1]:+.0f}]")
            continue
        ratios = sorted(new_ / old_ for old_, new_ in runs)
        print(f"  {name:28s} {ratios[1]:.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
