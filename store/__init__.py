"""The workspace database: schema and migrations, memory store, run records, recall index.

This package knows nothing of ``engine`` or ``tui``.
"""
