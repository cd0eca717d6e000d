"""Per search call through the official MCP SDK's stdio client, one `ragctx mcp` process
alone against the same while 3 others search the same data dir (design §10; issue 62):

    bench/.venv/bin/python bench/shared_search.py BIN DATA_DIR MODEL_DIR [CALLS [FLAG...]]

(FLAGs go before `mcp`, e.g. `--embedder-precision int8` for a store made with it.)

Two rounds: the measured process as the holder (started first) and as a client (started after
another holder). With RAGCTX_BENCH_CONTROL_DIR set (a copy of DATA_DIR), a third round runs the
3 busy agents on that copy instead: the same load on the cores, nothing shared, so the
difference between it and the holder round is what sharing costs beyond CPU. Each process searches its own session with questions that rarely repeat, so
each call embeds, searches and commits a step. Prints p50 / p99 in ms, alone and shared.
"""

import asyncio
import contextlib
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

WORDS = ("appeal fee waiver court record deadline form filing notice hearing judge transcript "
         "brief clerk motion order payment refund records request copy review").split()


def query(i):
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7, 11))


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, round((len(v) - 1) * p))]


async def agent(stack, params):
    r, w = await stack.enter_async_context(stdio_client(params))
    s = await stack.enter_async_context(ClientSession(r, w))
    await s.initialize()
    return s


async def timed(s, session, calls, offset):
    out = []
    for i in range(calls):
        t = time.perf_counter()
        res = await s.call_tool("search", {"session": session, "query": query(offset + i), "budget": 1500})
        assert not res.is_error
        out.append((time.perf_counter() - t) * 1000)
    return out


async def busy(s, session, stop):
    i = 0
    while not stop.is_set():
        await s.call_tool("search", {"session": session, "query": query(1000 + i), "budget": 1500})
        i += 1
    return i


async def round_(bin_path, data, model, calls, holder, flags, control=None):
    def params(d):
        return StdioServerParameters(command=bin_path, args=["--data-dir", d, "--model-dir", model, *flags, "mcp"])
    async with contextlib.AsyncExitStack() as stack:
        first = await agent(stack, params(data))
        others = [await agent(stack, params(control or data)) for _ in range(3)]
        measured, rest = (first, others) if holder else (others[0], [first] + others[1:])
        tag = "control" if control else "holder" if holder else "client"
        await timed(measured, f"warm-{tag}", 5, 0)
        alone = await timed(measured, f"alone-{tag}", calls, 10)
        stop = asyncio.Event()
        load = [asyncio.ensure_future(busy(o, f"busy-{tag}-{i}", stop)) for i, o in enumerate(rest)]
        shared = await timed(measured, f"shared-{tag}", calls, 500)
        stop.set()
        others_calls = sum(await asyncio.gather(*load))
    return {"measured": tag, "calls": calls, "alone_p50_ms": round(pct(alone, 0.5), 2),
            "alone_p99_ms": round(pct(alone, 0.99), 2), "shared_p50_ms": round(pct(shared, 0.5), 2),
            "shared_p99_ms": round(pct(shared, 0.99), 2), "others_calls_meanwhile": others_calls}


async def main(bin_path, data, model, calls="60", *flags):
    for holder in (True, False):
        print(json.dumps(await round_(bin_path, data, model, int(calls), holder, list(flags))), flush=True)
    control = os.environ.get("RAGCTX_BENCH_CONTROL_DIR")
    if control:
        print(json.dumps(await round_(bin_path, data, model, int(calls), True, list(flags), control)), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
