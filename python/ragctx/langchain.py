"""A LangChain retriever that keeps one ragctx session per conversation, and tools for agents.

    from ragctx import Engine
    from ragctx.langchain import RagctxRetriever
    retriever = RagctxRetriever(engine=Engine(data_dir="ragctx-data"), session="conversation-42")
    docs = retriever.invoke("How do I appeal?")        # one ragctx turn

Each call is one turn of the session (`Engine.retrieve`: no model is called), so a chain built on it gets ragctx's exclusion (a
chunk already shown is not shown again, or is carried as one block in `engine` memory),
grouping, token budget and a trace per turn, without changing the chain. Install `langchain-core`.

Metadata: a document's metadata is the chunk's own metadata (what it was ingested with)
with ragctx's keys over it: `document_id`, `title`, `marker` (cite as ``[marker]``),
`score`, `chunk_ids`, `carried_from`, `session_id` and `turn` always hold ragctx's values; a
chunk key that collides with one of them is kept as ``meta.<key>``.

Filters, LangChain / Chroma style (translated by `ragctx.filters.from_langchain`:
``$eq $ne $gt $gte $lt $lte $in $nin $exists $and $or $not``; another operator raises
`ValueError`), from any of:

    RagctxRetriever(engine=e, session="s", filter={"year": {"$gte": 2020}})
    RagctxRetriever(engine=e, session="s", search_kwargs={"filter": {"topic": "pests"}, "k": 4})
    retriever.invoke("question", filter={"$or": [{"topic": "pests"}, {"topic": "soil"}]})

They all hold together, and with the engine's standing filter: a filter only narrows.

`k`, LangChain's convention, is how many documents come back at most: the turn's `limit`,
and the documents cut to it (an `engine`-memory turn may carry earlier ones besides its new
results). From the narrowest: ``retriever.invoke(q, k=2)``, ``RagctxRetriever(..., k=2)``,
``search_kwargs={"k": 2}``.

For agents (LangGraph's ``create_react_agent``, any tool-calling loop), `RagctxSearchTool`
and `RagctxOpenTool` are `Engine.search` and `Engine.open` as tools of one session: a search
never hands the agent a passage it already holds (those that rank again come back as
one-line pointers), and open shows one again by its marker:

    tools = [RagctxSearchTool(engine=e, session="task-7"), RagctxOpenTool(engine=e, session="task-7")]

Each returns the text the model reads as the tool message's content and the whole result
(blocks, pointers, tokens) as its artifact.
"""

from typing import Any, Dict, List, Optional

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from ._turns import block_metadata
from .filters import all_of, from_langchain

_SEARCH_KWARGS = ("filter", "k")


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
    filter: Optional[Dict[str, Any]] = None
    """A metadata filter for every call (LangChain / Chroma operators, or ragctx's own)."""
    search_kwargs: Dict[str, Any] = Field(default_factory=dict)
    """As a vector store retriever's: `filter` (as above) and `k` (documents at most)."""
    k: Optional[int] = None
    """Documents returned at most, for every call (a call's own `k=` wins)."""
    last_turn: Optional[Dict[str, Any]] = None
    """The whole last turn (answer, citations, trace), for callers who want more."""

    def _k(self, kwargs: Dict[str, Any]) -> Optional[int]:
        """The call's `k`, else the retriever's, else `search_kwargs["k"]`; checked."""
        k = kwargs.pop("k", None)
        for candidate in (self.k, self.search_kwargs.get("k")):
            k = candidate if k is None else k
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000):
            raise ValueError(f"k must be an integer between 1 and 1000, got {k!r}")
        return k

    def _turn_args(self, filter: Optional[Dict[str, Any]], kwargs: Dict[str, Any]):
        """The turn's settings for one call, and its `k` (documents at most), if any."""
        kwargs.pop("verbose", None)  # LangChain's own, passed along to retrievers
        k = self._k(kwargs)
        if kwargs:
            raise TypeError(f"RagctxRetriever takes filter= and k= per call, not {', '.join(sorted(kwargs))}")
        unknown = set(self.search_kwargs) - set(_SEARCH_KWARGS)
        if unknown:
            raise ValueError(
                f"search_kwargs: ragctx takes {' and '.join(_SEARCH_KWARGS)}, not {', '.join(sorted(unknown))}"
            )
        args = dict(self.overrides)
        if k is not None:
            args["limit"] = k
        combined = all_of(
            [
                from_langchain(args.pop("filter", None)),
                from_langchain(self.filter),
                from_langchain(self.search_kwargs.get("filter")),
                from_langchain(filter),
            ]
        )
        if combined:
            args["filter"] = combined
        return args, k

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        filter: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> List[Document]:
        args, k = self._turn_args(filter, kwargs)
        turn = self.engine.retrieve(self.session, query, **args)
        self.last_turn = turn
        docs = to_documents(turn)
        return docs[:k] if k is not None else docs

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        filter: Optional[Dict[str, Any]] = None,
        **kwargs: Any,
    ) -> List[Document]:
        # The engine releases the GIL while it works: a thread keeps the event loop free.
        return await run_in_executor(
            None, self._get_relevant_documents, query, run_manager=run_manager.get_sync(), filter=filter, **kwargs
        )


class SearchInput(BaseModel):
    """The search tool's arguments, as the model gives them."""

    query: str = Field(description="What to look for, in words.", min_length=1, max_length=4000)


class OpenInput(BaseModel):
    """The open tool's arguments, as the model gives them."""

    ref: str = Field(
        description="A marker from an earlier result ([3] or 3), a chunk ID or a document ID.",
        min_length=1,
        max_length=512,
    )


class _SessionTool(BaseTool):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    engine: Any
    """A `ragctx.Engine`."""
    session: str
    """The ragctx session of this agent's task: what it holds is never sent again."""
    response_format: str = "content_and_artifact"

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        # The engine releases the GIL while it works: a thread keeps the event loop free.
        kwargs.pop("run_manager", None)
        return await run_in_executor(None, self._run, *args, **kwargs)


class RagctxSearchTool(_SessionTool):
    """`Engine.search` as a tool: new passages in full, held ones as pointers."""

    name: str = "search"
    description: str = (
        "Search the knowledge base. Returns new passages in full, each with a marker [n] to cite, "
        "and one-line pointers to passages you already hold (never re-sent): use open to see one again."
    )
    args_schema: type[BaseModel] = SearchInput
    budget: Optional[int] = None
    """Tokens one call may return (64-32000; ragctx's default 2000)."""
    limit: Optional[int] = None
    """Results of one call at most (1-100; ragctx's default 8)."""
    filter: Optional[Dict[str, Any]] = None
    """A metadata filter for every call (LangChain / Chroma operators, or ragctx's own)."""

    def _run(self, query: str, run_manager: Any = None) -> Any:
        found = self.engine.search(
            self.session, query, filter=from_langchain(self.filter) or None, budget=self.budget, limit=self.limit
        )
        return found["text"], found


class RagctxOpenTool(_SessionTool):
    """`Engine.open` as a tool: passages the session holds, shown again in full."""

    name: str = "open"
    description: str = (
        "Show again, in full, passages you already hold: by marker ([3] or 3), chunk ID or document ID. "
        "Use it when you need the text of a pointer."
    )
    args_schema: type[BaseModel] = OpenInput
    budget: Optional[int] = None
    """Tokens one call may return (64-32000; ragctx's default 4000)."""

    def _run(self, ref: str, run_manager: Any = None) -> Any:
        found = self.engine.open(self.session, ref, budget=self.budget)
        return found["text"], found
