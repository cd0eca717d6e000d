"""`Engine.search`, `open` and `forget`: an agent's steps (the MCP tools' work) from Python,
and the LangChain tools over them."""

import pytest

QUESTIONS = ["How often should I water ferns?", "Why are the leaves turning yellow?", "How often should I water ferns?"]


def chunk_ids(found):
    return [c for b in found["blocks"] for c in b["chunk_ids"]]


def test_search_never_returns_a_held_chunk_again(engine):
    held = []
    for q in QUESTIONS:
        found = engine.search("agent-1", q, budget=600, limit=4)
        assert found["session"] == "agent-1" and found["tokens"] <= 600
        new = chunk_ids(found)
        assert not set(new) & set(held), "a held chunk came back in full"
        held += new
        for p in found["pointers"]:
            assert set(p["chunk_ids"]) <= set(held), "a pointer names only chunks the agent holds"
        assert found["text"].strip()
    last = engine.search("agent-1", QUESTIONS[0], budget=600, limit=4)
    assert last["pointers"], "the same question again: its results are pointers"
    assert "you already hold this" in last["text"]
    steps = engine.trace("agent-1")
    assert [t["turn"] for t in steps] == [1, 2, 3, 4], "every search is a step of the session"
    assert all(t["trace"]["settings"]["memory"] == "client" for t in steps)


def test_open_shows_a_held_chunk_and_forget_lets_it_come_back(engine):
    first = engine.search("agent-2", QUESTIONS[0], budget=600, limit=2)
    marker, ids = first["blocks"][0]["marker"], first["blocks"][0]["chunk_ids"]
    again = engine.open("agent-2", f"[{marker}]")
    assert ids[0] in chunk_ids(again), "open shows a held chunk again"
    held = engine.search("agent-2", QUESTIONS[0], budget=600, limit=2)
    assert not set(ids) & set(chunk_ids(held)), "opened, it is still held: a search does not send it again"
    gone = engine.forget("agent-2", [ids[0]])
    assert gone == {"session": "agent-2", "forgotten": [ids[0]]}
    back = engine.search("agent-2", QUESTIONS[0], budget=600, limit=2)
    assert ids[0] in chunk_ids(back), "a forgotten chunk may be sent again"
    everything = engine.forget("agent-2")
    assert ids[0] in everything["forgotten"]


def test_bad_arguments_name_themselves_and_record_nothing(engine):
    from ragctx import BadInput

    engine.search("agent-3", QUESTIONS[0])
    cases = [
        (dict(budget=10), "budget must be between 64 and 32000"),
        (dict(limit=0), "limit must be between 1 and 100"),
        (dict(filter={"year": {"gte": "x"}}), "filter"),
        (dict(filter="{not json"), "filter"),
    ]
    for kwargs, message in cases:
        with pytest.raises(BadInput, match=message):
            engine.search("agent-3", QUESTIONS[1], **kwargs)
    with pytest.raises(BadInput, match="query"):
        engine.search("agent-3", "")
    with pytest.raises(BadInput, match="session"):
        engine.search("bad session id!", QUESTIONS[1])
    with pytest.raises(BadInput, match="ref"):
        engine.open("agent-3", "no-such-doc.md")
    with pytest.raises(BadInput, match="refs"):
        engine.forget("agent-3", [])
    assert [t["turn"] for t in engine.trace("agent-3")] == [1], "no failed call was recorded"


def test_a_search_filter_narrows_the_results(engine):
    found = engine.search("agent-4", "What pests attack houseplants?", filter={"document_id": "watering.md"})
    assert found["blocks"] and {b["document_id"] for b in found["blocks"]} == {"watering.md"}


def test_langchain_tools_hand_an_agent_nothing_twice(engine):
    from langchain_core.messages import ToolMessage
    from ragctx.langchain import RagctxOpenTool, RagctxSearchTool

    search = RagctxSearchTool(engine=engine, session="lc-agent", budget=600, limit=3)
    assert search.name == "search" and "query" in search.get_input_schema().model_json_schema()["properties"]
    calls = [{"name": "search", "args": {"query": q}, "id": str(i), "type": "tool_call"} for i, q in enumerate(QUESTIONS)]
    seen = []
    for call in calls:
        msg = search.invoke(call)
        assert isinstance(msg, ToolMessage) and isinstance(msg.content, str)
        new = chunk_ids(msg.artifact)
        assert not set(new) & set(seen)
        seen += new
    document = seen[0].split("#")[0]  # the demo's files are chunked as FILE#N
    opened = RagctxOpenTool(engine=engine, session="lc-agent").invoke({"ref": seen[0]})
    assert isinstance(opened, str) and f"({document})" in opened, "invoked without a tool call: the text the model reads"
