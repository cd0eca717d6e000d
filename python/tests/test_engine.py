"""The native engine from Python: the same turns as the CLI, errors as exceptions, the GIL
released while it works."""

import json
import pathlib
import subprocess
import threading
import time

import pytest

import ragctx
from ragctx import BadInput, Engine, NotFound
from conftest import DEMO, MODEL, REPO


def test_ask_returns_exactly_what_ask_json_prints(engine, ragctx_bin, tmp_path):
    turn = engine.ask("s1", "How often should I water ferns?")
    cli_data = tmp_path / "cli"
    run = lambda *a: subprocess.run(  # noqa: E731
        [str(ragctx_bin), "--data-dir", str(cli_data), "--model-dir", str(MODEL), *a],
        check=True, capture_output=True, text=True,
    ).stdout
    run("ingest", str(DEMO))
    cli = json.loads(run("ask", "--session", "s1", "--json", "How often should I water ferns?"))
    assert set(turn) == set(cli)
    assert set(turn["context"][0]) == set(cli["context"][0])
    assert [b["chunk_ids"] for b in turn["context"]] == [b["chunk_ids"] for b in cli["context"]]
    assert turn["answer"] == cli["answer"] and turn["citations"]


def test_a_session_never_shows_a_chunk_twice_and_keeps_its_trace(engine):
    first = engine.ask("c", "How often should I water ferns?", memory="client", limit=2)
    second = engine.ask("c", "How often should I water ferns?", memory="client", limit=2)
    shown = {c for b in first["context"] for c in b["chunk_ids"]}
    again = {c for b in second["context"] for c in b["chunk_ids"]}
    assert shown and not shown & again, "client memory never re-sends a chunk"
    assert second["pointers"], "what ranks again is pointed to"
    traces = engine.trace("c")
    assert [t["turn"] for t in traces] == [1, 2]
    assert engine.reset("c") is True
    assert engine.reset("never-seen") is False


def test_overrides_are_the_cli_turn_flags(engine):
    turn = engine.ask("b", "What soil do succulents need?", budget=300, limit=2)
    assert turn["trace"]["settings"]["budget"] == 300
    assert turn["trace"]["context_tokens"] <= 300
    assert len(turn["context"]) <= 2
    reshow = engine.ask("b", "anything", mode="reshow")
    assert reshow["intent"] == "reshow"
    hybrid = engine.ask("h", "What soil do succulents need?", retrieval="hybrid", fusion="rrf")
    sides = hybrid["trace"]["retrieval"]
    assert (sides["retrieval"], sides["fusion"]) == ("hybrid", "rrf")
    assert sides["lexical"] and sides["dense"]
    with pytest.raises(BadInput, match="retrieval"):
        engine.ask("h", "What soil?", retrieval="sparse")


def test_bad_input_is_raised_with_its_kind_and_changes_nothing(engine, tmp_path):
    with pytest.raises(BadInput, match="budgett"):
        Engine(data_dir=str(tmp_path / "x"), model_dir=str(MODEL), budgett=1)
    with pytest.raises(BadInput, match="empty"):
        engine.ask("s", "   ")
    with pytest.raises(BadInput):
        engine.ask("s", "q", memory="sometimes")
    with pytest.raises(BadInput, match="not a turn setting"):
        engine.ask("s", "q", generator="openai")
    with pytest.raises(BadInput, match="mode"):
        engine.ask("s", "q", mode=3)
    with pytest.raises(NotFound):
        engine.trace("nobody")
    before = engine.ask("n", "fungus gnats", limit=20)["trace"]["candidates"]
    with pytest.raises(BadInput, match="text"):
        engine.ingest_records([{"_id": "ok", "document_id": "d", "title": "t", "text": "fine"},
                               {"_id": "bad", "document_id": "d", "title": "t"}])
    assert engine.ask("n2", "fungus gnats", limit=20)["trace"]["candidates"] == before, "nothing written"
    assert issubclass(BadInput, ragctx.RagctxError) and issubclass(NotFound, ragctx.RagctxError)


def test_records_are_ingested_like_jsonl_lines(engine):
    report = engine.ingest_records([
        {"_id": "q#0", "document_id": "quokkas", "title": "Quokka festival", "text": "The quokka festival on Rottnest Island is held every March."},
        {"_id": "q#1", "document_id": "quokkas", "title": "Quokka festival", "text": "Volunteers count the quokkas at dawn."},
    ])
    assert (report["chunks"], report["documents"], report["new"]) == (2, 1, 2)
    turn = engine.ask("r", "When is the quokka festival?")
    assert turn["context"][0]["document_id"] == "quokkas"


def test_the_gil_is_released_while_the_engine_works(tmp_path):
    e = Engine(data_dir=str(tmp_path / "d"), model_dir=str(MODEL))
    ticks = 0
    stop = threading.Event()

    def spin():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    started = time.monotonic()
    e.ingest([str(DEMO)])
    for i in range(5):
        e.ask("g", f"question {i} about watering")
    spent = time.monotonic() - started
    stop.set()
    t.join()
    # With the GIL held by the engine the other thread would barely run at all.
    assert ticks > spent * 100, f"{ticks} ticks in {spent:.2f} s"


def test_crafted_files_cannot_take_the_python_process_down(tmp_path):
    """Python's ingest reads documents as the CLI does (issue 63): in a reader process of
    this interpreter under a memory cap, each on a guarded thread; a crafted file is named
    with the limit it passed, links are not followed out of the folder, the rest is read."""
    import sys as _sys

    folder = tmp_path / "wild"
    subprocess.run([_sys.executable, str(REPO / "scripts" / "hostile-files.py"), "--quick", str(folder)], check=True)
    e = Engine(data_dir=str(tmp_path / "d"), model_dir=str(MODEL))
    report = e.ingest([str(folder)])
    why = {pathlib.Path(p).name: w for p, w in report["unreadable"]}
    assert "draws itself" in why["form-draws-itself.pdf"], why
    assert "inflates past 64 MiB" in why["flate-bomb-twice-1gib.pdf"], why
    assert "more than 100000 times" in why["forms-drawn-a-billion-times.pdf"], why
    skipped = {pathlib.Path(p).name: w for p, w in report["not_followed"]}
    assert "not followed" in skipped["link-to-passwd.txt"] and "not a regular file" in skipped["a-pipe.txt"], skipped
    assert report["formats"]["md"]["files"] == 1 and report["formats"]["pdf"]["files"] == 1, report["formats"]
    turn = e.ask("w", "When do the greenhouse vents open?")
    assert "27 degrees" in turn["answer"] or any("27 degrees" in b["text"] for b in turn["context"])
