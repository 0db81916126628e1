"""Command line: ``python -m gpu_tensorarray info | demo | selftest`` (or the
``gpu-tensorarray`` console script). Benchmarks: ``python -m bench`` from a source checkout."""

import argparse
import os
import platform
import sys

import numpy as np

import gpu_tensorarray as gta
from gpu_tensorarray.backends import _parse as _parse_backend
from gpu_tensorarray.backends import cpu_kernels


class _Parser(argparse.ArgumentParser):
    """A user error is one line on stderr and exit status 2 (argparse's own code), not
    the usage block with the error under it."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _backend(text):
    """--backend's type: a name or device gta.device() knows (whether it loads here is
    the command's to say)."""
    try:
        _parse_backend(text)
    except gta.errors.InvalidArgumentError as error:
        raise argparse.ArgumentTypeError(error.message) from None
    return text


def _json_file(text):
    """--json's type: "-" (stdout) or a file that can be written, which is checked before
    the selftest runs (minutes on a new GPU), not after, and without making it."""
    if text != "-" and not _writable(text):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}")
    return text


def _writable(path):
    """Whether a file can be written at ``path`` (an existing file, or a new one in its folder)."""
    if os.path.isdir(path):
        return False
    return os.access(path if os.path.exists(path) else os.path.dirname(os.path.abspath(path)), os.W_OK)


def _prog(argv0):
    """The name the user typed: the console script's own, else ``python -m gpu_tensorarray``."""
    name = os.path.basename(argv0 or "")
    return "python -m gpu_tensorarray" if name in ("", "__main__.py", "-c") else name


def _command(commands, name, summary, example, **options):
    """A subcommand whose help says what it does and shows an example."""
    return commands.add_parser(name, help=summary, description=f"{summary}.", epilog=f"example:\n  {example}",
                               formatter_class=argparse.RawDescriptionHelpFormatter, **options)


def info(args):
    print(f"gpu_tensorarray {gta.__version__} (Python {platform.python_version()}, NumPy {np.__version__})")
    print("backends:")
    available = gta.available_backends()
    for name, problem in available.items():
        print(f"  {name:9s} {'available' if problem is None else 'unavailable: ' + problem}")
    try:
        name, reason = gta.default_backend()
        print(f"default backend: {name} ({reason})")
    except gta.errors.OpError as error:         # GPU_TENSORARRAY_BACKEND names no backend: the report goes on
        name = None
        print(f"default backend: none ({error})")
    print(f"accumulation: {gta.get_accumulation()}")
    usable, how = cpu_kernels.status()
    print(f"compiled scatter-add (numpy backend): {how if usable else 'not used: ' + how}")
    return 0 if name is not None and available[name] is None else 1


def demo(args):
    """A dynamic loop run forward under a persistent GradientTape, then two gradient
    computations (two tape.gradient calls: sources "gradients" and "gradients_1"), each
    accumulating into its own gradient array."""
    backend = gta.get_backend(args.backend)
    with gta.device(backend):
        print(f"backend: {backend.name} on {backend.device}")
        # Forward: a loop whose trip count depends on the data, into a dynamic array; the
        # reads that the two losses below are made of are recorded by the tape too.
        with gta.GradientTape(persistent=True) as tape:
            ta = gta.TensorArray("float32", size=0, dynamic_size=True, clear_after_read=False, element_shape=(4,))
            state = np.array([0.5, -1.0, 2.0, 0.25], np.float32)
            states = []
            while np.abs(state).sum() < 100.0:
                state = (1.5 * state + 1.0).astype(np.float32)
                states.append(backend.asarray(state))
                ta = ta.write(len(states) - 1, states[-1])
            size = int(gta.to_numpy(ta.size()))
            every_step = [ta.read(t) for t in range(size)]                 # loss1 = sum_t (t + 1) * sum(h_t)
            first, first_again, last = ta.read(0), ta.read(0), ta.read(size - 1)
            # loss2 = sum(h_0) + sum(h_0) + 2 * sum(h_last): slot 0 read twice
        print(f"forward: the loop ran {len(states)} steps; the dynamic array grew to size {size}")
        forward = gta.registry.lookup(ta.handle)

        def ones(scale):
            return backend.asarray(np.full(4, scale, np.float32))

        # Gradient computation 1: each read's gradient is written into the grad array,
        # each forward write's gradient reads it back.
        loss1_grads = [ones(t + 1.0) for t in range(size)]
        d1 = tape.gradient(every_step, states, output_gradients=loss1_grads)
        print(f"tape.gradient #1 used source {tape.sources_used[-1]!r} (grad array "
              f"{forward.name}@{tape.sources_used[-1]}); forward dynamic_size is now {forward.dynamic_size} "
              f"(size locked at {size})")
        try:
            ta.write(size, state)
        except gta.errors.InvalidArgumentError as error:
            print(f"  a forward write past the locked size fails: {error}")

        # Gradient computation 2: two reads of slot 0 mean two gradient writes there,
        # which aggregate (add) in this computation's own grad array.
        d2 = tape.gradient([first, first_again, last], states, output_gradients=[ones(1.0), ones(1.0), ones(2.0)])
        # Each source names its own grad array (TensorArrayGradV3); the tape closes it, and
        # takes it out of forward.grads, before gradient returns.
        first_source, second_source = tape.sources_used[-2:]
        separate = first_source != second_source and not forward.grads
        print(f"tape.gradient #2 used source {second_source!r}: a separate grad array, {forward.name}@{second_source} "
              f"(#1's: {forward.name}@{first_source}), each closed by the tape before its gradient returned "
              f"({forward.name} now holds {len(forward.grads)} gradient arrays)")

        d1 = np.array([gta.to_numpy(g)[0] for g in d1])
        d2 = np.array([gta.to_numpy(g)[0] for g in d2])
        expected1 = np.arange(1, size + 1, dtype=np.float32)
        expected2 = np.zeros(size, np.float32)
        expected2[0] += 2.0
        expected2[-1] += 2.0
        print(f"d loss1 / d h_t (first column), accumulator 'gradients':   {d1}")
        print(f"d loss2 / d h_t (first column), accumulator 'gradients_1': {d2}")
        again = np.array([gta.to_numpy(g)[0] for g in tape.gradient(every_step, states,
                                                                   output_gradients=loss1_grads)])
        ok = separate and np.array_equal(d1, expected1) and np.array_equal(d2, expected2) and np.array_equal(again, d1)
        print(f"nothing double counted: {ok} (each accumulator holds only its own computation's writes; "
              f"slot 0 of 'gradients_1' summed its two writes to {d2[0]}; computation 1 repeated with source "
              f"{tape.sources_used[-1]!r} gives the same values)")
        ta.close()        # the tape closed its grad arrays already
        print(f"after close: {gta.stats()['live_arrays']} arrays open")
        return 0 if ok else 1


def bench(args):
    where = "the benchmarks are not part of the installed package: from a source checkout, run python -m bench --help"
    if "-h" in args.rest or "--help" in args.rest:     # asked what it does: that is the answer
        print(f"bench: {where}")
        return 0
    print(f"error: {where}", file=sys.stderr)
    return 2


def selftest(args):
    from gpu_tensorarray.selftest import run

    return run(args.backend, args.json)


def _add_selftest_parser(commands, prog):
    parser = _command(commands, "selftest", "check every kernel and device placement against the numpy backend",
                      f"{prog} selftest --backend emulated --json selftest.json")
    parser.add_argument("--backend", action="append", metavar="NAME", type=_backend,
                        help="numpy | emulated | cupy | cuda:N, repeatable (default: every available one but numpy)")
    parser.add_argument("--json", nargs="?", const="-", metavar="FILE", type=_json_file,
                        help="JSON to FILE (default: stdout, with every other line on stderr)")
    parser.set_defaults(run=selftest)


def main(argv=None):
    prog = _prog(sys.argv[0])
    parser = _Parser(prog=prog, description="TensorFlow's TensorArray V3 ops and their gradients on the GPU (CuPy) "
                                            "or the CPU (NumPy), without TensorFlow.",
                     epilog=f"example:\n  {prog} demo", formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpu_tensorarray {gta.__version__}")
    commands = parser.add_subparsers(title="commands", dest="command", required=True)
    _command(commands, "info", "print the version, the backends usable here, the default one and why",
             f"{prog} info").set_defaults(run=info)
    demo_parser = _command(commands, "demo", "run a dynamic loop under a GradientTape and two gradient "
                           "computations, each accumulating in its own gradient arrays",
                           f"{prog} demo --backend emulated")
    demo_parser.add_argument("--backend", default=None, type=_backend,
                             help="numpy | emulated | cupy | cuda:N (default: automatic)")
    demo_parser.set_defaults(run=demo)
    # Accepts any arguments, so that old command lines reach the message saying where it went.
    commands.add_parser("bench", help="moved: python -m bench, from a source checkout", add_help=False,
                        prefix_chars="\0").set_defaults(run=bench)
    _add_selftest_parser(commands, prog)
    args, rest = parser.parse_known_args(argv)
    if rest and args.command != "bench":
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        status = args.run(args)
        sys.stdout.flush()
        return status
    except gta.errors.OpError as error:
        print(f"{prog}: error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (``info | head -1``): stop quietly. Point stdout at
        # /dev/null so the interpreter's own flush at exit cannot fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
