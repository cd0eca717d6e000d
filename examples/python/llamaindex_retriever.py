"""A LlamaIndex retriever over a ragctx session: three turns of one conversation over the
demo corpus, each a ragctx turn (exclusion, grouping, budget, trace). Run:
python examples/python/llamaindex_retriever.py (after scripts/python-dev)."""

import pathlib
import tempfile

from ragctx import Engine
from ragctx.llama_index import RagctxRetriever

repo = pathlib.Path(__file__).resolve().parents[2]
with tempfile.TemporaryDirectory() as data:
    engine = Engine(data_dir=data, model_dir=str(repo / "models" / "all-MiniLM-L6-v2"))
    engine.ingest([str(repo / "demo" / "houseplants")])
    retriever = RagctxRetriever(engine, session="conversation-1", limit=3)
    for question in ["Which window suits a cactus?", "What about ferns?", "How do I repot it?"]:
        nodes = retriever.retrieve(question)
        print(f"Q: {question}")
        for n in nodes:
            print(f"  [{n.node.metadata['marker']}] {n.node.metadata['title']}  score {n.score:.3f}")
        print(f"  answer: {retriever.last_turn['answer'][:120]}")
