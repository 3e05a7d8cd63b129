"""What a workflow file declares, read without running it.

Listing the workflows a workspace knows must not execute them: on a team workspace anyone who
can write ``runs`` chooses the files every dashboard would list. So the launch dialog reads each
file statically with :mod:`ast` (:func:`read_declaration`): the ``Workflow(...)`` it builds (its
name and description as literals), the input model's fields (``class Change(BaseModel)`` with
annotated fields, defaults taken when they are literals) and its docstring. Nothing is imported;
only the file the person picks is loaded, after its path was shown.

:func:`input_problem` checks a JSON input against those fields: required ones present, and
values of the plain types (``str``, ``int``, ``float``, ``bool``, ``list``, ``dict``, optional
ones) of the right JSON type. The workflow's own validation still runs when it is loaded.
"""

from __future__ import annotations

import ast
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_FILE_BYTES = 1024 * 1024
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "list": (list,),
    "List": (list,),
    "tuple": (list,),
    "set": (list,),
    "dict": (dict,),
    "Dict": (dict,),
}
_JSON_NAMES = {str: "text", int: "a whole number", float: "a number", bool: "true or false",
               list: "a list", dict: "an object"}


@dataclass(frozen=True)
class InputField:
    """One field of a workflow's input model, as written in its class."""

    name: str
    required: bool
    default: Any = None
    kind: str | None = None
    """The annotation's plain type name (``str``...), None when it is anything else."""
    optional: bool = False


@dataclass(frozen=True)
class WorkflowDeclaration:
    """A workflow file as read without running it (see the module docstring)."""

    path: Path
    name: str
    description: str = ""
    input_model: str | None = None
    fields: tuple[InputField, ...] = field(default_factory=tuple)

    def example_input(self) -> dict[str, Any]:
        """A starting input: defaults where given, empty values for the required fields."""
        empty: dict[str, Any] = {"str": "", "int": 0, "float": 0, "bool": False, "list": [],
                                 "List": [], "tuple": [], "set": [], "dict": {}, "Dict": {}}
        value: dict[str, Any] = {}
        for one in self.fields:
            if not one.required:
                value[one.name] = one.default
            else:
                value[one.name] = None if one.kind is None else empty.get(one.kind)
        return value


class DeclarationError(ValueError):
    """The file could not be read as a workflow declaration (one sentence)."""


def read_declaration(path: Path) -> WorkflowDeclaration:
    """Read ``path`` statically (nothing runs).

    Raises:
        DeclarationError: not a readable regular file under 1 MiB, not Python, or no
            ``Workflow("name", ...)`` with a literal name in it.
    """
    source = _read_source(path)
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        where = f" at line {line}" if line else ""
        raise DeclarationError(f"{path} has a syntax error{where}.") from None
    calls = [node for node in ast.walk(tree)
             if isinstance(node, ast.Call) and _is_workflow_call(node)]
    declared = [_declared(call) for call in calls]
    found = [one for one in declared if one is not None]
    if not found:
        raise DeclarationError(
            f"{path} declares no Workflow with a literal name (Workflow(\"name\", ...))."
        )
    name, description, model = found[0]
    if not description:
        description = (ast.get_docstring(tree) or "").strip().split("\n\n")[0].replace("\n", " ")
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    fields = _fields(classes[model]) if model in classes else ()
    return WorkflowDeclaration(path, name, description, model, fields)


def input_problem(declaration: WorkflowDeclaration, value: Any) -> str | None:
    """Why ``value`` does not fit the declared input fields (one sentence), or None."""
    if declaration.input_model is None or not declaration.fields:
        return None
    if not isinstance(value, dict):
        kind = type(value).__name__
        return f"the input of {declaration.name} is an object with fields, not {kind}"
    for one in declaration.fields:
        if one.name not in value:
            if one.required:
                return f"{one.name} is required"
            continue
        item = value[one.name]
        if item is None and (one.optional or not one.required and one.default is None):
            continue
        accepted = _JSON_TYPES.get(one.kind or "")
        if accepted is None:
            continue
        wrong = not isinstance(item, accepted) or (isinstance(item, bool) and bool not in accepted)
        if wrong:
            return f"{one.name} must be {_JSON_NAMES[accepted[-1]]}"
    return None


def _read_source(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise DeclarationError(f"Cannot read {path}: {error.strerror or error}.") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise DeclarationError(f"{path} is not a regular file.")
        data = os.read(fd, MAX_FILE_BYTES + 1)
    except OSError as error:
        raise DeclarationError(f"Cannot read {path}: {error.strerror or error}.") from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise DeclarationError(f"{path} is larger than 1 MiB; that is not a workflow file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DeclarationError(f"{path} is not UTF-8 text.") from None


def _is_workflow_call(node: ast.Call) -> bool:
    func = node.func
    return (isinstance(func, ast.Name) and func.id == "Workflow") or (
        isinstance(func, ast.Attribute) and func.attr == "Workflow"
    )


def _literal(node: ast.AST | None) -> Any:
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _declared(call: ast.Call) -> tuple[str, str, str | None] | None:
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    name = _literal(call.args[0]) if call.args else _literal(keywords.get("name"))
    if not isinstance(name, str) or not name:
        return None
    description = _literal(keywords.get("description"))
    model = keywords.get("input_model")
    model_name = model.id if isinstance(model, ast.Name) else None
    return name, description if isinstance(description, str) else "", model_name


def _fields(cls: ast.ClassDef) -> tuple[InputField, ...]:
    found: list[InputField] = []
    for statement in cls.body:
        if not isinstance(statement, ast.AnnAssign) or not isinstance(statement.target, ast.Name):
            continue
        kind, optional = _kind(statement.annotation)
        name = statement.target.id
        if statement.value is None:
            found.append(InputField(name, True, None, kind, optional))
            continue
        default = _default(statement.value)
        found.append(InputField(name, default is _REQUIRED, None if default is _REQUIRED
                                else default, kind, optional))
    return tuple(found)


_REQUIRED = object()


def _default(value: ast.expr) -> Any:
    # ``x: int = Field(3)`` / ``Field(default=3)``: the literal default; ``Field(...)``: required.
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) \
            == "Field":
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        factory = keywords.get("default_factory")
        if factory is not None:
            made: dict[str, Any] = {"list": [], "dict": {}, "set": [], "tuple": []}
            return made.get(factory.id) if isinstance(factory, ast.Name) else None
        given = value.args[0] if value.args else keywords.get("default")
        if given is None or (isinstance(given, ast.Constant) and given.value is Ellipsis):
            return _REQUIRED
        return _literal(given)
    return _literal(value)


def _kind(annotation: ast.expr) -> tuple[str | None, bool]:
    """The plain type name of an annotation and whether it admits None (``str | None``,
    ``Optional[str]``)."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None, False
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        parts = [annotation.left, annotation.right]
        kept = [p for p in parts if not (isinstance(p, ast.Constant) and p.value is None)]
        if len(kept) == 1:
            return _kind(kept[0])[0], True
        return None, True
    if isinstance(annotation, ast.Subscript):
        base = annotation.value
        base_name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
        if base_name == "Optional":
            return _kind(annotation.slice)[0], True
        return (base_name if base_name in _JSON_TYPES else None), False
    if isinstance(annotation, ast.Name):
        return (annotation.id if annotation.id in _JSON_TYPES else None), False
    return None, False
