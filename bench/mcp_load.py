"""bench/mcp-load's client side: one agent, then many, over MCP's streamable HTTP (see
bench/mcp-load). Prints one JSON object and a table."""

import asyncio
import json
import sys
import time

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

url, calls_path, inproc_path, sessions, seconds = sys.argv[1:]
sessions, seconds = int(sessions), float(seconds)
calls = [json.loads(line) for line in open(calls_path) if line.strip()]
inproc = json.load(open(inproc_path))
by_conversation = {}
for c in calls:
    by_conversation.setdefault(c["conversation"], []).append(c["query"])
conversations = list(by_conversation.items())


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, round((len(v) - 1) * p))] if v else 0.0


async def official_sdk(tag):
    """Every call through one official client session; per-call latency as the agent sees it."""
    lat = []
    async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        for c in calls:
            t0 = time.perf_counter()
            r = await s.call_tool("search", {"session": f"{tag}-{c['conversation']}", "query": c["query"]})
            lat.append((time.perf_counter() - t0) * 1e3)
            assert not r.is_error, r.content
    return lat


def bare_jsonrpc(tag):
    """Every call as a JSON-RPC post on one kept-alive connection: the server's share."""
    lat = []
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2025-11-25"}
    with httpx.Client(headers=headers, timeout=60) as h:
        for i, c in enumerate(calls):
            body = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
                    "params": {"name": "search", "arguments": {"session": f"{tag}-{c['conversation']}", "query": c["query"]}}}
            t0 = time.perf_counter()
            r = h.post(url, json=body)
            lat.append((time.perf_counter() - t0) * 1e3)
            r.raise_for_status()
            out = r.json()
            assert "result" in out and not out["result"].get("isError"), out
    return lat


async def agent(i, deadline, lat, errors):
    """Agent i: its own client session and ragctx sessions, conversations round robin."""
    try:
        async with streamable_http_client(url) as streams, ClientSession(streams[0], streams[1]) as s:
            await s.initialize()
            k = i
            while time.perf_counter() < deadline:
                conv, queries = conversations[k % len(conversations)]
                for q in queries:
                    if time.perf_counter() >= deadline:
                        break
                    t0 = time.perf_counter()
                    try:
                        r = await s.call_tool("search", {"session": f"load-{i}-{k}-{conv}", "query": q})
                        if r.is_error:
                            errors.append(str(r.content)[:200])
                    except Exception as e:  # noqa: BLE001 — counted, the run goes on
                        errors.append(repr(e)[:200])
                    lat.append((time.perf_counter() - t0) * 1e3)
                k += sessions
    except Exception as e:  # noqa: BLE001
        errors.append(f"agent {i}: {e!r}"[:200])


async def load():
    lat, errors = [], []
    t0 = time.perf_counter()
    await asyncio.gather(*(agent(i, t0 + seconds, lat, errors) for i in range(sessions)))
    return lat, errors, time.perf_counter() - t0


async def main():
    tag = f"b{int(time.time())}"
    sdk = await official_sdk(f"sdk-{tag}")
    bare = bare_jsonrpc(f"raw-{tag}")
    lat, errors, took = await load()
    report = {
        "chunks": inproc["chunks"], "calls": len(calls),
        "in_process": {"p50_ms": inproc["p50_ms"], "p99_ms": inproc["p99_ms"]},
        "http_official_sdk": {"p50_ms": pct(sdk, 0.5), "p99_ms": pct(sdk, 0.99)},
        "http_bare_jsonrpc": {"p50_ms": pct(bare, 0.5), "p99_ms": pct(bare, 0.99)},
        "load": {"sessions": sessions, "seconds": round(took, 1), "calls": len(lat), "errors": len(errors),
                 "first_errors": errors[:3], "calls_per_s": len(lat) / took,
                 "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)},
    }
    print(json.dumps(report))
    print(f"\n{len(calls)} calls over {inproc['chunks']} chunks")
    print("| path | p50 ms | p99 ms |\n|---|---:|---:|")
    for k in ("in_process", "http_official_sdk", "http_bare_jsonrpc"):
        print(f"| {k} | {report[k]['p50_ms']:.2f} | {report[k]['p99_ms']:.2f} |")
    ld = report["load"]
    print(f"| {sessions} concurrent agents ({ld['calls']} calls, {ld['calls_per_s']:.1f}/s, {ld['errors']} errors)"
          f" | {ld['p50_ms']:.2f} | {ld['p99_ms']:.2f} |")
    if errors:
        sys.exit(1)


asyncio.run(main())
