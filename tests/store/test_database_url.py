"""Database URLs: recognised, refused with their password hidden, redacted for messages, and
handed to child processes without the password."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.db.database_url import (
    check_url,
    for_child_process,
    has_password,
    redact_url,
    refuse_password_in_argument,
)
from store.errors import InvalidInputError
from store.workspace.layout import resolve_workspace


def test_redaction_hides_every_password_form() -> None:
    assert redact_url("postgresql://u:s3cret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://h/db?user=u&password=s3cret&sslmode=require") == (
        "postgresql://h/db?user=u&password=***&sslmode=require"
    )
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert has_password("postgresql://u:x@h/db") and has_password("postgresql://h/db?password=x")
    assert not has_password("postgresql://u@h/db?sslmode=verify-full")


def test_bad_urls_and_argument_passwords_are_refused_without_echoing_it() -> None:
    with pytest.raises(InvalidInputError, match="not a PostgreSQL URL") as refused:
        check_url("mysql://u:s3cret@h/db")
    assert "s3cret" not in str(refused.value)
    with pytest.raises(InvalidInputError, match="malformed"):
        check_url("postgresql://h:notaport/db")
    with pytest.raises(InvalidInputError, match="PGPASSWORD") as argument:
        refuse_password_in_argument("postgresql://u:s3cret@h/db")
    assert "s3cret" not in str(argument.value)


def test_child_processes_get_the_url_without_the_password() -> None:
    env = {"PGPASSFILE": "/home/u/.pgpass-team", "PGSSLMODE": "verify-full", "PGPASSWORD": "p"}
    child = for_child_process("postgresql://u:s3cret@h:5432/db?options=-csearch_path%3Dt", env)
    assert "s3cret" not in child and "p@" not in child
    assert child.startswith("postgresql://u@h:5432/db?")
    assert "passfile=%2Fhome%2Fu%2F.pgpass-team" in child and "sslmode=verify-full" in child
    assert "options=-csearch_path%3Dt" in child


def test_workspace_url_comes_from_flag_then_environment_then_config(tmp_path: Path) -> None:
    root = tmp_path / ".tether"
    root.mkdir()
    (root / "config.toml").write_text('database_url = "postgresql://cfg@h/db"\n')
    env = {"TETHER_DATABASE_URL": "postgresql://env@h/db"}
    assert resolve_workspace(root, environ={}).database_url == "postgresql://cfg@h/db"
    assert resolve_workspace(root, environ=env).database_url == "postgresql://env@h/db"
    flagged = resolve_workspace(root, environ=env, database_url="postgresql://flag@h/db")
    assert flagged.database_url == "postgresql://flag@h/db"
    (root / "config.toml").write_text("database_url = 5\n")
    with pytest.raises(InvalidInputError, match="must be a string"):
        resolve_workspace(root, environ={})
