"""Bank-type tag rules: what tags a note written to a bank carries, and which notes recall may
see, for project banks (``project-*``) and user banks (``user-*``). Pure functions.

Project banks hold knowledge about a code base that lives on branches:

* a write carries at most one ``branch:`` and at most one ``scope:`` tag; the scope is derived
  from the branch (``scope:main`` for ``branch:main`` or no branch at all, ``scope:branch``
  otherwise) and added when missing; an explicit scope that contradicts the branch, or
  ``scope:branch`` without a branch, is refused;
* recall always sees canonical main plus the configured current branch: a note must carry
  ``scope:main`` or one of the configured ``branch:`` tags, and each other configured tag.

User banks hold what is known about a person, which is no project's business:

* a tool may not write ``branch:``, ``scope:`` or ``stream:`` tags to them (refused); project
  tags configured on the task are left out silently;
* recall is scoped only by the tags a tool call adds.

Every other bank keeps the plain rule: the configured tags are written and required.

A bank's type comes from its namespace (:func:`store.memory.bank_tags.bank_type`):
``user:<id>`` is a user bank (``user-alice`` names ``user:alice``); a namespace whose id starts
with ``project-`` is a project bank (``project-payments`` names ``workflow:project-payments``).
Records written without the runtime (``tether notes add``, ``notes import``, ``memory set``)
get the derived scope when recall reads them (:func:`store.memory.bank_tags.effective_tags`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from engine.memory.recall_items import TagGroups
from engine.memory.tag_vocabulary import validate_tags
from store.errors import InvalidInputError
from store.memory.bank_tags import MAIN_SCOPE, bank_type, derived_scope

PROJECT_TAG_KINDS = ("branch:", "scope:", "stream:")


def _error(message: str) -> InvalidInputError:
    return InvalidInputError(f"Memory tags: {message}")


def _project_tags(tags: Sequence[str]) -> tuple[str, ...]:
    branches = [t for t in tags if t.startswith("branch:")]
    scopes = [t for t in tags if t.startswith("scope:")]
    if len(branches) > 1:
        raise _error(f"a project-bank note carries at most one branch tag ({', '.join(branches)}).")
    if len(scopes) > 1:
        raise _error(f"a project-bank note carries at most one scope tag ({', '.join(scopes)}).")
    expected = derived_scope(branches)
    if scopes and scopes[0] != expected:
        where = f"on {branches[0]}" if branches else "without a branch tag"
        raise _error(f"{scopes[0]} contradicts {expected}, which a note {where} gets.")
    return tuple(tags) if scopes else (*tags, expected)


def write_tags_for(
    namespace: str, configured: Sequence[str], extra: Iterable[object] | None, source: str
) -> tuple[str, ...]:
    """The tags a note written to ``namespace`` carries: configured + tool-supplied +
    ``source:<source>`` (unless a source is given), under the bank type's rules; at most 16."""
    extra_tags = validate_tags(extra)
    kind = bank_type(namespace)
    if kind == "user":
        refused = [t for t in extra_tags if t.startswith(PROJECT_TAG_KINDS)]
        if refused:
            raise _error(f"user-bank notes cannot carry project scope tags ({refused[0]}).")
        configured = [t for t in configured if not t.startswith(PROJECT_TAG_KINDS)]
    combined = list(dict.fromkeys([*configured, *extra_tags]))
    if not any(tag.startswith("source:") for tag in combined):
        combined.append(f"source:{source}")
    if kind == "project":
        combined = list(_project_tags(combined))
    return validate_tags(combined)


def recall_tag_groups(
    namespace: str, configured: Sequence[str], extra: Sequence[str] = ()
) -> TagGroups:
    """What a note of ``namespace`` must carry to be recalled (every group, any tag of one)."""
    kind = bank_type(namespace)
    extra_groups = tuple((tag,) for tag in dict.fromkeys(extra))
    if kind == "user":
        return extra_groups
    if kind == "project":
        branches = tuple(t for t in configured if t.startswith("branch:"))
        others = tuple((t,) for t in configured
                       if not t.startswith(("branch:", "scope:")))
        return ((MAIN_SCOPE, *branches), *others, *extra_groups)
    return (*((t,) for t in dict.fromkeys(configured)), *extra_groups)
