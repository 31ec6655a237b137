"""What the calls pass over (server/dialogue/unsaid.py), read against BFCL's base multi-turn
dialogues, where every turn with calls gives what its calls need: those gold calls standing
in for the model's, with every string and count grounded as `strictcall-bench bfcl-missing`
marks them, the answer asks instead of calling in at most 1% of such turns (on every
dialogue, 3 of 731: the rest of such a turn's words name another tool's field, "a recent
message" beside a delete, "a last-minute complication" beside a budget's last-modified
date). The turns that asked are named where it fails."""

from __future__ import annotations

import datetime as dt

from tests.conftest import evaldata

EVERY = 2  # every other dialogue: half a minute on this machine


def test_gold_calls_of_base_turns_are_almost_never_held_for_a_question():
    from bench.dialogue.bfcl_missing import parsed
    from bench.dialogue.bfcl_multi_turn_data import functions, load, tools
    from server.dialogue import Grounding, ground
    from server.dialogue.evidence import evidence_of
    from server.dialogue.turn import wording_of
    from server.dialogue.unsaid import unsaid
    from server.task import Turn

    root = evaldata("bfcl/multi_turn")
    asked, turns_with_calls = [], 0
    for entry, truth in load(every=EVERY, root=root):
        docs = {d["name"]: d for d in functions(entry["involved_classes"], root=root)}
        offered = {t["function"]["name"]: t["function"]["parameters"] for t in tools(
            list(docs.values()), grounded=True, numbers=True)}
        turns: list[Turn] = []
        for index, messages in enumerate(entry["question"]):
            turns += [Turn(m["role"], m["content"]) for m in messages]
            if truth[index]:
                turns_with_calls += 1
                evidence = evidence_of(turns, today=dt.date(2026, 12, 7))
                groundings = {n: g for n, s in offered.items()
                              if (g := ground(s, None, evidence))}
                wordings = {n: wording_of(groundings.get(n) or Grounding(), s)
                            for n, s in offered.items()}
                question = unsaid(turns[-1].text, [parsed(c, docs) for c in truth[index]],
                                  offered, groundings, wordings.__getitem__)
                if question is not None:
                    asked.append(f"{entry['id']} turn {index}: {question.text()!r}")
            turns.append(Turn("assistant", ""))
    assert turns_with_calls > 300
    assert len(asked) <= turns_with_calls // 100, "\n".join(asked)
