"""``python -m gpu_tensorarray bench``: runs the rows of benchmarks.plan(), times
them, prints a progress display (stderr) and a summary table (stdout), checks the
performance targets, and writes JSON (with a machine description) and a plot.

Timing: after warm-up, repeated rounds until a time budget is spent (at least
``min_rounds``); each round is ``setup()`` (untimed) then the timed ``run()``,
or, for cases without setup, ``run()`` repeated enough times to fill a round of
about a millisecond. The garbage collector is off during rounds (as in timeit).
On the cupy backend rounds are timed with CUDA events on the current stream
(every ``run()`` also ends with a synchronize). Reported: the median over
rounds and the interquartile range (IQR), per run and per op call; GB/s from the
bytes a run must move; and the ratio of that to the machine's copy bandwidth,
measured in the same run by the first row (one large copy, bytes read + written).
"""

import gc
import json
import math
import os
import platform
import re
import sys
import time
from importlib import metadata

import numpy as np

from . import benchmarks
from .backends import get_accumulation, get_backend

__all__ = ["run_bench", "machine_description"]

# (rounds at least, seconds per row at most unless rounds are missing, warm-up runs, round length)
PROFILES = {
    "full": {"min_rounds": 7, "budget": 1.0, "warmup": 2, "round_s": 2e-3},
    "quick": {"min_rounds": 3, "budget": 0.15, "warmup": 1, "round_s": 5e-4},
}


# -- clocks ---------------------------------------------------------------------------------------
def make_clock(backend):
    """clock(fn) -> seconds fn took; CUDA events on the cupy backend."""
    if backend.name == "cupy":
        import cupy

        def clock(fn):
            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            fn()
            end.record()
            end.synchronize()
            return cupy.cuda.get_elapsed_time(start, end) / 1e3
        return clock

    def clock(fn):
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return clock


def _repeat(run, number):
    if number == 1:
        return run

    def repeated():
        for _ in range(number):
            run()
    return repeated


def time_case(case, clock, min_rounds, budget, warmup, round_s):
    """Per-run seconds of each timed round, and the number of runs per round."""
    setup = case.setup or (lambda: None)
    for _ in range(warmup):
        setup()
        case.run()
    number = 1
    if case.setup is None:
        once = clock(case.run)
        number = max(1, min(10000, math.ceil(round_s / max(once, 1e-9))))
    timed = _repeat(case.run, number)
    times = []
    started = time.perf_counter()
    enabled = gc.isenabled()
    try:
        while len(times) < min_rounds or (time.perf_counter() - started < budget and len(times) < 10000):
            setup()
            gc.disable()
            try:
                times.append(clock(timed) / number)
            finally:
                if enabled:
                    gc.enable()
    finally:
        case.teardown()
    return times, number


def _stats(times):
    q25, median, q75 = np.percentile(times, [25, 50, 75])
    return float(median), float(q75 - q25)


# -- one run --------------------------------------------------------------------------------------
# Rows run in phases: ours and NumPy first (the copy row first of all), then torch, then
# TensorFlow. Their thread pools keep spinning a while after each op; on a machine with few
# cores those idle threads would slow whatever ran next. Results keep the plan's order.
_PHASES = {"torch": 1, "tensorflow": 2, "tf.raw_ops": 2}


def run_rows(rows, backend, profile, progress):
    clock = make_clock(backend)
    results, skipped = [], []
    copy_gbps = None
    order = sorted(range(len(rows)), key=lambda position: (_PHASES.get(rows[position].provider, 0), position))
    for number, row in enumerate((rows[position] for position in order), 1):
        label = f"{row.op} {row.case} [{benchmarks.provider_label(row.provider, backend)}" + \
                (f" {row.variant}]" if row.variant else "]")
        progress.start(number, label)
        gc.collect()
        try:
            case = row.make(backend)
        except benchmarks.Skip as reason:
            skipped.append({"id": row.id, "op": row.op, "case": row.case, "provider": row.provider,
                            "variant": row.variant, "reason": str(reason)})
            progress.done(number, label, f"skipped: {reason}")
            continue
        entry = {"id": row.id, "op": row.op, "case": row.case, "provider": row.provider,
                 "label": benchmarks.provider_label(row.provider, backend), "variant": row.variant,
                 "params": row.params, "calls": case.calls}
        if case.measure is not None:
            entry.update(case.measure())
            entry["per_call_us"] = entry["per_call_s"] * 1e6
            shown = f"peak {_ratio(entry['peak_over_data'])} of data, " \
                    f"{entry['host_bytes_per_element']:.1f} B/element host"
        else:
            times, repeats = time_case(case, clock, **profile)
            median, iqr = _stats(times)
            entry.update({"median_s": median, "iqr_s": iqr, "rounds": len(times), "runs_per_round": repeats,
                          "per_call_us": median / case.calls * 1e6, "per_call_iqr_us": iqr / case.calls * 1e6,
                          "bytes": case.nbytes, "gbps": case.nbytes / median / 1e9 if case.nbytes else None})
            if row.op == "copy":
                copy_gbps = entry["gbps"]
            entry["copy_ratio"] = entry["gbps"] / copy_gbps if entry["gbps"] and copy_gbps else None
            shown = f"{_time(median)} (IQR {_time(iqr)})"
        results.append(entry)
        progress.done(number, label, shown)
    rank = {row.id: position for position, row in enumerate(rows)}
    results.sort(key=lambda entry: rank[entry["id"]])
    skipped.sort(key=lambda entry: rank[entry["id"]])
    _speedups(results)
    return results, skipped, copy_gbps


def _speedups(results):
    """For every peer row: how many times faster ours (the op users see, deterministic
    where there is a mode) is; for every ours row: the same against each peer."""
    ours = {(r["op"], r["case"]): r for r in results
            if r["provider"] == "ours" and r["variant"] in (None, "deterministic") and "median_s" in r}
    for entry in results:
        reference = ours.get((entry["op"], entry["case"]))
        if entry["provider"] in benchmarks.PEERS and reference is not None and "median_s" in entry:
            entry["ours_speedup"] = entry["median_s"] / reference["median_s"]
            reference.setdefault("speedup_over", {})[entry["label"]] = entry["ours_speedup"]


# -- targets (numpy backend; DESIGN.md "Performance model") ---------------------------------------
def _find(results, op, provider, variant=None, **params):
    return [r for r in results if r["op"] == op and r["provider"] == provider and r["variant"] == variant
            and all(r["params"].get(k) == v for k, v in params.items())]


def _peer_of(results, row, provider):
    found = [r for r in results if r["op"] == row["op"] and r["case"] == row["case"] and r["provider"] == provider]
    return found[0] if found else None


def _targets(results, sizes):
    """[(target, measured text, met: True | False | None when not measured)]."""
    out = []

    def per_call(op, provider, limit, what, **params):
        for row in _find(results, op, provider, **params):
            out.append((f"{what}: {row['case']} < {limit:g} us per call", f"{row['per_call_us']:.2f} us",
                        row["per_call_us"] < limit))

    per_call("write", "ours", 2, "raw_ops write")
    per_call("read", "ours", 2, "raw_ops read")
    per_call("write", "ours.class", 3, "class write")
    per_call("read", "ours.class", 3, "class read")
    for provider in ("ours", "ours.class"):
        for count in sizes["stack"]["counts"]:
            per_call("stack", provider, 5, f"stack ({provider}) of a fully written array", count=count,
                     width=sizes["stack"]["width"])
    for row in _find(results, "gather", "ours"):
        peer = _peer_of(results, row, "numpy")
        ratio = peer["median_s"] / row["median_s"] if peer else None
        out.append((f"gather {row['case']} >= 0.8x np.take's throughput",
                    f"{ratio:.2f}x" if ratio else "needs --peers", ratio >= 0.8 if ratio else None))
    for row in _find(results, "scatter_add", "ours", "deterministic"):
        peer = _peer_of(results, row, "numpy")
        ratio = peer["median_s"] / row["median_s"] if peer else None
        need = 6 if row["params"]["width"] >= 64 else 2
        out.append((f"grad scatter-add deterministic {row['case']} >= {need}x np.add.at",
                    f"{ratio:.2f}x" if ratio else "needs --peers", ratio >= need if ratio else None))
        if row["params"]["width"] == max(sizes["scatter_add"]["widths"]):
            ratio = row["copy_ratio"]
            out.append((f"grad scatter-add deterministic {row['case']} >= 0.25x copy bandwidth",
                        f"{ratio:.2f}x ({row['gbps']:.2f} GB/s)" if ratio else "n/a", ratio >= 0.25 if ratio else None))
    for row in _find(results, "memory", "ours"):
        peak = row["peak_over_data"]
        out.append((f"memory {row['case']}: peak < 2x final data", _ratio(peak), peak < 2 if peak else None))
        host = row["host_bytes_per_element"]
        out.append((f"memory {row['case']}: host overhead < 64 B per element", f"{host:.1f} B", host < 64))
    return out


# -- machine --------------------------------------------------------------------------------------
def _version(*distributions):
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_description(backend):
    """CPU, cores, versions and thread settings (read after the peers ran, so the
    thread counts of the libraries they loaded are known)."""
    threads = {name: os.environ[name] for name in
               ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                "TF_NUM_INTEROP_THREADS") if name in os.environ}
    torch = sys.modules.get("torch")
    if torch is not None:
        threads["torch.get_num_threads"] = torch.get_num_threads()
        threads["torch.get_num_interop_threads"] = torch.get_num_interop_threads()
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "config"):
        threads["tf.intra_op_parallelism_threads"] = tf.config.threading.get_intra_op_parallelism_threads()
        threads["tf.inter_op_parallelism_threads"] = tf.config.threading.get_inter_op_parallelism_threads()
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = None
    from . import __version__

    description = {
        "cpu": _cpu_model(), "cores": os.cpu_count(), "cores_usable": affinity,
        "platform": platform.platform(), "python": platform.python_version(),
        "gpu_tensorarray": __version__, "numpy": np.__version__,
        "cupy": _version("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"),
        "torch": _version("torch"), "tensorflow": _version("tensorflow", "tensorflow-cpu"),
        "threads": threads, "backend": backend.name, "device": str(backend.device),
        "accumulation_default": get_accumulation(),
    }
    if backend.name == "cupy":
        import cupy

        properties = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        description["gpu"] = {"name": properties["name"].decode() if isinstance(properties["name"], bytes)
                              else properties["name"], "memory_bytes": properties["totalGlobalMem"],
                              "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion()}
    return description


# -- display --------------------------------------------------------------------------------------
def _time(seconds):
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def _ratio(value):
    return "-" if value is None else f"{value:.2f}x"


class Progress:
    """One line per row on stderr; on a terminal, one line rewritten in place."""

    def __init__(self, total, stream=None):
        self.total, self.stream = total, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.perf_counter()

    def start(self, number, label):
        if self.tty:
            self.stream.write(f"\r\033[K[{number}/{self.total} {time.perf_counter() - self.started:5.0f}s] {label} ...")
            self.stream.flush()

    def done(self, number, label, shown):
        if self.tty:
            self.stream.write(f"\r\033[K[{number}/{self.total}] {label}: {shown}")
            if number == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"[{number}/{self.total}] {label}: {shown}\n")
        self.stream.flush()


_SHORT = {"deterministic": "det", "atomic": "atomic"}


def summary(results, skipped, copy_gbps, backend, targets, stream=None):
    stream = stream or sys.stdout
    header = ("op", "case", "provider", "median", "IQR", "per call", "GB/s", "x copy", "ours faster")
    lines = []
    for r in results:
        provider = r["label"] + (f" {_SHORT.get(r['variant'], r['variant'])}" if r["variant"] else "")
        if r["op"] == "memory":
            lines.append((r["op"], r["case"], provider, _time(r["seconds"]), "-", _time(r["per_call_s"]),
                          f"peak {_ratio(r['peak_over_data'])}", f"slab {_ratio(r['capacity_over_data'])}",
                          f"{r['host_bytes_per_element']:.1f} B/elt host"))
            continue
        per_call = _time(r["per_call_us"] / 1e6) if r["calls"] > 1 else "-"
        lines.append((r["op"], r["case"], provider, _time(r["median_s"]), _time(r["iqr_s"]), per_call,
                      f"{r['gbps']:.2f}" if r["gbps"] else "-", _ratio(r["copy_ratio"]),
                      _ratio(r.get("ours_speedup"))))
    widths = [max(len(str(line[i])) for line in [header] + lines) for i in range(len(header))]
    print(f"\ngpu_tensorarray bench: backend {backend.name} on {backend.device}; copy bandwidth "
          f"{copy_gbps:.2f} GB/s (bytes read + written by one large copy)" if copy_gbps else "", file=stream)
    previous = None
    for line in [header] + lines:
        if previous is not None and line[0] != previous:
            print("", file=stream)
        previous = line[0] if line is not header else None
        print("  ".join(str(cell).ljust(width) if i < 3 else str(cell).rjust(width)
                        for i, (cell, width) in enumerate(zip(line, widths))), file=stream)
    if skipped:
        print("\nskipped:", file=stream)
        for s in skipped:
            print(f"  {s['id']}: {s['reason']}", file=stream)
    if targets:
        this_run = "" if backend.name == "numpy" else f"; this run: {backend.name}"
        print(f"\ntargets (set for the numpy backend{this_run}):", file=stream)
        for text, measured, met in targets:
            state = "met   " if met else ("MISSED" if met is False else "n/a   ")
            print(f"  {state} {text}: {measured}", file=stream)


def plot(results, copy_gbps, path, title):
    """Throughput against size: scatter-add GB/s against the row width E (one line per
    provider and distribution, n = S), and every row that moves bytes, GB/s against
    bytes moved per run, with the copy bandwidth as the limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 5.5))
    series = {}
    for r in results:
        if r["op"] == "scatter_add" and r.get("gbps") and r["params"]["count"] == r["params"]["rows"]:
            who = r["label"] + (f" {r['variant']}" if r["variant"] else "")
            series.setdefault((who, r["params"]["distribution"]), []).append((r["params"]["width"], r["gbps"]))
    providers = sorted({r["label"] + (f" {r['variant']}" if r["variant"] else "") for r in results})
    colour = {who: plt.get_cmap("tab10")(position % 10) for position, who in enumerate(providers)}
    for (who, distribution), points in sorted(series.items()):
        points.sort()
        left.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=colour[who],
                  linestyle="-" if distribution == "uniform" else "--", label=f"{who}, {distribution}")
    left.set(xscale="log", yscale="log", xlabel="row width E (float32 elements)", ylabel="GB/s",
             title="grad scatter-add, S rows, n = S (dashed: 90% to one index)")
    by_provider = {}
    for r in results:
        if r.get("gbps") and r["op"] != "copy":
            by_provider.setdefault(r["label"] + (f" {r['variant']}" if r["variant"] else ""), []).append(
                (r["bytes"], r["gbps"]))
    for who, points in sorted(by_provider.items()):
        right.scatter([p[0] for p in points], [p[1] for p in points], color=colour[who], label=who, s=18)
    right.set(xscale="log", yscale="log", xlabel="bytes moved per call", ylabel="GB/s",
              title="every row that moves bytes")
    for axes in (left, right):
        if copy_gbps:
            axes.axhline(copy_gbps, color="black", linestyle="--", linewidth=1, label="copy bandwidth")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


# -- the command ----------------------------------------------------------------------------------
def run_bench(args):
    """The ``bench`` subcommand; ``args`` has quick, backend, peers, threads, only, json, plot, tiny."""
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            print("error: --plot needs matplotlib: pip install 'gpu_tensorarray[plot]'", file=sys.stderr)
            return 2
    from . import device

    if args.threads:
        # Before torch or TensorFlow load: OpenMP and MKL read these at start-up.
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ[name] = str(args.threads)
        benchmarks.PEER_THREADS = args.threads
    backend = get_backend(args.backend)
    sizes = benchmarks.TINY_SIZES if args.tiny else benchmarks.SIZES
    profile = dict(PROFILES["quick" if args.quick or args.tiny else "full"])
    if args.tiny:
        profile.update(min_rounds=2, budget=0.0, warmup=1)
    rows = benchmarks.plan(sizes, peers=args.peers)
    if args.only:       # the copy row always runs: every ratio needs it
        pattern = re.compile(args.only)
        rows = [row for row in rows if row.op == "copy" or pattern.search(row.id)]
    progress = Progress(len(rows))
    started = time.time()
    with device(backend):
        results, skipped, copy_gbps = run_rows(rows, backend, profile, progress)
    targets = _targets(results, sizes)
    summary(results, skipped, copy_gbps, backend, targets)
    command = " ".join(["python -m gpu_tensorarray bench"] + (["--quick"] if args.quick else []) +
                       ([f"--backend {args.backend}"] if args.backend else []) + (["--peers"] if args.peers else []) +
                       ([f"--threads {args.threads}"] if args.threads else []) +
                       ([f"--only '{args.only}'"] if args.only else []) +
                       ([f"--json {args.json}"] if args.json else []) + ([f"--plot {args.plot}"] if args.plot else []) +
                       (["--tiny"] if args.tiny else []))
    if args.json:
        document = {
            "schema": 1, "command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z",
                                                                               time.localtime(started)),
            "seconds": time.time() - started, "sizes": "tiny" if args.tiny else "full",
            "profile": "quick" if args.quick or args.tiny else "full", "timing": dict(profile),
            "machine": machine_description(backend), "copy_gbps": copy_gbps, "rows": results,
            "skipped": skipped,
            "targets": [{"target": t, "measured": m, "met": met} for t, m, met in targets],
        }
        with open(args.json, "w") as out:
            json.dump(document, out, indent=1, default=_jsonable)
            out.write("\n")
    if args.plot:
        plot(results, copy_gbps, args.plot, f"gpu_tensorarray bench ({backend.name}; {_cpu_model()})")
    return 0


def _jsonable(value):
    if isinstance(value, (np.integer, np.floating)):
        return value.item()
    if isinstance(value, tuple):
        return list(value)
    return str(value)
