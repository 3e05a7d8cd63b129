"""Modal dialogs the dashboard's actions open: confirmations, editors and prompts.

Each is a ``ModalScreen[T]`` that dismisses with a typed result (``None`` when cancelled), so
callers can ``push_screen(dialog, callback)`` or ``await push_screen_wait(dialog)``.
"""

from __future__ import annotations

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
