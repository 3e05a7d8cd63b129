"""The memory runtime: what a task with a memory config recalls, retains and may call.

* :mod:`engine.memory.memory_config` — :class:`MemoryConfig`, validated when defined;
* :mod:`engine.memory.keyword_recall` — local BM25 recall over accepted notes and live facts;
* :mod:`engine.memory.block` — the byte-capped memory block (pure);
* :mod:`engine.memory.runtime` — :class:`MemoryRuntime`, the scheduler's memory hook;
* :mod:`engine.memory.memory_tools` — the ``remember`` / ``recall`` agent tools;
* :mod:`engine.memory.summarize` — the store's Summarizer driven by an engine agent.
"""
