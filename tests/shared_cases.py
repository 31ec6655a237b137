"""Requests several tiers send alike: the same cases on the embedded model
(tests/server/dialogue/test_conversation_e2e.py) and on the real models
(tests/realmodel/)."""

from __future__ import annotations


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
