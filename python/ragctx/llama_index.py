"""A LlamaIndex retriever that keeps one ragctx session per conversation.

    from ragctx import Engine
    from ragctx.llama_index import RagctxRetriever
    retriever = RagctxRetriever(Engine(data_dir="ragctx-data"), session="conversation-42")
    nodes = retriever.retrieve("How do I appeal?")      # one ragctx turn

Each call is one turn of the session (`Engine.retrieve`: no model is called) (exclusion, grouping, budget, trace); nodes carry
`document_id`, `title`, `marker`, `score`, `chunk_ids`, `carried_from`, `session_id` and
`turn` in their metadata and the block's score as their score. Install `llama-index-core`.
"""

from typing import Any, Dict, List, Optional

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ._turns import block_metadata


def to_nodes(turn: Dict[str, Any]) -> List[NodeWithScore]:
    """The context blocks of a ragctx turn as LlamaIndex nodes with scores."""
    return [
        NodeWithScore(
            node=TextNode(id_="|".join(block["chunk_ids"]), text=block["text"], metadata=block_metadata(block, turn)),
            score=block["score"],
        )
        for block in turn["context"]
    ]


class RagctxRetriever(BaseRetriever):
    """Retrieves through one ragctx session: each call is a turn (see the module's doc)."""

    def __init__(
        self,
        engine: Any,
        session: str,
        callback_manager: Optional[CallbackManager] = None,
        **overrides: Any,
    ) -> None:
        self.engine = engine
        self.session = session
        self.overrides = overrides
        self.last_turn: Optional[Dict[str, Any]] = None
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        turn = self.engine.retrieve(self.session, query_bundle.query_str, **self.overrides)
        self.last_turn = turn
        return to_nodes(turn)
