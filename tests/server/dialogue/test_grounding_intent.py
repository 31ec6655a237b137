"""Which of the conversation's values the user meant for a field: the user's words over the
system's date and profile, two values of a write's field left to the user, a new intent
that leaves the earlier one's values behind, counts said vaguely, a value said of another
field or another thing, and what an earlier call used."""

from __future__ import annotations

from contracts import contract_of
from contracts.examples import BookHotel
from grammars import GROUNDED, narrowed_schema
from server.dialogue import Grounding, ground
from server.dialogue.evidence import evidence_of
from server.task import Turn
from tests.server.dialogue.test_grounding import DISPUTE, TODAY, _found, _plain


def test_the_users_words_win_over_the_systems_date_and_profile():
    """The system message's "today" is the conversation's date, no value of a field; where
    the user gives a field a value, a value from context is no candidate beside it."""
    found = _found(DISPUTE.schema(), DISPUTE,
                   ("system", "Bank assistant. Today is 2026-12-02. Cards: 4417, 9921."),
                   ("user", "позавчера с карты 9921 списали 500 ₽, это не я"))
    assert found["operation_date"] == ("2026-11-30",)
    assert found["card_last4"] == ("9921",)
    # No date from the user: still not the system's "today".
    assert _found(DISPUTE.schema(), DISPUTE, ("system", "Today is 2026-12-02."),
                  ("user", "card 4417 was charged 500 twice"))["operation_date"] == ()


def test_two_values_of_a_writes_field_are_the_users_to_choose():
    from server.dialogue.questions import Wording
    from server.dialogue.turn import wording_of

    evidence = evidence_of([Turn("user", "on 29.11 or on 1.12, I am not sure: card 4417 was "
                                         "charged 500 ₽, dispute it")], today=TODAY)
    grounding = ground(DISPUTE.schema(), DISPUTE, evidence, ask_between=True)
    (date,) = [f for f in grounding.fields if f.path == ("operation_date",)]
    assert date.candidates == () and set(date.choices) == {"2026-11-29", "2026-12-01"}
    question = wording_of(grounding, DISPUTE.schema()).missing(("operation_date",))
    assert question.question == \
        "Which date of the operation: November 29, 2026 or December 1, 2026?"
    assert question.options == ("2026-11-29", "2026-12-01")  # in the order they were said
    russian = Wording("ru", choices={("d",): ("2026-11-29", "2026-12-01")},
                      descriptions={("d",): "Дата операции"})
    assert russian.missing(("d",)).question.replace("\u202f", " ") == \
        "Какое значение выбрать (дата операции): 29 ноября 2026 г. или 1 декабря 2026 г.?"
    # A read (or `strictcall.ambiguity: "model"`): the model may write either.
    assert set(ground(DISPUTE.schema(), DISPUTE, evidence).candidates()[
        ("operation_date",)]) == {"2026-11-29", "2026-12-01"}


def test_a_new_intent_leaves_the_earlier_ones_values_but_those_referred_back_to():
    """After a call, "one more" starts another event: the first dispute's operation id
    (said by the user) is no candidate of the second; "the same card" still finds the
    card. Without such words (a correction), the earlier values stay candidates."""
    turns = [Turn("user", "card 4417 was charged 1 200,50 twice, the first was OP-204518"),
             Turn("assistant", "", ())]
    def second(text: str) -> dict:
        evidence = evidence_of([*turns, Turn("user", text)], today=TODAY)
        return {p[-1]: v for p, v in
                ground(DISPUTE.schema(), DISPUTE, evidence, since=1).candidates().items()}
    new = second("one more, the same card: 89,90 on 30.11 that I never made")
    assert new["original_operation_id"] == () and new["card_last4"] == ("4417",)
    other = second("ещё одна операция: карта 5555, 89,90 30.11")
    assert other["card_last4"] == ("5555",) and other["original_operation_id"] == ()
    corrected = second("sorry, the amount was 1 300,00")
    assert corrected["original_operation_id"] == ("OP-204518",)
    assert corrected["card_last4"] == ("4417",)


def test_a_related_thing_without_saying_which_leaves_only_the_newest_messages_values():
    schema = {"type": "object", "properties": {"destination": {
        "type": "string", GROUNDED: True, "description": "The directory to copy the file to"}}}
    evidence = evidence_of([Turn("user", "Look in 'archive' first."),
                            Turn("user", "Copy it to a directory inside the 'Docs' folder.")],
                           today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("destination",): ("Docs",)}
    # "A folder" is a directory too (BFCL's cp: 'test' of an earlier search was copied to).
    evidence = evidence_of([Turn("user", "Find files with 'test' in their name."),
                            Turn("user", "Copy them safely into a folder right here.")],
                           today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("destination",): ()}
    russian = evidence_of([Turn("user", "Найди файлы с 'test' в имени."),
                           Turn("user", "Скопируй их в какую-нибудь папку.")], today=TODAY)
    assert ground(schema, None, russian).candidates() == {("destination",): ()}
    hotel = contract_of(BookHotel)  # ("City of the hotel": "a hotel in Paris" gives Paris)
    evidence = evidence_of([Turn("user", "A hotel in Paris for 2 nights, 2 guests")],
                           today=TODAY)
    assert ground(hotel.schema(), hotel, evidence).candidates()[("city",)] == ("Paris",)


def test_a_word_after_a_description_word_is_no_value_unless_it_looks_like_one():
    """BFCL's sort: "sort it alphabetically" gave the file "alphabetically" (after "sort", a
    word of the field's description, and "it"); a plain word there is no name."""
    schema = {"type": "object", "properties": {"file_name": {
        "type": "string", GROUNDED: True,
        "description": "The name of the file appeared at current directory to sort"}}}
    evidence = evidence_of([Turn("user", "Within a different file file, display the content "
                                         "and sort it alphabetically by line.")], today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("file_name",): ()}


def test_a_vague_count_is_no_count_whatever_numbers_came_before():
    """BFCL's tail: "the last several lines" gave the count 10 from a tool result's "Line
    10:"; several is no number, so the count is asked for (or the default left to it)."""
    schema = {"type": "object", "properties": {
        "lines": {"type": "integer", GROUNDED: True, "minimum": 1}}}
    said = "Display the last several lines of the file."
    evidence = evidence_of([Turn("tool", "Line 9: Overview Line 10: Final"),
                            Turn("user", said)], today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("lines",): ()}
    hotel = contract_of(BookHotel)
    evidence = evidence_of([Turn("user", "Отель в Казани на 3 ночи"),
                            Turn("user", "Нет, на несколько ночей больше.")], today=TODAY)
    assert ground(hotel.schema(), hotel, evidence).candidates()[("nights",)] == ()
    evidence = evidence_of([Turn("user", "Show the last 5 lines, several lines at most.")],
                           today=TODAY)
    assert ground(schema, None, evidence).candidates() == {("lines",): (5,)}


def test_an_amount_before_a_comma_is_no_card_number():
    """«списали 89,90 ₽, это был не я»: the run "89,90 ₽," is the amount 89.90, never the
    card 8990 (the comma after it hid the number, and the card got a second candidate)."""
    found = _found(DISPUTE.schema(), DISPUTE,
                   ("user", "сегодня с карты 5566 списали 89,90 ₽, это был не я"))
    assert found["card_last4"] == ("5566",) and found["amount"] == ("89.90",)


def test_a_named_count_made_vague_leaves_not_given_in_the_grammar():
    """BFCL's tail: a tool result's "Line 10:" names a count of lines, then the user says
    "several lines": no value, so "not given" must stay in the grammar (it was left out,
    and the schema became an empty `anyOf`, a 400 blaming the client's tool)."""
    schema = {"type": "object", "properties": {
        "lines": {"type": "integer", GROUNDED: True, "minimum": 1}}, "required": ["lines"]}
    evidence = evidence_of([Turn("user", "Find the overview lines."), Turn("assistant", ""),
                            Turn("tool", "Line 9: Overview Line 10: Final"),
                            Turn("user", "Display the last several lines.")], today=TODAY)
    grounding = ground(schema, None, evidence, since=1)
    (field,) = grounding.fields
    assert field.candidates == () and not field.named
    written = narrowed_schema(schema, [field.narrowing()])
    assert written["properties"]["lines"] == {"type": "null"}


TAIL = {"type": "object", "required": ["file_name"], "properties": {
    "file_name": {"type": "string", GROUNDED: True, "description":
                  "The name of the file to display. You can only perform on file at local "
                  "directory."},
    "lines": {"type": "integer", GROUNDED: True,
              "description": "The number of lines to display from the end of the file."}}}


def test_a_count_asked_for_vaguely_is_a_question_even_where_it_is_optional():
    """BFCL's tail: "the last several lines" with `lines` optional; the model left it out
    and showed 10 lines nobody asked for. The user wants a count and gave none: the field is
    `wanted`, so its "not given" is a question (server/pipeline/checking/calls.py)."""
    evidence = evidence_of([Turn("user", "Investigate within 'log.txt' for 'Error'."),
                            Turn("user", "Finally, show the last several lines the file.")],
                           today=TODAY)
    grounding = ground(TAIL, None, evidence)
    assert grounding.wanted == (("lines",),)
    assert grounding.candidates()[("lines",)] == ()
    said = evidence_of([Turn("user", "Show the last 5 lines of 'log.txt'.")], today=TODAY)
    assert ground(TAIL, None, said).wanted == ()  # a count given
    plain = evidence_of([Turn("user", "Show the end of 'log.txt'.")], today=TODAY)
    assert ground(TAIL, None, plain).wanted == ()  # no count asked for: the default


def test_a_value_said_of_the_fields_thing_wins_over_one_said_of_another():
    """BFCL: "the 'report.csv' file in the 'ResearchDocs' directory" gave the file
    "ResearchDocs" (a tool result's "current_working_directory: ResearchDocs" matched the
    description's "directory"). A quoted name before the field's word is said of it; a key
    holding only the description's words is of a related thing, below what the user said."""
    evidence = evidence_of([
        Turn("tool", "current_working_directory: ResearchDocs"),
        Turn("user", "Extract the last 3 lines from the 'report.csv' file in the "
                     "'ResearchDocs' directory.")], today=TODAY)
    assert ground(TAIL, None, evidence).candidates()[("file_name",)] == ("report.csv",)
    # "one of the 'log.txt' files into a new directory 'archive'": log.txt is the file's.
    evidence = evidence_of([
        Turn("user", "Move one of the 'log.txt' files into a new directory 'archive'."),
        Turn("tool", "current_working_directory: archive"),
        Turn("user", "Show the last 3 lines of the file.")], today=TODAY)
    assert ground(TAIL, None, evidence).candidates()[("file_name",)] == ("log.txt",)
    # Where the user's words name nothing, the related key still gives its value.
    listed = evidence_of([Turn("tool", "current_directory_content: report.txt"),
                          Turn("user", "Show me the last 3 lines.")], today=TODAY)
    assert ground(TAIL, None, listed).candidates()[("file_name",)] == ("report.txt",)


def test_a_comma_after_the_fields_word_ends_what_names_it():
    """BFCL's find: "a specific word in its file name, ensuring comprehensive coverage" gave
    the name "ensuring" ("name" read as "is named")."""
    schema = {"type": "object", "properties": {"name": {
        "type": "string", GROUNDED: True, "description": "The name of the file to find."}}}
    evidence = evidence_of([Turn("user", "List every project that has a specific word in its "
                                         "file name, ensuring comprehensive coverage.")],
                           today=TODAY)
    assert "ensuring" not in ground(schema, None, evidence).candidates()[("name",)]


MOVE = {"type": "object", "properties": {
    "source": {"type": "string", GROUNDED: True, "description": "Name of the file to move"},
    "destination": {"type": "string", GROUNDED: True,
                    "description": "The directory to move the file to"}},
        "required": ["source", "destination"]}


def test_one_saying_of_a_value_fills_one_field_of_a_call():
    evidence = evidence_of([Turn("user", "Move one file to temp, then compare it with "
                                         "'previous_report.pdf'.")], today=TODAY)
    grounding = ground(MOVE, None, evidence)
    assert grounding.said["previous_report.pdf"] == 1
    twice = {"source": "previous_report.pdf", "destination": "previous_report.pdf"}
    assert grounding.repeated(twice) == (("destination",),)  # asked, not read twice
    assert grounding.repeated({"source": "previous_report.pdf", "destination": "temp"}) == ()
    evidence = evidence_of([Turn("user", "Copy 'a.txt' over 'a.txt' again, I know.")],
                           today=TODAY)
    said_twice = {"source": "a.txt", "destination": "a.txt"}
    assert ground(MOVE, None, evidence).repeated(said_twice) == ()


FIND = {"type": "object", "properties": {
    "path": {"type": "string", GROUNDED: True, "description": "The directory to search"},
    "name": {"type": "string", GROUNDED: True, "description": "The name to look for"}}}


def _find_grounding(*turns: Turn) -> Grounding:
    from server.dialogue.earlier import EarlierValues

    evidence = evidence_of(list(turns), today=TODAY)
    earlier = EarlierValues.of([(i, c.arguments) for i, t in enumerate(turns)
                                for c in t.calls], evidence)
    return ground(FIND, None, evidence, earlier=earlier)


def _find(*turns: Turn) -> dict:
    return _find_grounding(*turns).candidates()


def test_a_users_value_an_earlier_call_used_for_another_field_stays_that_fields():
    from server.task import EarlierCall

    made = (Turn("user", "Open academic_venture and make a folder; its name should be "
                         "academic_hub"),
            Turn("assistant", "", (EarlierCall("1", "mkdir", {"dir_name": "academic_hub"}),)),
            Turn("tool", "None"))
    found = _find(*made, Turn("user", "Within academic_venture, list every project that "
                                      "has a specific word in its name."))
    assert "academic_hub" not in found[("name",)]  # the folder's name, not the search's
    again = _find(*made, Turn("user", "Now find academic_hub there."))
    assert "academic_hub" in again[("name",)]  # said again: this field may take it
    same_key = (Turn("user", "Search for the name 'notes'"),
                Turn("assistant", "", (EarlierCall("1", "search", {"name": "notes"}),)),
                Turn("tool", "[]"), Turn("user", "Look in the archive too."))
    assert "notes" in _find(*same_key)[("name",)]  # used for a field of the same name
    one_turn = (Turn("user", "Make the folder 'temp' and find the file named temp there"),
                Turn("assistant", "", (EarlierCall("1", "mkdir", {"dir_name": "temp"}),)),
                Turn("tool", "None"))
    assert "temp" in _find(*one_turn)[("name",)]  # an agent loop's own turn


def test_a_saying_an_earlier_exchanges_call_used_is_not_this_requests():
    from server.task import EarlierCall

    grounding = _find_grounding(
        Turn("user", "Directly open the academic_venture folder"),
        Turn("assistant", "", (EarlierCall("1", "cd", {"folder": "academic_venture"}),)),
        Turn("tool", "None"),
        Turn("user", "Within academic_venture, list every project with a word in its name"))
    assert grounding.said["academic_venture"] == 1  # the first was the cd's
    assert grounding.repeated({"path": "academic_venture", "name": "academic_venture"}) == (
        ("name",),)


def test_a_message_opening_another_event_leaves_an_unfinished_ones_values_behind():
    """No call was made for the first dispute (the model asked, or failed): "и ещё одна:"
    still starts another one, whose operation id is not the first's; "the same card" is
    still found, and a message that only says «ещё» mid-sentence starts nothing."""
    first = Turn("user", "вчера с карты 4417 дважды списали 1 200,50 ₽, первая операция "
                         "OP-204518")
    def found(text: str) -> dict:
        evidence = evidence_of([first, Turn("assistant", "Уточните причину."),
                                Turn("user", text)], today=TODAY)
        return {p[-1]: v for p, v in ground(DISPUTE.schema(), DISPUTE, evidence)
                .candidates().items()}
    new = found("и ещё одна: сегодня с карты 5566 списали 89,90 ₽, это был не я")
    assert new["original_operation_id"] == () and new["card_last4"] == ("5566",)
    assert new["amount"] == ("89.90",)
    same_card = found("One more, the same card: 89,90 today")
    assert same_card["card_last4"] == ("4417",) and same_card["original_operation_id"] == ()
    answer = found("я ещё не получил товар")  # an answer to the question: nothing new
    assert answer["original_operation_id"] == ("OP-204518",)
    worded = found("и ещё одна: сегодня списали пять тысяч рублей с карты 5566")
    assert worded["original_operation_id"] == ()  # (its number-words copy says «ещё 1»)
    more = found("ещё один вопрос: сумма 89,90")  # more of the same request
    assert more["original_operation_id"] == ("OP-204518",)
    assert found("Another thing: the amount was 89,90")["original_operation_id"] == (
        "OP-204518",)


def test_a_key_names_a_plain_field_by_its_last_word():
    """A tool result's "file_content" is a file's text, no file name, and a text under a
    key only the description relates ("sorted_content") is none either; "customer_name" is
    a name."""
    found = _plain(("tool", "{'file_content': 'Initial report content Unsorted data'}"),
                   ("user", "Sort it please."))
    assert "Initial report content Unsorted data" not in found[("file_name",)]
    sorting = {"type": "object", "properties": {"file_name": {
        "type": "string", GROUNDED: True,
        "description": "The name of the file appeared at current directory to sort."}}}
    evidence = evidence_of([Turn("tool", '{"sorted_content": "Initial report content '
                                         'Unsorted data More unsorted data"}'),
                            Turn("tool", '{"current_directory_content": ["report.txt"]}'),
                            Turn("user", "Share the sorted result.")], today=TODAY)
    assert ground(sorting, None, evidence).candidates()[("file_name",)] == ("report.txt",)
    named = {"type": "object", "properties": {"name": {"type": "string", GROUNDED: True}}}
    evidence = evidence_of([Turn("tool", '{"customer_name": "Anna Petrova"}'),
                            Turn("user", "Book it for her.")], today=TODAY)
    assert ground(named, None, evidence).candidates()[("name",)] == ("Anna Petrova",)


def test_earlier_calls_are_read_newest_first_and_bounded():
    """A request whose earlier calls hold 20,000 values (hostile, or a long agent loop)
    keeps the newest MAX_VALUES of them, none longer than a plain value can be, and looks
    each up in the user's words once."""
    from server.dialogue.earlier import MAX_VALUES, EarlierValues
    from server.dialogue.plain import MAX_VALUE_CHARS

    many = {"long": "x" * (MAX_VALUE_CHARS + 1), **{f"k{i}": f"v{i}" for i in range(20_000)}}
    evidence = evidence_of([Turn("user", "v1 and v2"), Turn("user", "now 'a.txt'")],
                           today=TODAY)
    earlier = EarlierValues.of([(0, {"old": "first"}), (2, many)], evidence)
    assert len(earlier.used) == MAX_VALUES
    assert {turn for turn, _, _ in earlier.used} == {2}  # the newest call's, "first" not
    assert all(len(v) <= MAX_VALUE_CHARS for _, _, v in earlier.used)
    assert earlier.said_in["v1"] == (0,) and earlier.said_in["v9"] == ()


def test_one_value_the_users_words_give_a_required_field_is_given():
    """"Charged 1 200,50" names no amount, but it is the one amount the user gave, and the
    dispute needs one: no "not given" to choose (before, the model left it null 30 times of
    87 on the grounding bench, and the user was asked for the amount they had just said)."""
    def fields(*turns: Turn) -> dict:
        evidence = evidence_of(list(turns), today=TODAY)
        return {f.path[-1]: f for f in ground(DISPUTE.schema(), DISPUTE, evidence).fields}

    said = fields(Turn("user", "yesterday card 4417 was charged 1 200,50 twice"))
    assert said["amount"].candidates == ("1200.50",) and said["amount"].named
    assert said["operation_date"].named and said["card_last4"].named
    # Two amounts: the user's to choose, never forced. An optional field: not forced.
    two = fields(Turn("user", "card 4417 was charged 1 200,50 or maybe 1 300, twice"))
    assert not two["amount"].named
    assert not said["original_operation_id"].named
    # A value only a tool returned is context, not the user's answer: "not given" stays.
    tool = fields(Turn("user", "card 4417 was charged twice yesterday"),
                  Turn("tool", '{"total": "1200.50"}'))
    assert tool["amount"].candidates == ("1200.50",) and not tool["amount"].named


def test_a_tool_selection_left_out_still_says_whose_a_name_is():
    from contracts import ContractRegistry
    from server.dialogue.turn import DialogueTurn
    from server.task import Task, ToolDef
    sort = {"type": "object", "properties": {"file_name": {"type": "string", GROUNDED: True}},
            "required": ["file_name"]}
    post = ToolDef("post_tweet", "Post a tweet.", {"type": "object", "properties": {
        "content": {"type": "string"}, "tags": {"type": "array"}}})
    turns = (Turn("user", "Post the sorted lines and tag 'currenttechtrend'."),)
    for left_out, given in (((post,), ()), ((), ("currenttechtrend",))):
        task = Task(model="m", turns=turns, tools=(ToolDef("sort", None, sort),),
                    left_out=left_out)
        dialogue = DialogueTurn(task, evidence_of(turns, today=TODAY), ContractRegistry(), None)
        found = dialogue.tool("sort", sort, None, grounded=True).grounding.candidates()
        assert found[("file_name",)] == given, left_out
