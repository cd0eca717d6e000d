"""Broken PDFs never crash the reader: the fixtures of tests/fixtures/documents/pdf with bytes
overwritten, cut short or spliced (seeded), each read by bench/pdf's binary as ragctx reads
it; counts files read, refused with an error (ragctx's InputError) and anything else (a
panic that escaped, an abort, a timeout of 20 s), and keeps the latter in the working folder.

    cargo build --release --manifest-path bench/pdf/Cargo.toml
    python3 bench/pdf/mutate.py [N (240)] [BINARY (bench/pdf/target/release/ragctx-bench-pdf)]
"""
import collections
import pathlib
import random
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
N = int(sys.argv[1]) if len(sys.argv) > 1 else 240
BIN = sys.argv[2] if len(sys.argv) > 2 else str(ROOT / "bench/pdf/target/release/ragctx-bench-pdf")
SOURCES = sorted((ROOT / "tests/fixtures/documents/pdf").glob("*.pdf"))

random.seed(7)
seen = collections.Counter()
work = pathlib.Path(tempfile.mkdtemp(prefix="pdf-mutate-"))
for i in range(N):
    b = bytearray(SOURCES[i % len(SOURCES)].read_bytes())
    if i % 3 == 0:
        for _ in range(random.randint(1, 20)):
            b[random.randrange(len(b))] = random.randrange(256)
    elif i % 3 == 1:
        b = b[: random.randrange(len(b))]
    else:
        j, k = random.randrange(len(b)), random.randrange(len(b))
        b[j : j + 50] = b[k : k + 50]
    path = work / f"m{i}.pdf"
    path.write_bytes(b)
    try:
        r = subprocess.run([BIN, "ragctx", str(path)], capture_output=True, timeout=20)
    except subprocess.TimeoutExpired:
        seen["timeout"] += 1
        continue
    if r.returncode == 0:
        seen["read"] += 1
    elif b"InputError" in r.stderr:
        seen["refused with an error"] += 1
    else:
        seen[f"exit {r.returncode}"] += 1
        continue
    path.unlink()
print(dict(seen), "kept in", work)
