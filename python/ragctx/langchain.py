"""A LangChain retriever that keeps one ragctx session per conversation.

    from ragctx import Engine
    from ragctx.langchain import RagctxRetriever
    retriever = RagctxRetriever(engine=Engine(data_dir="ragctx-data"), session="conversation-42")
    docs = retriever.invoke("How do I appeal?")        # one ragctx turn

Each call is one turn of the session (`Engine.retrieve`: no model is called), so a chain built on it gets ragctx's exclusion (a
chunk already shown is not shown again, or is carried as one block in `engine` memory),
grouping, token budget and a trace per turn, without changing the chain. Documents carry
`document_id`, `title`, `marker` (cite as ``[marker]``), `score`, `chunk_ids`,
`carried_from`, `session_id` and `turn` in their metadata. Install `langchain-core`.
"""

from typing import Any, Dict, List, Optional

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from ._turns import block_metadata


def to_documents(turn: Dict[str, Any]) -> List[Document]:
    """The context blocks of a ragctx turn as LangChain documents."""
    return [
        Document(page_content=block["text"], metadata=block_metadata(block, turn))
        for block in turn["context"]
    ]


class RagctxRetriever(BaseRetriever):
    """Retrieves through one ragctx session: each call is a turn (see the module's doc)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any
    """A `ragctx.Engine`."""
    session: str
    """The ragctx session of this conversation."""
    overrides: Dict[str, Any] = Field(default_factory=dict)
    """Turn settings for every call, as `Engine.ask`'s (`memory`, `budget`, `limit`, ...)."""
    last_turn: Optional[Dict[str, Any]] = None
    """The whole last turn (answer, citations, trace), for callers who want more."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> List[Document]:
        turn = self.engine.retrieve(self.session, query, **self.overrides)
        self.last_turn = turn
        return to_documents(turn)
