"""Rules with one home: a rule two modules need is worked out in one place that both call, so
the two cannot drift apart (a copy that is fixed in one place stays wrong in the other).

Each test checks the home against a plain reference written here, and that the modules which
need the rule call it rather than work it out again (read from their source)."""

import ast
from pathlib import Path

import pytest

from gpu_tensorarray import shapes

PACKAGE = Path(shapes.__file__).parent


def _source(module):
    return (PACKAGE / module).read_text(encoding="utf-8")


def _calls(module):
    """The names a module's source calls (f(...) and x.f(...))."""
    names = set()
    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else getattr(func, "attr", None))
    return names


@pytest.mark.parametrize("shape, expected", [(None, None), ((), ()), ((3,), ()), ((None, 2, 3), (2, 3))])
def test_except_first_drops_the_first_dimension(shape, expected):
    """A concat's element_shape_except0: unknown stays unknown, a scalar element gives ()."""
    assert shapes.except_first(shape) == expected


@pytest.mark.parametrize("module", ["tensor_array.py", "torch/autograd.py"])
def test_concat_callers_take_element_shape_except0_from_shapes(module):
    """The V3 class's concat and the torch bridge's concat (read_value) both pass
    shapes.except_first(element_shape), and neither slices the element shape itself."""
    assert "except_first" in _calls(module)
    assert "element_shape[1:]" not in _source(module)


def _imports(module):
    """{(imported module, name)} of a module's ``from ... import ...`` statements."""
    found = set()
    for node in ast.walk(ast.parse(_source(module))):
        if isinstance(node, ast.ImportFrom):
            found.update((node.module, alias.name) for alias in node.names)
    return found


def test_messages_builds_texts_and_works_out_no_shapes():
    """messages.py is one builder per error text: it formats shapes, it does not merge or judge them."""
    assert {name for module, name in _imports("messages.py") if module == "shapes"} <= {"format_shape"}
    assert not {"merge", "is_fully_defined", "is_compatible"} & _calls("messages.py")


def _plain_zeros_shape(shape, slot_shapes):
    """The rule written out: merge the set slots' shapes in while the shape is not fully defined
    (None: no shape; a merge conflict: "conflict")."""
    def merged(a, b):
        if a is None or b is None:
            return b if a is None else a
        if len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b)):
            raise ValueError
        return tuple(y if x is None else x for x, y in zip(a, b))

    try:
        if shape is None or None in shape:
            for slot_shape in slot_shapes:
                shape = merged(shape, slot_shape)
    except ValueError:
        return "conflict"
    return None if shape is None or None in shape else shape


@pytest.mark.parametrize("method", ["read", "gather", "stack"])
@pytest.mark.parametrize("shape, slot_shapes", [
    ((2,), []), ((2,), [(3,)]), (None, []), (None, [(2,)]), ((None,), [(2,), (2,)]), ((None, 3), [(2, None)]),
    (None, [(2,), (3,)]), (None, [(2,), (2, 1)]), ((None,), []), ((), []),
])
def test_zeros_shape_is_the_plain_rule(method, shape, slot_shapes):
    """tf2_lists.zeros_shape, the one home of the tf2 zeros shape, against the rule written out:
    the shape, or InvalidArgumentError (a merge conflict, or no fully defined shape)."""
    from gpu_tensorarray import tf2_lists
    from gpu_tensorarray.errors import InvalidArgumentError

    expected = _plain_zeros_shape(shape, slot_shapes)
    if isinstance(expected, tuple):
        assert tf2_lists.zeros_shape(shape, iter(slot_shapes), method) == expected
        return
    with pytest.raises(InvalidArgumentError) as caught:
        tf2_lists.zeros_shape(shape, iter(slot_shapes), method)
    words = "Incompatible" if expected == "conflict" else "fully"
    assert words in str(caught.value) and str(caught.value).endswith(f"(TensorArray.{method}, mode 'tf2')")


@pytest.mark.parametrize("module", ["tf2_array.py", "torch/tf2.py"])
def test_both_tf2_classes_take_the_zeros_shape_from_tf2_lists(module):
    """Neither merges the set slots' shapes itself (nor takes the rule from messages, as before)."""
    assert "zeros_shape" in _calls(module)
    assert "zero_shape" not in {name for _, name in _imports(module)}
