"""Loading a workflow from a Python file (``tether run path/to/workflow.py``)."""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import traceback
from pathlib import Path

from engine.workflow.definition import Workflow
from store.errors import InvalidInputError


def load_workflow(path: str | Path) -> Workflow:
    """Import ``path`` and return its Workflow: the ``workflow`` attribute, else the only
    Workflow object in the module. Any problem is one InvalidInputError sentence."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise InvalidInputError(f"There is no workflow file at {file}.")
    if file.suffix != ".py":
        raise InvalidInputError(f"{file} is not a Python file; a workflow is a .py module.")
    digest = hashlib.sha1(str(file.resolve()).encode()).hexdigest()[:10]
    module_name = f"tether_workflow_{file.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None or spec.loader is None:
        raise InvalidInputError(f"{file} cannot be imported as a Python module.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except InvalidInputError as error:
        raise InvalidInputError(f"{file}: {error}") from error
    except SyntaxError as error:
        raise InvalidInputError(
            f"{file} has a syntax error at line {error.lineno}: {error.msg}."
        ) from error
    except SystemExit as error:
        raise InvalidInputError(
            f"{file} called sys.exit({error.code!r}) while loading; a workflow file must only "
            "define its workflow."
        ) from None
    except Exception as error:
        frames = traceback.extract_tb(error.__traceback__)
        line = next((f.lineno for f in reversed(frames) if f.filename == str(file)), None)
        where = f" at line {line}" if line else ""
        raise InvalidInputError(
            f"{file} failed to load{where}: {type(error).__name__}: {error}"
        ) from error
    candidate = getattr(module, "workflow", None)
    if isinstance(candidate, Workflow):
        return candidate
    found = [v for v in vars(module).values() if isinstance(v, Workflow)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InvalidInputError(f"{file} defines no Workflow; expose one as `workflow`.")
    raise InvalidInputError(f"{file} defines several Workflows; name the one to run `workflow`.")
