"""How a Claude Code session failed, from its ``result`` and its ``rate_limit_event`` lines
(pure functions; :mod:`engine.agents.cli.claude_session` reads the stream).

* An API failure arrives as ``subtype: "success"`` with ``is_error: true``, the HTTP status in
  ``api_error_status`` and a ``terminal_reason``; the CLI's own terminal errors
  (``error_max_turns``, ``error_during_execution``, ...) carry their prose in ``errors``. The
  kind (limit, permanent, transient) comes from all of them
  (:func:`engine.agents.failures.classify`).
* ``rate_limit_event`` lines come on ordinary runs too (``status`` allowed or
  allowed_warning); only ``rejected`` means a limit was hit, and its ``resetsAt`` (epoch
  seconds) says when it resets, preferred over the time printed in the text.
* A ``result`` after a successful one (the CLI's "only prompt commands are supported in
  streaming mode" after a background task, anthropics/claude-code#16768) does not undo the
  success: the session reader keeps the first and notes the second.
"""

from __future__ import annotations

from typing import Any

from engine.agents.agent import AgentError, failure_error
from engine.agents.cli.outcome import exit_words
from engine.agents.failures import classify, status_kind
from engine.agents.reset_times import reset_at_ms

PERMANENT_SUBTYPES = frozenset(
    {"error_max_turns", "error_max_budget_usd", "error_max_structured_output_retries"}
)


def rejected_reset_ms(event: dict[str, Any]) -> tuple[int | None, str] | None:
    """For a ``rate_limit_event`` whose status is ``rejected``: when the limit resets (epoch
    ms, None when not said) and which limit it is; None for any other event."""
    info = event.get("rate_limit_info")
    if not isinstance(info, dict) or info.get("status") != "rejected":
        return None
    resets = info.get("resetsAt")
    at = None
    if isinstance(resets, int | float) and not isinstance(resets, bool) and resets > 0:
        at = int(resets * 1000) if resets < 10**11 else int(resets)
    return at, str(info.get("rateLimitType") or "limit")


def succeeded(result: dict[str, Any] | None) -> bool:
    """True for a result that reports success (no error flag, a success subtype)."""
    if result is None or result.get("is_error"):
        return False
    return str(result.get("subtype") or "success") == "success"


def session_error(
    result: dict[str, Any],
    returncode: int,
    stderr_tail: str,
    *,
    now_ms: int,
    limit: tuple[int | None, str] | None = None,
    session_id: str | None = None,
    exit_forgiven: bool = False,
) -> AgentError | None:
    """The failure ``result`` reports, or None for a usable answer. ``limit`` is what a
    rejected ``rate_limit_event`` said; ``exit_forgiven`` ignores a non-zero exit (it came
    with a spurious second result after the success)."""
    subtype = str(result.get("subtype") or "")
    text = result.get("result")
    status = result.get("api_error_status")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    errors = result.get("errors")
    said = [str(text)] if isinstance(text, str) and text.strip() else []
    if isinstance(errors, list):
        said += [str(e) for e in errors]
    failed_exit = returncode != 0 and not exit_forgiven
    if result.get("is_error") or subtype not in ("", "success") or failed_exit:
        reason = " | ".join(said)[:600] or stderr_tail or "no reason given"
        if succeeded(result):
            # Only the exit failed: the result's text is the answer, not a reason.
            reason = "its result reported success" + (f"; {stderr_tail}" if stderr_tail else "")
        label = subtype if subtype and subtype != "success" else "error"
        if status is not None:
            label += f", HTTP {status}"
        terminal = result.get("terminal_reason")
        if subtype in PERMANENT_SUBTYPES:
            kind = "permanent"
        else:
            kind = classify(
                reason,
                status,
                default=status_kind(status) or "transient",
                terminal_reason=terminal if isinstance(terminal, str) else None,
            )
        resets = None
        if limit is not None and (kind == "limit" or status == 429):
            kind, resets = "limit", limit[0]
        if kind == "limit" and resets is None:
            resets = reset_at_ms(reason, now_ms)
        return failure_error(
            f"Claude Code failed ({label}, {exit_words(returncode)}): {reason}",
            kind,
            resets_at_ms=resets,
            session_id=session_id,
        )
    if result.get("structured_output") is None and not (isinstance(text, str) and text.strip()):
        return AgentError(
            "Claude Code finished with an empty result (no text, no structured output).",
            session_id=session_id,
        )
    return None


def no_result_error(returncode: int, stderr_tail: str, *, now_ms: int,
                    session_id: str | None) -> AgentError:
    """A session that printed no result: the end of its stderr says why."""
    reason = stderr_tail or "no output"
    kind = classify(reason)
    return failure_error(
        f"Claude Code ended without a result ({exit_words(returncode)}): {reason}"
        if returncode < 0 else
        f"Claude Code exited with status {returncode} without a result: {reason}",
        kind,
        resets_at_ms=reset_at_ms(reason, now_ms) if kind == "limit" else None,
        session_id=session_id,
    )
