"""Sentences a PostgreSQL workspace's user meets before any Tether table exists (pure)."""

from __future__ import annotations


def missing_schema_message(search_path: str) -> str:
    """The sentence for a URL whose search path names no schema that exists, with the SQL
    that creates it when the path names one schema."""
    names = [name.strip() for name in search_path.split(",") if name.strip()]
    text = f"The database URL's search path ({search_path}) names no schema that exists"
    if len(names) == 1:
        name = names[0]
        if not (name.startswith('"') and name.endswith('"')):
            name = '"' + name.replace('"', '""') + '"'
        return f"{text}; create it first (CREATE SCHEMA {name};)."
    return f"{text}; create one first (CREATE SCHEMA name;)."
