import pytest

from grammars import Budget, BudgetExceeded

SMALL = Budget(max_tools=2, max_optional_params=2, max_union_params=1, max_depth=3,
               max_enum_values=3, max_schema_bytes=200)


def _obj(props, required=()):
    return {"type": "object", "properties": props, "required": list(required)}


@pytest.mark.parametrize(("schema", "limit", "measured"), [
    (_obj({"a": {}, "b": {}, "c": {}}), "max_optional_params", 3),
    (_obj({"a": {"anyOf": [{}, {}]}, "b": {"type": ["string", "null"]}}, ["a", "b"]),
     "max_union_params", 2),
    (_obj({"a": _obj({"b": _obj({"c": {}}, ["c"])}, ["b"])}, ["a"]), "max_depth", 4),
    ({"enum": [1, 2, 3, 4]}, "max_enum_values", 4),
    ({"description": "x" * 300}, "max_schema_bytes", 318),
])
def test_each_limit_names_itself(schema, limit, measured):
    with pytest.raises(BudgetExceeded) as info:
        SMALL.check_schema(schema, where="the schema")
    assert (info.value.limit, info.value.measured, info.value.allowed) == (
        limit, measured, getattr(SMALL, limit))
    assert f"{measured} > {getattr(SMALL, limit)}" in info.value.render()
    assert f"STRICTCALL_{limit.upper()}" in info.value.render()


def test_within_budget_passes():
    SMALL.check_schema(_obj({"a": {"enum": [1, 2, 3]}}, ["a"]), where="x")
    SMALL.check_tools(2)
    with pytest.raises(BudgetExceeded, match="max_tools"):
        SMALL.check_tools(3)
