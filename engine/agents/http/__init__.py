"""HTTP agents over httpx: :mod:`engine.agents.http.openai` (OpenAI-compatible chat
completions) and :mod:`engine.agents.http.anthropic` (the Messages API), over the shared
transport of :mod:`engine.agents.http.transport` and the retry timing of
:mod:`engine.agents.http.http_retry`.
"""
