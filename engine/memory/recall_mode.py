"""Which recall a task gets (keyword, semantic or hybrid) and why: the workspace's ``[memory]``
settings and the resolution of a task's mode against what is installed (pure).

```toml
[memory]
mode = "auto"       # auto (hybrid when a local encoder is installed, else keyword) | hybrid |
                    # semantic | keyword
encoder = "auto"    # auto | minilm-onnx-int8 | minilm-numpy | e5-small-q4 (engine.memory.encoders)
summarizer_agent = "sim"   # the agent of `tether memory summarize` (engine.memory.summarize)
```

A task's ``MemoryConfig(mode=...)`` overrides the workspace's mode. A mode that needs the
encoder when none can load runs by keyword and says so in the block's warning: a task never
fails for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from store.errors import InvalidInputError

MODES = ("hybrid", "semantic", "keyword")
WORKSPACE_MODES = ("auto", *MODES)
# summarizer_agent is read by engine.memory.summarize.
_KEYS = {"mode", "encoder", "summarizer_agent"}


@dataclass(frozen=True)
class MemorySettings:
    """The workspace's ``[memory]`` table."""

    mode: str = "auto"
    encoder: str = "auto"


def memory_settings_from(data: dict[str, Any], source: str) -> MemorySettings:
    """The ``[memory]`` table of parsed ``config.toml`` data; InvalidInputError names a bad
    key or value."""
    from engine.memory.encoders import AUTO, KINDS

    table = data.get("memory", {})
    if not isinstance(table, dict):
        raise InvalidInputError(f"{source}: [memory] must be a table.")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise InvalidInputError(f"{source}: unknown [memory] setting {unknown[0]!r}.")
    mode = table.get("mode", "auto")
    if mode not in WORKSPACE_MODES:
        raise InvalidInputError(
            f"{source}: memory.mode must be one of {', '.join(WORKSPACE_MODES)}, not {mode!r}.")
    encoder = table.get("encoder", AUTO)
    if encoder != AUTO and encoder not in KINDS:
        raise InvalidInputError(
            f"{source}: memory.encoder must be one of {', '.join([AUTO, *KINDS])}, "
            f"not {encoder!r}.")
    return MemorySettings(mode, encoder)


@dataclass(frozen=True)
class ModeChoice:
    """The recall a task runs (``mode``), why, and the mode asked for when it could not be
    honoured (``fallback_from``: the encoder cannot load, keyword answers)."""

    mode: str
    why: str
    fallback_from: str | None = None


def resolve_mode(
    task_mode: str | None, settings: MemorySettings, encoder_ok: bool, encoder_why: str
) -> ModeChoice:
    """The recall mode in force for a task (see the module docstring). ``encoder_ok`` and
    ``encoder_why`` say whether the workspace's encoder can load, and which it is or why not."""
    if task_mode is not None:
        asked, source = task_mode, "the task's memory config"
    elif settings.mode != "auto":
        asked, source = settings.mode, "the workspace's [memory] mode"
    elif encoder_ok:
        return ModeChoice("hybrid", f"hybrid by default ({encoder_why})")
    else:
        return ModeChoice("keyword", f"keyword by default: semantic recall is off ({encoder_why})")
    if asked == "keyword":
        return ModeChoice("keyword", f"keyword, set by {source}")
    if encoder_ok:
        return ModeChoice(asked, f"{asked}, set by {source} ({encoder_why})")
    return ModeChoice(
        "keyword", f"{asked} is set by {source} but semantic recall is off ({encoder_why}); "
        "keyword recall answers instead", asked)


def recall_status(settings: MemorySettings) -> dict[str, Any]:
    """Which recall tasks get by default and why, the encoder and its model (loads nothing):
    ``tether memory status`` and the dashboard's Memory view."""
    from engine.memory.encoders import choose_kind

    kind, why = choose_kind(settings.encoder)
    choice = resolve_mode(None, settings, kind is not None, why)
    return {
        "recall": choice.mode,
        "why": choice.why,
        "encoder": kind.name if kind else None,
        "model": kind.model_id if kind else None,
        "line": f"recall: {choice.why}",
    }
