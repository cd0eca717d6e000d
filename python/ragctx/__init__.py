"""ragctx: a multi-turn RAG context engine with a Rust core.

    from ragctx import Engine
    engine = Engine(data_dir="ragctx-data", budget=2000)
    engine.ingest(["docs/"])
    turn = engine.ask("session-1", "How do I appeal?")
    turn["answer"], turn["citations"], turn["context"], turn["trace"]

An engine acts as one tenant and may hold a standing filter; chunks carry metadata that
filters select on (``ragctx.filters`` translates LangChain and LlamaIndex filters):

    engine = Engine(data_dir="ragctx-data", tenant="plants-en", filter={"lang": "en"})
    engine.ingest(["docs/"], metadata={"topic": "care", "year": 2024})
    engine.ask("session-1", "Which pests?", filter={"year": {"gte": 2020}})  # both hold

A session never shows a chunk twice, keeps one document's neighbouring chunks from
crowding out other sources, and fits a token budget; every turn has a trace. Adapters for
LangChain (``ragctx.langchain.RagctxRetriever``) and LlamaIndex
(``ragctx.llama_index.RagctxRetriever``) keep one ragctx session per conversation.
"""

from ._native import BadInput, Conflict, Engine, NotFound, RagctxError, Unavailable

__all__ = ["Engine", "RagctxError", "BadInput", "NotFound", "Unavailable", "Conflict"]
