"""The conversation read as people write it, through the real server process and the
official `openai` client on the embedded model. Each test is one of the failures issue 38
measured, now held by the grammar or by the server's own reading (so greedy or not, the
model cannot break it): amounts and dates in the forms people write, a correction of one
of two numbers of one type, a second intent in one session, nested and compact-JSON
evidence, the prompt the same with grounding on and off, a dialogue in Russian (questions
asked and replies read in Russian), and a Russian request choosing among 25 tools."""

from __future__ import annotations

import datetime as dt
import json
import uuid

import pytest
from openai import OpenAI

from contracts import clock
from tests.live import MODEL
from tests.shared_cases import (
    MEANT_CASES,
    PLAIN_STRING_CASES,
    WANTED_CASES,
    file_tools,
    judge_meant,
    tail_tool,
    tweet_tool,
    words_tool,
)

pytestmark = pytest.mark.slow

TODAY = clock.today()


def _forced(tool: str) -> dict:
    return {"type": "function", "function": {"name": tool}}


class Talk:
    """One Chat Completions conversation in a session; the client keeps the messages."""

    def __init__(self, client: OpenAI, tool: str, *, tools: list[dict] | None = None,
                 **options) -> None:
        self.client, self.tool = client, tool
        self.tools = tools or [_forced(tool)]
        self.options = {"session": f"e2e-{uuid.uuid4().hex}", **options}
        self.messages: list[dict] = []

    def say(self, text: str | None = None, *, role: str = "user") -> dict:
        if text is not None:
            self.messages.append({"role": role, "content": text})
        raw = self.client.chat.completions.with_raw_response.create(
            model=MODEL, messages=self.messages, tools=self.tools,
            tool_choice=_forced(self.tool), max_tokens=200, temperature=0,
            extra_body={"strictcall": self.options})
        body = json.loads(raw.text)
        body["headers"] = dict(raw.headers)
        message = body["choices"][0]["message"]
        self.messages.append({k: v for k, v in message.items()
                              if k in ("role", "content", "tool_calls") and v})
        return body


def _shown(body: dict) -> dict:
    """The call's arguments, or what a question says was collected."""
    message = body["choices"][0]["message"]
    if message.get("tool_calls"):
        return json.loads(message["tool_calls"][0]["function"]["arguments"])
    return body["strictcall"]["needs_input"]["collected"]


def _asked(body: dict) -> set[str]:
    needs = (body.get("strictcall") or {}).get("needs_input") or {}
    return {q["field"] for q in [*needs.get("missing", ()), *needs.get("confirm", ())]}


AMOUNT = {"type": "function", "function": {
    "name": "record_payment", "description": "Record a payment the customer made.",
    "parameters": {"type": "object", "properties": {
        "amount": {"type": ["number", "null"], "x-strictcall-grounded": True,
                   "description": "Amount paid"},
        "paid_on": {"type": "string", "format": "date", "x-strictcall-grounded": True,
                    "description": "Day of the payment"}},
        "required": ["amount", "paid_on"]}}}


def _latest(day: int, month: int) -> str:
    """The latest `day`.`month` that is not in the future."""
    this_year = dt.date(TODAY.year, month, day)
    return (this_year if this_year <= TODAY else this_year.replace(year=TODAY.year - 1)
            ).isoformat()


def _days_ago(days: int) -> str:
    return (TODAY - dt.timedelta(days=days)).isoformat()


def _last_friday() -> str:
    """The latest Friday before today (a week back when today is a Friday)."""
    return _days_ago((TODAY.weekday() - 4) % 7 or 7)


@pytest.mark.parametrize(("said", "amount", "paid_on"), [
    ("I paid 1 200,50 ₽ last Friday", 1200.5, _last_friday()),
    ("Ich habe €2.300,00 vorgestern bezahlt", 2300, _days_ago(2)),
    ("I paid $1,200.50 on 30.11", 1200.5, _latest(30, 11)),
    ("позавчера я заплатил 1 200,50 ₽", 1200.5, _days_ago(2))])
def test_amounts_and_dates_in_the_forms_people_write(live_client, said, amount, paid_on):
    """The amount and the day as the user wrote them, read into the call (or into what a
    question says was collected): the number the text means, never a piece of it ("1" of
    "1 200,50") and never left out; the day the words name, counted from today."""
    body = Talk(live_client, "record_payment", tools=[AMOUNT]).say(said)
    shown = _shown(body)
    assert (shown.get("amount"), shown.get("paid_on")) == (amount, paid_on), body
    grounded = body["headers"]["x-strictcall-enforcement"].split("grounded: ")[1]
    assert "record_payment#/amount=1" in grounded and "record_payment#/paid_on=1" in grounded


@pytest.mark.parametrize(("tool", "said"), [
    ("book_hotel", "A hotel in Paris from 20.12 for 2 nights, 2 guests, near the old town"),
    ("book_ticket", "Two tickets on the 752A for me, Ivan Petrov, passport 4510 123456")])
def test_the_prompt_is_the_same_with_grounding_on_and_off(live_client, tool, said):
    # (Usage counts a repair's prompts too: grounding off, the tiny model writes a past
    # check-in, which a repair fixes. The first decode's prompt is what is compared.)
    bodies = [Talk(live_client, tool, grounding=on).say(said) for on in (True, False)]
    tokens = [b["usage"]["prompt_tokens"] - ((b.get("strictcall") or {}).get("repair") or {})
              .get("prompt_tokens", 0) for b in bodies]
    assert tokens[0] == tokens[1] > 0


def test_a_correction_of_one_of_two_numbers_changes_only_that_one(live_client):
    talk = Talk(live_client, "book_hotel")
    first = talk.say("A hotel in Paris for 2 nights, 2 guests please")
    assert {k: _shown(first).get(k) for k in ("nights", "guests")} == {"nights": 2, "guests": 2}
    second = talk.say("Make it 5 nights. We land at 7 am")
    assert (_shown(second)["nights"], _shown(second)["guests"]) == (5, 2)
    assert second["strictcall"]["slots"]["changed"] == [
        {"field": "/nights", "old": 2, "new": 5}]


def test_a_second_intent_in_one_session_starts_from_the_conversation(live_client):
    talk = Talk(live_client, "open_dispute")
    talk.say("Card 4417 was charged 1 200,50 yesterday, a payment I never made")
    talk.messages.append({"role": "user", "content":
                          "one more: card 5555, 89,90 on 30.11, also not me"})
    second = talk.say()
    shown = _shown(second)
    assert shown.get("card_last4") == "5555"  # the new card, not the first call's
    assert shown.get("amount") in ("89.90", None)  # never 1200.50 from the first intent
    assert shown.get("operation_date") in (_latest(30, 11), None)


def test_an_id_in_compact_json_and_a_profile_in_the_system_message(live_client):
    talk = Talk(live_client, "check_access_request_status")
    talk.messages += [
        {"role": "user", "content": "Is my payroll access request stuck?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "list_requests", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": '{"requests":[{"id":"AR-004217","status":"pending"}]}'}]
    body = talk.say()
    assert _shown(body).get("request_id") in ("AR-004217", None)
    assert "/request_id" not in _asked(body)  # the result held it: copied, never asked for
    assert "check_access_request_status#/request_id=1" in body["headers"][
        "x-strictcall-enforcement"]
    ticket = Talk(live_client, "book_ticket")
    ticket.say("Profile: Ivan Petrov, passport 4510 123456.", role="system")
    booked = ticket.say("Book me on train 752A please")
    passengers = _shown(booked).get("passengers") or []
    assert all(p.get("passport") in ("4510 123456", None) for p in passengers)
    assert "book_ticket#/passengers/items/passport=1" in booked["headers"][
        "x-strictcall-enforcement"]


@pytest.mark.parametrize(("system", "said"), [
    ("You are a bank's assistant. Today is 2026-12-02.",
     "the day before yesterday card 4417 was charged 500 rubles twice, dispute the second"),
    ("Ты ассистент банка. Сегодня 02.12.2026.",
     "позавчера с карты 4417 дважды списали 500 ₽, оспорьте второе списание")])
def test_the_users_relative_date_wins_over_the_systems_today(live_client, system, said):
    talk = Talk(live_client, "open_dispute")
    talk.messages.append({"role": "system", "content": system})
    body = talk.say(said)
    shown = _shown(body)
    assert shown.get("card_last4") == "4417"
    # The user's day (two days before the system's today) or a question: never today.
    assert shown.get("operation_date") in ("2026-11-30", None)
    if shown.get("operation_date") is None:
        assert "/operation_date" in _asked(body)


@pytest.mark.parametrize(("said", "words"), [
    ("29.11 or 1.12, I am not sure: card 4417 was charged 500 rubles, dispute it",
     ("November 29", "December 1")),
    ("29.11 или 1.12, не помню: с карты 4417 списали 500 ₽, оспорьте", ("29 ноября", "1 декабря"))])
def test_two_dates_the_user_gave_are_the_users_to_choose(live_client, said, words):
    """A write (open_dispute is a contract of kind "write"): the model cannot pick one."""
    body = Talk(live_client, "open_dispute").say(said)
    message = body["choices"][0]["message"]
    assert not message.get("tool_calls")
    (asked,) = [q for q in body["strictcall"]["needs_input"]["missing"]
                if q["field"] == "/operation_date"]
    year = TODAY.year if dt.date(TODAY.year, 12, 1) <= TODAY else TODAY.year - 1
    assert asked["options"] == [f"{year}-11-29", f"{year}-12-01"]
    assert all(w in message["content"] for w in words), message["content"]
    assert "/card_last4" not in _asked(body)  # said: the card is no question


def test_a_russian_dialogue_is_asked_and_read_in_russian(live_client):
    talk = Talk(live_client, "open_dispute")
    first = talk.say("Пожалуйста, оспорьте платёж с карты •• 4417, сумма 1 200,50 ₽")
    assert first["choices"][0]["message"]["content"].startswith("Какого числа")
    assert first["strictcall"]["needs_input"]["language"] == "ru"
    changed = talk.say("ой, сумма была 1 300,00 ₽")
    question = changed["choices"][0]["message"]["content"]
    assert "сумма операции" in question and "да или нет" in question
    assert [c["field"] for c in changed["strictcall"]["slots"]["confirm"]] == ["/amount"]
    confirmed = talk.say("Да, не против")
    assert confirmed["strictcall"]["slots"]["filled"]["amount"] == "1300.00"
    assert confirmed["strictcall"]["slots"]["changed"][0]["new"] == "1300.00"


@pytest.mark.parametrize(("turns", "correction", "yes", "language"), [
    (["вчера с карты 4417 дважды списали 1 200,50 ₽, верните второе списание",
      "первая операция OP-204518"], "ой, простите, сумма была 1 300,00 ₽", "да", "ru"),
    (["yesterday card 4417 was charged 1 200,50 twice, refund the second one",
      "the first one was OP-204518"], "sorry, the amount was 1 300,00", "yes", "en")])
def test_a_correction_after_a_filed_dispute_is_confirmed_and_filed_once(
        live_client, turns, correction, yes, language):
    """The ledger, on the embedded model: the dispute is filed; the user corrects its
    amount; the answer is a confirmation about the amount alone (no second dispute), and
    the yes files the corrected one once."""
    talk = Talk(live_client, "open_dispute")
    filed = None
    for said in turns:
        body = talk.say(said)
        if body["choices"][0]["message"].get("tool_calls"):
            filed = body
            break
    assert filed is not None, "the dispute was never filed"
    assert _shown(filed)["amount"] == "1200.50"
    held = talk.say(correction)
    message = held["choices"][0]["message"]
    assert not message.get("tool_calls"), "a correction filed a second dispute"
    assert [c["field"] for c in held["strictcall"]["slots"]["confirm"]] == ["/amount"]
    assert "1200.50" in message["content"] and "1300.00" in message["content"]
    assert held["strictcall"]["needs_input"]["language"] == language
    confirmed = talk.say(yes)
    (call,) = confirmed["choices"][0]["message"]["tool_calls"]
    arguments = json.loads(call["function"]["arguments"])
    assert (arguments["amount"], arguments["card_last4"]) == ("1300.00", "4417")


RUSSIAN_TOOLS = {
    "block_card": "Заблокировать банковскую карту при утере или краже",
    "open_dispute_ru": "Оспорить операцию по карте: двойное списание или мошенничество",
    "transfer_money": "Перевести деньги на счёт другого клиента банка",
    "exchange_rate": "Показать курс обмена валют на сегодня",
    "open_deposit": "Открыть вклад под процент",
    "close_deposit": "Закрыть вклад досрочно",
    "order_card": "Заказать новую дебетовую карту",
    "change_pin": "Сменить ПИН-код карты",
    "card_limits": "Изменить лимиты на снятие наличных",
    "loan_request": "Подать заявку на потребительский кредит",
    "loan_schedule": "Показать график платежей по кредиту",
    "mortgage_rate": "Узнать ставку по ипотеке",
    "branch_hours": "Часы работы отделения банка",
    "atm_nearby": "Найти ближайший банкомат",
    "statement": "Выписка по счёту за период",
    "pay_mobile": "Оплатить мобильную связь",
    "pay_utilities": "Оплатить коммунальные услуги",
    "tax_debt": "Проверить налоговую задолженность",
    "cashback": "Показать начисленный кэшбэк",
    "insurance": "Оформить страховку для путешествий",
    "currency_buy": "Купить иностранную валюту",
    "sms_alerts": "Подключить СМС-уведомления",
    "change_phone": "Сменить номер телефона в профиле",
    "support_chat": "Связаться со службой поддержки",
    "close_account": "Закрыть счёт в банке",
}


def test_a_russian_request_chooses_among_25_tools(live_client):
    tools = [{"type": "function", "function": {
        "name": name, "description": text,
        "parameters": {"type": "object", "properties": {}}}} for name, text in
        RUSSIAN_TOOLS.items()]
    raw = live_client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content":
                                "Я потерял карту, заблокируйте её, пожалуйста"}],
        tools=tools, tool_choice="required", max_tokens=60, temperature=0)
    offered = json.loads(raw.text)["strictcall"]["tools"]
    assert offered["selection"]["out_of"] == 25 and len(offered["visible"]) == 5
    assert offered["visible"][0] == "block_card"  # the best match comes first


@pytest.mark.parametrize(("said", "asked", "language"), PLAIN_STRING_CASES.values(),
                         ids=PLAIN_STRING_CASES.keys())
def test_a_plain_string_is_the_users_named_value_or_a_question(live_client, said, asked,
                                                                language):
    """BFCL's missing-parameter turns: "one of my files" names no file (the one said before
    is another), nor does "the file": the file name can only be asked for (before, any run
    of words was a value: a sort on "file"); a file the user names is the value, or a
    question, never another word of the conversation."""
    talk = Talk(live_client, "count_words",
                tools=[words_tool("Имя файла" if language == "ru" else None)])
    for text in said[:-1]:
        talk.messages.append({"role": "user", "content": text})
    body = talk.say(said[-1])
    message = body["choices"][0]["message"]
    if message.get("tool_calls"):
        assert asked is not None, f"a file nobody named: {message['tool_calls']}"
        assert _shown(body) == {"file_name": asked}
        return
    needs = body["strictcall"]["needs_input"]
    assert [m["field"] for m in needs["missing"]] == ["/file_name"], needs
    assert needs["language"] == language and message["content"], needs
    assert asked is None, f"{asked!r} was named, and the model left it out: {needs}"


@pytest.mark.parametrize(("tool", "said", "asked", "language"), WANTED_CASES.values(),
                         ids=WANTED_CASES.keys())
def test_an_optional_field_asked_for_without_a_value_is_a_question(live_client, tool, said,
                                                                   asked, language):
    """BFCL's tail and post_tweet: "the last several lines", "mention someone": the field is
    optional, the user wants it and said no value, so the answer asks for it (before, the
    model left it out: 10 lines nobody asked for, a tweet with no mention). Where the user
    gives it ("the last 5 lines"), the call carries it."""
    tools = {"tail": tail_tool, "post_tweet": tweet_tool}
    talk = Talk(live_client, tool, tools=[tools[tool](language)])
    body = talk.say(said)
    message = body["choices"][0]["message"]
    if asked is None:
        if message.get("tool_calls"):
            assert _shown(body) == {"file_name": "log.txt", "lines": 5}
        else:
            assert "/lines" not in _asked(body), body["strictcall"]
        return
    assert not message.get("tool_calls"), f"called without {asked}: {message['tool_calls']}"
    needs = body["strictcall"]["needs_input"]
    assert asked in [m["field"] for m in needs["missing"]], needs
    assert needs["language"] == language and message["content"], needs


@pytest.mark.parametrize(("said", "language", "word"), MEANT_CASES.values(),
                         ids=MEANT_CASES.keys())
def test_a_specific_thing_the_user_did_not_say_is_asked_not_passed_over(live_client, said,
                                                                         language, word):
    """BFCL miss_param_7: "a specific word in its file name", and the model listed the
    folder (a call needing nothing). A call must come (tool_choice "required"); where the
    word is not said, the answer is StrictCall's question in the user's words and language,
    never a call (the question may be `find`'s own, where the model chose it); where it is
    said, no such question, and a search carries that word."""
    judge_meant(live_client.chat.completions.with_raw_response.create(
        model=MODEL, messages=[{"role": "user", "content": said}],
        tools=file_tools(language), tool_choice="required", max_tokens=200, temperature=0
    ).text, language, word)
