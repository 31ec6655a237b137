"""Requests several tiers send alike: the same cases on the embedded model
(tests/server/dialogue/test_conversation_e2e.py) and on the real models
(tests/realmodel/)."""

from __future__ import annotations

import json


def words_tool(described: str | None) -> dict:
    """A client's tool whose file name is a plain string; `described`: the field's
    description, a Russian client's «Имя файла» (an English one's is its key's words)."""
    field = {"type": "string", "x-strictcall-grounded": True}
    return {"type": "function", "function": {
        "name": "count_words", "description": "Count the words in a file.", "parameters": {
            "type": "object", "required": ["file_name"], "properties": {"file_name": {
                **field, **({"description": described} if described else {})}}}}}


# BFCL's missing-parameter turns in English and Russian: (what the user said, the file
# name the call must carry or None where it must be asked, the language asked in).
PLAIN_STRING_CASES = {
    "en-which": (["Open 'report.txt' please.",
                  "How many words does one of my files contain?"], None, "en"),
    "ru-which": (["Открой «отчёт.txt».", "Сколько слов в каком-нибудь моём файле?"], None,
                 "ru"),
    "en-no-name": (["Sort the file and count its words, please."], None, "en"),
    "en-named": (["How many words are in 'report.txt'?"], "report.txt", "en"),
    "ru-named": (["Посчитай слова в файле, который называется итоги.txt"], "итоги.txt",
                 "ru")}


def tail_tool(language: str) -> dict:
    """A client's `tail`: a plain file name, and an optional count of lines (described in
    the client's language)."""
    return {"type": "function", "function": {
        "name": "tail", "description": "Show the last lines of a file.", "parameters": {
            "type": "object", "required": ["file_name"], "properties": {
                "file_name": {"type": "string", "x-strictcall-grounded": True},
                "lines": {"type": "integer", "minimum": 1, "x-strictcall-grounded": True,
                          "description": "Число строк" if language == "ru"
                          else "The number of lines to show"}}}}}


def tweet_tool(language: str) -> dict:
    """A client's `post_tweet`: its text, and an optional list of mentions."""
    return {"type": "function", "function": {
        "name": "post_tweet", "description": "Post a tweet.", "parameters": {
            "type": "object", "required": ["content"], "properties": {
                "content": {"type": "string", "x-strictcall-grounded": True},
                "mentions": {"type": "array", "items": {
                    "type": "string", "x-strictcall-grounded": True},
                    "description": "Кого упомянуть" if language == "ru"
                    else "The users to mention"}}}}}


# BFCL's optional fields the user asks for without saying which: (the tool, what the user
# said, the field that must be asked for, or None where the call must carry what was said,
# the language).
WANTED_CASES = {
    "en-several-lines": ("tail", "Show the last several lines of 'log.txt'.", "/lines", "en"),
    "ru-several-lines": ("tail", "Покажи последние несколько строк файла «log.txt».",
                         "/lines", "ru"),
    "en-five-lines": ("tail", "Show the last 5 lines of the file log.txt.", None, "en"),
    "en-mention-someone": ("post_tweet", "Post 'Hello world' and mention someone.",
                           "/mentions", "en"),
    "ru-mention-someone": ("post_tweet", "Опубликуй «Привет всем» и упомяни кого-нибудь.",
                           "/mentions", "ru")}


def file_tools(language: str) -> list[dict]:
    """BFCL's `ls` (needs nothing the user must give) and `find` (a name to search for,
    grounded, described in the client's language)."""
    return [{"type": "function", "function": {
        "name": "ls", "description": "List the files of the current folder.", "parameters": {
            "type": "object", "properties": {"a": {"type": "boolean",
                                                   "description": "Show hidden files"}}}}},
            {"type": "function", "function": {
                "name": "find", "description": "Find files whose name contains a word.",
                "parameters": {"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "x-strictcall-grounded": True,
                             "description": "Слово в имени файла" if language == "ru"
                             else "The word to search for in file names"}}}}}]


# BFCL's "a specific word" turns (miss_param_7), in English and Russian: (what the user
# said, the language, the word a call must search for, or None where the answer must ask
# which word, in the user's words).
MEANT_CASES = {
    "en-specific-word": ("List every file here that has a specific word in its name.", "en",
                         None),
    "ru-specific-word": ("Покажи все файлы здесь, в имени которых есть определённое слово.",
                         "ru", None),
    "en-word-given": ("List every file here that has the word 'goal' in its name.", "en",
                      "goal"),
}


def judge_meant(text: str, language: str, word: str | None) -> None:
    """A MEANT_CASES answer (the response's JSON `text`), judged: where the word is not
    said, StrictCall's question in the user's language, in the user's words or as the
    search's field (the model chose `find` and could write no word nobody said), never a
    call; where it is said, a call and no question, and a search carries that word."""
    body = json.loads(text)
    message = body["choices"][0]["message"]
    needs = (body.get("strictcall") or {}).get("needs_input")
    if word is None:
        assert not message.get("tool_calls"), f"passed over: {message['tool_calls']}"
        assert needs is not None and needs["language"] == language, body
        phrase = "определённое слово" if language == "ru" else "specific word"
        (asked,) = needs["missing"]
        assert (asked["field"], phrase in message["content"]) in (("", True),
                                                                  ("/name", False)), needs
        return
    assert needs is None and message.get("tool_calls"), body  # said: a call, no question
    for call in message["tool_calls"]:
        if call["function"]["name"] == "find":
            assert json.loads(call["function"]["arguments"]) == {"name": word}
