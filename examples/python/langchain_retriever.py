"""A LangChain retriever over a ragctx session: three turns of one conversation over the
demo corpus, in `client` memory (the chat app keeps what it was shown, so ragctx never sends
a chunk twice: the second question does not get the first one's chunks back, it gets
pointers to them). Every call is a ragctx turn, recorded in the session's trace.
Run: python examples/python/langchain_retriever.py (after scripts/python-dev)."""

import pathlib
import tempfile

from ragctx import Engine
from ragctx.langchain import RagctxRetriever

repo = pathlib.Path(__file__).resolve().parents[2]
with tempfile.TemporaryDirectory() as data:
    engine = Engine(data_dir=data, model_dir=str(repo / "models" / "all-MiniLM-L6-v2"))
    engine.ingest([str(repo / "demo" / "houseplants")])
    retriever = RagctxRetriever(engine=engine, session="conversation-1", overrides={"memory": "client", "limit": 2})
    seen = set()
    for question in ["How often should I water a fern?", "And how often in winter?", "What pests should I look for?"]:
        docs = retriever.invoke(question)
        print(f"Q: {question}")
        for d in docs:
            print(f"  [{d.metadata['marker']}] {d.metadata['title']}  score {d.metadata['score']:.3f}")
        chunks = {c for d in docs for c in d.metadata["chunk_ids"]}
        assert not chunks & seen, "a chunk came back"
        seen |= chunks
        turn = retriever.last_turn
        pointers = ", ".join(f"[{p['marker']}] {p['title']}" for p in turn.get("pointers", []))
        print(f"  turn {turn['turn']}: {turn['trace']['context_tokens']} tokens, excluded {turn['trace']['excluded']}"
              + (f", already with you: {pointers}" if pointers else ""))
    turns = [t["turn"] for t in engine.trace("conversation-1")]
    print(f"trace of conversation-1: turns {turns}; no chunk sent twice")
