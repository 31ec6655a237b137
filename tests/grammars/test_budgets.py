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


@pytest.mark.parametrize("schema", [
    _obj({"a": {}}, [{}]),  # was TypeError: unhashable type: 'dict'
    _obj({"a": {}}, [["a"]]),  # unhashable type: 'list'
    {**_obj({"a": {}}), "required": 5},  # 'int' object is not iterable
    {**_obj({"a": {}}), "required": True},
    {**_obj({"a": {}}), "required": None},
    {"description": "\ud800"},  # was UnicodeEncodeError: surrogates not allowed
])
def test_the_first_reader_measures_any_schema_without_crashing(schema):
    """The metaschema check refuses these first (with a pointer); budgets measure them all."""
    Budget().check_schema(schema, where="the schema")


def test_depth_is_measured_past_the_stack():
    schema: dict = {}
    for _ in range(5000):
        schema = {"items": schema}
    with pytest.raises(BudgetExceeded) as info:
        Budget().check_schema(schema, where="the schema")
    assert (info.value.limit, info.value.measured) == ("max_depth", 5001)
