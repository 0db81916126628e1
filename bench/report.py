"""What a bench run shows: the progress lines (stderr), the summary table and the
target verdicts (stdout), the JSON document with the machine description, the plot."""

import os
import platform
import sys
import time
from importlib import metadata

import numpy as np

__all__ = ["Progress", "summary", "plot", "document", "machine_description", "cpu_model", "format_time",
           "format_ratio"]


def format_time(seconds):
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def format_ratio(value):
    return "-" if value is None else f"{value:.2f}x"


_time, _ratio = format_time, format_ratio


class Progress:
    """One line per row on stderr; on a terminal, one line rewritten in place."""

    def __init__(self, total, stream=None):
        self.total, self.stream = total, stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.started = time.perf_counter()
        self.run = None             # (this run, runs) with --repeat

    def _prefix(self, number):
        run = f"run {self.run[0]}/{self.run[1]} " if self.run else ""
        return f"[{run}{number}/{self.total}"

    def start(self, number, label):
        if self.tty:
            self.stream.write(f"\r\033[K{self._prefix(number)} {time.perf_counter() - self.started:5.0f}s] {label} ...")
            self.stream.flush()

    def done(self, number, label, shown):
        if self.tty:
            self.stream.write(f"\r\033[K{self._prefix(number)}] {label}: {shown}")
            if number == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"{self._prefix(number)}] {label}: {shown}\n")
        self.stream.flush()


_SHORT = {"deterministic": "det", "atomic": "atomic"}


def _who(r):
    return r["label"] + (f" {_SHORT.get(r['variant'], r['variant'])}" if r["variant"] else "")


def _spread(r, field, show):
    low_high = r.get("spread", {}).get(field)
    return f"{show(low_high[0])}-{show(low_high[1])}" if low_high else "-"


def summary(results, skipped, failures, copy_gbps, backend, verdicts, rough=False, repeat=1, stream=None):
    stream = stream or sys.stdout
    spread = "IQR" if repeat == 1 else f"min-max of {repeat}"
    header = ("op", "case", "provider", "median", spread, "per call", "GB/s", "x copy", "x ref", "ours faster", "")
    lines = []
    for r in results:
        if r["op"] == "memory":
            lines.append((r["op"], r["case"], _who(r), _time(r["seconds"]), _spread(r, "seconds", _time),
                          _time(r["per_call_s"]), f"peak {_ratio(r['peak_over_data'])}",
                          f"slab {_ratio(r['capacity_over_data'])}", "",
                          f"{r['host_bytes_per_element']:.1f} B/elt host", ""))
            continue
        per_call = _time(r["per_call_us"] / 1e6) if r["calls"] > 1 else "-"
        lines.append((r["op"], r["case"], _who(r), _time(r["median_s"]),
                      _time(r["iqr_s"]) if repeat == 1 else _spread(r, "median_s", _time), per_call,
                      f"{r['gbps']:.2f}" if r["gbps"] else ("view" if r["op"] == "stack" and r["role"] == "ours" else "-"),
                      _ratio(r.get("copy_ratio")), _ratio(r.get("over_reference")), _ratio(r.get("ours_speedup")),
                      "SUSPICIOUS: faster than copying as many bytes" if r.get("suspicious") else ""))
    widths = [max(len(str(line[i])) for line in [header] + lines) for i in range(len(header))]
    if copy_gbps:
        print(f"\ngpu_tensorarray bench: backend {backend.name} on {backend.device}"
              + (f"; {repeat} runs, medians over the runs" if repeat > 1 else "")
              + f"; copy bandwidth {copy_gbps:.2f} GB/s (one large copy, bytes read + written)\n"
              "GB/s: the bytes a call must move (read + written; view: none move). x copy: that over the\n"
              "copy bandwidth for as many bytes (a copy touching as much memory as the call, timed the same\n"
              "way, or the large copy where faster). x ref: ours over its floor in the same position\n"
              "(scatter_add: add_rows; stack: TensorArraySizeV3). ours faster: the peer's time over ours.",
              file=stream)
    previous = None
    for line in [header] + lines:
        if previous is not None and line[0] != previous:
            print("", file=stream)
        previous = line[0] if line is not header else None
        print("  ".join(str(cell).ljust(width) if i < 3 or i == len(line) - 1 else str(cell).rjust(width)
                        for i, (cell, width) in enumerate(zip(line, widths))).rstrip(), file=stream)
    if skipped:
        print("\nskipped (optional peers not installed):", file=stream)
        for s in skipped:
            print(f"  {s['id']}: {s['reason']}", file=stream)
    if verdicts:
        notes = ([] if backend.name == "numpy" else [f"this run: {backend.name}"]) + \
            (["rough: --quick"] if rough else [])
        print(f"\ntargets (set for the numpy backend{''.join('; ' + n for n in notes)}):", file=stream)
        for v in verdicts:
            state = "met   " if v["met"] else ("MISSED" if v["met"] is False else "n/a   ")
            runs = f" ({v['met_runs']} runs met)" if "met_runs" in v else ""
            print(f"  {state}{' [rough]' if rough and v['met'] is not None else ''} {v['target']}: "
                  f"{v['measured']}{runs}", file=stream)
    if failures:
        print("\nFAILED rows (the run fails):", file=stream)
        for f in failures:
            print(f"  {f['id']}: {f['error']}", file=stream)


def plot(results, copy_gbps, path, title):
    """Throughput: scatter-add GB/s against the row width E (n = S), and every row that
    moves bytes, GB/s against bytes moved per call, each point labelled with its op;
    hot indices (90% to one index) dashed and triangles, uniform solid and circles."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def marker(r):
        return "^" if r["params"].get("distribution") == "hot" else "o"

    figure, (left, right) = plt.subplots(1, 2, figsize=(14, 6))
    moving = [r for r in results if r.get("gbps") and r["op"] != "copy"]
    providers = sorted({_who(r) for r in moving})
    colour = {who: plt.get_cmap("tab10")(position % 10) for position, who in enumerate(providers)}
    series = {}
    for r in moving:
        if r["op"] == "scatter_add" and r["params"]["multiple"] == 1:
            series.setdefault((_who(r), r["params"]["distribution"]), []).append((r["params"]["width"], r["gbps"]))
    for (who, distribution), points in sorted(series.items()):
        points.sort()
        left.plot([p[0] for p in points], [p[1] for p in points], color=colour[who],
                  marker="^" if distribution == "hot" else "o",
                  linestyle="--" if distribution == "hot" else "-", label=f"{who}, {distribution}")
    left.set(xscale="log", yscale="log", xlabel="row width E (float32 elements)", ylabel="GB/s",
             title="grad scatter-add, S rows, n = S")
    for r in moving:
        right.scatter(r["bytes"], r["gbps"], color=colour[_who(r)], marker=marker(r), s=22)
        text = r["op"] + (f" E={r['params']['width']}" if r["op"] == "scatter_add" else "")
        right.annotate(text, (r["bytes"], r["gbps"]), fontsize=6, xytext=(3, 2), textcoords="offset points")
    for who in providers:
        right.scatter([], [], color=colour[who], label=who)
    right.scatter([], [], color="grey", marker="o", label="uniform indices / other ops")
    right.scatter([], [], color="grey", marker="^", label="hot: 90% to one index")
    right.set(xscale="log", yscale="log", xlabel="bytes moved per call", ylabel="GB/s",
              title="every row that moves bytes")
    for axes in (left, right):
        if copy_gbps:
            axes.axhline(copy_gbps, color="black", linestyle=":", linewidth=1, label="large copy bandwidth")
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def document(command, started, settings, profile, backend, copy_gbps, results, skipped, failures, verdicts, runs):
    """The JSON document: every row (with every run's rows under "runs" when repeated)."""
    return {
        "schema": 2, "command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": time.time() - started, "settings": settings, "timing": dict(profile),
        "machine": machine_description(backend), "copy_gbps": copy_gbps, "rows": results, "skipped": skipped,
        "failures": failures, "targets": verdicts,
        "runs": [{"rows": rows, "copy_gbps": copy} for rows, _, _, copy in runs] if len(runs) > 1 else [],
    }


def _version(*distributions):
    for name in distributions:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def cpu_model():
    """The CPU's brand string (py-cpuinfo), else what the platform module knows."""
    try:
        import cpuinfo
    except ImportError:
        return platform.processor() or platform.machine()
    info = cpuinfo.get_cpu_info()
    return info.get("brand_raw") or info.get("arch") or platform.machine()


def _thread_pools():
    """The native thread pools loaded now (BLAS, OpenMP), by threadpoolctl, or why not."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "threadpoolctl is not installed (bench/requirements.txt)"
    return [{key: pool.get(key) for key in ("user_api", "internal_api", "prefix", "version", "num_threads")}
            for pool in threadpool_info()]


def machine_description(backend):
    """CPU, cores, versions and thread settings (read after the peers ran, so the
    thread counts of the libraries they loaded are known)."""
    from gpu_tensorarray import __version__, get_accumulation
    from gpu_tensorarray.backends import cpu_kernels

    threads = {name: os.environ[name] for name in
               ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS",
                "TF_NUM_INTEROP_THREADS") if name in os.environ}
    threads["pools"] = _thread_pools()
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
    description = {
        "cpu": cpu_model(), "cores": os.cpu_count(), "cores_usable": affinity,
        "platform": platform.platform(), "python": platform.python_version(),
        "gpu_tensorarray": __version__, "numpy": np.__version__,
        "cupy": _version("cupy", "cupy-cuda12x", "cupy-cuda13x", "cupy-cuda11x"),
        "torch": _version("torch"), "tensorflow": _version("tensorflow", "tensorflow-cpu"),
        "threads": threads, "backend": backend.name, "device": str(backend.device),
        "accumulation_default": get_accumulation(), "compiled_scatter_add": cpu_kernels.status()[1],
    }
    if backend.name == "cupy":
        import cupy

        properties = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
        description["gpu"] = {"name": properties["name"].decode() if isinstance(properties["name"], bytes)
                              else properties["name"], "memory_bytes": properties["totalGlobalMem"],
                              "cuda_runtime": cupy.cuda.runtime.runtimeGetVersion()}
    return description
