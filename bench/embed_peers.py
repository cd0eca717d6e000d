#!/usr/bin/env python3
"""Embedding throughput of peer all-MiniLM-L6-v2 encoders on a given set of passages.

    bench/.venv-embed/bin/python bench/embed_peers.py --passages FILE.jsonl \\
        --model-dir models/all-MiniLM-L6-v2 [--threads 2] \\
        [--peers sentence-transformers,fastembed] [--json] [--vectors-out DIR]

FILE.jsonl holds one JSON object per line with a "text" field (what `ragctx bench embed`
embeds). Peers (install them with bench/embed-peers-setup, which also makes the ONNX export):

  sentence-transformers  SentenceTransformer(model_dir) on PyTorch, CPU,
                         encode(texts, batch_size=32, normalize_embeddings=True)
  fastembed              fastembed's own sentence-transformers/all-MiniLM-L6-v2 pipeline
                         (ONNX Runtime, mean pooling, L2 normalisation) on the export in
                         bench/.venv-embed/minilm-onnx, list(embed(texts, batch_size=32))
  onnxruntime            the same export with a plain InferenceSession + tokenizers, batches
                         of 32, mean pooling (not run unless named)

Each peer loads its model (not timed), embeds 8 passages to warm up (not timed), then embeds
all passages in one timed call. All truncate at 256 tokens (max_seq_length of the model
directory). Threads: torch.set_num_threads / ONNX Runtime intra-op threads. The mean cosine
to the sentence-transformers vectors is a sanity check (needs that peer in --peers).
Nothing is fetched from a model hub.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_ONNX_DIR = os.path.join(HERE, ".venv-embed", "minilm-onnx")
PEERS = ("sentence-transformers", "fastembed", "onnxruntime")
BATCH = 32
WARMUP = 8


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def read_passages(path, limit):
    texts = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            obj = json.loads(line)
            if not isinstance(obj.get("text"), str):
                sys.exit(f"embed_peers: {path}:{n} has no string field 'text'")
            texts.append(obj["text"])
            if limit and len(texts) >= limit:
                break
    if not texts:
        sys.exit(f"embed_peers: no passages in {path}")
    return texts


def max_seq_length(model_dir):
    with open(os.path.join(model_dir, "sentence_bert_config.json")) as f:
        return int(json.load(f)["max_seq_length"])


def token_counts(model_dir, texts, max_len):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    full = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    return full, np.minimum(full, max_len)


# Each runner: load(model_dir, threads) -> embed(texts) -> float32 [n, 384], L2-normalised.


def load_sentence_transformers(args):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    model = SentenceTransformer(args.model_dir, device="cpu")
    model.max_seq_length = args.max_len

    def embed(texts):
        return model.encode(
            texts, batch_size=BATCH, normalize_embeddings=True, show_progress_bar=False,
            convert_to_numpy=True,
        )

    return embed


def load_fastembed(args):
    from fastembed import TextEmbedding

    check_onnx_dir(args.onnx_dir)
    model = TextEmbedding(
        "sentence-transformers/all-MiniLM-L6-v2",
        specific_model_path=args.onnx_dir,
        threads=args.threads,
        providers=["CPUExecutionProvider"],
        cache_dir=args.fastembed_cache,
    )

    def embed(texts):
        return list(model.embed(texts, batch_size=BATCH))

    return embed


def load_onnxruntime(args):
    import onnxruntime as ort
    from tokenizers import Tokenizer

    check_onnx_dir(args.onnx_dir)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(
        os.path.join(args.onnx_dir, "model.onnx"), so, providers=["CPUExecutionProvider"]
    )
    tok = Tokenizer.from_file(os.path.join(args.onnx_dir, "tokenizer.json"))
    tok.enable_truncation(max_length=args.max_len)
    tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def embed(texts):
        out = []
        for i in range(0, len(texts), BATCH):
            enc = tok.encode_batch(texts[i : i + BATCH])
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = sess.run(["last_hidden_state"], feed)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out.append(pooled.astype(np.float32))
        return np.concatenate(out)

    return embed


LOADERS = {
    "sentence-transformers": load_sentence_transformers,
    "fastembed": load_fastembed,
    "onnxruntime": load_onnxruntime,
}
LABELS = {
    "sentence-transformers": "sentence-transformers (PyTorch CPU)",
    "fastembed": "fastembed (ONNX Runtime)",
    "onnxruntime": "onnxruntime (direct)",
}


def check_onnx_dir(path):
    if not os.path.isfile(os.path.join(path, "model.onnx")):
        sys.exit(f"embed_peers: no ONNX export in {path}: run bench/embed-peers-setup")


def versions():
    import importlib.metadata as md

    v = {"python": sys.version.split()[0]}
    for pkg in ("numpy", "torch", "transformers", "sentence-transformers", "tokenizers",
                "onnxruntime", "fastembed"):
        try:
            v[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            v[pkg] = None
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--passages", required=True, help="JSONL with a 'text' field per line")
    ap.add_argument("--model-dir", required=True, help="sentence-transformers directory of all-MiniLM-L6-v2")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", default="sentence-transformers,fastembed",
                    help=f"comma-separated, from {', '.join(PEERS)}")
    ap.add_argument("--limit", type=int, default=0, help="embed only the first N passages")
    ap.add_argument("--onnx-dir", default=DEFAULT_ONNX_DIR, help="ONNX export (bench/embed-peers-setup)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    ap.add_argument("--vectors-out", metavar="DIR", help="save each peer's vectors as DIR/PEER.npy")
    args = ap.parse_args()

    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    for p in peers:
        if p not in LOADERS:
            sys.exit(f"embed_peers: unknown peer {p!r} (known: {', '.join(PEERS)})")
    # The reference for the cosine check is computed first when it is asked for.
    if "sentence-transformers" in peers:
        peers.remove("sentence-transformers")
        peers.insert(0, "sentence-transformers")

    import tempfile

    args.max_len = max_seq_length(args.model_dir)
    texts = read_passages(args.passages, args.limit)
    warm = texts[:WARMUP]
    full, cut = token_counts(args.model_dir, texts, args.max_len)
    info = {
        "passages": len(texts),
        "mean_chars": round(float(np.mean([len(t) for t in texts])), 1),
        "mean_tokens": round(float(cut.mean()), 1),
        "tokens": int(cut.sum()),
        "truncated": int((full > args.max_len).sum()),
        "max_seq_length": args.max_len,
        "threads": args.threads,
        "batch_size": BATCH,
    }
    if args.vectors_out:
        os.makedirs(args.vectors_out, exist_ok=True)

    results = []
    ref = None
    with tempfile.TemporaryDirectory(prefix="embed-peers-") as tmp:
        args.fastembed_cache = tmp  # fastembed creates its cache dir even when it does not use it
        for peer in peers:
            log(f"embed_peers: {peer}: loading")
            t = time.perf_counter()
            embed = LOADERS[peer](args)
            load_s = time.perf_counter() - t
            embed(warm)
            t = time.perf_counter()
            vecs = embed(texts)
            secs = time.perf_counter() - t
            vecs = np.asarray(np.stack(vecs) if isinstance(vecs, list) else vecs, dtype=np.float32)
            if peer == "sentence-transformers":
                ref = vecs
            cos = None
            if ref is not None:
                a, b = vecs.astype(np.float64), ref.astype(np.float64)
                c = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
                cos = {"mean": float(c.mean()), "min": float(c.min())}
            if args.vectors_out:
                np.save(os.path.join(args.vectors_out, f"{peer}.npy"), vecs)
            r = {
                "peer": peer,
                "label": LABELS[peer],
                "passages": len(texts),
                "seconds": round(secs, 4),
                "passages_per_s": round(len(texts) / secs, 2),
                "tokens_per_s": round(info["tokens"] / secs, 1),
                "load_seconds": round(load_s, 2),
                "dim": int(vecs.shape[1]),
                "cosine_to_sentence_transformers": cos,
            }
            results.append(r)
            log(f"embed_peers: {peer}: {secs:.2f} s")

    out = {"versions": versions(), "input": {"file": args.passages, **info}, "results": results}
    if args.json:
        print(json.dumps(out, indent=1))
        return

    v = out["versions"]
    print("versions: " + " · ".join(f"{k} {v[k]}" for k in v if v[k]))
    print(
        f"passages: {info['passages']} from {args.passages} ({info['mean_chars']:.0f} chars, "
        f"{info['mean_tokens']:.0f} tokens on average; {info['truncated']} cut at "
        f"{info['max_seq_length']} tokens) · threads {args.threads} · batch {BATCH}"
    )
    print()
    print("| peer | passages | seconds | passages/s | tokens/s | mean cos to ST | min cos to ST |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        c = r["cosine_to_sentence_transformers"]
        mean = f"{c['mean']:.7f}" if c else "n/a"
        low = f"{c['min']:.7f}" if c else "n/a"
        print(
            f"| {r['label']} | {r['passages']} | {r['seconds']:.2f} | {r['passages_per_s']:.2f} "
            f"| {r['tokens_per_s']:.0f} | {mean} | {low} |"
        )


if __name__ == "__main__":
    main()
