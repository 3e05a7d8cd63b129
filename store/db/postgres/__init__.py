"""The PostgreSQL backend (a team workspace): the pooled database, LISTEN/NOTIFY and
the schema's migrations."""
