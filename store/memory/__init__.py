"""The memory store: facts, threads and messages, notes and supersession, processors,
memory blocks, and their SQL."""
