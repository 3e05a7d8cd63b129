"""PostgreSQL twins of the SQLite statements in ``store/sql/``: one module per area with the
same statement names (see :mod:`store.sql.postgres.catalogue`), plus the schema."""
