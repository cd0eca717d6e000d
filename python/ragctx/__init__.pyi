"""Types of ragctx's native engine. The dicts are the JSON objects `ragctx ask --json` and
`ragctx trace --json` print."""

from os import PathLike
from typing import Any, Iterable, List, Mapping, Optional, TypedDict, Union

_Path = Union[str, "PathLike[str]"]

class Citation(TypedDict):
    marker: int
    document_id: str
    title: str
    chunk_ids: List[str]

class ContextBlock(TypedDict):
    marker: int
    document_id: str
    title: str
    chunk_ids: List[str]
    tokens: int
    score: float
    #: `engine` memory: the turn that first showed a carried block, else None.
    carried_from: Optional[int]
    text: str

class Pointer(TypedDict):
    marker: int
    document_id: str
    title: str
    chunk_ids: List[str]
    shown_in_turn: int
    score: float
    tokens: int

class _Turn(TypedDict):
    session_id: str
    turn: int
    intent: str
    answer: str
    citations: List[Citation]
    context: List[ContextBlock]
    trace: Mapping[str, Any]

class Turn(_Turn, total=False):
    #: `client` memory only.
    pointers: List[Pointer]

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
    seconds: float

class Record(TypedDict, total=False):
    _id: str
    document_id: str
    title: str
    text: str
    weight: float

class RagctxError(Exception): ...
class BadInput(RagctxError): ...
class NotFound(RagctxError): ...
class Unavailable(RagctxError): ...
class Conflict(RagctxError): ...

class Engine:
    def __init__(
        self,
        data_dir: Optional[_Path] = None,
        model_dir: Optional[_Path] = None,
        config: Optional[_Path] = None,
        **settings: Any,
    ) -> None: ...
    @staticmethod
    def from_config(path: _Path, **settings: Any) -> "Engine": ...
    def ingest(self, paths: List[_Path], append: bool = False) -> IngestReport: ...
    def ingest_records(self, records: Iterable[Record], append: bool = False) -> IngestReport: ...
    def ask(self, session: str, question: str, **overrides: Any) -> Turn: ...
    def retrieve(self, session: str, question: str, **overrides: Any) -> Turn: ...
    def trace(self, session: str) -> List[Mapping[str, Any]]: ...
    def reset(self, session: str) -> bool: ...
