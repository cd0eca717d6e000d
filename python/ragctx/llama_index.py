"""A LlamaIndex retriever that keeps one ragctx session per conversation.

    from ragctx import Engine
    from ragctx.llama_index import RagctxRetriever
    retriever = RagctxRetriever(Engine(data_dir="ragctx-data"), session="conversation-42")
    nodes = retriever.retrieve("How do I appeal?")      # one ragctx turn

Each call is one turn of the session (`Engine.retrieve`: no model is called) (exclusion,
grouping, budget, trace); nodes carry the block's score as their score. Install
`llama-index-core`.

Metadata: a node's metadata is the chunk's own metadata (what it was ingested with) with
ragctx's keys over it: `document_id`, `title`, `marker`, `score`, `chunk_ids`,
`carried_from`, `session_id` and `turn` always hold ragctx's values; a chunk key that
collides with one of them is kept as ``meta.<key>``.

Filters: ``filters=MetadataFilters(...)`` as a vector index retriever takes them (translated
by `ragctx.filters.from_llama_index`: EQ, NE, GT, GTE, LT, LTE, IN, NIN, ANY, ALL,
CONTAINS, IS_EMPTY under AND / OR / NOT; TEXT_MATCH and other operators raise
`ValueError`), or a ragctx filter dict. They hold together with the engine's standing filter
and a ``filter=`` among the overrides: a filter only narrows.

    from llama_index.core.vector_stores import MetadataFilters, MetadataFilter, FilterOperator
    retriever = RagctxRetriever(engine, session="s", filters=MetadataFilters(filters=[
        MetadataFilter(key="year", value=2020, operator=FilterOperator.GTE)]))
"""

from typing import Any, Dict, List, Optional

from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from ._turns import block_metadata
from .filters import all_of, from_langchain, from_llama_index


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
        filters: Any = None,
        **overrides: Any,
    ) -> None:
        self.engine = engine
        self.session = session
        self.overrides = overrides
        self.filters = filters
        # Translated now: an operator ragctx lacks is refused when the retriever is made.
        from_llama_index(filters)
        self.last_turn: Optional[Dict[str, Any]] = None
        super().__init__(callback_manager=callback_manager)

    def _turn_args(self) -> Dict[str, Any]:
        args = dict(self.overrides)
        combined = all_of([from_langchain(args.pop("filter", None)), from_llama_index(self.filters)])
        if combined:
            args["filter"] = combined
        return args

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        turn = self.engine.retrieve(self.session, query_bundle.query_str, **self._turn_args())
        self.last_turn = turn
        return to_nodes(turn)
