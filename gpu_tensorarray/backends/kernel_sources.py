"""The CUDA kernels as data: where kernels/ is, the one source text every backend
compiles, each kernel's C signature, and which dtypes each kernel is built for.

Both compiled backends start here: cupy hands ``module_source()`` and
``name_expressions()`` to NVRTC; the emulated backend's library, built at install
(setup.py), compiles the same files, its entry points from ``instantiations()``. The
launcher checks arguments against ``signature()``, parsed from the .cu files
themselves, so the Python side cannot drift from the C side unnoticed.
"""

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from .. import dtypes
from ..errors import InternalError

__all__ = ["kernels_dir", "module_source", "signature", "name_expression", "name_expressions",
           "instantiations", "atomic_dtypes", "KERNEL_DTYPES", "ATOMIC_DTYPES", "Parameter", "Signature"]

# Dtypes (by name, as every table here: bfloat16's numpy dtype exists only once
# ml_dtypes is imported, its kernels always) with a CUDA atomicAdd (int64 through
# unsigned long long, complex as two component adds). The other integer widths
# have none: their atomic scatter-add runs the deterministic kernel, which is a
# correct (and ordered) atomic result.
ATOMIC_DTYPES = frozenset((
    "float16", "float32", "float64", "complex64", "complex128", "int32", "int64", "uint32", "uint64",
    dtypes.BFLOAT16))

# Atomics that older GPUs lack: dtype name -> the compute capability its atomicAdd
# needs. kernels/common.cuh guards the same ones with __CUDA_ARCH__; keep the two in step.
_ATOMIC_MINIMUM_ARCH = {"float64": 60, "complex128": 60, "float16": 70, dtypes.BFLOAT16: 80}


def atomic_dtypes(arch):
    """The dtype names whose atomic scatter-add runs add_rows_atomic on a GPU of
    compute capability ``arch`` (61 or "61" for sm_61); the others run the deterministic kernel."""
    arch = int(arch)
    return frozenset(name for name in ATOMIC_DTYPES if arch >= _ATOMIC_MINIMUM_ARCH.get(name, 0))


# kernel name -> the dtype names it is instantiated for (one template parameter each).
KERNEL_DTYPES = {
    "gather_rows": dtypes.NAMES,
    "put_rows": dtypes.NAMES,
    "add_rows_atomic": ATOMIC_DTYPES,
    "add_rows_deterministic": dtypes.AGGREGATABLE_NAMES,
}

# Every kernel is a template over its element type, named T.
TEMPLATE_PARAMETER = "T"

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[ \t]*$', re.MULTILINE)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_KERNEL = re.compile(r"template\s*<\s*typename\s+(\w+)\s*>\s*__global__\s+void\s+(\w+)\s*\(([^)]*)\)")
_PARAMETER = re.compile(r"^(?P<const>const\s+)?(?P<type>[A-Za-z_][\w ]*?)\s*(?P<pointer>\*)?\s*"
                        r"(?:__restrict__\s*)?(?P<name>\w+)$")


def kernels_dir():
    """The kernels folder: the copy installed inside the package (wheels, see
    pyproject.toml), else <repo>/kernels in a source checkout (editable installs), never a
    folder of that common name beside an installed package (site-packages/kernels)."""
    package = Path(__file__).resolve().parent.parent
    candidates = [package / "kernels"]
    if (package.parent / "setup.py").is_file():
        candidates.append(package.parent / "kernels")
    for candidate in candidates:
        if any(candidate.glob("*.cu")):
            return candidate
    raise InternalError(f"No CUDA kernel sources (*.cu) found in {', '.join(map(str, candidates))}")


@functools.cache
def module_source():
    """Every kernels/*.cu in name order as one translation unit, quoted includes
    inlined once each. One text means one compiled module per device, and a
    compiler cache keyed by this text sees header edits too."""
    return _inlined(sorted(kernels_dir().glob("*.cu")))


def _beside(folder, name):
    """The kernels folder's own file ``name`` (a quoted include names no other folder's)."""
    if Path(name).name != name or name in (".", ".."):
        raise InternalError(f"Kernel sources include {name!r}: only files of {folder} by name")
    return folder / name


def _inlined(paths):
    folder = kernels_dir()
    included = set()

    def inline(path):
        if path.name in included:
            return ""
        included.add(path.name)
        text = path.read_text()
        return _INCLUDE.sub(lambda match: inline(_beside(folder, match.group(1))), text)

    return "\n".join(inline(path) for path in paths)


@dataclass(frozen=True)
class Parameter:
    name: str
    type: str        # the C type, template parameter unsubstituted ("T", "long long")
    pointer: bool
    const: bool

    def c_type(self, type_argument):
        """Spelled out for one instantiation: ``const float*``, ``long long``."""
        base = type_argument if self.type == TEMPLATE_PARAMETER else self.type
        return f"{'const ' if self.const else ''}{base}{'*' if self.pointer else ''}"


@dataclass(frozen=True)
class Signature:
    name: str
    parameters: tuple


@functools.cache
def _signatures():
    code = _COMMENT.sub(" ", module_source())
    found = {}
    for template_parameter, name, parameter_list in _KERNEL.findall(code):
        if template_parameter != TEMPLATE_PARAMETER:
            raise InternalError(f"kernel {name}: its template parameter must be named "
                                f"{TEMPLATE_PARAMETER}, not {template_parameter}")
        found[name] = Signature(name, tuple(_parse_parameter(name, text) for text in parameter_list.split(",")))
    missing = set(KERNEL_DTYPES) - set(found)
    if missing:
        raise InternalError(f"kernels {sorted(missing)} are not defined in {kernels_dir()}")
    return found


def _parse_parameter(kernel, text):
    match = _PARAMETER.match(" ".join(text.split()))
    if match is None:
        raise InternalError(f"kernel {kernel}: cannot parse the parameter {text.strip()!r}")
    return Parameter(match["name"], match["type"].strip(), bool(match["pointer"]), bool(match["const"]))


def signature(kernel):
    """The parsed C signature of a kernel in kernels/*.cu."""
    try:
        return _signatures()[kernel]
    except KeyError:
        raise InternalError(f"no kernel named {kernel!r} in {kernels_dir()}") from None


def name_expression(kernel, dtype):
    """The C++ name of one instantiation, as NVRTC's name expressions spell it."""
    return f"{kernel}<{dtypes.c_type(dtype)}>"


def instantiations():
    """(kernel, dtype name) for every instantiation the backends may launch."""
    return [(kernel, name) for kernel, names in KERNEL_DTYPES.items() for name in sorted(names)]


def name_expressions():
    return tuple(name_expression(kernel, dtype) for kernel, dtype in instantiations())
