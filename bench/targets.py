"""The performance targets (set for the numpy backend) as data, and ``evaluate``.

A Target applies to every result row of ``op`` whose provider is in ``providers``
and whose params match ``where`` (a value, or a (comparison, value) pair). Its
``quantity`` is one of:

- "per_call_us": the row's time per op call; with ``against`` (a provider), the
  limit is ``threshold`` times that provider's time in the same case plus ``offset`` us;
- "speedup": the ``against`` provider's time over the row's (how many times faster ours is);
- "copy_ratio": GB/s over a copy touching as much memory (runner.py);
- "peak_over_data", "host_bytes_per_element": from the memory row.

``requires``: run settings the target needs, e.g. {"threads": 1}; otherwise not measured.
"""

import operator
from collections import namedtuple

import numpy as np

from .report import format_time

__all__ = ["Target", "TARGETS", "evaluate", "combine"]

Target = namedtuple("Target", "text op providers where quantity compare threshold against offset requires",
                    defaults=({}, None, 0.0, {}))

_WIDE = {"width": (">=", 64)}
_DETERMINISTIC = {"mode": "deterministic"}

TARGETS = (
    Target("raw_ops write per call, keywords", "write", ("ours",), {}, "per_call_us", "<=", 0.5),
    Target("raw_ops read per call, keywords", "read", ("ours",), {}, "per_call_us", "<=", 0.4),
    Target("raw_ops write, np.int32 index, within its int index's time +", "write", ("ours.np_int32",), {},
           "per_call_us", "<=", 1.0, against="ours", offset=0.1),
    Target("raw_ops read, np.int32 index, within its int index's time +", "read", ("ours.np_int32",), {},
           "per_call_us", "<=", 1.0, against="ours", offset=0.1),
    Target("class write within 1.5x raw_ops'", "write", ("ours.class",), {}, "per_call_us", "<=", 1.5,
           against="ours"),
    Target("class read within 1.5x raw_ops'", "read", ("ours.class",), {}, "per_call_us", "<=", 1.5,
           against="ours"),
    Target("stack of a fully written array, warm", "stack", ("ours", "ours.class"), {}, "per_call_us", "<", 5),
    Target("gather, np.take's time over ours", "gather", ("ours",), {}, "speedup", ">=", 0.8, against="numpy"),
    Target("grad scatter-add, n=S, E=1, np.add.at's time over ours", "scatter_add", ("ours",),
           dict(_DETERMINISTIC, width=1, multiple=1), "speedup", ">=", 2, against="numpy"),
    Target("grad scatter-add, n=4S, E=1, np.add.at's time over ours", "scatter_add", ("ours",),
           dict(_DETERMINISTIC, width=1, multiple=4), "speedup", ">=", 4, against="numpy"),
    Target("grad scatter-add, E>=64, np.add.at's time over ours", "scatter_add", ("ours",),
           dict(_DETERMINISTIC, **_WIDE), "speedup", ">=", 6, against="numpy"),
    Target("grad scatter-add, E>=64, torch index_add_'s time (1 thread) over ours", "scatter_add", ("ours",),
           dict(_DETERMINISTIC, **_WIDE), "speedup", ">=", 1, against="torch", requires={"threads": 1}),
    Target("grad scatter-add, int32 indices within int64's time", "scatter_add", ("ours",), _DETERMINISTIC,
           "per_call_us", "<=", 1.1, against="ours.int64"),
    Target("grad scatter-add op within 1.5x its add_rows + 3 us", "scatter_add", ("ours",), {},
           "per_call_us", "<=", 1.5, against="ours.add_rows", offset=3.0),
    Target("grad scatter-add, E=4096, GB/s over a copy of as much memory", "scatter_add", ("ours",),
           dict(_DETERMINISTIC, width=4096), "copy_ratio", ">=", 0.25),
    Target("memory: peak over final data", "memory", ("ours",), {}, "peak_over_data", "<", 2),
    Target("memory: host bytes per element", "memory", ("ours",), {}, "host_bytes_per_element", "<", 64),
)

_COMPARE = {"<": operator.lt, "<=": operator.le, ">=": operator.ge, ">": operator.gt}
_UNIT = {"host_bytes_per_element": " B"}


def _matches(params, where):
    for key, wanted in where.items():
        value = params.get(key)
        if isinstance(wanted, tuple):
            if value is None or not _COMPARE[wanted[0]](value, wanted[1]):
                return False
        elif value != wanted:
            return False
    return True


def _counterpart(results, row, provider):
    """``provider``'s row in ``row``'s case: the same mode where it has modes."""
    found = [r for r in results if r["op"] == row["op"] and r["case"] == row["case"] and r["provider"] == provider
             and "median_s" in r]
    same_mode = [r for r in found if r["variant"] == row["variant"]]
    return (same_mode or found or [None])[0]


def _show(value, quantity):
    if quantity == "per_call_us":
        return format_time(value * 1e-6)
    return f"{value:.3g}{_UNIT.get(quantity, 'x')}"


def evaluate(results, settings=None, targets=TARGETS):
    """One verdict per (target, matching row): {"target", "row", "value", "limit", "met",
    "measured"}; "met" is None (and "measured" says why) where it could not be measured."""
    settings = settings or {}
    verdicts = []
    for target in targets:
        for row in results:
            if row["op"] != target.op or row["provider"] not in target.providers or \
                    not _matches(row["params"], target.where):
                continue
            tags = ([row["label"]] if len(target.providers) > 1 else []) + \
                ([row["variant"]] if row["variant"] and "mode" not in target.where else [])
            text = f"{target.text}: {row['case']}" + (f" [{' '.join(tags)}]" if tags else "") + \
                f" {target.compare} " + (f"{target.threshold:g}x {target.against} + {target.offset:g} us"
                                         if target.quantity == "per_call_us" and target.against else
                                         _show(target.threshold, target.quantity))
            verdict = {"target": text, "row": row["id"], "value": None, "limit": target.threshold, "met": None,
                       "quantity": target.quantity, "compare": target.compare}
            missing = [f"--{key} {value}" for key, value in target.requires.items() if settings.get(key) != value]
            value, limit = row.get(target.quantity), target.threshold
            other = _counterpart(results, row, target.against) if target.against else None
            if target.against and other is None:
                why = "needs --peers" if target.against in ("numpy", "torch", "tensorflow") else "not measured"
                verdicts.append(dict(verdict, measured=why))
                continue
            if missing:
                verdicts.append(dict(verdict, measured="needs " + " ".join(missing)))
                continue
            if target.quantity == "speedup":
                value = other["median_s"] / row["median_s"]
            elif target.against:
                limit = target.threshold * other["per_call_us"] + target.offset
            if value is None:
                verdicts.append(dict(verdict, measured="not measured"))
                continue
            measured = _show(value, target.quantity) + \
                (f" (limit {_show(limit, target.quantity)})" if limit != target.threshold else "")
            verdicts.append(dict(verdict, value=value, limit=limit, measured=measured,
                                 met=bool(_COMPARE[target.compare](value, limit))))
    return verdicts


def combine(per_run):
    """Verdicts of repeated runs (lists in the same order) as one list: the median value
    and limit, "spread" [min, max] of the value, "met" on the medians, "met_runs" k/N."""
    if len(per_run) == 1:
        return per_run[0]
    combined = []
    for verdicts in zip(*per_run):
        measured = [v for v in verdicts if v["value"] is not None]
        if not measured:
            combined.append(dict(verdicts[0]))
            continue
        values = [v["value"] for v in measured]
        value, limit = float(np.median(values)), float(np.median([v["limit"] for v in measured]))
        quantity, compare = measured[0]["quantity"], measured[0]["compare"]
        combined.append(dict(
            measured[0], value=value, limit=limit, spread=[min(values), max(values)],
            met=bool(_COMPARE[compare](value, limit)), met_runs=f"{sum(v['met'] for v in measured)}/{len(verdicts)}",
            measured=f"{_show(value, quantity)} [{_show(min(values), quantity)} to {_show(max(values), quantity)}]" +
            (f" (limit {_show(limit, quantity)})" if "(limit" in measured[0]["measured"] else "")))
    return combined
