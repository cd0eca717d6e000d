"""The embedding server alone: posts the passages of `ragctx bench embed --save-passages FILE`
to an OpenAI-compatible /v1/embeddings server in the batches and with the concurrency ragctx
uses (16 texts, 2 requests in flight by default), standard library only. Its passages/s is
what the server can do; `ragctx bench embed --embedder openai` on the same file and server
shows what ragctx adds.

    python3 bench/embed_direct.py --passages P.jsonl --url http://127.0.0.1:PORT/v1 \
        --model multilingual-e5-small [--batch 16] [--concurrency 2] [--json]
"""

import argparse
import json
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def post(url, model, texts, input_type):
    body = {"model": model, "input": texts}
    if input_type:
        body["input_type"] = "passage"
    req = urllib.request.Request(
        url + "/embeddings", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as res:
        data = json.loads(res.read())["data"]
    if len(data) != len(texts):
        raise SystemExit(f"{len(data)} embeddings for {len(texts)} texts")
    return len(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--no-input-type", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with open(a.passages, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    url = a.url.rstrip("/")
    batches = [texts[i : i + a.batch] for i in range(0, len(texts), a.batch)]
    post(url, a.model, texts[:1], not a.no_input_type)  # warm-up, not timed
    start = time.perf_counter()
    with ThreadPoolExecutor(a.concurrency) as pool:
        done = sum(pool.map(lambda b: post(url, a.model, b, not a.no_input_type), batches))
    secs = time.perf_counter() - start
    out = {"passages": done, "seconds": secs, "passages_per_s": done / secs}
    if a.json:
        print(json.dumps(out))
    else:
        print(f"{done} passages straight to the server in {secs:.2f} s: {done / secs:.1f} passages/s")


if __name__ == "__main__":
    main()
