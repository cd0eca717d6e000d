"""A LangChain retriever over a ragctx session: three turns of one conversation over the
demo corpus. Each call is a ragctx turn, so what the conversation already showed is not
shown again and every turn has a trace. Run: python examples/python/langchain_retriever.py
(after scripts/python-dev)."""

import pathlib
import tempfile

from ragctx import Engine
from ragctx.langchain import RagctxRetriever

repo = pathlib.Path(__file__).resolve().parents[2]
with tempfile.TemporaryDirectory() as data:
    engine = Engine(data_dir=data, model_dir=str(repo / "models" / "all-MiniLM-L6-v2"))
    engine.ingest([str(repo / "demo" / "houseplants")])
    retriever = RagctxRetriever(engine=engine, session="conversation-1", overrides={"limit": 3})
    for question in ["How often should I water a fern?", "And in winter?", "What pests should I look for?"]:
        docs = retriever.invoke(question)
        print(f"Q: {question}")
        for d in docs:
            carried = f" (shown in turn {d.metadata['carried_from']})" if d.metadata["carried_from"] else ""
            print(f"  [{d.metadata['marker']}] {d.metadata['title']}{carried}  score {d.metadata['score']:.3f}")
        trace = retriever.last_turn["trace"]
        print(f"  turn {retriever.last_turn['turn']}: {trace['context_tokens']} tokens, excluded {trace['excluded']}")
