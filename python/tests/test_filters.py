"""The filter translators (no engine): every supported operator of LangChain / Chroma and
LlamaIndex maps onto ragctx's filter language, every other one is refused by name."""

import pytest

from ragctx.filters import UnsupportedFilter, all_of, from_langchain, from_llama_index


@pytest.mark.parametrize(
    "given, expected",
    [
        (None, {}),
        ({}, {}),
        ({"topic": "pests"}, {"topic": "pests"}),
        ({"topic": {"$eq": "pests"}}, {"topic": "pests"}),
        ({"topic": {"$ne": "pests"}}, {"not": {"topic": "pests"}}),
        ({"year": {"$gt": 2020}}, {"year": {"gt": 2020}}),
        ({"year": {"$gte": 2020}}, {"year": {"gte": 2020}}),
        ({"year": {"$lt": 2020}}, {"year": {"lt": 2020}}),
        ({"year": {"$lte": 2020}}, {"year": {"lte": 2020}}),
        ({"tags": {"$in": ["a", "b"]}}, {"tags": {"in": ["a", "b"]}}),
        ({"tags": {"$nin": ("a",)}}, {"tags": {"nin": ["a"]}}),
        ({"year": {"$exists": True}}, {"year": {"exists": True}}),
        ({"year": {"$exists": False}}, {"year": {"exists": False}}),
        ({"$and": [{"a": 1}, {"b": {"$gt": 2}}]}, {"and": [{"a": 1}, {"b": {"gt": 2}}]}),
        ({"$or": [{"a": 1}, {"b": {"$ne": 2}}]}, {"or": [{"a": 1}, {"not": {"b": 2}}]}),
        ({"$not": {"a": {"$in": [1, 2]}}}, {"not": {"a": {"in": [1, 2]}}}),
        ({"year": {"$not": {"$gt": 3}}}, {"not": {"year": {"gt": 3}}}),
        # several fields, several operators on one field: all of them
        ({"a": 1, "b": True}, {"and": [{"a": 1}, {"b": True}]}),
        ({"y": {"$gte": 1, "$lt": 5}}, {"and": [{"y": {"gte": 1}}, {"y": {"lt": 5}}]}),
        # ragctx's own language passes through
        ({"and": [{"year": {"gte": 2020}}], "not": {"t": "x"}}, {"and": [{"and": [{"year": {"gte": 2020}}]}, {"not": {"t": "x"}}]}),
        ({"year": {"gte": 2020, "lt": 2030}}, {"year": {"gte": 2020, "lt": 2030}}),
        ('{"topic": {"$eq": "pests"}}', {"topic": "pests"}),
    ],
)
def test_langchain_operators_translate(given, expected):
    assert from_langchain(given) == expected


@pytest.mark.parametrize("op", ["$like", "$ilike", "$regex", "$contains", "$between", "$text", "$size", "$all"])
def test_langchain_operators_ragctx_lacks_are_refused_by_name(op):
    with pytest.raises(UnsupportedFilter, match=r"\%s" % op) as e:
        from_langchain({"$or": [{"a": 1}, {"title": {op: "x"}}]})
    assert isinstance(e.value, ValueError)
    assert "filter.$or[1].title" in str(e.value)


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"$foo": [{"a": 1}]}, r"\$foo"),
        ({"$and": {"a": 1}}, "takes a list"),
        ({"$or": []}, "at least one"),
        ({"a": {"$in": "abc"}}, "takes a list"),
        ({"a": {"$exists": "yes"}}, "True or False"),
        ({"a": {}}, "operator dict"),
        (["a"], "a filter is a dict"),
    ],
)
def test_malformed_langchain_filters_are_refused(bad, message):
    with pytest.raises(UnsupportedFilter, match=message):
        from_langchain(bad)


def test_all_of_drops_empty_filters():
    assert all_of([None, {}, {"a": 1}]) == {"a": 1}
    assert all_of([{"a": 1}, {"b": 2}]) == {"and": [{"a": 1}, {"b": 2}]}
    assert all_of([]) == {}


def _li():
    from llama_index.core.vector_stores import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

    return FilterCondition, FilterOperator, MetadataFilter, MetadataFilters


@pytest.mark.parametrize(
    "op, value, expected",
    [
        ("EQ", "pests", {"f": "pests"}),
        ("NE", "pests", {"not": {"f": "pests"}}),
        ("GT", 3, {"f": {"gt": 3}}),
        ("GTE", 3.5, {"f": {"gte": 3.5}}),
        ("LT", 3, {"f": {"lt": 3}}),
        ("LTE", 3, {"f": {"lte": 3}}),
        ("IN", ["a", "b"], {"f": {"in": ["a", "b"]}}),
        ("NIN", ["a", "b"], {"f": {"nin": ["a", "b"]}}),
        ("ANY", ["a", "b"], {"f": {"in": ["a", "b"]}}),
        ("ALL", ["a", "b"], {"and": [{"f": "a"}, {"f": "b"}]}),
        ("CONTAINS", "a", {"f": "a"}),
        ("IS_EMPTY", None, {"f": {"exists": False}}),
    ],
)
def test_llama_index_operators_translate(op, value, expected):
    FilterCondition, FilterOperator, MetadataFilter, MetadataFilters = _li()
    one = MetadataFilter(key="f", value=value, operator=getattr(FilterOperator, op))
    assert from_llama_index(MetadataFilters(filters=[one])) == expected
    assert from_llama_index(one) == expected


def test_llama_index_conditions_translate():
    FilterCondition, FilterOperator, MetadataFilter, MetadataFilters = _li()
    a = MetadataFilter(key="topic", value="pests")
    b = MetadataFilter(key="year", value=2020, operator=FilterOperator.GTE)
    assert from_llama_index(MetadataFilters(filters=[a, b])) == {"and": [{"topic": "pests"}, {"year": {"gte": 2020}}]}
    assert from_llama_index(MetadataFilters(filters=[a, b], condition=FilterCondition.OR)) == {
        "or": [{"topic": "pests"}, {"year": {"gte": 2020}}]
    }
    # NOT: none of them holds (as LlamaIndex's own filter evaluates it)
    assert from_llama_index(MetadataFilters(filters=[a, b], condition=FilterCondition.NOT)) == {
        "not": {"or": [{"topic": "pests"}, {"year": {"gte": 2020}}]}
    }
    assert from_llama_index(MetadataFilters(filters=[a], condition=FilterCondition.NOT)) == {"not": {"topic": "pests"}}
    nested = MetadataFilters(filters=[a, MetadataFilters(filters=[b, a], condition=FilterCondition.OR)])
    assert from_llama_index(nested) == {"and": [{"topic": "pests"}, {"or": [{"year": {"gte": 2020}}, {"topic": "pests"}]}]}
    assert from_llama_index(MetadataFilters(filters=[])) == {}
    assert from_llama_index(None) == {}
    assert from_llama_index({"year": {"$gt": 1}}) == {"year": {"gt": 1}}, "a dict is a ragctx (or $-style) filter"


@pytest.mark.parametrize("op", ["TEXT_MATCH", "TEXT_MATCH_INSENSITIVE"])
def test_llama_index_operators_ragctx_lacks_are_refused_by_name(op):
    FilterCondition, FilterOperator, MetadataFilter, MetadataFilters = _li()
    f = MetadataFilters(filters=[MetadataFilter(key="title", value="x", operator=getattr(FilterOperator, op))])
    with pytest.raises(UnsupportedFilter, match=op):
        from_llama_index(f)


def test_llama_index_contains_takes_one_value():
    FilterCondition, FilterOperator, MetadataFilter, MetadataFilters = _li()
    with pytest.raises(UnsupportedFilter, match="CONTAINS"):
        from_llama_index(MetadataFilter(key="t", value=["a", "b"], operator=FilterOperator.CONTAINS))


def test_block_metadata_keeps_ragctx_keys_and_moves_colliding_ones():
    from ragctx._turns import block_metadata

    block = {"document_id": "d", "title": "T", "marker": 1, "score": 0.5, "chunk_ids": ["d#0"],
             "text": "x", "metadata": {"topic": "pests", "title": "user title", "meta.score": 1, "score": 9}}
    meta = block_metadata(block, {"session_id": "s", "turn": 2})
    assert meta["title"] == "T" and meta["score"] == 0.5 and meta["turn"] == 2
    assert meta["topic"] == "pests"
    assert meta["meta.title"] == "user title"
    assert meta["meta.score"] == 1 and meta["meta.meta.score"] == 9
    assert block_metadata({**block, "metadata": None}, {"session_id": "s", "turn": 1})["document_id"] == "d"
