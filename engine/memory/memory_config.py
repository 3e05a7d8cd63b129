"""Memory configuration for a workflow or a task, validated when it is defined.

A :class:`MemoryConfig` names the bank(s) a task reads and writes, the tags that scope it, how it
recalls (``auto`` = the task prompt is the query, a fixed query, or ``off``), the byte budget of
the recalled block, whether a successful output is retained (and with which note status), and
whether the agent is offered the ``remember``/``recall`` tools, the ``primers``: ids of
mental-model notes inserted verbatim before the recalled items (same block, same budget), and
the recall ``mode`` (``hybrid``, ``semantic`` or ``keyword``; None: the workspace's default,
:mod:`engine.memory.recall_mode`).
Project (``project-*``) and user (``user-*``) banks follow their own tag rules
(:mod:`engine.memory.tag_rules`); tags those rules would refuse fail here.

Two rules from the reference's pitfalls are enforced here rather than discovered at run time:

* invalid values fail at definition time with one sentence (:class:`InvalidInputError`);
* a config that is set but could never take effect is an error, not a silent no-op: memory
  without a bank, a retain status with retain off, a budget with nothing that reads it, or a
  bank with recall, retain and tools all off.

A task's own config *replaces* the workflow's (never merges); ``memory=False`` on a task turns an
inherited config off for that task (see :func:`resolve_memory`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from engine.memory.recall_mode import MODES
from engine.memory.tag_rules import write_tags_for
from engine.memory.tag_vocabulary import (
    MAX_TAG_CHARS,
    config_error,
    has_bad_chars,
    validate_tags,
)
from store.errors import InvalidInputError
from store.memory.namespaces import (
    bank_to_namespace,
    format_namespace,
    validate_namespace,
)

DEFAULT_BUDGET_BYTES = 2048
# The block's advisory line and a truncation marker must fit with room for some recalled text;
# a smaller budget could never inject anything, which would be a silent no-op.
MIN_BUDGET_BYTES = 128
MAX_BUDGET_BYTES = 1_048_576
MAX_BANK_CHARS = 200
MAX_QUERY_CHARS = 4000
MAX_PRIMERS = 16

Recall = str  # "auto", "off", or a fixed query
Retain = Literal["on-complete", "off"]
NoteStatus = Literal["accepted", "pending"]


def bank_namespace(bank: str) -> str:
    """The canonical namespace a bank name refers to.

    ``kind:id`` text is taken as a namespace as written; a plain bank name goes through the
    store's bank mapping (``code-review`` -> ``workflow:code-review``).
    """
    if ":" in bank:
        return format_namespace(validate_namespace(bank))
    return format_namespace(bank_to_namespace(bank))


def _validate_bank(bank: object) -> str:
    if not isinstance(bank, str):
        raise config_error(f"bank {bank!r} is not text.")
    name = bank.strip()
    if not name:
        raise config_error("a bank name is empty.")
    if len(name) > MAX_BANK_CHARS:
        raise config_error(f"bank {name[:40]!r}... is longer than {MAX_BANK_CHARS} characters.")
    if any(unicodedata.category(ch) == "Cc" for ch in name) or any(ch.isspace() for ch in name):
        raise config_error(f"bank {name!r} contains whitespace or control characters.")
    try:
        bank_namespace(name)
    except InvalidInputError as error:
        raise config_error(f"bank {name!r} is not a valid namespace ({error}).") from None
    return name


def _normalise_banks(bank: object, banks: object) -> tuple[str, ...]:
    if bank is not None and banks is not None:
        raise config_error("give either bank or banks, not both.")
    if bank is not None:
        return (_validate_bank(bank),)
    if banks is None:
        return ()
    if isinstance(banks, str) or not isinstance(banks, Iterable):
        raise config_error("banks must be a list of bank names.")
    unique = tuple(dict.fromkeys(_validate_bank(item) for item in banks))
    if not unique:
        raise config_error("banks is an empty list; name at least one bank.")
    return unique


def _normalise_recall(recall: object) -> str:
    if recall is None or recall is False:
        return "off"
    if not isinstance(recall, str):
        raise config_error(f"recall must be 'auto', 'off' or a query string, not {recall!r}.")
    text = recall.strip()
    if not text:
        raise config_error("recall is an empty query; use 'auto', 'off' or a query.")
    if len(text) > MAX_QUERY_CHARS:
        raise config_error(f"the fixed recall query is longer than {MAX_QUERY_CHARS} characters.")
    return text


def _normalise_primers(primers: object) -> tuple[str, ...]:
    if primers is None:
        return ()
    if isinstance(primers, str) or not isinstance(primers, Iterable):
        raise config_error("primers must be a list of note ids.")
    ids: list[str] = []
    for primer in primers:
        if not isinstance(primer, str) or not primer.strip():
            raise config_error(f"primer {primer!r} is not a note id.")
        if len(primer) > MAX_TAG_CHARS or has_bad_chars(primer):
            raise config_error(f"primer {primer[:40]!r} is not a valid note id.")
        if primer not in ids:
            ids.append(primer)
    if len(ids) > MAX_PRIMERS:
        raise config_error(f"{len(ids)} primers given; at most {MAX_PRIMERS} are allowed.")
    return tuple(ids)


@dataclass(frozen=True)
class MemoryConfig:
    """Validated memory settings (see the module docstring for every rule).

    Construct with ``bank="x"`` or ``banks=[...]``; after construction :attr:`banks` always holds
    the de-duplicated bank names and :attr:`bank` the first of them.
    """

    bank: str | None = None
    banks: tuple[str, ...] | None = None
    tags: tuple[str, ...] = ()
    recall: Recall = "auto"
    budget_bytes: int | None = None
    retain: Retain = "off"
    retain_status: NoteStatus | None = None
    tools: bool = False
    primers: tuple[str, ...] = ()
    mode: str | None = None
    namespaces: tuple[str, ...] = field(default=(), init=False, compare=False)

    def __post_init__(self) -> None:
        banks = _normalise_banks(self.bank, self.banks)
        object.__setattr__(self, "banks", banks)
        object.__setattr__(self, "bank", banks[0] if banks else None)
        object.__setattr__(self, "namespaces", tuple(bank_namespace(b) for b in banks))
        object.__setattr__(self, "tags", validate_tags(self.tags))
        object.__setattr__(self, "recall", _normalise_recall(self.recall))
        object.__setattr__(self, "primers", _normalise_primers(self.primers))
        if self.retain not in ("on-complete", "off"):
            raise config_error(f"retain must be 'on-complete' or 'off', not {self.retain!r}.")
        if self.retain_status not in (None, "accepted", "pending"):
            raise config_error(
                f"retain_status must be 'accepted' or 'pending', not {self.retain_status!r}."
            )
        if self.mode is not None and self.mode not in MODES:
            raise config_error(
                f"mode must be one of {', '.join(MODES)} (or unset), not {self.mode!r}.")
        if self.mode is not None and self.recall == "off" and not self.tools:
            raise config_error("mode is set but recall is off and there are no tools to use it.")
        if not isinstance(self.tools, bool):
            raise config_error(f"tools must be true or false, not {self.tools!r}.")
        budget = self.budget_bytes
        if budget is not None and (
            isinstance(budget, bool)
            or not isinstance(budget, int)
            or not MIN_BUDGET_BYTES <= budget <= MAX_BUDGET_BYTES
        ):
            raise config_error(
                f"budget_bytes must be a whole number from {MIN_BUDGET_BYTES} to "
                f"{MAX_BUDGET_BYTES}, not {budget!r}."
            )
        self._refuse_no_ops()
        self._check_bank_tag_rules()

    def _check_bank_tag_rules(self) -> None:
        """Tags that a project or user bank would refuse fail now, not at the first write."""
        for namespace in self.namespaces:
            try:
                write_tags_for(namespace, self.tags, (), "run")
            except InvalidInputError as error:
                raise config_error(f"bank {namespace}: {error}") from None

    def _refuse_no_ops(self) -> None:
        """Refuse settings that could never take effect (the reference's silent no-op)."""
        if not self.banks:
            raise config_error(
                "no bank is named, so recall, retain and tools could not work; give bank."
            )
        if self.recall == "off" and self.retain == "off" and not self.tools and not self.primers:
            raise config_error(
                "recall, retain and tools are all off and there are no primers, so it would do "
                "nothing; remove it or turn one on."
            )
        if self.retain_status is not None and self.retain == "off":
            raise config_error("retain_status is set but retain is off; set retain='on-complete'.")
        if (self.budget_bytes is not None and self.recall == "off" and not self.tools
                and not self.primers):
            raise config_error(
                "budget_bytes is set but neither recall, primers nor tools would use it."
            )

    # -- derived values -------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        """True when the task reads or writes memory, so its output must bypass the cache."""
        return bool(self.banks) and (
            self.recall != "off" or self.retain != "off" or self.tools or bool(self.primers)
        )

    @property
    def effective_budget(self) -> int:
        """The block's byte budget (default 2048)."""
        return self.budget_bytes if self.budget_bytes is not None else DEFAULT_BUDGET_BYTES

    @property
    def effective_retain_status(self) -> NoteStatus:
        """The status retained notes get (accepted unless configured as pending)."""
        return self.retain_status or "accepted"

    def query_for(self, task_prompt: str) -> str | None:
        """The recall query for a task: its prompt (``auto``), the fixed query, or None (off)."""
        if self.recall == "off":
            return None
        if self.recall == "auto":
            return task_prompt
        return self.recall

    def namespace_of(self, bank: str | None) -> tuple[str, ...]:
        """Namespaces for an optional bank named by a tool call (must be a configured bank)."""
        if bank is None:
            return self.namespaces
        assert self.banks is not None
        for name, namespace in zip(self.banks, self.namespaces, strict=True):
            if bank in (name, namespace):
                return (namespace,)
        raise config_error(
            f"bank {bank!r} is not one of this task's banks ({', '.join(self.banks)})."
        )

    def describe(self) -> dict[str, Any]:
        """A JSON-ready summary (stored with blocks and shown by the dashboard)."""
        return {
            "banks": list(self.banks or ()),
            "namespaces": list(self.namespaces),
            "tags": list(self.tags),
            "recall": self.recall,
            "budget_bytes": self.effective_budget,
            "retain": self.retain,
            "retain_status": self.effective_retain_status,
            "tools": self.tools,
            "primers": list(self.primers),
            "mode": self.mode,
        }

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> MemoryConfig:
        """Build a config from a dict (config.toml or JSON), refusing unknown keys."""
        allowed = {
            "bank",
            "banks",
            "tags",
            "recall",
            "budget_bytes",
            "retain",
            "retain_status",
            "tools",
            "primers",
            "mode",
        }
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise config_error(f"unknown setting{'' if len(unknown) == 1 else 's'} "
                               f"{', '.join(unknown)}.")
        values = dict(data)
        for key in ("tags", "primers"):
            if key in values and values[key] is not None and not isinstance(values[key], str):
                values[key] = tuple(values[key])
        return cls(**values)


MemorySetting = MemoryConfig | Mapping[str, Any] | bool | None


def coerce_memory(value: MemorySetting) -> MemoryConfig | Literal[False] | None:
    """Turn what a workflow author wrote into a config: None (inherit), False (off) or a config."""
    if value is None or value is False:
        return value
    if value is True:
        raise config_error("memory=True names no bank; pass MemoryConfig(bank=...).")
    if isinstance(value, MemoryConfig):
        return value
    if isinstance(value, Mapping):
        return MemoryConfig.from_mapping(value)
    raise config_error(
        f"memory must be a MemoryConfig, a dict or False, not {type(value).__name__}."
    )


def resolve_memory(task: MemorySetting, workflow: MemorySetting) -> MemoryConfig | None:
    """The config a task runs with: its own (replacing, never merging), else the workflow's.

    ``task=False`` switches an inherited config off for that task.
    """
    own = coerce_memory(task)
    if own is False:
        return None
    if own is not None:
        return own
    inherited = coerce_memory(workflow)
    return inherited if isinstance(inherited, MemoryConfig) else None
