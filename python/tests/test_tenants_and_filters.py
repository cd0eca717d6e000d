"""Tenants, metadata and filters through the native engine (DESIGN §8): an engine acts as one
tenant; a filtered turn answers only from matching chunks; a call's filter narrows the
standing one; the framework retrievers carry chunk metadata and translate their filters."""

import gc
import json

import pytest

from ragctx import BadInput, Engine, NotFound
from conftest import MODEL

RECORDS = [
    {"_id": "ferns#0", "document_id": "ferns", "title": "Fern care",
     "text": "Water ferns twice a week and keep their soil moist; ferns like humid air.",
     "metadata": {"topic": "care", "year": 2024, "tags": ["ferns", "water"]}},
    {"_id": "cacti#0", "document_id": "cacti", "title": "Cactus care",
     "text": "Water cacti once a month; cacti rot when their soil stays wet.",
     "metadata": {"topic": "care", "year": 2018, "tags": ["cacti", "water"]}},
    {"_id": "mites#0", "document_id": "mites", "title": "Spider mites",
     "text": "Spider mites leave fine webs; wash the leaves and water the plant well.",
     "metadata": {"topic": "pests", "year": 2022}},
]
Q = "How often should I water my plants?"


def docs_of(turn):
    return {b["document_id"] for b in turn["context"]}


@pytest.fixture
def small(tmp_path):
    # No relevance floor: these tests are about which documents a filter lets through, so
    # every matching document must reach the context however weakly it matches the question.
    e = Engine(data_dir=str(tmp_path / "data"), model_dir=str(MODEL), relevance_floor=0)
    e.ingest_records(RECORDS)
    return e


def test_blocks_carry_their_chunks_metadata(small):
    turn = small.ask("m", Q, limit=10)
    assert docs_of(turn) == {"ferns", "cacti", "mites"}
    meta = {b["document_id"]: b.get("metadata") for b in turn["context"]}
    assert meta["ferns"] == {"topic": "care", "year": 2024, "tags": ["ferns", "water"]}
    assert meta["mites"] == {"topic": "pests", "year": 2022}


def test_a_filtered_turn_answers_only_from_matching_documents(small):
    assert docs_of(small.ask("a", Q, filter={"topic": "pests"})) == {"mites"}
    assert docs_of(small.ask("b", Q, filter={"year": {"gte": 2020}})) == {"ferns", "mites"}
    assert docs_of(small.ask("c", Q, filter={"tags": "cacti"})) == {"cacti"}, "a list field: contains"
    assert docs_of(small.ask("d", Q, filter='{"not": {"topic": "pests"}}')) == {"ferns", "cacti"}
    assert docs_of(small.ask("e", Q, filter={"document_id": {"in": ["ferns", "mites"]}})) == {"ferns", "mites"}
    turn = small.retrieve("f", Q, filter={"or": [{"year": {"lt": 2020}}, {"topic": "pests"}]})
    assert docs_of(turn) == {"cacti", "mites"}
    assert turn["answer"] and all(c["document_id"] in {"cacti", "mites"} for c in turn["citations"])
    assert small.ask("g", Q, filter={"topic": "nothing"})["context"] == []


def test_a_calls_filter_narrows_the_standing_one(tmp_path):
    data = str(tmp_path / "data")
    e = Engine(data_dir=data, model_dir=str(MODEL), filter={"topic": "care"})
    e.ingest_records(RECORDS)
    assert e.filter == {"topic": "care"}
    assert docs_of(e.ask("a", Q)) == {"ferns", "cacti"}
    assert docs_of(e.ask("b", Q, filter={"year": {"gt": 2020}})) == {"ferns"}
    assert docs_of(e.ask("c", Q, filter={"topic": "pests"})) == set(), "never widened"
    assert docs_of(e.ask("d", Q, budget=4000, filter={"year": {"lt": 2020}})) == {"cacti"}
    del e
    gc.collect()
    e = Engine(data_dir=data, model_dir=str(MODEL), filter=json.dumps({"year": {"lt": 2020}}))
    assert docs_of(e.ask("e", Q)) == {"cacti"}


def test_malformed_filters_are_bad_input_naming_the_path(small, tmp_path):
    with pytest.raises(BadInput, match=r"filter\.or\[0\]\.year\.gt"):
        small.ask("x", Q, filter={"or": [{"year": {"gt": "x"}}]})
    with pytest.raises(BadInput, match=r"filter\.year\.between"):
        small.retrieve("x", Q, filter={"year": {"between": [1, 2]}})
    with pytest.raises(BadInput, match="not JSON"):
        small.ask("x", Q, filter="{year")
    with pytest.raises(BadInput, match=r"filter\.and"):
        Engine(data_dir=str(tmp_path / "y"), model_dir=str(MODEL), filter={"and": []})
    with pytest.raises(NotFound):
        small.trace("x")  # nothing ran


def test_ingest_metadata_goes_under_each_chunks_own(tmp_path):
    e = Engine(data_dir=str(tmp_path / "data"), model_dir=str(MODEL))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "orchids.md").write_text("# Orchids\n\nOrchids want bright indirect light and weekly water.\n")
    e.ingest([str(docs)], metadata={"topic": "care", "lang": "en"})
    e.ingest_records(RECORDS[2:], metadata={"lang": "de", "topic": "ignored"})
    turn = e.ask("m", Q, limit=10)
    meta = {b["document_id"]: b.get("metadata") for b in turn["context"]}
    assert meta["mites"] == {"topic": "pests", "year": 2022, "lang": "de"}, "a record's own keys win"
    orchids = next(d for d in meta if d.endswith("orchids.md"))
    assert meta[orchids] == {"topic": "care", "lang": "en"}
    assert docs_of(e.ask("n", Q, filter={"lang": "de"})) == {"mites"}
    with pytest.raises(BadInput, match="metadata"):
        e.ingest([str(docs)], metadata={"nested": {"no": 1}})


def test_two_tenants_over_one_data_dir_see_nothing_of_each_other(tmp_path):
    data = str(tmp_path / "data")
    # One process holds a data dir once: the engines are opened one after the other.
    en = Engine(data_dir=data, model_dir=str(MODEL), tenant="plants-en")
    assert en.tenant == "plants-en" and "plants-en" in repr(en)
    en.ingest_records(RECORDS[:2])
    first = en.ask("shared-id", Q)
    assert docs_of(first) == {"ferns", "cacti"}
    del en
    gc.collect()

    de = Engine(data_dir=data, model_dir=str(MODEL), tenant="plants-de")
    assert de.documents() == []
    assert de.ask("other", Q)["context"] == []
    with pytest.raises(NotFound):
        de.trace("shared-id")
    assert de.reset("shared-id") is False
    # The same ids in another tenant are other things.
    de.ingest_records([{**RECORDS[2], "document_id": "ferns", "_id": "ferns#0"}])
    assert [d["document_id"] for d in de.documents()] == ["ferns"]
    turn = de.ask("shared-id", Q)
    assert turn["turn"] == 1 and turn["context"][0]["title"] == "Spider mites"
    del de, turn
    gc.collect()

    en = Engine(data_dir=data, model_dir=str(MODEL), tenant="plants-en")
    assert sorted((d["document_id"], d["chunks"]) for d in en.documents()) == [("cacti", 1), ("ferns", 1)]
    assert [t["turn"] for t in en.trace("shared-id")] == [1], "plants-de's turn is not plants-en's"
    assert en.ask("shared-id", Q)["turn"] == 2
    del en
    gc.collect()
    default = Engine(data_dir=data, model_dir=str(MODEL))
    assert default.tenant == "default" and default.documents() == []
    with pytest.raises(BadInput):
        Engine(data_dir=str(tmp_path / "z"), model_dir=str(MODEL), tenant="no spaces/allowed")


def test_langchain_documents_carry_metadata_and_filters(small):
    from ragctx.filters import UnsupportedFilter
    from ragctx.langchain import RagctxRetriever

    r = RagctxRetriever(engine=small, session="lc", overrides={"limit": 10})
    docs = r.invoke(Q)
    by_id = {d.metadata["document_id"]: d.metadata for d in docs}
    assert by_id["ferns"]["topic"] == "care" and by_id["ferns"]["tags"] == ["ferns", "water"]
    assert by_id["ferns"]["title"] == "Fern care" and by_id["ferns"]["turn"] == 1

    r = RagctxRetriever(engine=small, session="lc2", filter={"topic": {"$eq": "care"}},
                        search_kwargs={"filter": {"year": {"$gte": 2020}}, "k": 5})
    assert {d.metadata["document_id"] for d in r.invoke(Q)} == {"ferns"}
    assert r.last_turn["trace"]["settings"]["limit"] == 5
    r = RagctxRetriever(engine=small, session="lc3")
    assert {d.metadata["document_id"] for d in r.invoke(Q, filter={"$or": [{"topic": "pests"}, {"year": {"$lt": 2020}}]})} == {"mites", "cacti"}
    assert {d.metadata["document_id"] for d in r.invoke(Q, filter={"topic": {"$ne": "care"}})} == {"mites"}
    with pytest.raises(UnsupportedFilter, match=r"\$like"):
        r.invoke(Q, filter={"title": {"$like": "%Fern%"}})
    with pytest.raises(ValueError, match="search_kwargs"):
        RagctxRetriever(engine=small, session="lc4", search_kwargs={"score_threshold": 0.5}).invoke(Q)


def test_langchain_async_calls_take_the_filter(small):
    import asyncio
    from ragctx.langchain import RagctxRetriever

    r = RagctxRetriever(engine=small, session="async")
    docs = asyncio.run(r.ainvoke(Q, filter={"topic": "pests"}))
    assert {d.metadata["document_id"] for d in docs} == {"mites"}


def test_llama_index_nodes_carry_metadata_and_filters(small):
    from llama_index.core.vector_stores import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
    from ragctx.filters import UnsupportedFilter
    from ragctx.llama_index import RagctxRetriever

    nodes = RagctxRetriever(small, session="li", limit=10).retrieve(Q)
    by_id = {n.node.metadata["document_id"]: n.node.metadata for n in nodes}
    assert by_id["mites"]["topic"] == "pests" and by_id["mites"]["year"] == 2022
    assert by_id["mites"]["marker"] >= 1

    filters = MetadataFilters(filters=[
        MetadataFilter(key="tags", value="water", operator=FilterOperator.CONTAINS),
        MetadataFilter(key="year", value=2020, operator=FilterOperator.LT),
    ], condition=FilterCondition.AND)
    r = RagctxRetriever(small, session="li2", filters=filters)
    assert {n.node.metadata["document_id"] for n in r.retrieve(Q)} == {"cacti"}
    r = RagctxRetriever(small, session="li3", filter={"topic": "care"},
                        filters=MetadataFilters(filters=[MetadataFilter(key="tags", value=None, operator=FilterOperator.IS_EMPTY)],
                                                condition=FilterCondition.NOT))
    assert {n.node.metadata["document_id"] for n in r.retrieve(Q)} == {"ferns", "cacti"}
    with pytest.raises(UnsupportedFilter, match="TEXT_MATCH"):
        RagctxRetriever(small, session="li4", filters=MetadataFilters(filters=[
            MetadataFilter(key="title", value="Fern", operator=FilterOperator.TEXT_MATCH)]))
