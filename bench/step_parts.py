"""Where a training step's time goes, part by part, timed inside the step: each TensorArray
method and each backward node of the torch bridge and of torch_floor.py's FloorTensorArray,
where the step pays for it (between the cell's torch ops and autograd's engine, which a
loop of its own does not show), beside the list model's forward and backward.

    python bench/step_parts.py                        examples/rnn_torch.py's GRU, T=20
    python bench/step_parts.py --model elman --steps 200
    python bench/step_parts.py --json parts.json      the same, and the figures as JSON

One torch thread, numpy backend. The three models run alternately, step by step, in one
process; each figure is microseconds per step, the mean over ``--rounds`` steps. Every timed
call pays two ``time.perf_counter`` reads (the same for both classes), so a part compares
between the classes; the wrapped steps are a little slower than bench/torch_elman.py's.
"""

import argparse
import collections
import importlib.util
import json
import pathlib
import sys
import time

import torch

_ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT))
import gpu_tensorarray as gta  # noqa: E402
from gpu_tensorarray.torch import TensorArray, autograd  # noqa: E402
from bench import torch_elman, torch_floor  # noqa: E402

METHODS = ("unstack", "size", "read", "write", "stack")
# (class, attribute, the part's name): the backward nodes and the end of a backward pass.
NODES = ((autograd._Reader, "backward", "read node's backward"),
         (autograd._WriteRun, "backward", "write run's backward"),
         (autograd, "_end_pass", "end of the pass"),
         (torch_floor._Stack, "backward", "read node's backward"),
         (torch_floor._Writes, "backward", "write run's backward"))
_FLOOR_NODES = (torch_floor._Stack, torch_floor._Writes)


def _gru():
    spec = importlib.util.spec_from_file_location("rnn_torch_example", _ROOT / "examples" / "rnn_torch.py")
    rnn = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rnn)
    return rnn


class _Parts:
    """Seconds per (class, part), while the wrappers are installed."""

    def __init__(self):
        self.seconds = collections.defaultdict(float)
        self._saved = []

    def timing(self, function, key):
        """``function``, each call's seconds added to ``key``'s."""
        seconds, clock = self.seconds, time.perf_counter

        def timed(*args, **kwargs):
            start = clock()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[key] += clock() - start
        return timed

    def _timed(self, owner, name, key):
        function = owner.__dict__[name]
        static = isinstance(function, staticmethod)
        timed = self.timing(function.__func__ if static else function, key)
        self._saved.append((owner, name, function))
        setattr(owner, name, staticmethod(timed) if static else timed)

    def __enter__(self):
        for cls, who in ((TensorArray, "ours"), (torch_floor.FloorTensorArray, "floor")):
            for method in METHODS:
                self._timed(cls, method, (who, method))
        for owner, name, part in NODES:
            self._timed(owner, name, ("floor" if owner in _FLOOR_NODES else "ours", part))
        return self

    def __exit__(self, *exc):
        for owner, name, function in reversed(self._saved):
            setattr(owner, name, function)


def _models(model_name, steps, parts):
    """{who: (module, x, loss of the module's output, whether it runs forward_list)}."""
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    if model_name == "gru":
        rnn = _gru()
        make = lambda cls: rnn.RunningMeanModel(tensor_array=cls)       # noqa: E731
        x, target = rnn.make_batch(generator, batch=16, min_steps=steps, max_steps=steps)
        loss = lambda out: rnn.loss_of(*out, target)                      # noqa: E731
    else:
        make = torch_elman.Elman
        x = torch.randn(steps, torch_elman.BATCH, torch_elman.FEATURES, generator=generator)
        loss = torch_elman.loss_of
    ours = make(parts.timing(TensorArray, ("ours", "creating the arrays")))
    floor = make(parts.timing(torch_floor.FloorTensorArray, ("floor", "creating the arrays")))
    floor.load_state_dict(ours.state_dict())
    return {"list": (ours, x, loss, True), "ours": (ours, x, loss, False), "floor": (floor, x, loss, False)}


def measure(model_name="gru", steps=20, rounds=300):
    """{who: {part: microseconds per step}}: "forward" and "backward" for all three models (the
    loss's own computation between them is in neither), the TensorArray parts for ours and the floor."""
    torch.set_num_threads(1)
    with gta.device("numpy"), _Parts() as parts:
        models = _models(model_name, steps, parts)
        for round_ in range(rounds + 5):                    # 5 rounds warm up
            if round_ == 5:
                parts.seconds.clear()
            for who, (module, x, loss_of, listed) in models.items():
                module.zero_grad(set_to_none=True)
                start = time.perf_counter()
                out = module.forward_list(x) if listed else module(x)
                middle = time.perf_counter()
                loss = loss_of(out)
                before_backward = time.perf_counter()
                loss.backward()
                parts.seconds[(who, "forward")] += middle - start
                parts.seconds[(who, "backward")] += time.perf_counter() - before_backward
    figures = collections.defaultdict(dict)
    for (who, part), seconds in parts.seconds.items():
        figures[who][part] = seconds / rounds * 1e6
    return dict(figures)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("gru", "elman"), default="gru", help="which model (default: gru)")
    parser.add_argument("--steps", type=int, default=20, help="sequence length (default 20)")
    parser.add_argument("--rounds", type=int, default=300, help="timed steps per model (default 300)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1:
        parser.error("--steps and --rounds need a count of at least 1")
    figures = measure(args.model, args.steps, args.rounds)
    parts = ["forward", "backward", "creating the arrays", *METHODS,
             "read node's backward", "write run's backward", "end of the pass"]
    print(f"{args.model}, T={args.steps}: microseconds per step, the mean of {args.rounds} steps")
    print(f"{'part':24s} {'ours':>9s} {'floor':>9s} {'list':>9s}")
    for part in parts:
        cells = [figures[who].get(part) for who in ("ours", "floor", "list")]
        print(f"{part:24s} " + " ".join(f"{cell:9.1f}" if cell is not None else f"{'-':>9s}" for cell in cells))
    if args.json:
        report = {"benchmark": "step_parts", "model": args.model, "T": args.steps, "rounds": args.rounds,
                  "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "us_per_step": figures}
        pathlib.Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
