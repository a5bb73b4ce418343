"""Each public module of the package says what it offers: an ``__all__`` that lists exactly its public names, so
that ``from kubevents.traces import *`` brings neither ``heapq`` nor ``json``, and a name added without being
listed (or listed after it is gone) fails here."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil

import pytest

import kubevents

MODULES = ["kubevents"] + sorted(
    f"kubevents.{m.name}" for m in pkgutil.iter_modules(kubevents.__path__) if not m.name.startswith("_")
)

# Strict: once the module lists its names this fails, and the mark must go.
def defined_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level itself (not by importing them), conditional blocks included."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return names


def test_every_public_module_is_checked():
    assert {"kubevents.traces", "kubevents.lab", "kubevents.plots", "kubevents.testing"} <= set(MODULES)
    assert not any(name.split(".")[-1].startswith("_") for name in MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_all_lists_exactly_the_public_names(name):
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list) and all(isinstance(n, str) for n in exported), f"{name} has no __all__ list"
    assert len(exported) == len(set(exported)), f"{name}.__all__ lists a name twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists names it does not have: {missing}"
    private = [n for n in exported if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))]
    assert not private, f"{name}.__all__ lists private names: {private}"
    public = {n for n in defined_names(ast.parse(inspect.getsource(module))) if not n.startswith("_")}
    unlisted = sorted(public - set(exported))
    assert not unlisted, f"{name} defines public names that its __all__ leaves out: {unlisted}"
    star: dict[str, object] = {}
    exec(f"from {name} import *", star)
    assert set(star) - {"__builtins__"} == set(exported)
