"""What a pure-Python raw write and read cannot cost less than on this machine, beside ours.

    python bench/call_floor.py [--rounds N]

The floor of TensorArrayWriteV3 is a ``def`` that takes the op's four keyword arguments,
copies the value into a row of a NumPy slab under a lock (``with``: the form that an
interrupt cannot leave held) and returns the flow; the floor of TensorArrayReadV3 takes its
four and returns a row of a view under the lock. They check nothing. Both are called as
``tf.raw_ops`` code calls ours, with keyword arguments and a Python int index, on a (64,)
float32 element of a 2000-slot array; each round times 2000 calls of each of the four, in
turn, and each figure is the minimum over the rounds, per call. Three runs.
"""

import argparse
import pathlib
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import gpu_tensorarray as gta  # noqa: E402
from gpu_tensorarray import raw_ops  # noqa: E402

SLOTS, ROW = 2000, (64,)


def floors():
    """(write, read): the least a keyword-called raw write and read of one row can do."""
    lock = threading.Lock()
    slab = np.zeros((SLOTS,) + ROW, np.float32)
    view = slab.view()
    view.flags.writeable = False

    def write(handle, index, value, flow_in, name=None):
        with lock:
            slab[index] = value
        return flow_in

    def read(handle, index, flow_in, dtype, name=None):
        with lock:
            return view[index]
    return write, read


def one_run(rounds):
    """Minimum seconds per call over ``rounds`` rounds: {floor write, ours write, floor read, ours read}."""
    value = np.ones(ROW, np.float32)
    floor_write, floor_read = floors()
    best = {"floor write": float("inf"), "ours write": float("inf"), "floor read": float("inf"),
            "ours read": float("inf")}
    for _ in range(rounds):
        handle, flow = raw_ops.TensorArrayV3(size=SLOTS, dtype=np.float32, element_shape=ROW,
                                             clear_after_read=False)
        for name, write in (("floor write", floor_write), ("ours write", raw_ops.TensorArrayWriteV3)):
            start = time.perf_counter()
            for index in range(SLOTS):
                write(handle=handle, index=index, value=value, flow_in=flow)
            best[name] = min(best[name], (time.perf_counter() - start) / SLOTS)
        for name, read in (("floor read", floor_read), ("ours read", raw_ops.TensorArrayReadV3)):
            start = time.perf_counter()
            for index in range(SLOTS):
                read(handle=handle, index=index, flow_in=flow, dtype=np.float32)
            best[name] = min(best[name], (time.perf_counter() - start) / SLOTS)
        raw_ops.TensorArrayCloseV3(handle=handle)
    return best


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=41, help="rounds per run (default 41)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds needs a count of at least 1")
    with gta.device("numpy"):
        runs = [one_run(args.rounds) for _ in range(3)]
    for name in runs[0]:
        figures = sorted(run[name] * 1e6 for run in runs)
        print(f"{name:12s} {statistics.median(figures):.3f} us per call [{figures[0]:.3f}-{figures[-1]:.3f}]")
    for op in ("write", "read"):
        ratios = sorted(run[f"ours {op}"] / run[f"floor {op}"] for run in runs)
        print(f"ours / floor, {op}: {statistics.median(ratios):.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
