"""Framework filters translated onto ragctx's filter language (pure Python, no engine needed).

ragctx has one filter language (DESIGN §8), a JSON object evaluated inside the search:

    {"topic": "pests"}                      equal (on a list field: contains)
    {"year": {"gte": 2020, "lt": 2025}}     gt / gte / lt / lte (numbers)
    {"tags": {"in": ["a", "b"]}}            in / nin
    {"year": {"exists": True}}              exists
    {"and": [...]}, {"or": [...]}, {"not": {...}}

`from_langchain` reads LangChain / Chroma-style ``$`` operators, `from_llama_index` reads
LlamaIndex ``MetadataFilters``. An operator ragctx lacks (``$like``, ``$regex``,
``TEXT_MATCH``, ...) raises `UnsupportedFilter` (a `ValueError`) naming it: it is never
ignored, since a dropped condition would widen what a caller may see. Values are passed on
as given; the engine checks them (`BadInput` naming the JSON path of a bad one).
"""

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

Filter = Dict[str, Any]

__all__ = ["UnsupportedFilter", "from_langchain", "from_llama_index", "all_of"]


class UnsupportedFilter(ValueError):
    """A filter operator or shape that ragctx's filter language cannot express."""


# LangChain / Chroma comparison operators and ragctx's name for each (`$eq` is a bare value).
_LC_COMPARISONS = {"$in": "in", "$nin": "nin", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}
# ragctx's own operators, accepted as they are (a native filter translates to itself).
_NATIVE_OPERATORS = {"in", "nin", "gt", "gte", "lt", "lte", "exists"}
_LC_SUPPORTED = "$eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $and, $or, $not"


def all_of(filters: Sequence[Optional[Filter]]) -> Filter:
    """The filters that are set (not None, not ``{}``), all of them: ``{}`` for none, the one
    filter for one, else ``{"and": [...]}``."""
    parts = [f for f in filters if f]
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    return {"and": parts}


def _list(value: Any, op: str, at: str) -> List[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise UnsupportedFilter(f"{at}: {op} takes a list, not {type(value).__name__}")
    if not value:
        raise UnsupportedFilter(f"{at}: {op} takes at least one item")
    return list(value)


def from_langchain(filter: Optional[Mapping[str, Any]]) -> Filter:
    """A LangChain / Chroma-style metadata filter as a ragctx filter.

    ``{"f": v}`` and ``{"f": {"$eq": v}}`` → ``{"f": v}``; ``$ne`` → ``{"not": {"f": v}}``;
    ``$gt $gte $lt $lte $in $nin $exists`` → ragctx's operator of the same name;
    ``{"$and": [..]}`` / ``{"$or": [..]}`` → ``{"and": [..]}`` / ``{"or": [..]}``;
    ``{"$not": {..}}`` (a filter, or on a field an operator object) → ``{"not": {..}}``.
    ragctx's own operators (no ``$``) pass through, so a native filter is accepted too, as a
    dict or as JSON text.
    ``$ne``/``$nin`` match chunks without the field, as LlamaIndex's do (Chroma's skip them).
    ``$like``, ``$ilike``, ``$regex``, ``$contains``, ``$between``... raise
    `UnsupportedFilter`; for "a list field contains v" write ``{"f": v}`` (ragctx equality
    is containment on a list field, which ``$contains`` does not always mean).
    """
    if filter is None:
        return {}
    if isinstance(filter, str):  # JSON text, as `Engine` takes it
        filter = json.loads(filter)
    return _lc_filter(filter, "filter")


def _lc_filter(filter: Any, at: str) -> Filter:
    if not isinstance(filter, Mapping):
        raise UnsupportedFilter(f"{at}: a filter is a dict such as {{'topic': 'pests'}}, not {type(filter).__name__}")
    clauses: List[Filter] = []
    for key, value in filter.items():
        if not isinstance(key, str):
            raise UnsupportedFilter(f"{at}: keys are strings, not {key!r}")
        where = f"{at}.{key}"
        if key in ("$and", "$or", "and", "or"):
            items = _list(value, key, where)
            clauses.append({key.lstrip("$"): [_lc_filter(f, f"{where}[{i}]") for i, f in enumerate(items)]})
        elif key in ("$not", "not"):
            clauses.append({"not": _lc_filter(value, where)})
        elif key.startswith("$"):
            raise UnsupportedFilter(f"{where}: ragctx has no filter operator {key} (it supports {_LC_SUPPORTED})")
        else:
            clauses.extend(_lc_field(key, value, where))
    return all_of(clauses) if clauses else {}


def _lc_field(field: str, value: Any, at: str) -> List[Filter]:
    if not isinstance(value, Mapping):
        return [{field: value}]
    if not value:
        raise UnsupportedFilter(f"{at}: an operator dict needs one of {_LC_SUPPORTED}")
    out: List[Filter] = []
    native: Dict[str, Any] = {}
    for op, arg in value.items():
        where = f"{at}.{op}"
        if op == "$eq":
            out.append({field: arg})
        elif op == "$ne":
            out.append({"not": {field: arg}})
        elif op in _LC_COMPARISONS:
            if op in ("$in", "$nin"):
                arg = _list(arg, op, where)
            out.append({field: {_LC_COMPARISONS[op]: arg}})
        elif op == "$exists":
            if not isinstance(arg, bool):
                raise UnsupportedFilter(f"{where}: $exists takes True or False, not {arg!r}")
            out.append({field: {"exists": arg}})
        elif op == "$not":
            # {"f": {"$not": {"$gt": 3}}}: the field's conditions, negated.
            out.append({"not": all_of(_lc_field(field, arg, where))})
        elif isinstance(op, str) and op.startswith("$"):
            raise UnsupportedFilter(f"{where}: ragctx has no filter operator {op} (it supports {_LC_SUPPORTED})")
        else:
            # ragctx's own operators; an unknown one is left for the engine to refuse by path.
            native[op] = arg
    if native:
        out.append({field: native})
    return out


def from_llama_index(filters: Any) -> Filter:
    """LlamaIndex ``MetadataFilters`` (or one ``MetadataFilter``) as a ragctx filter.

    EQ → ``{"f": v}``; NE → ``{"not": {"f": v}}``; GT/GTE/LT/LTE → ``gt``/``gte``/``lt``/
    ``lte``; IN/NIN → ``in``/``nin``; CONTAINS (a list field holds v) → ``{"f": v}``; ANY →
    ``in``; ALL → one equality per value, all of them; IS_EMPTY → ``{"f": {"exists": False}}``
    (the field is missing). Conditions: AND → ``and``, OR → ``or``, NOT (none of them
    holds, as LlamaIndex evaluates it) → ``{"not": {"or": [..]}}``; nested ``MetadataFilters``
    nest. TEXT_MATCH, TEXT_MATCH_INSENSITIVE and any other operator raise
    `UnsupportedFilter`. ``None`` is no filter; a plain dict is taken as a ragctx filter
    (through `from_langchain`, so ``$`` operators work too).
    """
    if filters is None:
        return {}
    if isinstance(filters, Mapping):
        return from_langchain(filters)
    return _li(filters, "filters")


def _enum_value(x: Any) -> str:
    return str(getattr(x, "value", x)).lower()


def _li(f: Any, at: str) -> Filter:
    if hasattr(f, "filters"):  # MetadataFilters
        parts = [_li(sub, f"{at}.filters[{i}]") for i, sub in enumerate(f.filters)]
        parts = [p for p in parts if p]
        condition = _enum_value(getattr(f, "condition", None) or "and")
        if condition == "not":
            return {"not": parts[0] if len(parts) == 1 else {"or": parts}} if parts else {}
        if not parts:
            return {}
        if condition == "and":
            return all_of(parts)
        if condition == "or":
            return parts[0] if len(parts) == 1 else {"or": parts}
        raise UnsupportedFilter(f"{at}: ragctx has no filter condition {condition!r} (it supports and, or, not)")
    if not (hasattr(f, "key") and hasattr(f, "value")):
        raise UnsupportedFilter(f"{at}: not a MetadataFilter or MetadataFilters: {f!r}")
    key, value = f.key, f.value
    op = _enum_value(getattr(f, "operator", None) or "==")
    where = f"{at}({key} {op})"
    if op == "==":
        return {key: value}
    if op == "!=":
        return {"not": {key: value}}
    if op in (">", ">=", "<", "<="):
        return {key: {{">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}[op]: value}}
    if op in ("in", "nin", "any"):
        return {key: {"nin" if op == "nin" else "in": _list(value, op.upper(), where)}}
    if op == "all":
        return all_of([{key: v} for v in _list(value, "ALL", where)])
    if op == "contains":
        if isinstance(value, (list, tuple)):
            raise UnsupportedFilter(f"{where}: CONTAINS takes one value (use ALL or ANY for several)")
        return {key: value}
    if op == "is_empty":
        return {key: {"exists": False}}
    raise UnsupportedFilter(
        f"{where}: ragctx has no filter operator {op.upper()} "
        "(it supports EQ, NE, GT, GTE, LT, LTE, IN, NIN, ANY, ALL, CONTAINS, IS_EMPTY)"
    )
