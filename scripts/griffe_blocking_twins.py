"""A Griffe extension (mkdocs.yml): the ``_sync`` twins of the app's methods, documented as methods.

``Conveyor`` makes each blocking twin with ``get_job_sync = blocking_twin(get_job)``. Read from the
source without importing it, that is a class attribute whose value is a call, and the API reference
would show it as one. This extension turns each such attribute into a method with the async method's
parameters and return type and a docstring pointing at it, so the reference lists ``get_job_sync(job_id)``
beside ``get_job``.
"""

from __future__ import annotations

import ast
import re
from typing import Any

import griffe

_TWIN = re.compile(r"^blocking_twin\((?P<method>\w+)\)$")


class BlockingTwins(griffe.Extension):
    """Replace ``name_sync = blocking_twin(name)`` attributes with documented methods."""

    def on_class_members(
        self, *, node: ast.AST | griffe.ObjectNode, cls: griffe.Class, **kwargs: Any
    ) -> None:
        for name, member in list(cls.members.items()):
            if member.is_alias or not member.is_attribute:
                continue
            match = _TWIN.match(str(member.value)) if member.value is not None else None
            original = cls.members.get(match["method"]) if match else None
            if original is None or original.is_alias or not original.is_function:
                continue
            twin = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=original.parameters,
                returns=original.returns,
            )
            twin.docstring = griffe.Docstring(
                f"Blocking twin of `{original.name}`: the same operation, run on the app's private event "
                "loop thread, so plain (non-async) code can call it.",
                parent=twin,
            )
            cls.set_member(name, twin)
