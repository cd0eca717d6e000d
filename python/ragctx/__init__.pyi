"""Types of ragctx's native engine. The dicts are the JSON objects `ragctx ask --json` and
`ragctx trace --json` print."""

from os import PathLike
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, TypedDict, Union

_Path = Union[str, "PathLike[str]"]
#: A chunk's metadata: string, number, bool or list-of-strings values (DESIGN §8).
MetadataValue = Union[str, int, float, bool, List[str]]
Metadata = Mapping[str, MetadataValue]
#: ragctx's filter language as a dict (`{"topic": "pests"}`, `{"year": {"gte": 2020}}`,
#: `{"tags": {"in": [..]}}`, `{"f": {"exists": True}}`, `{"and"|"or": [..]}`, `{"not": {..}}`),
#: or the same as JSON text.
Filter = Union[Mapping[str, Any], str]

class _Citation(TypedDict):
    marker: int
    document_id: str
    title: str
    chunk_ids: List[str]

class _CitedSentence(TypedDict):
    #: The sentence as its block shows it.
    text: str

class CitedSentence(_CitedSentence, total=False):
    #: The chunk it belongs to, and its byte span ``[start, end)`` in that chunk's text.
    chunk_id: str
    span: Tuple[int, int]
    #: The page it stands on (a PDF's).
    page: int

class Citation(_Citation, total=False):
    #: The pages cited, ``[start, end]`` each: the cited sentences' where each one's page is
    #: known, else those the cited blocks are read from (a PDF's; absent otherwise).
    pages: List[Tuple[int, int]]
    #: The sentences of the cited blocks the answer's statements come from.
    sentences: List[CitedSentence]

class _ContextBlock(TypedDict):
    marker: int
    document_id: str
    title: str
    chunk_ids: List[str]
    tokens: int
    score: float
    #: `engine` memory: the turn that first showed a carried block, else None.
    carried_from: Optional[int]
    text: str

class ContextBlock(_ContextBlock, total=False):
    #: The metadata of the block's first chunk; absent when it has none.
    metadata: Dict[str, MetadataValue]
    #: True when a block of the same document ranks above it (the prompt shows it under that
    #: block's header); absent otherwise.
    continued: bool

class _Pointer(TypedDict):
    marker: int
    document_id: str
    title: str
    chunk_ids: List[str]
    shown_in_turn: int
    score: float
    tokens: int

class Pointer(_Pointer, total=False):
    #: The metadata of the document's best ranking chunk; absent when it has none.
    metadata: Dict[str, MetadataValue]

class _Turn(TypedDict):
    #: The one turn report (2): what `ask` returns is what the session stores as its trace.
    version: int
    session_id: str
    turn: int
    intent: str
    question: str
    query: str
    answer: str
    citations: List[Citation]
    #: In rank order (the prompt shows a document's blocks together, under its best one).
    context: List[ContextBlock]
    exclusion: Mapping[str, List[str]]
    invalid_markers: List[int]
    at_unix_ms: int
    #: The turn's numbers: candidates, documents, fragments, tokens, settings, timings.
    trace: Mapping[str, Any]

class Turn(_Turn, total=False):
    #: `client` memory only.
    pointers: List[Pointer]
    #: The quantized embedding the turn searched with (`scale`, `values`).
    query_vector: Mapping[str, Any]

class _FormatTally(TypedDict):
    files: int
    chunks: int

class FormatTally(_FormatTally, total=False):
    #: Pages the files hold (PDF only).
    pages: int

class IngestReport(TypedDict):
    chunks: int
    documents: int
    files: int
    new: int
    updated: int
    removed: int
    embedded: int
    cached: int
    stored: int
    skipped: List[str]
    #: Files read and the chunks they gave, by format (``md``, ``txt``, ``html``, ``docx``, ``pdf``, ``jsonl``).
    formats: Dict[str, FormatTally]
    #: Documents found in folders that could not be read, each ``[path, why]``: left out, the rest ingested.
    unreadable: List[Tuple[str, str]]
    #: Documents ingested with a part left out, each ``[path, what]`` (a PDF's pages without a text layer).
    partly_read: List[Tuple[str, str]]
    #: Chunks the lexical (BM25) index covers after the ingest; None for Milvus without one.
    lexical: Optional[int]
    seconds: float

class Record(TypedDict, total=False):
    _id: str
    document_id: str
    title: str
    text: str
    weight: float
    metadata: Metadata

class _DocumentSummaryBase(TypedDict):
    document_id: str
    title: str
    chunks: int

class DocumentSummary(_DocumentSummaryBase, total=False):
    metadata: Dict[str, Any]

class BlockOut(TypedDict):
    marker: int
    chunk_ids: List[str]
    document_id: str
    title: str
    metadata: Dict[str, Any]
    text: str
    tokens: int

class PointerOut(TypedDict):
    marker: int
    chunk_ids: List[str]
    document_id: str
    title: str
    shown_in_step: int

class Found(TypedDict):
    """What `Engine.search` and `Engine.open` return (the MCP tools' structured result)."""

    session: str
    step: int
    #: Chunks new to the session (for `open`: those shown again), in rank order.
    blocks: List[BlockOut]
    #: Chunks the session already holds that rank: named, not sent again.
    pointers: List[PointerOut]
    tokens: int
    dropped_by_budget: List[str]
    #: What a model reads: pointers as one line each, then the blocks in full.
    text: str

class Forgotten(TypedDict):
    session: str
    forgotten: List[str]

class RagctxError(Exception): ...
class BadInput(RagctxError): ...
class NotFound(RagctxError): ...
class Unavailable(RagctxError): ...
class Conflict(RagctxError): ...

class Engine:
    """One tenant's engine (`tenant`, default `default`): its ingests, turns, documents and
    sessions are that tenant's alone. `filter` is a standing filter every turn holds to; a
    call's `filter` narrows it (both hold), never replaces it. A malformed filter raises
    `BadInput` naming its JSON path."""

    def __init__(
        self,
        data_dir: Optional[_Path] = None,
        model_dir: Optional[_Path] = None,
        config: Optional[_Path] = None,
        *,
        tenant: Optional[str] = None,
        filter: Optional[Filter] = None,
        **settings: Any,
    ) -> None: ...
    @staticmethod
    def from_config(path: _Path, **settings: Any) -> "Engine": ...
    @property
    def tenant(self) -> str: ...
    @property
    def filter(self) -> Dict[str, Any]: ...
    def ingest(
        self, paths: List[_Path], append: bool = False, metadata: Optional[Metadata] = None
    ) -> IngestReport: ...
    def ingest_records(
        self, records: Iterable[Record], append: bool = False, metadata: Optional[Metadata] = None
    ) -> IngestReport: ...
    def documents(self) -> List[DocumentSummary]: ...
    def ask(self, session: str, question: str, *, filter: Optional[Filter] = None, **overrides: Any) -> Turn: ...
    def retrieve(
        self, session: str, question: str, *, filter: Optional[Filter] = None, **overrides: Any
    ) -> Turn: ...
    def search(
        self,
        session: str,
        query: str,
        filter: Optional[Filter] = None,
        budget: Optional[int] = None,
        limit: Optional[int] = None,
    ) -> Found: ...
    def open(self, session: str, ref: str, budget: Optional[int] = None) -> Found: ...
    def forget(self, session: str, refs: Optional[List[str]] = None) -> Forgotten: ...
    def trace(self, session: str) -> List[Turn]: ...
    def reset(self, session: str) -> bool: ...
