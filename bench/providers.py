"""Who runs a benchmark row: one entry per provider in PROVIDERS.

"ours*" providers are the library (always there); peers are optional packages,
imported only when one of their rows runs. A provider that cannot run here raises
``Skip`` with the reason; that is the only way a row may be skipped: a missing
optional peer. Any other failure fails the bench run.
"""

import importlib.util
import os
import sys
from collections import namedtuple

import numpy as np

__all__ = ["PROVIDERS", "Provider", "Peer", "Skip", "label", "set_peer_threads"]


class Skip(Exception):
    """An optional peer that is not installed here; the message says why."""


# module: the peer's module (NumPy or CuPy for "numpy"); device: where its tensors live;
# sync: waits for its queued work (a no-op on the CPU).
Peer = namedtuple("Peer", "module device sync")

_threads = None         # threads for torch and TensorFlow, or None for their defaults


def set_peer_threads(count):
    """Threads for the peers; must run before torch or TensorFlow load."""
    global _threads
    _threads = count


def _ours(backend):
    return Peer(None, backend.device, backend.synchronize)


def _array_module(backend):
    """The backend's own array module: NumPy, or CuPy on the cupy backend."""
    if backend.name == "cupy":
        return Peer(sys.modules["cupy"], backend.device, backend.synchronize)
    return Peer(np, "cpu", lambda: None)


def _torch(backend):
    if importlib.util.find_spec("torch") is None:
        raise Skip("torch is not installed (see README: Performance)")
    import torch

    if _threads and torch.get_num_threads() != _threads:
        torch.set_num_threads(_threads)
    device = "cuda" if backend.name == "cupy" and torch.cuda.is_available() else "cpu"
    return Peer(torch, device, torch.cuda.synchronize if device == "cuda" else (lambda: None))


def _tensorflow(backend):
    if importlib.util.find_spec("tensorflow") is None:
        raise Skip("tensorflow is not installed (pip install tensorflow-cpu)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    first = "tensorflow" not in sys.modules
    import tensorflow as tf

    if first and _threads:          # only possible before TensorFlow's first op
        tf.config.threading.set_intra_op_parallelism_threads(_threads)
        tf.config.threading.set_inter_op_parallelism_threads(_threads)
    sync = getattr(tf.test.experimental, "sync_devices", None) if tf.config.list_logical_devices("GPU") else None
    return Peer(tf, "gpu" if sync else "cpu", sync or (lambda: None))


# role: "ours" (the library as users call it), "reference" (the library's own floor for an
# op, timed in the same position: ours over it is the "x ref" column) or "peer". phase: run
# order; torch's and TensorFlow's thread pools keep spinning after each op and would slow
# whatever ran next on a machine with few cores, so they run last.
Provider = namedtuple("Provider", "name role phase load what")

PROVIDERS = {p.name: p for p in (
    Provider("ours", "ours", 0, _ours, "raw_ops as users call it: keywords (tf.raw_ops' only form), int indices "
                                       "(int32 index vectors)"),
    Provider("ours.positional", "ours", 0, _ours, "raw_ops called positionally: the fastest form"),
    Provider("ours.np_int32", "ours", 0, _ours, "raw_ops with keywords and an np.int32 scalar index (from a tensor)"),
    Provider("ours.int64", "ours", 0, _ours, "raw_ops with keywords and int64 index vectors"),
    Provider("ours.class", "ours", 0, _ours, "the TensorArray class"),
    Provider("ours.first", "ours", 0, _ours, "raw_ops: the op's first call after a fresh setup (cold)"),
    Provider("ours.add_rows", "reference", 0, _ours, "the backend's scatter-add primitive under the op"),
    Provider("ours.size", "reference", 0, _ours, "TensorArraySizeV3 in the same position as the op"),
    Provider("numpy", "peer", 0, _array_module, "NumPy (CuPy on the cupy backend)"),
    Provider("torch", "peer", 1, _torch, "PyTorch"),
    Provider("tensorflow", "peer", 2, _tensorflow, "tf.TensorArray, eager"),
    Provider("tf.raw_ops", "peer", 2, _tensorflow, "tf.raw_ops.TensorArray*V3"),
)}


def label(provider, backend):
    """The provider's name as shown: the "numpy" peer is CuPy on the cupy backend."""
    return "cupy" if provider == "numpy" and backend.name == "cupy" else provider
