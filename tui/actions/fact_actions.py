"""The Memory view's fact keys: ``e`` edits the selected fact's JSON value (validated live)
and TTL, ``n`` adds a fact, ``d`` deletes one after a confirmation naming its namespace and key.
Every write goes through ``MemoryStore`` like ``tether memory set/rm``."""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import work
from textual.binding import Binding

from store.facts import Fact
from tui.actions.feedback import write_safely
from tui.actions.read_only import write_refused
from tui.cli.background import embed_in_background
from tui.format import visible
from tui.modals import ConfirmDialog, FactEditor, NewFactForm
from tui.modals.fact_editor import FactEdit
from tui.run_control import host_for
from tui.screens.memory_lists import MemoryListsScreen
from tui.screens.memory_render import fact_row_key


class FactActionsScreen(MemoryListsScreen):
    """The Memory view's lists with the keys that edit, add and delete facts."""

    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        Binding("e", "edit_fact", "Edit value"),
        Binding("n", "new_fact", "New fact"),
        Binding("d", "delete_fact", "Delete fact"),
    ]
    KEY_NOTES: ClassVar[dict[str, str]] = {
        "edit_fact": "on a fact (facts list)",
        "delete_fact": "on a fact (facts list)",
    }
    """When each fact key applies (the ? help lists every key with this note)."""

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide fact keys unless a fact is selected (they also do nothing then)."""
        if write_refused(self.app, action):
            return False
        if action in ("edit_fact", "delete_fact"):
            return self._active == "facts" and self.selected_fact() is not None
        return super().check_action(action, parameters)

    @work(group="memory-action", exclusive=True)
    async def action_edit_fact(self) -> None:
        """Edit the selected fact's JSON value and TTL."""
        fact = self.selected_fact()
        if fact is None or not self.check_action("edit_fact", ()):
            return
        text, ttl_ms = fact.value_json, fact.ttl_ms
        while True:
            edit = await self.app.push_screen_wait(
                FactEditor(fact.namespace, fact.key, text, ttl_ms)
            )
            if edit is None:
                return
            saved = await write_safely(self, partial(self._store_fact, edit))
            if saved is not None:
                break
            # The write failed (told in a toast): reopen the editor with what was typed.
            text, ttl_ms = edit.value_json, edit.ttl_ms
        self.app.notify(visible(f"Saved {saved.namespace} / {saved.key}."), markup=False)
        embed_in_background(self.tether.workspace)  # semantic vector, when installed
        await self.refresh_data()

    async def _store_fact(self, edit: FactEdit) -> Fact:
        memory = await self.memory()
        return await memory.set_fact(edit.namespace, edit.key, edit.value, ttl_ms=edit.ttl_ms)

    @work(group="memory-action", exclusive=True)
    async def action_new_fact(self) -> None:
        """Add a fact (namespace and key validated like ``tether memory set``)."""
        edit = await self.app.push_screen_wait(NewFactForm(self.selected_namespace() or ""))
        if edit is None:
            return
        memory = await host_for(self.app).memory(create=True)
        self._memory = memory
        saved = await write_safely(
            self, lambda: memory.set_fact(edit.namespace, edit.key, edit.value, ttl_ms=edit.ttl_ms)
        )
        if saved is None:
            return
        self.app.notify(f"Saved {saved.namespace} / {saved.key}.", markup=False)
        embed_in_background(memory.db.workspace)  # semantic vector, when installed
        self._active = "facts"
        await self.refresh_data()
        self.facts_table.select_key(fact_row_key(saved.namespace, saved.key))

    @work(group="memory-action", exclusive=True)
    async def action_delete_fact(self) -> None:
        """Delete the selected fact after a confirmation naming its namespace and key."""
        fact = self.selected_fact()
        if fact is None or not self.check_action("delete_fact", ()):
            return
        target = Text.assemble(("namespace ", "dim"), fact.namespace, ("   key ", "dim"), fact.key)
        confirmed = await self.app.push_screen_wait(
            ConfirmDialog("Delete this fact?", target,
                          detail="Recall stops seeing it at once; this cannot be undone.")
        )
        if not confirmed:
            return
        memory = await self.memory()
        deleted = await write_safely(self, lambda: memory.delete_fact(fact.namespace, fact.key))
        if deleted is not None:
            message = "Deleted" if deleted else "Already gone:"
            self.app.notify(f"{message} {fact.namespace} / {fact.key}.", markup=False)
        await self.refresh_data()
