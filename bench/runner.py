"""Timing: runs plan() rows and turns them into result entries (dicts).

After warm-up, timed rounds repeat until a time budget is spent (at least
``min_rounds``). A round is ``setup()`` (untimed) then one timed ``run()``, or,
for cases without setup, ``run()`` repeated to fill about ``round_s`` seconds.
The garbage collector is off while timing (as in timeit); on the cupy backend
rounds are timed with CUDA events. Reported: the median over rounds and the
interquartile range (IQR), per run and per op call.

Bandwidth is checked against the copy bandwidth for as many bytes: a copy of the
same bytes timed the same way (a 4 MB gather repeated in a loop stays in the CPU's
cache, and so does a 4 MB copy; a 256 MiB copy does not), or the large copy where
that is faster (a tiny copy is bound by its call overhead). The copy touches as much
memory as the row: a row that moves some bytes twice (a scatter-add's destination
rows, read then written) is compared with a copy of its footprint, the bytes it
touches once each, which stays in the cache exactly when the row's would. These
copies run after all rows. A row faster than 1.5x that is flagged as suspicious:
something is cached, lazy or miscounted.

A row skips only when its peer is not installed (providers.Skip); any other
failure, a wrong result included, is recorded in ``failures`` and fails the run.
"""

import gc
import math
import time
import traceback

import numpy as np

from .cases import OPS, WrongResult
from .providers import PROVIDERS, Skip, label
from .report import format_ratio as _ratio, format_time as _time

__all__ = ["PROFILES", "SUSPICIOUS", "run_rows", "run_repeated", "make_clock", "time_case", "flag_suspicious"]

# (rounds at least, seconds per row at most unless rounds are missing, warm-up rounds, round length)
PROFILES = {
    "full": {"min_rounds": 7, "budget": 1.0, "warmup": 2, "round_s": 2e-3},
    "quick": {"min_rounds": 3, "budget": 0.15, "warmup": 1, "round_s": 5e-4},
    "tiny": {"min_rounds": 2, "budget": 0.0, "warmup": 1, "round_s": 5e-4},
}
SUSPICIOUS = 1.5        # GB/s over the copy bandwidth for as many bytes above which a row is flagged


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
    while len(times) < min_rounds or (time.perf_counter() - started < budget and len(times) < 10000):
        setup()
        gc.disable()
        try:
            times.append(clock(timed) / number)
        finally:
            if enabled:
                gc.enable()
    return times, number


def _stats(times):
    q25, median, q75 = np.percentile(times, [25, 50, 75])
    return float(median), float(q75 - q25)


class _CopyReference:
    """The copy bandwidth for n bytes (read + written): a copy of n bytes timed like the
    rows, once per size, or the large copy's figure where that is higher (a small copy
    is bound by its call overhead, not by the memory)."""

    def __init__(self, backend, profile, largest, known):
        self.backend, self.clock, self.profile = backend, make_clock(backend), profile
        self.known, self.largest = known, largest

    def gbps(self, nbytes):
        if self.largest and nbytes >= self.largest[0]:
            return self.largest[1]
        if nbytes not in self.known:
            case = OPS["copy"].factory(nbytes=max(4, nbytes // 2))["numpy"](self.backend,
                                                                             PROVIDERS["numpy"].load(self.backend))
            times, _ = time_case(case, self.clock, **self.profile)
            self.known[nbytes] = case.nbytes / _stats(times)[0] / 1e9
        return max(self.known[nbytes], self.largest[1] if self.largest else 0.0)


def _compare_with_copies(runs, backend, profile):
    """Every row that moves bytes gets "copy_gbps", "copy_ratio" and "suspicious". The
    reference copies run after every row of every run, because what a row allocates and
    frees changes how fast the next rows get memory: glibc hands a 2 MB gather output
    out of recycled heap (0.12-0.2 ms a gather here) or as fresh pages that fault in
    (1-2 ms; 5-7 ms with MALLOC_MMAP_THRESHOLD_=131072), depending on the buffers freed
    before (its dynamic mmap threshold)."""
    known = {}                  # nbytes -> GB/s of a copy of that many bytes, shared by the runs
    for results, *_ in runs:
        largest = next(((r["bytes"], r["gbps"]) for r in results if r["op"] == "copy"), None)
        copies = _CopyReference(backend, profile, largest, known)
        for entry in results:
            if entry.get("gbps"):
                entry["copy_gbps"] = copies.gbps(entry["footprint"]) if entry["op"] != "copy" else entry["gbps"]
                entry["copy_ratio"] = entry["gbps"] / entry["copy_gbps"]
                entry["suspicious"] = flag_suspicious(entry)


def flag_suspicious(entry):
    """True when a row moves bytes faster than SUSPICIOUS times the copy bandwidth for as many bytes."""
    return bool(entry.get("copy_ratio") and entry["copy_ratio"] > SUSPICIOUS)


def _entry(row, backend, case):
    return {"id": row.id, "op": row.op, "case": row.case, "provider": row.provider, "role": row.role,
            "label": label(row.provider, backend), "variant": row.variant, "params": row.params,
            "calls": case.calls}


def run_rows(rows, backend, profile, progress):
    """(results, skipped, failures, copy_gbps) of one run over ``rows``; run_repeated
    adds the copy references."""
    clock = make_clock(backend)
    results, skipped, failures, copy_gbps = [], [], [], None
    order = sorted(range(len(rows)), key=lambda position: (PROVIDERS[rows[position].provider].phase, position))
    for number, row in enumerate((rows[position] for position in order), 1):
        shown = f"{row.op} {row.case} [{label(row.provider, backend)}" + (f" {row.variant}]" if row.variant else "]")
        progress.start(number, shown)
        gc.collect()
        case = None
        try:
            case = row.make(backend)
            if case.measure is not None:
                entry = dict(_entry(row, backend, case), **case.measure())
                entry["per_call_us"] = entry["per_call_s"] * 1e6
                outcome = f"peak {_ratio(entry['peak_over_data'])} of data, " \
                          f"{entry['host_bytes_per_element']:.1f} B/element host"
            else:
                times, repeats = time_case(case, clock, **profile)
                median, iqr = _stats(times)
                entry = dict(_entry(row, backend, case), median_s=median, iqr_s=iqr, rounds=len(times),
                             runs_per_round=repeats, per_call_us=median / case.calls * 1e6,
                             per_call_iqr_us=iqr / case.calls * 1e6, bytes=case.nbytes, footprint=case.footprint,
                             gbps=case.nbytes / median / 1e9 if case.nbytes else None)
                if row.op == "copy":
                    copy_gbps = entry["gbps"]
                outcome = f"{_time(median)} (IQR {_time(iqr)})"
            if case.check is not None:      # after timing: its buffers would change how the timed
                case.check()                # calls get memory (see _compare_with_copies)
        except Skip as reason:
            if row.role != "peer" and not OPS[row.op].requires:
                failures.append({"id": row.id, "error": f"our own row skipped: {reason}"})
                progress.done(number, shown, "FAILED: skipped")
            else:
                skipped.append({"id": row.id, "op": row.op, "case": row.case, "provider": row.provider,
                                "variant": row.variant, "reason": str(reason)})
                progress.done(number, shown, f"skipped: {reason}")
            continue
        except Exception as error:      # noqa: BLE001 -- reported, and it fails the run
            text = str(error) if isinstance(error, WrongResult) else \
                f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=-3)}"
            failures.append({"id": row.id, "error": text})
            progress.done(number, shown, f"FAILED: {type(error).__name__}: {error}")
            continue
        finally:
            if case is not None:
                case.teardown()
        results.append(entry)
        progress.done(number, shown, outcome)
    rank = {row.id: position for position, row in enumerate(rows)}
    for listed in (results, skipped, failures):
        listed.sort(key=lambda entry: rank[entry["id"]])
    _relations(results)
    return results, skipped, failures, copy_gbps


def _relations(results):
    """Peers: how many times faster ours (the op users see, deterministic where there is
    a mode) is ("ours_speedup"); ours: time over its reference in the same position
    ("over_reference": op over add_rows, stack over SizeV3)."""
    timed = [r for r in results if "median_s" in r]
    ours = {(r["op"], r["case"]): r for r in timed
            if r["provider"] == "ours" and r["variant"] in (None, "deterministic")}
    references = {(r["op"], r["case"], r["variant"]): r for r in timed if r["role"] == "reference"}
    for entry in timed:
        if entry["role"] == "peer" and (entry["op"], entry["case"]) in ours:
            mine = ours[entry["op"], entry["case"]]
            entry["ours_speedup"] = entry["median_s"] / mine["median_s"]
            mine.setdefault("speedup_over", {})[entry["label"]] = entry["ours_speedup"]
        if entry["role"] == "ours":
            reference = references.get((entry["op"], entry["case"], entry["variant"]))
            if reference is not None:
                entry["over_reference"] = entry["median_s"] / reference["median_s"]
                entry["reference"] = reference["provider"]


# Fields summarised over repeated runs (median, and [min, max] in "spread").
_VARYING = ("median_s", "iqr_s", "per_call_us", "gbps", "copy_gbps", "copy_ratio", "ours_speedup",
            "over_reference", "peak_over_data", "capacity_over_data", "host_bytes_per_element", "seconds",
            "per_call_s")


def run_repeated(rows, backend, profile, progress, repeat):
    """The selection ``repeat`` times in this process. Returns (runs, combined): every
    run's (results, skipped, failures, copy_gbps), and one result list whose numbers
    are medians over the runs, with "spread": {field: [min, max]} and "runs"."""
    runs = []
    for index in range(repeat):
        progress.run = (index + 1, repeat) if repeat > 1 else None
        runs.append(run_rows(rows, backend, profile, progress))
    _compare_with_copies(runs, backend, profile)
    if repeat == 1:
        return runs, runs[0][0]
    by_id = {}
    for results, *_ in runs:
        for entry in results:
            by_id.setdefault(entry["id"], []).append(entry)
    combined = []
    for entries in by_id.values():
        entry = dict(entries[0], runs=len(entries), spread={})
        for field in _VARYING:
            values = [e[field] for e in entries if e.get(field) is not None]
            if values:
                entry[field] = float(np.median(values))
                entry["spread"][field] = [float(min(values)), float(max(values))]
        speedups = {}
        for e in entries:
            for who, value in e.get("speedup_over", {}).items():
                speedups.setdefault(who, []).append(value)
        if speedups:
            entry["speedup_over"] = {who: float(np.median(values)) for who, values in speedups.items()}
        entry["suspicious"] = any(e.get("suspicious") for e in entries)
        combined.append(entry)
    return runs, combined
