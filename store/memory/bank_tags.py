"""Bank types and the scope a project-bank record has, whoever wrote it (pure functions).

A bank's type comes from its namespace: ``user:<id>`` is a user bank; a namespace whose id
starts with ``project-`` is a project bank (``workflow:project-payments``); every other bank is
plain. Project banks hold knowledge about a code base that lives on branches, so a record is
either canonical (``scope:main``) or about one branch (``scope:branch`` with its ``branch:``).

The scope follows from the branch tag: ``scope:main`` for ``branch:main`` or no branch at all,
``scope:branch`` otherwise. The memory runtime writes it onto the notes it saves
(:mod:`engine.memory.tag_rules`); a note or fact written any other way (``tether notes add``,
``notes import``, ``memory set``, a note saved before the rule existed) gets the same scope when
recall reads it (:func:`effective_tags`), so every writer's records are recallable by a task
of their bank.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from store.memory.namespaces import parse_namespace

BankType = Literal["project", "user", "plain"]
MAIN_SCOPE = "scope:main"
BRANCH_SCOPE = "scope:branch"


def bank_type(namespace: str) -> BankType:
    """``project``, ``user`` or ``plain`` for a canonical namespace."""
    parsed = parse_namespace(namespace)
    if parsed.kind == "user":
        return "user"
    if parsed.id.startswith("project-"):
        return "project"
    return "plain"


def derived_scope(tags: Sequence[str]) -> str:
    """The scope a project-bank record's branch tag implies (its first ``branch:`` tag)."""
    branch = next((t for t in tags if t.startswith("branch:")), None)
    return MAIN_SCOPE if branch in (None, "branch:main") else BRANCH_SCOPE


def effective_tags(namespace: str, tags: Sequence[str]) -> tuple[str, ...]:
    """The tags recall scopes a record by: its own, plus the derived scope when a project-bank
    record carries no ``scope:`` tag (records of other banks: their own tags)."""
    own = tuple(tags)
    if any(t.startswith("scope:") for t in own) or bank_type(namespace) != "project":
        return own
    return (*own, derived_scope(own))
