"""The end-to-end tests that check calls, run on two degenerate servers
(tests/mutants/degenerate.py): one that asks the user for every value, one that refuses
every answer. Each named test must fail on each server it names: a test that passes there
cannot tell a server that works from one that never answers.

    .venv/bin/python tests/mutants/check.py [--mutant ask|refuse] [--only SUBSTRING]

Prints, per mutant, each named test and how its cases ended, and exits 1 when one of them
had no failing case (all passed or skipped, or it could not start). `make test-mutants`
runs it; so does .ci/run."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BOTH = ("ask", "refuse")
REFUSE = ("refuse",)  # a JSON or text answer: no call for `ask` to turn into a question
VLLM_TESTS = "tests/server/engines/test_vllm_engine.py"
VLLM_PYTHON = str(ROOT / ".venv-vllm" / "bin" / "python")

# The tests that check what a call, a question or an answer holds, and the degenerate
# servers each must fail on. Left out on purpose: tests of errors, limits, logs, health and
# disconnects, which no decoded answer reaches.
NAMED: dict[str, dict[str, tuple[str, ...]]] = {
    "tests/server/dialogue/test_conversation_e2e.py": {
        "test_amounts_and_dates_in_the_forms_people_write": BOTH,
        "test_a_correction_of_one_of_two_numbers_changes_only_that_one": BOTH,
        "test_a_second_intent_in_one_session_starts_from_the_conversation": BOTH,
        "test_an_id_in_compact_json_and_a_profile_in_the_system_message": BOTH,
        "test_the_users_relative_date_wins_over_the_systems_today": BOTH,
        "test_two_dates_the_user_gave_are_the_users_to_choose": BOTH,
        "test_a_russian_dialogue_is_asked_and_read_in_russian": BOTH,
        "test_a_correction_after_a_filed_dispute_is_confirmed_and_filed_once": BOTH,
        # Its claim is which tools the decode saw (selection), made before any decode.
        "test_a_russian_request_chooses_among_25_tools": REFUSE,
        "test_a_plain_string_is_the_users_named_value_or_a_question": BOTH,
        "test_an_optional_field_asked_for_without_a_value_is_a_question": BOTH,
    },
    "tests/server/pipeline/test_grounding_e2e.py": {
        "test_greedy_asks_about_the_original_operation": BOTH,
        "test_sampled_never_returns_a_value_nobody_gave": BOTH,
        "test_given_the_id_in_the_next_turn_the_call_is_whole": BOTH,
        "test_an_invented_identifier_cannot_be_decoded": BOTH,
        "test_the_question_on_every_api_and_stream": BOTH,
    },
    "tests/server/test_records_e2e.py": {
        "test_decisions_are_audited_and_rotated_with_redaction": BOTH,
    },
    "tests/server/api/test_openai_client.py": {
        "test_bfcl_simple_required_calls_always_validate": BOTH,
        "test_response_format_json_schema_always_validates": REFUSE,
        "test_named_tool_choice": BOTH,
        "test_auto_mode_every_emitted_call_is_valid": BOTH,
    },
    "tests/server/formats/test_qwen_e2e.py": {
        "test_required_call_with_qwens_thinking_on_by_default": BOTH,
        "test_no_thinking_when_effort_is_none": BOTH,
        "test_named_tool_and_budget": BOTH,
        "test_streamed_call_and_reasoning": BOTH,
        "test_json_answer_after_qwens_thinking": REFUSE,
        "test_contract_is_enforced_in_qwens_format": BOTH,
    },
    "tests/server/engines/test_vllm_engine.py": {
        "test_required_tool_call_is_valid": BOTH,
        "test_named_tool_choice": BOTH,
        "test_response_format_json_schema": REFUSE,
        "test_registered_contract_with_repair": BOTH,
        "test_streamed_tool_call_assembles_to_a_valid_call": BOTH,
    },
    "tests/realmodel/test_qwen_real.py": {
        "test_the_seed_dispute_is_a_call_with_the_users_values_or_a_question": BOTH,
        "test_a_missing_value_is_asked_for_never_invented": REFUSE,
        "test_the_readmes_weather_example": BOTH,
        "test_auto_answers_in_text_carry_no_markup": REFUSE,
        "test_auto_calls_a_tool_that_fits_and_answers_in_text_where_none_does": BOTH,
        "test_the_readmes_responses_and_messages_examples": BOTH,
        "test_the_users_date_not_the_systems_today": REFUSE,
        "test_two_dates_the_user_gave_are_asked_about_in_russian": BOTH,
        "test_a_russian_slot_dialogue_collects_the_values_across_turns": BOTH,
        "test_an_agent_loop_ends_in_a_text_answer_that_uses_the_result": BOTH,
        "test_a_correction_after_a_filed_dispute_is_confirmed_and_filed_once": BOTH,
        "test_a_plain_string_is_the_users_named_value_or_a_question": BOTH,
        "test_an_optional_field_asked_for_without_a_value_is_a_question": BOTH,
    },
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mutant", choices=BOTH, action="append")
    parser.add_argument("--only", help="run only the named test files holding this text")
    args = parser.parse_args()
    files = [f for f in NAMED if not args.only or args.only in f]
    wrong = 0
    for mutant in args.mutant or BOTH:
        wanted = [f"{f}::{t}" for f in files for t, on in NAMED[f].items() if mutant in on]
        cases = _run(mutant, wanted)
        print(f"\n== STRICTCALL_TEST_MUTANT={mutant}: a server that "
              f"{'asks for every value' if mutant == 'ask' else 'refuses every answer'}")
        for test in wanted:
            ends = [how for case, how in cases.items() if _function(case) == test]
            failed = ends.count("failed")
            # A test function fails where one of its cases fails (a case whose right answer
            # is a question passes on the `ask` server, as it should).
            verdict = "ok  " if failed else "MISS"
            wrong += not failed
            told = ", ".join(f"{n} {how}" for how in ("failed", "passed", "skipped", "error")
                             if (n := ends.count(how))) or "not run"
            print(f"  {verdict} {test}  ({told})")
    print("\nevery named test failed on each degenerate server" if not wrong
          else f"\n{wrong} named test(s) did not fail: they cannot tell such a server apart")
    return 1 if wrong else 0


def _function(case: str) -> str:
    """`path::test_name` of a case id `path::test_name[params]`."""
    return case.split("[", 1)[0]


def _run(mutant: str, tests: list[str]) -> dict[str, str]:
    """Each case's end ("failed", "passed", "skipped", "error") under `mutant`, by
    `path::name[params]`: the vLLM tier's tests with .venv-vllm's Python (as `make
    test-vllm` runs them), the rest with this one."""
    ended: dict[str, str] = {}
    for python, group in ((VLLM_PYTHON, [t for t in tests if t.startswith(VLLM_TESTS)]),
                          (sys.executable, [t for t in tests if not t.startswith(VLLM_TESTS)])):
        if group:
            ended |= _cases(python, mutant, group)
    return ended


def _cases(python: str, mutant: str, tests: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        env = {**os.environ, "STRICTCALL_TEST_MUTANT": mutant,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE),
                                                           os.environ.get("PYTHONPATH")]))}
        subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-m", "", f"--junitxml={report}",
                        *tests], cwd=ROOT, env=env, check=False)
        if not report.exists():
            return {t: "error" for t in tests}
        ended: dict[str, str] = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            module = str(case.get("classname")).replace(".", "/") + ".py"
            test = f"{module}::{case.get('name')}"
            kinds = {child.tag for child in case}
            ended[test] = ("failed" if "failure" in kinds else "error" if "error" in kinds
                           else "skipped" if "skipped" in kinds else "passed")
        return ended


if __name__ == "__main__":
    sys.exit(main())
