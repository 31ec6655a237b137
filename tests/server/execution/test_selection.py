"""BM25 tool selection in every script: words from identifiers, stemmed per language
(Russian, German, English; Chinese by characters and pairs), ranking, pinned tools, ties in
order."""

from __future__ import annotations

import pytest

from server.execution import select, tool_text, words

TOOLS = {
    "get_weather": tool_text("get_weather", "Current weather for a city.",
                             {"properties": {"city": {"description": "City name"}}}),
    "bookFlight": tool_text("bookFlight", "Book a flight between two airports.",
                            {"properties": {"origin": {}, "destination": {}}}),
    "convert_currency": tool_text("convert_currency", "Convert an amount of money.",
                                  {"properties": {"amount": {}, "from_currency": {}}}),
}


def test_words_split_identifiers_and_stem():
    assert words("bookFlight get_weather.now card_last4") == [
        "book", "flight", "weather", "now", "card", "last", "4"]
    assert words("Flights cities") == ["flight", "citi"]
    assert words("заблокируйте карты", language="ru") == ["заблок", "карт"]
    assert words("Überweisungen", language="de") == words("Überweisung", language="de")
    assert words("订酒店") == ["订", "酒", "店", "订酒", "酒店"]


def test_the_best_tools_come_first():
    picked = select(TOOLS, "Please book me a flight from Paris", k=2, reason="catalog")
    assert picked.visible[0] == "bookFlight" and len(picked.visible) == 2
    assert picked.as_dict()["method"] == "bm25" and picked.out_of == 3


def test_a_pinned_tool_is_always_kept():
    picked = select(TOOLS, "weather in Oslo", k=1, reason="over_budget",
                    pinned=["convert_currency"])
    assert picked.visible == ("convert_currency",)


def test_the_newest_request_outweighs_what_the_user_asked_before():
    said = ("What is the weather in Oslo and in Bergen, and will the weather in Oslo "
            "hold? Now convert 100 euros into crowns.")
    assert select(TOOLS, said, k=1, reason="over_budget").visible == ("get_weather",)
    assert select(TOOLS, said, k=1, reason="over_budget",
                  newest="Now convert 100 euros into crowns.").visible == ("convert_currency",)
    # A reply that names no tool ("yes") leaves the dialogue's words to choose.
    assert select(TOOLS, said, k=1, reason="over_budget", newest="Yes.").visible == (
        "get_weather",)


def test_ties_keep_the_offered_order():
    picked = select(TOOLS, "nothing matches this", k=3, reason="catalog")
    assert picked.visible == tuple(TOOLS)


# A bank's tools described in Russian, German and Chinese: the request finds its tool
# among others whatever the word's form ("карту" / "карты", "Überweisung" /
# "Überweisungen").
BANK = {
    "ru": {"block_card": "Заблокировать банковскую карту клиента при утере или краже",
           "open_dispute": "Оспорить операцию по карте: двойное списание, мошенничество",
           "transfer": "Перевести деньги на счёт другого клиента",
           "exchange_rate": "Курс обмена валют на сегодня",
           "open_deposit": "Открыть вклад с процентами"},
    "de": {"block_card": "Bankkarte sperren bei Verlust oder Diebstahl",
           "open_dispute": "Eine Kartenbuchung beanstanden: doppelte Abbuchung, Betrug",
           "transfer": "Überweisungen auf das Konto eines anderen Kunden",
           "exchange_rate": "Wechselkurs der Währungen für heute",
           "open_deposit": "Festgeld mit Zinsen eröffnen"},
    "zh": {"block_card": "挂失并冻结银行卡",
           "open_dispute": "对银行卡交易提出争议：重复扣款或欺诈",
           "transfer": "向其他客户的账户转账",
           "exchange_rate": "今天的外汇汇率",
           "open_deposit": "开立定期存款"},
}


@pytest.mark.parametrize(("language", "asked", "tool"), [
    ("ru", "Я потерял карту, заблокируйте её срочно", "block_card"),
    ("ru", "С карты дважды списали деньги, хочу оспорить", "open_dispute"),
    ("ru", "Переведите 500 рублей на счёт брата", "transfer"),
    ("de", "Ich möchte eine Überweisung auf das Konto meiner Mutter", "transfer"),
    ("de", "Meine Karte wurde gestohlen, bitte sperren", "block_card"),
    ("zh", "我的银行卡丢了，请冻结", "block_card"),
    ("zh", "我想查一下今天的汇率", "exchange_rate"),
])
def test_a_request_finds_its_tool_in_its_own_language(language, asked, tool):
    docs = {name: tool_text(name, text, None) for name, text in BANK[language].items()}
    assert select(docs, asked, k=1, reason="catalog").visible == (tool,)
