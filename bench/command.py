"""``python -m bench``: plan the rows, run them (``--repeat`` times), print the table and
the target verdicts, write the JSON and the plot.

Exit status: 0; 1 when one of our rows failed (an exception or a wrong result) or a
target was MISSED (unless --no-fail); 2 for a usage error (one line on stderr).
"""

import argparse
import contextlib
import json
import os
import re
import sys
import time

import numpy as np

from . import providers
from .cases import SIZES, TINY_SIZES, plan
from .report import Progress, cpu_model, document, plot, summary
from .runner import PROFILES, run_repeated
from .targets import combine, evaluate

__all__ = ["main", "parser", "run_bench"]


def _command_line(args):
    parts = ["python -m bench"]
    for flag in ("quick", "peers", "tiny", "no_fail"):
        if getattr(args, flag):
            parts.append(f"--{flag.replace('_', '-')}")
    for option in ("backend", "threads", "only", "repeat", "json", "plot"):
        value = getattr(args, option)
        if value and not (option == "repeat" and value == 1):
            parts.append(f"--{option} '{value}'" if option == "only" else f"--{option} {value}")
    return " ".join(parts)


class UsageError(Exception):
    """A mistake on the command line: one line on stderr, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):       # a usage error is one line, as the command's own
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def parser():
    made = _Parser(
        prog="python -m bench",
        description="Time gpu_tensorarray's ops (raw_ops as users call them: keywords, NumPy integer scalars, "
                    "int32 indices, and the fastest form beside them) against a copy of as much memory and, with "
                    "--peers, against NumPy, PyTorch and TensorFlow; print a table and the performance targets "
                    "(bench/targets.py). Run it from a source checkout, with the package installed or built in "
                    "place (python setup.py build_ext --inplace).",
        epilog="example: python -m bench --only '^(write|read)/' --repeat 3 --json bench.json",
    )
    made.add_argument("--quick", action="store_true",
                      help="fewer rounds per row (same sizes); target verdicts are marked rough")
    made.add_argument("--backend", default=None, help="numpy | emulated | cupy (default: automatic)")
    made.add_argument("--peers", action="store_true",
                      help="also NumPy, PyTorch and TensorFlow, where installed (bench/requirements.txt)")
    made.add_argument("--threads", type=int, metavar="N",
                      help="threads for the peers (torch, TensorFlow, OpenMP, BLAS); default: their own choice")
    made.add_argument("--only", metavar="REGEX", help="only the rows whose id (op/case/provider) matches")
    made.add_argument("--repeat", type=int, default=1, metavar="N",
                      help="run the selection N times in this process: medians and min-max spread per row")
    made.add_argument("--json", metavar="FILE", help="write every row and the machine description as JSON")
    made.add_argument("--plot", metavar="FILE.png", help="plot throughput against size (needs matplotlib)")
    made.add_argument("--no-fail", action="store_true", help="exit 0 even when a target is MISSED")
    made.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)   # tiny sizes: the CLI's own test
    return made


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        return run_bench(args)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def _selected(args):
    rows = plan(TINY_SIZES if args.tiny else SIZES, peers=args.peers)
    if not args.only:
        return rows
    try:
        pattern = re.compile(args.only)
    except re.error as error:
        raise UsageError(f"--only {args.only!r} is not a regular expression: {error}") from None
    chosen = [row for row in rows if pattern.search(row.id)]
    if not any(row.op != "copy" for row in chosen):
        raise UsageError(f"--only {args.only!r} selects no row{'' if args.peers else ' (peers need --peers)'}; "
                         f"row ids look like {rows[1].id!r}")
    # The copy row always runs: every ratio needs it.
    return [row for row in rows if row.op == "copy" or row in chosen]


def _thread_limits(count):
    """numpy's BLAS and OpenMP pools at ``count`` threads (threadpoolctl), where installed."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=count)


def run_bench(args):
    """The command; ``args`` as ``parser()`` makes them."""
    from gpu_tensorarray import device, errors, get_backend

    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise UsageError("--plot needs matplotlib (bench/requirements.txt)") from None
    for option in ("json", "plot"):     # checked now, not once the rows (minutes) have run
        path = getattr(args, option)
        if path and (os.path.isdir(path) or not os.access(
                path if os.path.exists(path) else os.path.dirname(os.path.abspath(path)), os.W_OK)):
            raise UsageError(f"--{option} {path!r}: cannot write there")
    if args.repeat < 1:
        raise UsageError("--repeat needs a count of at least 1")
    if args.threads is not None and args.threads < 1:
        raise UsageError("--threads needs a count of at least 1")
    rows = _selected(args)          # first: a bad --only is an error before anything loads
    try:
        backend = get_backend(args.backend)
    except errors.OpError as error:
        raise UsageError(f"--backend {args.backend}: {str(error).splitlines()[0]}") from None
    if backend.name == "numpy":
        from gpu_tensorarray.backends import cpu_kernels
        built, why = cpu_kernels.status()
        if not built:       # the figures would be the NumPy fallback's, which only the JSON would say
            print(f"note: {why}; the gradient rows time the NumPy fallback", file=sys.stderr)
    limits = contextlib.nullcontext()
    if args.threads:
        # Before torch or TensorFlow load: OpenMP and MKL read these at start-up.
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = str(args.threads)
        providers.set_peer_threads(args.threads)
        limits = _thread_limits(args.threads)
    profile = PROFILES["tiny" if args.tiny else "quick" if args.quick else "full"]
    started = time.time()
    with limits, device(backend):
        runs, results = run_repeated(rows, backend, profile, Progress(len(rows)), args.repeat)
    skipped = runs[-1][1]
    failures = [failure for _, _, run_failures, _ in runs for failure in run_failures]
    copy_gbps = float(np.median([copy for *_, copy in runs if copy])) if any(copy for *_, copy in runs) else None
    settings = {"threads": args.threads, "quick": args.quick, "tiny": args.tiny, "repeat": args.repeat,
                "peers": args.peers}
    verdicts = combine([evaluate(run_results, settings) for run_results, *_ in runs])
    summary(results, skipped, failures, copy_gbps, backend, verdicts, rough=args.quick or args.tiny,
            repeat=args.repeat)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(document(_command_line(args), started, settings, profile, backend, copy_gbps, results, skipped,
                               failures, verdicts, runs), out, indent=1, default=_jsonable)
            out.write("\n")
        print(f"\njson: {args.json}")
    if args.plot:
        plot(results, copy_gbps, args.plot, f"gpu_tensorarray bench ({backend.name}; {cpu_model()})")
        print(f"plot: {os.path.abspath(args.plot)}")
    if failures:
        print(f"error: {len(failures)} of our rows failed (listed above)", file=sys.stderr)
        return 1
    missed = [verdict for verdict in verdicts if verdict["met"] is False]
    if missed and not args.no_fail:
        print(f"error: {len(missed)} target{'s' if len(missed) > 1 else ''} MISSED (listed above; --no-fail to "
              f"exit 0 all the same)", file=sys.stderr)
        return 1
    return 0


def _jsonable(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return str(value)
