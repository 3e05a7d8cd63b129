"""The memory runtime: what a task with a memory config recalls, retains and may call.

* :mod:`engine.memory.memory_config` — :class:`MemoryConfig`, validated when defined, over the
  tag vocabulary (:mod:`engine.memory.tag_vocabulary`) and the bank-type tag rules
  (:mod:`engine.memory.tag_rules`);
* :mod:`engine.memory.keyword_recall` — local BM25 recall over accepted notes and live facts;
  :mod:`engine.memory.semantic_recall` adds semantic and hybrid recall over the local model of
  :mod:`engine.memory.encoder`; both answer with :mod:`engine.memory.recall_items`;
* :mod:`engine.memory.block` — the byte-capped memory block (pure);
* :mod:`engine.memory.runtime` — :class:`MemoryRuntime`, the scheduler's memory hook, over
  :mod:`engine.memory.memory_access` (the stores and recall the tools use too);
* :mod:`engine.memory.memory_tools` — the ``remember`` / ``recall`` agent tools, served to agent
  CLIs by :mod:`engine.memory.mcp_server`;
* :mod:`engine.memory.summarize` — the store's Summarizer driven by an engine agent.
"""
