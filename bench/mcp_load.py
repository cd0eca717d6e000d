"""bench/mcp-load's client side (see bench/mcp-load):

    mcp_load.py seq URL CALLS TAG           one agent: the official SDK, then bare JSON-RPC
    mcp_load.py load URL CALLS SESSIONS S   SESSIONS concurrent agents for S seconds
    mcp_load.py report DIR ROUNDS           the rounds and their medians (exit 1 on errors)
"""

import asyncio
import json
import statistics
import sys
import time

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, round((len(v) - 1) * p))] if v else 0.0


def read_calls(path):
    return [json.loads(line) for line in open(path) if line.strip()]


async def official_sdk(url, calls, tag):
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


def bare_jsonrpc(url, calls, tag):
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


async def agent(url, conversations, sessions, i, deadline, lat, errors):
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


async def load(url, calls, sessions, seconds):
    by_conversation = {}
    for c in calls:
        by_conversation.setdefault(c["conversation"], []).append(c["query"])
    conversations = list(by_conversation.items())
    lat, errors = [], []
    t0 = time.perf_counter()
    await asyncio.gather(*(agent(url, conversations, sessions, i, t0 + seconds, lat, errors) for i in range(sessions)))
    took = time.perf_counter() - t0
    return {"sessions": sessions, "seconds": round(took, 1), "calls": len(lat), "errors": len(errors),
            "first_errors": errors[:3], "calls_per_s": len(lat) / took, "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}


def report(tmp, rounds):
    rows = []
    for r in range(1, rounds + 1):
        inproc = json.load(open(f"{tmp}/inproc-{r}.json"))
        http = json.load(open(f"{tmp}/http-{r}.json"))
        rows.append({"round": r, "in_process": {"p50_ms": inproc["p50_ms"], "p99_ms": inproc["p99_ms"]}, **http})
    paths = ("in_process", "http_official_sdk", "http_bare_jsonrpc")
    median = {p: {q: statistics.median(row[p][q] for row in rows) for q in ("p50_ms", "p99_ms")} for p in paths}
    ld = json.load(open(f"{tmp}/load.json"))
    out = {"chunks": inproc["chunks"], "calls": inproc["calls"], "rounds": rows, "median": median, "load": ld}
    print(json.dumps(out))
    print(f"\n{inproc['calls']} calls over {inproc['chunks']} chunks, {rounds} rounds (p50 / p99 ms)")
    print("| path | " + " | ".join(f"round {r['round']}" for r in rows) + " | median |")
    print("|---|" + "---:|" * (len(rows) + 1))
    for p in paths:
        cells = [f"{r[p]['p50_ms']:.2f} / {r[p]['p99_ms']:.2f}" for r in rows]
        print(f"| {p} | " + " | ".join(cells) + f" | {median[p]['p50_ms']:.2f} / {median[p]['p99_ms']:.2f} |")
    print(f"\n{ld['sessions']} concurrent agents, {ld['seconds']} s: {ld['calls']} calls ({ld['calls_per_s']:.1f}/s), "
          f"{ld['errors']} errors, p50 {ld['p50_ms']:.1f} ms, p99 {ld['p99_ms']:.1f} ms (p99/p50 {ld['p99_ms'] / max(ld['p50_ms'], 1e-9):.2f})")
    if ld["errors"]:
        sys.exit(1)


def main():
    mode, *args = sys.argv[1:]
    if mode == "seq":
        url, calls_path, tag = args
        calls = read_calls(calls_path)
        sdk = asyncio.run(official_sdk(url, calls, f"sdk-{tag}-{int(time.time())}"))
        bare = bare_jsonrpc(url, calls, f"raw-{tag}-{int(time.time())}")
        print(json.dumps({"http_official_sdk": {"p50_ms": pct(sdk, 0.5), "p99_ms": pct(sdk, 0.99)},
                          "http_bare_jsonrpc": {"p50_ms": pct(bare, 0.5), "p99_ms": pct(bare, 0.99)}}))
    elif mode == "load":
        url, calls_path, sessions, seconds = args
        print(json.dumps(asyncio.run(load(url, read_calls(calls_path), int(sessions), float(seconds)))))
    elif mode == "report":
        report(args[0], int(args[1]))
    else:
        sys.exit(__doc__)


main()
