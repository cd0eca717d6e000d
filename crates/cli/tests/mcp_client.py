"""MCP clients we did not write against ragctx's tool server (run by crates/cli/tests/mcp.rs
with bench/.venv's Python: the official MCP Python SDK `mcp`, and `fastmcp`'s client).

    mcp_client.py stdio BIN DATA_DIR MODEL_DIR   an agent session over stdio (`ragctx mcp`)
    mcp_client.py http URL KEY_A KEY_B           the same tools over `serve`'s /mcp, two tenants
    mcp_client.py fastmcp URL KEY                fastmcp's client over HTTP
    mcp_client.py barekeys URL KEY_1 KEY_2       two bare keys: the same session name, two sessions
    mcp_client.py shared BIN DATA_DIR MODEL_DIR NEW_DOC WORK_DIR
                                                 two `ragctx mcp` hosts, `ragctx serve` and the CLI on
                                                 one data dir at once; the holder killed mid-write

Each mode asserts what it checks and prints one JSON line of what it saw; a failed check exits
non-zero with the reason. The questions are ours, written for the fixture corpus's
government pages (tests/fixtures/mtrag), not taken from any evaluation set.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

QUESTIONS = [
    "How do I appeal a court decision?",
    "What fees do I pay to file an appeal?",
    "Can I get the filing fee waived?",
    "How do I appeal a court decision?",  # the agent checking again
]


def held(result):
    """(block chunk ids, pointer chunk ids) of a search or open result."""
    s = result.structured_content
    assert s is not None, f"no structured content: {result}"
    blocks = [c for b in s["blocks"] for c in b["chunk_ids"]]
    pointers = [c for p in s["pointers"] for c in p["chunk_ids"]]
    return blocks, pointers


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def check_schemas(tools):
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"search", "open", "documents", "forget"}, sorted(by_name)
    search = by_name["search"].input_schema
    assert search["additionalProperties"] is False, search
    assert set(search["required"]) == {"session", "query"}, search["required"]
    props = search["properties"]
    assert props["query"]["maxLength"] == 4000 and props["query"]["minLength"] == 1, props["query"]
    assert props["budget"]["minimum"] == 64 and props["budget"]["maximum"] == 32000, props["budget"]
    assert props["limit"]["maximum"] == 100, props["limit"]
    assert "object" in json.dumps(props["filter"]), props["filter"]
    for t in by_name.values():
        assert t.output_schema is not None and t.output_schema.get("type") == "object", (t.name, t.output_schema)
        assert t.description, t.name
    for name in ("search", "open", "forget"):
        assert by_name[name].input_schema["properties"]["session"]["pattern"], name
    a = {n: t.annotations for n, t in by_name.items()}
    assert a["search"].read_only_hint and a["open"].read_only_hint and a["documents"].read_only_hint, a
    assert a["forget"].destructive_hint and not a["forget"].read_only_hint, a
    out = by_name["search"].output_schema
    assert {"blocks", "pointers", "step", "tokens"} <= set(out["properties"]), out


async def call_error(s, name, args):
    """The text of a tool error, or of the protocol error a bad call raised."""
    try:
        r = await s.call_tool(name, args)
    except Exception as e:  # a protocol error (unknown tool, arguments of the wrong shape)
        return f"protocol: {e}"
    assert r.is_error, f"{name}({args}) should fail: {text_of(r)[:200]}"
    return text_of(r)


async def agent_session(s, session):
    """A multi-call agent session: no chunk comes back twice in full, a repeated question
    brings pointers, `open` shows a held chunk again, `forget` lets it come back."""
    seen_blocks = set()
    calls = []
    for q in QUESTIONS:
        r = await s.call_tool("search", {"session": session, "query": q, "budget": 1500})
        assert not r.is_error, text_of(r)
        blocks, pointers = held(r)
        again = seen_blocks.intersection(blocks)
        assert not again, f"{q!r}: chunks sent twice: {again}"
        assert set(pointers) <= seen_blocks, f"pointers to chunks never sent: {set(pointers) - seen_blocks}"
        seen_blocks.update(blocks)
        calls.append({"query": q, "blocks": len(blocks), "pointers": len(pointers),
                      "tokens": r.structured_content["tokens"], "step": r.structured_content["step"]})
    assert calls[0]["blocks"] > 0, calls
    assert calls[-1]["pointers"] > 0, f"the repeated question points to what it holds: {calls}"
    assert "already hold" in text_of(r), text_of(r)[:300]
    first = await s.call_tool("search", {"session": session + "-x", "query": QUESTIONS[0], "budget": 1500})
    top = first.structured_content["blocks"][0]
    # The same question in this session: its best chunk is held, so it is a pointer now.
    r = await s.call_tool("search", {"session": session, "query": QUESTIONS[0], "budget": 1500})
    blocks, pointers = held(r)
    assert top["chunk_ids"][0] in pointers and top["chunk_ids"][0] not in blocks, (top["chunk_ids"], blocks, pointers)
    pointer = [p for p in r.structured_content["pointers"] if top["chunk_ids"][0] in p["chunk_ids"]][0]
    handle = pointer["handles"][pointer["chunk_ids"].index(top["chunk_ids"][0])]
    assert f"[{handle}]" in text_of(r), f"the pointer's handle is in the text the model reads: {text_of(r)[:300]}"
    # The pointer's handle opens that passage alone; the document's marker opens all it holds.
    opened = await s.call_tool("open", {"session": session, "ref": f"[{handle}]"})
    assert not opened.is_error, text_of(opened)
    o_blocks, _ = held(opened)
    assert o_blocks == [top["chunk_ids"][0]], (handle, top["chunk_ids"], o_blocks)
    whole = await s.call_tool("open", {"session": session, "ref": f"[{pointer['marker']}]"})
    assert not whole.is_error and "whole document" in whole.structured_content["opened"], whole.structured_content
    assert set(o_blocks) <= set(held(whole)[0]), "the document's marker opens every passage held of it"
    # (Its document's other held chunks may be merged around it: a piece from its middle.)
    middle = top["text"][len(top["text"]) // 2:][:60]
    assert middle in text_of(opened), f"open shows the text again: {middle!r}"
    forgot = await s.call_tool("forget", {"session": session, "refs": [top["chunk_ids"][0]]})
    assert not forgot.is_error, text_of(forgot)
    assert forgot.structured_content["forgotten"] == [top["chunk_ids"][0]], forgot.structured_content
    back = await s.call_tool("search", {"session": session, "query": QUESTIONS[0], "budget": 1500})
    blocks, _ = held(back)
    assert top["chunk_ids"][0] in blocks, f"forgotten, it comes back in full: {blocks}"
    return calls


async def bad_input(s, session):
    """Each a clear error; the server keeps serving and nothing stored changes."""
    before = (await s.call_tool("documents", {})).structured_content["documents"]
    said = {
        "unknown tool": await call_error(s, "delete_everything", {}),
        "missing query": await call_error(s, "search", {"session": session}),
        "wrong type": await call_error(s, "search", {"session": session, "query": "fees", "budget": "lots"}),
        "huge query": await call_error(s, "search", {"session": session, "query": "appeal " * 800}),
        "bad filter": await call_error(s, "search", {"session": session, "query": "fees", "filter": {"year": {"gt": "x"}}}),
        "bad budget": await call_error(s, "search", {"session": session, "query": "fees", "budget": 5}),
        "bad session": await call_error(s, "search", {"session": "no spaces allowed", "query": "fees"}),
        "unknown ref": await call_error(s, "open", {"session": session, "ref": "no-such-chunk"}),
        "empty refs": await call_error(s, "forget", {"session": session, "refs": []}),
    }
    for what, needle in [("missing query", "query"), ("wrong type", "budget"), ("huge query", "query"),
                         ("bad filter", "filter"), ("bad budget", "budget"), ("bad session", "session"),
                         ("unknown ref", "ref"), ("empty refs", "refs")]:
        assert needle in said[what], f"{what}: the error names {needle!r}: {said[what]}"
    assert "delete_everything" in said["unknown tool"] or "not found" in said["unknown tool"].lower(), said["unknown tool"]
    after = (await s.call_tool("documents", {})).structured_content["documents"]
    assert after == before, "nothing stored changed"
    ok = await s.call_tool("search", {"session": session + "-after", "query": "appeal"})
    assert not ok.is_error and held(ok)[0], "still serving"
    return said


async def stdio(bin_path, data_dir, model_dir):
    params = StdioServerParameters(command=bin_path, args=["--data-dir", data_dir, "--model-dir", model_dir, "mcp"])
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            check_schemas(await s.list_tools())
            session = f"agent-{os.getpid()}"
            calls = await agent_session(s, session)
            said = await bad_input(s, session)
            docs = (await s.call_tool("documents", {})).structured_content["documents"]
            assert docs and all(d["chunks"] >= 1 for d in docs)
    print(json.dumps({"session": session, "calls": calls, "errors": said, "documents": len(docs)}))


def client(url, key):
    from mcp.shared._httpx_utils import create_mcp_http_client
    return create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})


async def http(url, key_a, key_b):
    from mcp.client.streamable_http import streamable_http_client
    out = {}
    async with client(url, key_a) as hc, streamable_http_client(url, http_client=hc) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            check_schemas(await s.list_tools())
            out["calls"] = await agent_session(s, "agent-h")
            out["documents_a"] = len((await s.call_tool("documents", {})).structured_content["documents"])
    async with client(url, key_b) as hc, streamable_http_client(url, http_client=hc) as streams:
        async with ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            docs = (await s.call_tool("documents", {})).structured_content["documents"]
            assert docs == [], f"tenant b sees tenant a's documents: {docs[:3]}"
            r = await s.call_tool("search", {"session": "agent-h", "query": QUESTIONS[0]})
            blocks, pointers = held(r)
            assert not blocks and not pointers, f"tenant b found tenant a's chunks or session: {blocks} {pointers}"
            out["documents_b"] = 0
    assert out["documents_a"] > 0
    print(json.dumps(out))


async def with_fastmcp(url, key):
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport
    async with Client(StreamableHttpTransport(url, headers={"Authorization": f"Bearer {key}"})) as c:
        names = sorted(t.name for t in await c.list_tools())
        assert names == ["documents", "forget", "open", "search"], names
        r = await c.call_tool("search", {"session": "fast-1", "query": QUESTIONS[1]})
        s = r.structured_content
        assert s["step"] >= 1, s
        again = await c.call_tool("search", {"session": "fast-1", "query": QUESTIONS[1]})
        a = again.structured_content
        sent = {c for b in s["blocks"] for c in b["chunk_ids"]}
        assert not sent & {c for b in a["blocks"] for c in b["chunk_ids"]}, "nothing sent twice"
    print(json.dumps({"tools": names, "blocks": len(s["blocks"]), "pointers_again": len(a["pointers"])}))


async def barekeys(url, key_1, key_2):
    """Bare API keys keep their sessions apart: the same session name is two sessions."""
    from mcp.client.streamable_http import streamable_http_client
    seen = {}
    for key, tries in [(key_1, 2), (key_2, 1)]:
        async with client(url, key) as hc, streamable_http_client(url, http_client=hc) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await s.initialize()
                for _ in range(tries):
                    r = await s.call_tool("search", {"session": "shared-name", "query": QUESTIONS[0]})
                    assert not r.is_error, text_of(r)
                    seen.setdefault(key, []).append(held(r))
    (b1, p1), (b1b, p1b) = seen[key_1]
    (b2, p2), = seen[key_2]
    assert b1 and p1b and not p1, "the first key's second search points to what it holds"
    assert b2 and not p2, "the second key's session of the same name holds nothing"
    print(json.dumps({"key_1": [len(b1), len(p1b)], "key_2": [len(b2), len(p2)]}))


def cli(bin_path, data_dir, model_dir, *args):
    import subprocess
    out = subprocess.run([bin_path, "--data-dir", data_dir, "--model-dir", model_dir, *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"ragctx {args}: exit {out.returncode}: {out.stderr[-2000:]}"
    return out.stdout


class Agent:
    """One agent's session: checks that no chunk ever comes back to it twice in full."""

    def __init__(self, name, s):
        self.name, self.s, self.seen, self.steps = name, s, set(), 0

    async def search(self, query):
        r = await self.s.call_tool("search", {"session": self.name, "query": query, "budget": 1200})
        assert not r.is_error, f"{self.name}: {text_of(r)}"
        blocks, pointers = held(r)
        again = self.seen.intersection(blocks)
        assert not again, f"{self.name}: {query!r}: chunks sent twice: {again}"
        self.seen.update(blocks)
        self.steps += 1
        return r.structured_content


def documents_of(found):
    return {b["document_id"] for b in found["blocks"]} | {p["document_id"] for p in found["pointers"]}


async def shared(bin_path, data_dir, model_dir, new_doc, work):
    """Two `ragctx mcp` hosts (the first holds the data dir and serves it to the others),
    `ragctx serve` and the CLI on one data dir at once: a document the CLI ingests is found by
    every agent's next search; the holder, SIGKILLed while it is inside a session's write
    transaction (its failpoint paused there, seen on its stderr), loses nothing it
    acknowledged, and the others keep answering."""
    import contextlib
    import signal
    import subprocess
    import time
    from mcp.client.streamable_http import streamable_http_client

    pidfile = os.path.join(work, "holder.pid")
    errpath = os.path.join(work, "holder.err")
    flags = ["--data-dir", data_dir, "--model-dir", model_dir, "mcp"]
    holder = StdioServerParameters(
        command="sh", args=["-c", 'echo $$ > "$0"; exec "$@"', pidfile, bin_path, *flags],
        # Every session commit the holder runs pauses here for 1.5 s: the kill below lands
        # inside one, as the failpoint's line on its stderr proves.
        env={"RAGCTX_FAILPOINTS": "sessions.before-commit=1500", "RAGCTX_LOCK_WAIT_SECS": "60"})
    second = StdioServerParameters(command=bin_path, args=flags, env={"RAGCTX_LOCK_WAIT_SECS": "60"})
    paused = lambda: open(errpath).read().count("failpoint sessions.before-commit: paused")
    out = {}
    async with contextlib.AsyncExitStack() as stack:
        errlog = stack.enter_context(open(errpath, "w"))
        ra, wa = await stack.enter_async_context(stdio_client(holder, errlog=errlog))
        a = Agent("host-a", await stack.enter_async_context(ClientSession(ra, wa)))
        await a.s.initialize()  # the first process: it holds the data dir
        rb, wb = await stack.enter_async_context(stdio_client(second))
        b = Agent("host-b", await stack.enter_async_context(ClientSession(rb, wb)))
        await b.s.initialize()  # a second host on the same knowledge base, at the same time
        serve = subprocess.Popen([bin_path, "--data-dir", data_dir, "--model-dir", model_dir, "serve",
                                  "--addr", "127.0.0.1:0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        stack.callback(lambda: (serve.kill(), serve.wait()))
        banner = serve.stderr.readline()
        url = "http://" + banner.split("http://")[1].split()[0] + "/mcp"
        rc, wc, *_ = await stack.enter_async_context(streamable_http_client(url))
        c = Agent("web-c", await stack.enter_async_context(ClientSession(rc, wc)))
        await c.s.initialize()
        for agent in (a, b, c):
            assert (await agent.search(QUESTIONS[0]))["blocks"], agent.name
        # The CLI ingests a new file while all three are open; each one's next search finds it.
        started = time.monotonic()
        cli(bin_path, data_dir, model_dir, "ingest", new_doc)
        out["cli_ingest_s"] = round(time.monotonic() - started, 2)
        new_id = os.path.basename(new_doc)
        for agent in (a, b, c):
            found = await agent.search("quillfeather ordinance permits for lantern boats")
            assert new_id in documents_of(found), f"{agent.name} did not find the new file: {documents_of(found)}"
        traces = json.loads(cli(bin_path, data_dir, model_dir, "trace", "--session", "host-a", "--json"))
        assert len(traces) == a.steps, f"the CLI reads host-a's {a.steps} steps: {len(traces)}"
        acknowledged = a.steps
        # Host A's next search is killed inside its session's write transaction.
        before = paused()
        call = asyncio.ensure_future(a.s.call_tool("search", {"session": "host-a", "query": QUESTIONS[1]}))
        deadline = time.monotonic() + 60
        while paused() == before:
            assert time.monotonic() < deadline and not call.done(), "the holder never reached its write"
            await asyncio.sleep(0.02)
        os.kill(int(open(pidfile).read()), signal.SIGKILL)
        call.cancel()
        # The others keep answering: one of them takes the data dir over.
        started = time.monotonic()
        for agent in (b, c):
            assert (await agent.search(QUESTIONS[2]))["step"] >= 1
        out["takeover_s"] = round(time.monotonic() - started, 2)
        for agent in (b, c):
            await agent.search(QUESTIONS[0])  # asked again: pointers, never a chunk twice
        traces = json.loads(cli(bin_path, data_dir, model_dir, "trace", "--session", "host-a", "--json"))
        assert len(traces) == acknowledged, f"host-a: {acknowledged} steps acknowledged, {len(traces)} stored"
        listed = cli(bin_path, data_dir, model_dir, "documents", "list")
        assert new_id in listed, "the CLI's acknowledged ingest is kept"
        out.update({"steps": {x.name: x.steps for x in (a, b, c)}, "killed_after": acknowledged,
                    "chunks_seen": {x.name: len(x.seen) for x in (a, b, c)}})
        # Host A's stdio pipe is dead: close the others first, then let the stack unwind.
        with contextlib.suppress(Exception):
            await stack.aclose()
    print(json.dumps(out))


if __name__ == "__main__":
    mode, *args = sys.argv[1:]
    run = {"stdio": stdio, "http": http, "fastmcp": with_fastmcp, "barekeys": barekeys, "shared": shared}[mode]
    asyncio.run(run(*args))
