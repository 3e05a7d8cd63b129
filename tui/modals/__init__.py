"""Modal dialogs the dashboard's actions open: confirmations, editors and prompts.

Each is a ``ModalScreen[T]`` that dismisses with a typed result (``None`` when cancelled), so
callers can ``push_screen(dialog, callback)`` or ``await push_screen_wait(dialog)``.

The names below are imported from their modules on first use: importing one dialog (a
confirmation, from the Runs view) does not import the others' widgets (text areas, selects)
before the dashboard's first paint.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tui.modals.confirm import ConfirmDialog
    from tui.modals.fact_editor import FactEdit, FactEditor, NewFactForm
    from tui.modals.launch import LaunchRequest, LaunchRunDialog, WorkflowChoice
    from tui.modals.reason import (
        ReasonDialog,
        ReasonResult,
        bulk_decision_dialog,
        clear_run_dialog,
        reject_note_dialog,
    )

_MODULE_OF = {
    "ConfirmDialog": "confirm",
    "FactEdit": "fact_editor",
    "FactEditor": "fact_editor",
    "NewFactForm": "fact_editor",
    "LaunchRequest": "launch",
    "LaunchRunDialog": "launch",
    "WorkflowChoice": "launch",
    "ReasonDialog": "reason",
    "ReasonResult": "reason",
    "bulk_decision_dialog": "reason",
    "clear_run_dialog": "reason",
    "reject_note_dialog": "reason",
}

__all__ = [
    "ConfirmDialog",
    "FactEdit",
    "FactEditor",
    "LaunchRequest",
    "LaunchRunDialog",
    "NewFactForm",
    "ReasonDialog",
    "ReasonResult",
    "WorkflowChoice",
    "bulk_decision_dialog",
    "clear_run_dialog",
    "reject_note_dialog",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
