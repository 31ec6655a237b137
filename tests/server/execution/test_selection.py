"""BM25 tool selection: words from identifiers, ranking, pinned tools, ties in order."""

from __future__ import annotations

from server.execution import select, tool_words, words

TOOLS = {
    "get_weather": tool_words("get_weather", "Current weather for a city.",
                              {"properties": {"city": {"description": "City name"}}}),
    "bookFlight": tool_words("bookFlight", "Book a flight between two airports.",
                             {"properties": {"origin": {}, "destination": {}}}),
    "convert_currency": tool_words("convert_currency", "Convert an amount of money.",
                                   {"properties": {"amount": {}, "from_currency": {}}}),
}


def test_words_split_identifiers_and_stem():
    assert words("bookFlight get_weather.now") == ["book", "flight", "weather", "now"]
    assert words("Flights cities") == ["flight", "city"]


def test_the_best_tools_come_first():
    picked = select(TOOLS, "Please book me a flight from Paris", k=2, reason="catalog")
    assert picked.visible[0] == "bookFlight" and len(picked.visible) == 2
    assert picked.as_dict()["method"] == "bm25" and picked.out_of == 3


def test_a_pinned_tool_is_always_kept():
    picked = select(TOOLS, "weather in Oslo", k=1, reason="over_budget",
                    pinned=["convert_currency"])
    assert picked.visible == ("convert_currency",)


def test_ties_keep_the_offered_order():
    picked = select(TOOLS, "nothing matches this", k=3, reason="catalog")
    assert picked.visible == tuple(TOOLS)
