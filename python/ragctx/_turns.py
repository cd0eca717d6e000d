"""What both framework retrievers take from a ragctx turn."""

from typing import Any, Dict


def block_metadata(block: Dict[str, Any], turn: Dict[str, Any]) -> Dict[str, Any]:
    """The metadata a retrieved document or node carries: where the block comes from, how to
    cite it (``[marker]``), and which turn of which session showed it."""
    return {
        "document_id": block["document_id"],
        "title": block["title"],
        "marker": block["marker"],
        "score": block["score"],
        "chunk_ids": block["chunk_ids"],
        "carried_from": block.get("carried_from"),
        "session_id": turn["session_id"],
        "turn": turn["turn"],
    }
