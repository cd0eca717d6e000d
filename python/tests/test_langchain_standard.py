"""LangChain's own standard suites (`langchain-tests`) against ragctx's retriever and tools."""

import tempfile

from langchain_tests.integration_tests import RetrieversIntegrationTests, ToolsIntegrationTests

from conftest import DEMO, MODEL

_ENGINE = None
_SESSIONS = iter(range(1_000_000))


def shared_engine():
    """One engine over the demo corpus for the whole module (the suites build many retrievers)."""
    global _ENGINE
    if _ENGINE is None:
        from ragctx import Engine

        _ENGINE = Engine(data_dir=tempfile.mkdtemp(prefix="ragctx-lc-standard-"), model_dir=str(MODEL))
        _ENGINE.ingest([str(DEMO)])
    return _ENGINE


class TestRagctxRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self):
        from ragctx.langchain import RagctxRetriever

        return RagctxRetriever

    @property
    def retriever_constructor_params(self):
        # A session of its own for every retriever the suite builds.
        return {"engine": shared_engine(), "session": f"std-{next(_SESSIONS)}"}

    @property
    def retriever_query_example(self) -> str:
        return "How should I care for my houseplants?"


class TestRagctxSearchToolStandard(ToolsIntegrationTests):
    @property
    def tool_constructor(self):
        from ragctx.langchain import RagctxSearchTool

        return RagctxSearchTool

    @property
    def tool_constructor_params(self):
        return {"engine": shared_engine(), "session": f"std-tool-{next(_SESSIONS)}"}

    @property
    def tool_invoke_params_example(self):
        return {"query": "How often should I water ferns?"}


class TestRagctxOpenToolStandard(ToolsIntegrationTests):
    @property
    def tool_constructor(self):
        from ragctx.langchain import RagctxOpenTool

        return RagctxOpenTool

    @property
    def tool_constructor_params(self):
        # A session that holds the watering page, so that `open` has something to show.
        session = f"std-open-{next(_SESSIONS)}"
        shared_engine().search(session, "How often should I water ferns?", filter={"document_id": "watering.md"})
        return {"engine": shared_engine(), "session": session}

    @property
    def tool_invoke_params_example(self):
        return {"ref": "watering.md"}
