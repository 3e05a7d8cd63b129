"""The read model: the rows and values the store reads and the engine and dashboard show."""
