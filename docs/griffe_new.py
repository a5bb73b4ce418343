"""A griffe extension for the API reference (mkdocs.yml): the constructors of the native classes.

pyo3 classes are made by ``__new__``, so ``_native.pyi`` declares their parameters there (an ``__init__`` in
the stubs would contradict the runtime, which ``mypy.stubtest`` checks). mkdocstrings shows a class's
signature from its ``__init__``: for a class with a ``__new__`` and no ``__init__``, this adds an
``__init__`` with the parameters of ``__new__``.
"""

from __future__ import annotations

from typing import Any

import griffe


class NewAsInit(griffe.Extension):
    def on_class_members(self, *, cls: griffe.Class, **kwargs: Any) -> None:
        new = cls.members.get("__new__")
        if not isinstance(new, griffe.Function) or "__init__" in cls.members:
            return
        self_ = griffe.Parameter("self", kind=griffe.ParameterKind.positional_or_keyword)
        init = griffe.Function(
            "__init__",
            lineno=new.lineno,
            endlineno=new.endlineno,
            parameters=griffe.Parameters(self_, *list(new.parameters)[1:]),
            returns="None",
            parent=cls,
        )
        cls.set_member("__init__", init)
