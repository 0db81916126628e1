"""``python -m gpu_tensorarray bench`` end to end, at tiny sizes (the hidden --tiny
option): every planned row is in the JSON, measured with positive numbers, or listed
as skipped with a reason; the machine description is there."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

import gpu_tensorarray
from gpu_tensorarray import benchmarks

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(gpu_tensorarray.__file__)))

_NUMBERS = ("median_s", "per_call_us", "rounds", "runs_per_round")


def _run_bench(tmp_path, *extra):
    out = tmp_path / "bench.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "gpu_tensorarray", "bench", "--quick", "--tiny", "--backend", "numpy",
                           "--json", str(out), *extra], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done


# torch and TensorFlow take seconds to import: their rows have a test of their own.
_HEAVY_PEERS = r"/(torch|tensorflow|tf\.raw_ops)$"


def test_bench_json_has_every_row_with_positive_numbers(tmp_path):
    document, done = _run_bench(tmp_path, "--peers", "--only", f"^(?!.*{_HEAVY_PEERS})")
    planned = {row.id for row in benchmarks.plan(benchmarks.TINY_SIZES, peers=True)
               if not re.search(_HEAVY_PEERS, row.id)}
    measured = {row["id"]: row for row in document["rows"]}
    skipped = {row["id"]: row["reason"] for row in document["skipped"]}
    assert set(measured) | set(skipped) == planned
    assert not set(measured) & set(skipped)
    assert all(reason for reason in skipped.values())
    # Only the GradientTape row may skip (while gpu_tensorarray.GradientTape does not exist).
    assert all(row_id.startswith("tape/") for row_id in skipped), skipped
    _check_rows(measured)
    assert document["copy_gbps"] > 0
    for peer in (row for row in measured.values() if row["provider"] == "numpy" and row["op"] != "copy"):
        assert peer["ours_speedup"] > 0, peer
    machine = document["machine"]
    for key in ("cpu", "cores", "python", "numpy", "threads", "backend"):
        assert machine[key] not in (None, ""), key
    assert machine["backend"] == "numpy"
    assert document["targets"] and all({"target", "measured", "met"} <= set(t) for t in document["targets"])
    # The summary table goes to stdout, the progress lines to stderr (not a terminal here: plain lines).
    assert "\ntargets (" in done.stdout and "scatter_add" in done.stdout
    assert f"[{len(planned)}/{len(planned)}]" in done.stderr and "\r" not in done.stderr


def test_bench_heavy_peers(tmp_path):
    """torch's and TensorFlow's rows, where either is installed (else they are skipped rows)."""
    installed = [name for name in ("torch", "tensorflow") if importlib.util.find_spec(name)]
    if not installed:
        pytest.skip("neither torch nor tensorflow is installed")
    document, _ = _run_bench(tmp_path, "--peers", "--threads", "1", "--only", _HEAVY_PEERS)
    measured = {row["id"]: row for row in document["rows"] if row["op"] != "copy"}
    for row in document["skipped"]:
        assert row["provider"] in ("torch", "tensorflow", "tf.raw_ops") and row["reason"], row
        assert ("torch" if row["provider"] == "torch" else "tensorflow") not in installed, row
    assert measured and all(row["provider"] in ("torch", "tensorflow", "tf.raw_ops") for row in measured.values())
    _check_rows(measured)
    assert document["machine"]["threads"]["OMP_NUM_THREADS"] == "1"


def _check_rows(measured):
    for row in measured.values():
        if row["op"] == "memory":
            assert row["data_bytes"] > 0 and row["slab_bytes"] >= row["data_bytes"], row
            assert row["peak_over_data"] > 0 and row["host_bytes_per_element"] > 0 and row["seconds"] > 0, row
            continue
        for key in _NUMBERS:
            assert row[key] > 0, (row["id"], key, row[key])
        assert row["iqr_s"] >= 0, row
        if row["bytes"]:
            assert row["gbps"] > 0 and row["copy_ratio"] > 0, row


def test_bench_plot(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    _run_bench(tmp_path, "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
