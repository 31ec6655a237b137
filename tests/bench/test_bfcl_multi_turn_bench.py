"""`strictcall-bench bfcl-multi-turn`: BFCL's function docs as tools, a tool call as BFCL's
call string, calls run on BFCL's own classes (from the evaldata), and the turn's score by
state and results as BFCL's multi-turn checker gives it; one real run end to end."""

from __future__ import annotations

import json

import jsonschema
import pytest

from bench.dialogue.bfcl_multi_turn import main, summary, table
from bench.dialogue.bfcl_multi_turn_data import GROUNDED, call_string, functions, load, tools
from bench.dialogue.bfcl_multi_turn_exec import (
    DialogueBackends,
    TurnChecks,
    missing_results,
    score_turn,
    state_differences,
)
from tests.conftest import evaldata

VERDICTS = {"correct", "no call", "call not expected", "step limit", "results missing",
            "request failed"}


@pytest.fixture(scope="module")
def dialogues() -> dict[str, tuple[dict, list[list[str]]]]:
    """multi_turn_base by id (skips without the evaldata; fails under CI)."""
    for part in ("BFCL_v4_multi_turn_base.json", "possible_answer", "func_doc",
                 "func_source_code", "multi_turn_utils.py"):
        evaldata(f"bfcl/multi_turn/{part}")
    return {entry["id"]: (entry, truth) for entry, truth in load()}


def _checked(entry: dict, truth: list[list[str]], model_turns: list[list[str]]
             ) -> list[TurnChecks]:
    """Each turn's checks when the model's calls per turn are `model_turns`."""
    backends = DialogueBackends(entry)
    model_results: list[str] = []
    out = []
    for calls, truth_calls in zip(model_turns, truth, strict=False):
        model_results += backends.run("model", calls)
        out.append(TurnChecks.after_turn(backends, model_results=model_results,
                                         truth_results=backends.run("truth", truth_calls)))
    return out


def _scored(entry: dict, truth: list[list[str]], model_turns: list[list[str]]) -> list[str]:
    """Each turn's verdict when the model's calls per turn are `model_turns`."""
    return [score_turn(truth_calls=truth_calls, model_calls=len(calls), forced_quit=False,
                       checks=checks)
            for calls, truth_calls, checks in zip(
                model_turns, truth, _checked(entry, truth, model_turns), strict=False)]


def test_a_stride_mixes_the_api_classes(dialogues):
    picked = load(25, 0, 8)
    assert [e["id"] for e, _ in picked][:3] == [f"multi_turn_base_{i}" for i in (0, 8, 16)]
    assert len(picked) == 25 and {"TravelAPI", "TradingBot", "VehicleControlAPI"} <= {
        c for e, _ in picked for c in e["involved_classes"]}
    assert load(2, 199) == [dialogues["multi_turn_base_199"]]


def test_the_functions_become_json_schema_tools(dialogues):
    entry, _ = dialogues["multi_turn_base_31"]  # GorillaFileSystem and MathAPI
    docs = functions(entry["involved_classes"])
    offered = tools(docs, grounded=False)
    assert [t["function"]["name"] for t in offered] == [d["name"] for d in docs]
    for tool in offered:
        parameters = tool["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object" and "response" not in tool["function"]
        assert GROUNDED not in json.dumps(parameters)
    (mean,) = [t["function"]["parameters"] for t in offered if t["function"]["name"] == "mean"]
    assert mean["properties"]["numbers"]["items"] == {"type": "number"}  # BFCL's "float"


def test_grounding_marks_each_free_string_parameter_and_nothing_else():
    doc = {"name": "f", "description": "", "parameters": {"type": "dict", "properties": {
        "path": {"type": "string"}, "mode": {"type": "string", "enum": ["r", "w"]},
        "count": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}},
        "ratio": {"type": "float"}}, "required": ["path"]}}
    (tool,) = tools([doc], grounded=True)
    properties = tool["function"]["parameters"]["properties"]
    assert [n for n, p in properties.items() if p.get(GROUNDED)] == ["path"]
    assert properties["ratio"]["type"] == "number"
    (plain,) = tools([doc], grounded=False)
    assert GROUNDED not in json.dumps(plain)


def test_a_tool_call_becomes_bfcls_call_string():
    offered = {"cd", "post_tweet"}
    assert call_string("cd", '{"folder": "document"}', offered) == "cd(folder='document')"
    assert call_string("post_tweet", json.dumps({"content": "It's done", "tags": ["#a"],
                                                 "n": 2.5, "on": True, "x": None}), offered) \
        == "post_tweet(content=\"It's done\",tags=['#a'],n=2.5,on=True,x=None)"
    assert call_string("cd", "", offered) == "cd()"
    for name, arguments in [("rm", '{"file_name": "a"}'), ("cd", "[1]"), ("cd", "{oops"),
                            ("cd", '{"folder) or __import__(\'os\'": 1}')]:
        with pytest.raises(ValueError):
            call_string(name, arguments, offered)


def test_calls_run_on_bfcls_classes_with_the_entrys_initial_state(dialogues):
    entry, _ = dialogues["multi_turn_base_0"]
    backends = DialogueBackends(entry)
    moved, missing, wrong = backends.run("model", [
        "cd(folder='document')", "cd(folder='no_such_folder')", "cd(directory='document')"])
    assert json.loads(moved) == {"current_working_directory": "document"}
    assert "error" in json.loads(missing)
    assert wrong.startswith("Error during execution: ")  # a TypeError, as BFCL reports it
    model, truth = backends.instances("model"), backends.instances("truth")
    assert set(model) == set(truth) == {"GorillaFileSystem", "TwitterAPI"}
    # the working directory is private (`_current_dir`): BFCL's state check skips it
    assert not state_differences(model["GorillaFileSystem"], truth["GorillaFileSystem"])
    assert backends.run("model", ["mkdir(dir_name='new')"]) == ["None"]
    assert set(state_differences(model["GorillaFileSystem"], truth["GorillaFileSystem"])) \
        == {"root"}
    assert backends.run("truth", ["pwd()"]) == ['{"current_working_directory": "/workspace"}']
    # another dialogue's backends (another copy of BFCL's module) start from the entry too
    assert DialogueBackends(entry).run("model", ["pwd()"]) == backends.run("truth", ["pwd()"])
    assert backends.run("model", ["pwd()"]) == [
        '{"current_working_directory": "/workspace/document"}']


def test_the_math_class_runs_with_mpmath(dialogues):
    entry, _ = dialogues["multi_turn_base_31"]
    (result,) = DialogueBackends(entry).run("model", ["logarithm(value=8, base=2, precision=5)"])
    assert result == "{'result': mpf('3.0')}"  # not JSON: BFCL writes str() of the dict


def test_the_ground_truth_as_the_models_calls_scores_every_turn_correct(dialogues):
    for entry, truth in dialogues.values():
        assert _scored(entry, truth, truth) == ["correct"] * len(truth), entry["id"]


def test_a_wrong_argument_changes_the_state_and_scores_wrong(dialogues):
    entry, truth = dialogues["multi_turn_base_0"]
    wrong = [c.replace("dir_name='temp'", "dir_name='tmp'") for c in truth[0]]
    assert wrong != truth[0]
    assert _scored(entry, truth, [wrong]) == ["state: GorillaFileSystem"]


def test_a_missing_call_scores_wrong_by_state_or_by_its_missing_result(dialogues):
    entry, truth = dialogues["multi_turn_base_0"]
    assert truth[0][-1].startswith("mv(") and truth[1][-1].startswith("grep(")
    assert _scored(entry, truth, [truth[0][:-1]]) == ["state: GorillaFileSystem"]
    # grep changes no state: only its result is missing
    assert _scored(entry, truth, [truth[0], truth[1][:-1]]) == ["correct", "results missing"]
    assert _scored(entry, truth, [truth[0], []]) == ["correct", "no call"]


def test_a_result_from_an_earlier_turn_counts_and_extra_calls_do_no_harm(dialogues):
    entry, truth = dialogues["multi_turn_base_0"]
    early = [truth[0] + truth[1], ["pwd()", "ls()"]]  # turn 1's calls made in turn 0
    assert _scored(entry, truth, early)[1] == "correct"


def test_the_turn_verdicts_by_bfcls_rules():
    passed, differs, missing = (TurnChecks([], []), TurnChecks(["TicketAPI"], ["1"]),
                                TurnChecks([], ["1"]))
    verdicts = [score_turn(truth_calls=calls, model_calls=made, forced_quit=forced,
                           checks=checks)
                for calls, made, forced, checks in [
                    (["f()"], 1, False, passed), (["f()"], 1, False, differs),
                    (["f()"], 1, False, missing), (["f()"], 0, False, passed),
                    (["f()"], 5, True, passed), ([], 0, False, differs),
                    ([], 1, False, passed)]]
    assert verdicts == ["correct", "state: TicketAPI", "results missing", "no call",
                        "step limit", "correct", "call not expected"]
    for truth_calls in ([], ["f()"]):  # a dead server's silence is no answer
        assert score_turn(truth_calls=truth_calls, model_calls=0, forced_quit=False,
                          checks=passed, request_failed=True) == "request failed"
    assert missing_results(["a", "b", "a"], ["a", "a", "a", "c"]) == ["a", "c"]
    assert missing_results(["b", "a"], ["a", "b"]) == []  # in any order


def test_the_report_counts_what_the_records_hold():
    step = {"calls": ["cd(folder='a')"], "results": ["{}"], "not_run": [], "question": False,
            "finish": "tool_calls", "prompt_tokens": 100, "seconds": 1.0}
    asked = {**step, "calls": [], "results": [], "question": True, "finish": "stop",
             "prompt_tokens": 300, "seconds": 3.0}
    failed = {"error": "400 context_length_exceeded", "calls": [], "results": [],
              "not_run": []}
    checks = {"state_differs": [], "results_missing": []}
    records = [{"id": "a", "setting": "grounding-on", "correct": False, "turns": [
        {"verdict": "correct", "steps": [step, asked], **checks},
        {"verdict": "request failed", "steps": [failed], **checks},
        {"verdict": "step limit", "steps": [step], **checks},
        {"verdict": "step limit", "steps": [step], **checks, "state_differs": ["X"]}]}]
    row = summary("grounding-on", records, [{"during": "multi_turn_base_150 grounding-on",
                                             "why": "exited with -9"}])
    assert {k: row[k] for k in ("dialogues", "dialogues_correct", "turns", "turns_correct",
                                "requests", "calls", "questions", "cut_off", "step_limit",
                                "checks_pass_at_step_limit", "failed",
                                "prompt_tokens_median", "latency_s_median")} == {
        "dialogues": 1, "dialogues_correct": 0, "turns": 4, "turns_correct": 1,
        "requests": 5, "calls": 3, "questions": 1, "cut_off": 0, "step_limit": 2,
        "checks_pass_at_step_limit": 1, "failed": {"400 context_length_exceeded": 1},
        "prompt_tokens_median": 100, "latency_s_median": 1.0}
    rendered = table([row])
    assert "| grounding-on | 0 of 1 | 1 of 4 | 5 | 3 | 1 | 0 | 2 (1) | " \
           "1 (1 400 context_length_exceeded) | 100 | 1.00 |" in rendered
    assert "| grounding-on | step limit 2, request failed 1 | " \
           "multi_turn_base_150: exited with -9 |" \
        in rendered


def test_a_saved_run_renders_its_page(tmp_path):
    from bench.common.results_file import save
    from bench.report.pages import benchmark_pages, read_results

    row = summary("grounding-off", [{"id": "a", "setting": "grounding-off", "correct": True,
                                     "turns": [{"verdict": "correct", "steps": [],
                                                "state_differs": [], "results_missing": []}]}])
    save("bfcl-multi-turn", {"args": {"offset": 0, "max_steps": 5, "max_tokens": 256,
                                      "model": "embedded"}, "rows": [row], "dialogues": []},
         ["--limit", "1"], directory=tmp_path)
    pages = benchmark_pages(read_results(tmp_path))
    assert "dialogues correct: grounding-off 1 of 1 (1 of 1 turns)" in \
        str(pages["benchmarks/index.md"])
    page = str(pages["benchmarks/bfcl-multi-turn.md"])
    assert page.startswith("# BFCL multi-turn: dialogues scored by state")
    assert "| grounding-off | 1 of 1 | 1 of 1 | 0 | 0 |" in page


def test_an_unknown_setting_is_refused():
    with pytest.raises(SystemExit, match="grounding-off"):
        main(["--settings", "grounding-maybe"])


@pytest.mark.slow
@pytest.mark.long
def test_a_real_run_scores_every_turn_in_both_settings(dialogues, tmp_path):
    """For real: a server on the embedded model, the openai client, BFCL's classes; one
    two-turn dialogue, at most 2 requests with calls per turn. Each turn's checks (state and
    results) are the ones a replay of the model's recorded calls on fresh instances gives, as
    BFCL's checker re-executes them."""
    out = tmp_path / "report.json"
    assert main(["--offset", "3", "--limit", "1", "--max-steps", "2", "--max-tokens", "96",
                 "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    entry, truth = dialogues["multi_turn_base_3"]
    assert [r["setting"] for r in report["rows"]] == ["grounding-off", "grounding-on"]
    for row in report["rows"]:
        (record,) = [r for r in report["dialogues"] if r["setting"] == row["setting"]]
        assert record["id"] == entry["id"] and len(record["turns"]) == len(truth) == 2
        steps = [s for t in record["turns"] for s in t["steps"]]
        assert row["turns"] == 2 and row["requests"] == len(steps) >= 2
        assert row["calls"] == sum(len(s["calls"]) for s in steps)
        for turn in record["turns"]:
            assert 1 <= len(turn["steps"]) <= 2
            assert turn["verdict"] in VERDICTS or turn["verdict"].startswith("state: ")
        answered = [s for s in steps if "error" not in s]
        assert all(s["prompt_tokens"] > 0 and s["seconds"] > 0 for s in answered)
        assert len(answered) + sum(row["failed"].values()) == row["requests"]
        model_turns = [[c for s in t["steps"] for c in s["calls"]] for t in record["turns"]]
        replayed = _checked(entry, truth, model_turns)
        assert [{"state_differs": c.state_differs, "results_missing": c.results_missing}
                for c in replayed] == [{k: t[k] for k in ("state_differs", "results_missing")}
                                       for t in record["turns"]]
        assert row["turns_correct"] == sum(t["verdict"] == "correct" for t in record["turns"])
        assert row["dialogues_correct"] == int(row["turns_correct"] == 2)
