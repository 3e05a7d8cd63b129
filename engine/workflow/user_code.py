"""Calling a workflow's own code (prompts, items, item keys, until conditions, cache keys,
custom agents): what it may raise, and how that is told.

A workflow's code runs inside the engine, so ``sys.exit()`` in a prompt would otherwise end
the whole process with status 0, no run recorded and nothing said. Everything but a person's
Ctrl-C (KeyboardInterrupt) and cancellation is the workflow's failure, reported as such.
"""

from __future__ import annotations

USER_CODE_ERRORS: tuple[type[BaseException], ...] = (Exception, SystemExit)
"""What a call into workflow code may raise that fails that node or run (never the engine)."""


def raised(error: BaseException) -> str:
    """What the code did, for a sentence: ``raised ValueError: bad`` or ``called
    sys.exit(0)``."""
    if isinstance(error, SystemExit):
        return f"called sys.exit({error.code!r})"
    return f"raised {type(error).__name__}: {error}"
