"""Where the emulated backend keeps its compiled kernels, and why loading one is safe.

Loading a shared library runs its code, so a library is loaded only when this
user built it and it is intact:

- the cache folder ($XDG_CACHE_HOME/gpu_tensorarray, else ~/.cache/gpu_tensorarray)
  must belong to this user and be writable by nobody else. Otherwise the library is
  built in a private temporary folder (mode 0700), loaded, and the folder removed;
- each library has a record beside it (``<name>.sha256``: its size and SHA-256,
  written at build time). Both files must belong to this user and be writable by
  nobody else, and the library's bytes must match the record, read through the very
  file descriptor that is then loaded (/proc/self/fd), so no rename can swap it;
- anything else (missing, truncated, foreign, tampered) is rebuilt, never loaded;
- files are written under a temporary name, fsynced, renamed into place, and the
  folder fsynced: concurrent first builds each write whole files, and readers verify.
"""

import hashlib
import os
import secrets
import stat
import tempfile
import warnings
from pathlib import Path

from ..errors import UnavailableError

__all__ = ["cache_folder", "load_or_build"]

# The record's first word: a record of another layout is a mismatch, not a guess.
_RECORD_FORMAT = "gpu_tensorarray-kernels-v1"
_RECORD_SUFFIX = ".sha256"
_NO_FOLLOW = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
_warned = set()
_loaded_descriptors = []


def cache_folder():
    """The cache folder's path (it may not exist, or be unusable)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):         # the XDG spec: relative paths are ignored
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpu_tensorarray"


def load_or_build(name, build, load):
    """``load(path)`` of the verified cached library ``name``, else of a fresh build.

    ``build(path)`` compiles the library to ``path``; ``load(path)`` loads it and
    raises UnavailableError when it is not the expected library. A fresh build is
    saved to the cache when the folder is safe and writable."""
    folder = cache_folder()
    folder_fd = _open_private_folder(folder)
    try:
        if folder_fd is not None:
            library = _load_cached(folder, folder_fd, name, load)
            if library is not None:
                return library
        return _build(folder if folder_fd is not None else None, folder_fd, name, build, load)
    finally:
        if folder_fd is not None:
            os.close(folder_fd)


def _private(status):
    """Owned by this user and writable by nobody else."""
    return status.st_uid == os.geteuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_private_folder(folder):
    """A descriptor of the cache folder, or None (with a warning) when it is not safe to use."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        pass                            # a read-only home: an existing folder can still be read
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
    except OSError as error:
        _warn_once(f"gpu_tensorarray: cannot use the kernel cache folder {folder} ({error.strerror}); the emulated "
                   f"backend builds its kernels in a private temporary folder, in every process. Set XDG_CACHE_HOME "
                   f"to a folder of your own to keep them.")
        return None
    if not _private(os.fstat(fd)):
        os.close(fd)
        _warn_once(f"gpu_tensorarray: the kernel cache folder {folder} is not yours or is writable by other users, "
                   f"so nothing in it is loaded; the emulated backend builds its kernels in a private temporary "
                   f"folder, in every process. Remove that folder, or run `chmod go-w {folder}` if it is yours, or "
                   f"set XDG_CACHE_HOME to a folder of your own.")
        return None
    return fd


def _load_cached(folder, folder_fd, name, load):
    record = _read_record(folder_fd, name)
    if record is None:
        return None
    try:
        fd = os.open(name, os.O_RDONLY | _NO_FOLLOW, dir_fd=folder_fd)
    except OSError:
        return None
    library = None
    try:
        status = os.fstat(fd)
        size, digest = record
        if stat.S_ISREG(status.st_mode) and _private(status) and status.st_size == size and _digest(fd) == digest:
            try:
                library = load(_descriptor_path(fd, folder / name))
            except (OSError, UnavailableError):      # not loadable, or not our kernels: rebuild
                pass
    finally:
        if library is None:
            os.close(fd)
        else:
            # Loaded: the descriptor stays open for the life of the process, so that no later
            # file gets its number. The loader knows a library by the path it was given, and a
            # later load of /proc/self/fd/<that number> would be handed this library again.
            _loaded_descriptors.append(fd)
    return library


def _read_record(folder_fd, name):
    """(size, sha256 hex) from ``name``'s record, or None when there is no valid one."""
    try:
        fd = os.open(name + _RECORD_SUFFIX, os.O_RDONLY | _NO_FOLLOW, dir_fd=folder_fd)
    except OSError:
        return None
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode) or not _private(status) or status.st_size > 4096:
            return None
        words = os.read(fd, 4096).decode("ascii", "replace").split()
    finally:
        os.close(fd)
    if len(words) != 3 or words[0] != _RECORD_FORMAT or not words[1].isdigit():
        return None
    return int(words[1]), words[2]


def _digest(fd):
    digest = hashlib.sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def _descriptor_path(fd, path):
    """A path naming the open file itself (Linux: no rename can swap it), else ``path``."""
    return f"/proc/self/fd/{fd}" if os.path.isdir("/proc/self/fd") else str(path)


def _build(folder, folder_fd, name, build, load):
    """Build in a private temporary folder (inside the cache folder when it is usable:
    /tmp may be mounted noexec), load that file, save a copy to the cache."""
    try:
        scratch = tempfile.TemporaryDirectory(prefix=".build-", dir=folder)
    except OSError:
        try:
            scratch = tempfile.TemporaryDirectory(prefix="gpu_tensorarray-build-")
        except OSError as error:
            raise UnavailableError(f"The emulated backend cannot create a temporary folder to build its kernels in "
                                   f"({error}); set TMPDIR to a writable folder") from None
    with scratch as scratch_path:
        path = Path(scratch_path) / name
        build(path)
        data = path.read_bytes()
        try:
            library = load(str(path))
        except OSError as error:
            raise UnavailableError(
                f"The emulated backend built its kernels but cannot load them ({error}); is {scratch_path} on a "
                f"filesystem mounted noexec? Set XDG_CACHE_HOME (or TMPDIR) to a folder that allows it") from None
    if folder_fd is not None:
        try:
            _save(folder_fd, name, data)
        except OSError as error:
            _warn_once(f"gpu_tensorarray: cannot save the emulated backend's kernels in {folder} "
                       f"({error.strerror}); every process builds them again. Make that folder writable, or set "
                       f"XDG_CACHE_HOME to a folder of your own.")
    return library


def _save(folder_fd, name, data):
    """The library, then its record, each whole or not at all."""
    _write_atomically(folder_fd, name, data)
    record = f"{_RECORD_FORMAT} {len(data)} {hashlib.sha256(data).hexdigest()}\n"
    _write_atomically(folder_fd, name + _RECORD_SUFFIX, record.encode("ascii"))
    os.fsync(folder_fd)


def _write_atomically(folder_fd, name, data):
    temporary = f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NO_FOLLOW, 0o600,
                 dir_fd=folder_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=folder_fd)
        except OSError:
            pass
        raise


def _warn_once(message):
    if message not in _warned:
        _warned.add(message)
        warnings.warn(message, RuntimeWarning, stacklevel=2)
