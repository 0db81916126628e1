"""The project's own documentation stays true to the code that cites it.

* Every ``docs/<file>.md §x.y`` in the package, tests, examples, benches and README
  names a file in docs/ and a section it has (and, with ``step N``, a step that
  section numbers); a bare ``§x.y`` belongs to the last docs/ file named before it in
  the same file.
* Every link between the docs lands on a heading that exists, and every link from the
  README or the docs to a file names one that exists.
* Every ``python`` block of the README and docs/ runs as pasted, in a fresh interpreter,
  and prints what its ``# ->`` comments show (docs/README.md, "Code blocks").
* No file cites notes that are not part of the repository.
* docs/architecture.md's import tower lists every module of the package, and every
  import in the code points to a lower floor.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
import gpu_tensorarray  # noqa: E402  (where the blocks import it from: the checkout or the installed wheel)

PACKAGE_PARENT = Path(gpu_tensorarray.__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PACKAGE = ROOT / "gpu_tensorarray"
SOURCE_SUFFIXES = {".py", ".md", ".cu", ".cuh", ".h", ".toml", ".txt", ".cfg", ".sh"}

_DOC_NAME = re.compile(r"docs/([\w-]+\.md)")
_SECTION = re.compile(r"§(\d+(?:\.\d+)?)(?:\s+steps?\s+(\d+)(?:\s*(?:-|and|,)\s*(\d+))?)?")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$", re.MULTILINE)
_NUMBERED_HEADING = re.compile(r"^(\d+(?:\.\d+)?)\.?\s")
_STEP = re.compile(r"^(\d+)\.\s", re.MULTILINE)
_LINK = re.compile(r"\]\(([\w-]*\.md)?#([\w-]+)\)")
# Assembled from parts, so that this file does not cite them itself.
_FOREIGN = re.compile("|".join([r"DESIGN\.md", r"DESIGN \"", "TF_" + "SEMANTICS", r"\.\./shared"]))


def _files(*tops):
    for top in tops:
        path = ROOT / top
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES
                              and "__pycache__" not in p.parts)


def _sections(doc):
    """section number -> the set of step numbers its body lists (top-level "N. " items
    before the next heading)."""
    text = doc.read_text()
    headings = list(_HEADING.finditer(text))
    sections = {}
    for position, heading in enumerate(headings):
        numbered = _NUMBERED_HEADING.match(heading.group(2))
        if not numbered:
            continue
        end = headings[position + 1].start() if position + 1 < len(headings) else len(text)
        body = text[heading.end():end]
        sections[numbered.group(1)] = {int(step) for step in _STEP.findall(body)}
    return sections


def _slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _citations(path):
    """(line number, docs file name or None, section, first step, last step) for every § in ``path``."""
    text = path.read_text(errors="replace")
    current = None
    found = []
    marks = sorted([(m.start(), "doc", m) for m in _DOC_NAME.finditer(text)] +
                   [(m.start(), "section", m) for m in _SECTION.finditer(text)], key=lambda item: item[0])
    for start, kind, match in marks:
        if kind == "doc":
            current = match.group(1)
            continue
        line = text.count("\n", 0, start) + 1
        first = match.group(2) and int(match.group(2))
        last = match.group(3) and int(match.group(3))
        found.append((line, current, match.group(1), first, last or first))
    return found


def test_docs_exist_and_have_sections():
    assert (DOCS / "semantics.md").is_file() and (DOCS / "architecture.md").is_file()
    sections = _sections(DOCS / "semantics.md")
    assert {"1.4", "2.2", "2.10", "3", "4", "6.1", "6.2", "7"} <= set(sections)
    assert sections["2.2"] == set(range(1, 12))     # Write: eleven steps


def test_every_docs_reference_points_to_a_section_that_exists():
    known = {doc.name: _sections(doc) for doc in DOCS.glob("*.md")}
    problems, count = [], 0
    for path in _files("gpu_tensorarray", "tests", "examples", "bench", "kernels", "README.md"):
        where = path.relative_to(ROOT)
        text = path.read_text(errors="replace")
        for name in _DOC_NAME.findall(text):
            if name not in known:
                problems.append(f"{where}: docs/{name} does not exist")
        if path.suffix == ".md" and path.parent == DOCS:
            continue
        for line, doc, section, first, last in _citations(path):
            count += 1
            if doc is None:
                problems.append(f"{where}:{line}: §{section} without a docs/<file>.md before it")
            elif doc in known and section not in known[doc]:
                problems.append(f"{where}:{line}: docs/{doc} has no section {section}")
            elif doc in known and first is not None:
                missing = [step for step in range(first, last + 1) if step not in known[doc][section]]
                if missing:
                    problems.append(f"{where}:{line}: docs/{doc} §{section} has no step {missing[0]}")
    assert not problems, "\n".join(problems)
    assert count >= 40, f"only {count} citations found: is the parser still reading them?"


def test_links_between_docs_land_on_headings():
    anchors = {doc.name: {_slug(h) for _, h in _HEADING.findall(doc.read_text())} for doc in DOCS.glob("*.md")}
    problems = []
    for doc in DOCS.glob("*.md"):
        for target, anchor in _LINK.findall(doc.read_text()):
            name = target or doc.name
            if name not in anchors:
                problems.append(f"docs/{doc.name}: link to {name}, which does not exist")
            elif anchor not in anchors[name]:
                problems.append(f"docs/{doc.name}: link to {name}#{anchor}, which is no heading")
    assert not problems, "\n".join(problems)


_FILE_LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)]*))?\)")


def test_links_to_files_name_files_that_exist():
    """... and, with an #anchor into a Markdown file, a heading it has."""
    problems, count = [], 0
    for doc in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        for target, anchor in _FILE_LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+://", target):
                continue
            count += 1
            path = doc.parent / target
            if not path.exists():
                problems.append(f"{doc.relative_to(ROOT)}: link to {target}, which does not exist")
            elif anchor and anchor not in {_slug(h) for _, h in _HEADING.findall(path.read_text())}:
                problems.append(f"{doc.relative_to(ROOT)}: link to {target}#{anchor}, which is no heading")
    assert not problems, "\n".join(problems)
    assert count >= 10, f"only {count} links found: is the pattern still matching them?"


# -- code blocks that run as pasted ----------------------------------------------------------

_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_SHOWS = re.compile(r"#\s*->\s?(.*?)\s*$")
_OPTIONAL = re.compile(r"^\s*(?:import|from)\s+(torch|tensorflow|jax)\b", re.MULTILINE)


def _blocks(language):
    """(where, code) of every fenced block of ``language`` in the README and docs/."""
    found = []
    for doc in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = doc.read_text()
        for match in _FENCE.finditer(text):
            if match.group(1) == language:
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{doc.relative_to(ROOT)}:{line}", match.group(2)))
    return found


PYTHON_BLOCKS = _blocks("python")


def test_the_blocks_are_all_found():
    fences = sum(text.count("```python") for text in
                 [(ROOT / "README.md").read_text(), *(doc.read_text() for doc in DOCS.glob("*.md"))])
    assert len(PYTHON_BLOCKS) == fences >= 8


@pytest.mark.parametrize("code", [code for _, code in PYTHON_BLOCKS], ids=[where for where, _ in PYTHON_BLOCKS])
def test_every_python_block_runs_as_pasted(code):
    for module in sorted(set(_OPTIONAL.findall(code))):
        pytest.importorskip(module)
    expected = [match.group(1) for line in code.splitlines() if (match := _SHOWS.search(line))]
    env = dict(os.environ, PYTHONPATH=str(PACKAGE_PARENT), PYTHONWARNINGS="ignore", TF_CPP_MIN_LOG_LEVEL="3")
    for name in ("GPU_TENSORARRAY_BACKEND", "GPU_TENSORARRAY_MODE", "GPU_TENSORARRAY_ACCUMULATION"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600,
                          cwd=str(PACKAGE_PARENT))
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line.rstrip() for line in done.stdout.splitlines()] == expected


def test_nothing_cites_notes_outside_the_repository():
    problems = []
    for path in _files("gpu_tensorarray", "tests", "examples", "bench", "kernels", "docs", ".ci",
                       "README.md", "pyproject.toml"):
        if path == Path(__file__).resolve():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if _FOREIGN.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not problems, "\n".join(problems)


def test_every_named_test_file_exists():
    """Paths like tests/<folder>/test_x.py in the docs, README, CI and code name real files
    (the tests are grouped in folders by component, tests/README.md)."""
    named = re.compile(r"\btests/[\w/]+\.(?:py|md)\b")
    problems, count = [], 0
    for path in _files("gpu_tensorarray", "tests", "examples", "bench", "docs", ".ci", "README.md", "pyproject.toml"):
        for match in named.finditer(path.read_text(errors="replace")):
            count += 1
            if not (ROOT / match.group(0)).is_file():
                problems.append(f"{path.relative_to(ROOT)}: {match.group(0)} does not exist")
    assert not problems, "\n".join(problems)
    assert count >= 20, f"only {count} test paths found: is the pattern still matching them?"


# -- the import tower ----------------------------------------------------------------------

def _modules():
    """module name (relative to the package; "(package)" for its __init__) -> path."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts) or "(package)"] = path
    return modules


def _absolute(name):
    return "gpu_tensorarray" + ("" if name == "(package)" else "." + name)


def _imports(name, path, modules):
    """The package's modules that ``path`` imports (anywhere in it, functions included)."""
    by_absolute = {_absolute(module): module for module in modules}
    package = _absolute(name) if path.name == "__init__.py" else _absolute(name).rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                target = by_absolute.get(f"{origin}.{alias.name}") or by_absolute.get(origin)
                if target:
                    found.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in by_absolute:
                    found.add(by_absolute[alias.name])
    found.discard(name)
    return found


def _tower():
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*`([^`]+)`\s*\|", (DOCS / "architecture.md").read_text(), re.MULTILINE)
    return [(int(floor), module) for floor, module in rows]


def test_the_tower_lists_every_module_once():
    listed = [module for _, module in _tower()]
    modules = _modules()
    assert len(listed) == len(set(listed)), "a module is listed twice in docs/architecture.md"
    missing = sorted(set(modules) - set(listed))
    assert not missing, f"docs/architecture.md's import tower lacks {missing}: add a row for each"
    stale = sorted(set(listed) - set(modules))
    assert not stale, f"docs/architecture.md's import tower lists modules that do not exist: {stale}"


def test_every_import_points_down_the_tower():
    floor = {module: level for level, module in _tower()}
    modules = _modules()
    problems = []
    for name, path in modules.items():
        if name not in floor:
            continue                    # reported by test_the_tower_lists_every_module_once
        for target in sorted(_imports(name, path, modules)):
            if target in floor and floor[target] >= floor[name]:
                problems.append(f"{name} (floor {floor[name]}) imports {target} (floor {floor[target]})")
    assert not problems, "imports that do not point down docs/architecture.md's tower:\n" + "\n".join(problems)


@pytest.mark.parametrize("module", ["storage", "layouts", "registry"])
def test_storage_code_never_names_numpy_or_cupy(module):
    # The architecture's promise: storage reaches arrays only through the backend and layouts.
    imported = {alias.name for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text()))
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(ast.parse((PACKAGE / f"{module}.py").read_text()))
                 if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    assert not imported & {"numpy", "cupy"}, imported
