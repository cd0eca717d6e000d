"""The LangChain and LlamaIndex retrievers keep one ragctx session per conversation, and
the examples run."""

import pathlib
import subprocess
import sys

from conftest import REPO


def test_langchain_retriever_runs_turns_of_one_session(engine):
    from langchain_core.documents import Document
    from ragctx.langchain import RagctxRetriever

    r = RagctxRetriever(engine=engine, session="lc", overrides={"memory": "client", "limit": 2})
    first = r.invoke("How often should I water ferns?")
    second = r.invoke("How often should I water ferns?")
    assert first and all(isinstance(d, Document) for d in first)
    meta = first[0].metadata
    assert {"document_id", "title", "marker", "score", "chunk_ids", "session_id", "turn"} <= set(meta)
    assert meta["turn"] == 1 and second[0].metadata["turn"] == 2
    ids = lambda docs: {c for d in docs for c in d.metadata["chunk_ids"]}  # noqa: E731
    assert not ids(first) & ids(second), "the session excluded what it showed"
    assert r.last_turn["trace"]["excluded"] > 0
    assert [t["turn"] for t in engine.trace("lc")] == [1, 2]


def test_langchain_k_is_how_many_documents_come_back(engine):
    """LangChain's convention: `k` on the retriever, per call, or in search_kwargs."""
    import pytest
    from ragctx.langchain import RagctxRetriever

    assert len(RagctxRetriever(engine=engine, session="k0").invoke("How often should I water ferns?")) > 1
    assert len(RagctxRetriever(engine=engine, session="k1", k=1).invoke("How often should I water ferns?")) == 1
    r = RagctxRetriever(engine=engine, session="k2")
    assert len(r.invoke("How often should I water ferns?", k=1)) == 1
    assert r.last_turn["trace"]["settings"]["limit"] == 1, "k is the turn's limit"
    s = RagctxRetriever(engine=engine, session="k3", search_kwargs={"k": 2})
    assert len(s.invoke("Which plants like humidity?")) <= 2
    with pytest.raises(ValueError, match="k must be an integer"):
        r.invoke("ferns", k=0)
    with pytest.raises(TypeError, match="filter= and k="):
        r.invoke("ferns", top=3)


def test_documents_as_users_have_them_reach_langchain_with_their_sections(tmp_path):
    """A hard-wrapped Markdown chapter, a DOCX and PDFs ingested from Python: a LangChain
    document carries the chunk's heading path (`section`) and a PDF's pages, the title from the
    first heading (of any level) or the document's own, and the ingest report says per format
    what it read and which pages it left out."""
    import shutil

    from ragctx import Engine
    from ragctx.langchain import RagctxRetriever

    from conftest import MODEL

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "errors.md").write_text(
        "## Recoverable Errors\n\nMost errors are not serious enough to\nstop the program.\n\n"
        "### Propagating Errors\n\nA function can return the error to the\ncalling code instead of handling it.\n"
    )
    fixtures = REPO / "tests" / "fixtures" / "documents"
    shutil.copy(fixtures / "care-guide.docx", docs / "care-guide.docx")
    shutil.copy(fixtures / "pdf" / "report-pdftex.pdf", docs / "report.pdf")
    shutil.copy(fixtures / "pdf" / "notice-scanned.pdf", docs / "notice.pdf")
    engine = Engine(data_dir=str(tmp_path / "data"), model_dir=str(MODEL))
    report = engine.ingest([str(docs)])
    assert report["formats"] == {
        "docx": {"files": 1, "chunks": 3},
        "md": {"files": 1, "chunks": 2},
        "pdf": {"files": 2, "pages": 8, "chunks": 7},
    }
    assert report["unreadable"] == []
    assert [why for _, why in report["partly_read"]] == [
        f"{docs / 'notice.pdf'}: page 2 without a text layer (scanned? ragctx runs no OCR)"
    ]
    r = RagctxRetriever(engine=engine, session="sections")
    found = r.invoke("How can a function return the error to the calling code?")
    chapter = [d for d in found if d.metadata["document_id"] == "errors.md"]
    assert chapter, found
    top = chapter[0]
    assert top.metadata["title"] == "Recoverable Errors"
    assert top.metadata["section"] == "Propagating Errors"
    assert "return the error to the calling code instead" in top.page_content, "hard-wrapped lines joined"
    care = RagctxRetriever(engine=engine, session="docx").invoke("When should I water a calathea?")
    assert any(d.metadata["title"] == "Care guide for tropical plants" for d in care), care
    # A PDF's page reaches the LangChain document as a number, with the section.
    pages = RagctxRetriever(engine=engine, session="pdf").invoke("How many objects did the repair café fix?")
    page5 = [d for d in pages if "fixed 774 of the 1,020 objects" in d.page_content]
    assert page5, pages
    meta = page5[0].metadata
    assert (meta["page_start"], meta["page_end"], meta["section"]) == (5, 5, "Events and the repair café"), meta
    assert isinstance(meta["page_start"], int)
    turn = engine.trace("pdf")[0]
    assert any(c["document_id"] == "report.pdf" and [5, 5] in c.get("pages", []) for c in turn["citations"]), turn


def test_llama_index_retriever_runs_turns_of_one_session(engine):
    from llama_index.core.schema import NodeWithScore
    from ragctx.llama_index import RagctxRetriever

    r = RagctxRetriever(engine, session="li", memory="client", limit=2)
    first = r.retrieve("What do spider mites look like?")
    second = r.retrieve("What do spider mites look like?")
    assert first and all(isinstance(n, NodeWithScore) for n in first)
    assert first[0].node.metadata["document_id"].endswith(".md")
    assert first[0].score == r.engine.trace("li")[0]["context"][0]["score"]
    ids = lambda nodes: {c for n in nodes for c in n.node.metadata["chunk_ids"]}  # noqa: E731
    assert not ids(first) & ids(second)


def test_the_examples_run():
    for example in sorted((REPO / "examples" / "python").glob("*.py")):
        out = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, f"{example.name}: {out.stderr}"
        assert "turns [1, 2, 3]; no chunk sent twice" in out.stdout, f"{example.name} printed: {out.stdout}"


def test_retrieval_never_calls_the_model(tmp_path):
    """The retrievers' turns use the extractive generator: an engine whose generator is an
    unreachable OpenAI endpoint fails to answer with `ask`, and still retrieves."""
    from ragctx import Engine, Unavailable
    from ragctx.langchain import RagctxRetriever
    from conftest import DEMO, MODEL

    e = Engine(data_dir=str(tmp_path / "d"), model_dir=str(MODEL), generator="openai",
               openai_base_url="http://127.0.0.1:9/v1", openai_model="none", openai_timeout_secs=1)
    e.ingest([str(DEMO)])
    import pytest
    with pytest.raises(Unavailable, match="generator"):
        e.ask("a", "How often should I water ferns?")
    docs = RagctxRetriever(engine=e, session="r").invoke("How often should I water ferns?")
    assert docs and docs[0].metadata["turn"] == 1
