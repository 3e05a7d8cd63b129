"""The SQLite backend (the embedded default): connections, the asyncio database, the
in-thread database of the short commands, file checks and the schema's migrations."""
