"""The error trees drawn in the docstrings of `elicithub.errors` and `elicithub.testing.errors` are the code's."""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

import pytest

import elicithub
from elicithub import errors
from elicithub.errors import HubError
from elicithub.testing import errors as runner_errors
from elicithub.testing.errors import TestRunnerError

LINE = re.compile(r"^(?P<indent> *)[*+-] (?P<name>\w+)(?: \((?P<module>[\w.]+)\))?$")


def drawn(module: ModuleType) -> set[tuple[str, str | None, str]]:
    """(class, parent, where it is defined) for each line of the tree drawn in `module`'s docstring; `where` is the
    module named in brackets, or `module` itself when none is."""
    tree: set[tuple[str, str | None, str]] = set()
    parents: list[tuple[int, str]] = []
    for line in (module.__doc__ or "").splitlines():
        found = LINE.match(line)
        if found is None:
            continue
        depth = len(found["indent"])
        while parents and parents[-1][0] >= depth:
            parents.pop()
        parent = parents[-1][1] if parents else None
        where = f"elicithub.{found['module']}" if found["module"] else module.__name__
        tree.add((found["name"], parent, where))
        parents.append((depth, found["name"]))
    return tree


def defined(root: type[Exception]) -> set[tuple[str, str | None, str]]:
    """(class, parent, module) for `root` and every public subclass of it in the package."""
    for info in pkgutil.walk_packages(elicithub.__path__, "elicithub."):
        importlib.import_module(info.name)
    tree: set[tuple[str, str | None, str]] = {(root.__name__, None, root.__module__)}
    pending = [root]
    while pending:
        cls = pending.pop()
        for sub in cls.__subclasses__():
            pending.append(sub)
            if not sub.__name__.startswith("_") and sub.__module__.startswith("elicithub."):
                tree.add((sub.__name__, cls.__name__, sub.__module__))
    return tree


@pytest.mark.parametrize(("module", "root"), [(errors, HubError), (runner_errors, TestRunnerError)])
def test_the_drawn_error_tree_is_the_code(module: ModuleType, root: type[Exception]) -> None:
    drawing, code = drawn(module), defined(root)
    assert sorted(code - drawing) == [], "defined but not drawn (or drawn under another parent or module)"
    assert sorted(drawing - code) == [], "drawn but not defined"
