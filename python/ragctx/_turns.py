"""What both framework retrievers take from a ragctx turn."""

from typing import Any, Dict

# The keys ragctx sets on every retrieved document or node.
RAGCTX_KEYS = ("document_id", "title", "marker", "score", "chunk_ids", "carried_from", "session_id", "turn")


def block_metadata(block: Dict[str, Any], turn: Dict[str, Any]) -> Dict[str, Any]:
    """The metadata a retrieved document or node carries: the chunk's own metadata (what it
    was ingested with), then ragctx's keys over it: where the block comes from, how to cite
    it (``[marker]``), and which turn of which session showed it.

    ragctx's keys always hold ragctx's values. A chunk metadata key that is also one of
    ragctx's (``title``, ``score``, ...) is not dropped: it is kept as ``meta.<key>``
    (``meta.meta.<key>`` if that is taken too, and so on)."""
    ours = {
        "document_id": block["document_id"],
        "title": block["title"],
        "marker": block["marker"],
        "score": block["score"],
        "chunk_ids": block["chunk_ids"],
        "carried_from": block.get("carried_from"),
        "session_id": turn["session_id"],
        "turn": turn["turn"],
    }
    user = dict(block.get("metadata") or {})
    out = dict(user)
    for key in RAGCTX_KEYS:
        if key in user:
            moved = f"meta.{key}"
            while moved in out:
                moved = f"meta.{moved}"
            out[moved] = user[key]
    out.update(ours)
    return out
