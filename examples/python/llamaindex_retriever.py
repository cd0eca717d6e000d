"""A LlamaIndex retriever over a ragctx session: three turns of one conversation over the
demo corpus in `client` memory (no chunk is sent twice; what ranks again is pointed to),
each a ragctx turn recorded in the session's trace. Run:
python examples/python/llamaindex_retriever.py (after scripts/python-dev)."""

import pathlib
import tempfile

from ragctx import Engine
from ragctx.llama_index import RagctxRetriever

repo = pathlib.Path(__file__).resolve().parents[2]
with tempfile.TemporaryDirectory() as data:
    engine = Engine(data_dir=data, model_dir=str(repo / "models" / "all-MiniLM-L6-v2"))
    engine.ingest([str(repo / "demo" / "houseplants")])
    retriever = RagctxRetriever(engine, session="conversation-1", memory="client", limit=2)
    seen = set()
    for question in ["Which window suits a cactus?", "Which window suits a cactus best?", "How do I repot it?"]:
        nodes = retriever.retrieve(question)
        print(f"Q: {question}")
        for n in nodes:
            print(f"  [{n.node.metadata['marker']}] {n.node.metadata['title']}  score {n.score:.3f}")
        chunks = {c for n in nodes for c in n.node.metadata["chunk_ids"]}
        assert not chunks & seen, "a chunk came back"
        seen |= chunks
        print(f"  turn {retriever.last_turn['turn']}: excluded {retriever.last_turn['trace']['excluded']}")
    turns = [t["turn"] for t in engine.trace("conversation-1")]
    print(f"trace of conversation-1: turns {turns}; no chunk sent twice")
