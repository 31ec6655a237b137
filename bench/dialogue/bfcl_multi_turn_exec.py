"""BFCL's own classes and execution helper, imported at run time from the evaldata, and the
turn's score as BFCL's multi-turn checker gives it.

BFCL's files import each other as the `bfcl_eval` package; the package is not installed
here, so its names are set up in `sys.modules` pointing at the evaldata folder (nothing is
copied). BFCL keeps a dialogue's live instances in the globals of its `multi_turn_utils`
module; each `DialogueBackends` loads a private copy of that module, so two dialogues (or a
test and a run) never share state.

Scoring (written from BFCL's `multi_turn_checker.py` semantics, not copied): a turn whose
ground truth has calls is correct when the model made a call in it, every public attribute
of each ground-truth instance equals the model's instance's after the turn (both sides have
run all their calls so far), and every ground-truth result of the turn is among the model's
results so far, as a multiset and in any order. A turn whose ground truth is empty is correct
when the model made no call (BFCL's irrelevance check). A turn cut off by the step limit
fails, as BFCL's forced quit fails the dialogue."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import types
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bench.dialogue.bfcl_multi_turn_data import CLASS_FILES, MULTI_TURN

Side = Literal["model", "truth"]
PACKAGE = "bfcl_eval.eval_checker.multi_turn_eval"
# BFCL's STATELESS_CLASSES: instantiated without a scenario.
STATELESS = ["MathAPI"]
_copies = itertools.count()


def bfcl_package(root: Path = MULTI_TURN) -> None:
    """Make `bfcl_eval...multi_turn_eval` (func_source_code/, multi_turn_utils.py) importable
    from `root`, with the one constants module multi_turn_utils imports."""
    for name in ("bfcl_eval", "bfcl_eval.eval_checker", PACKAGE, "bfcl_eval.constants"):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [str(root)] if name == PACKAGE else []
            sys.modules[name] = module
    constants = "bfcl_eval.constants.executable_backend_config"
    if constants not in sys.modules:
        config = types.ModuleType(constants)
        config.CLASS_FILE_PATH_MAPPING = {  # type: ignore[attr-defined]
            cls: f"{PACKAGE}.func_source_code.{file}" for cls, file in CLASS_FILES.items()}
        config.STATELESS_CLASSES = STATELESS  # type: ignore[attr-defined]
        sys.modules[constants] = config


def multi_turn_utils(root: Path = MULTI_TURN) -> types.ModuleType:
    """A private copy of BFCL's multi_turn_utils (its globals hold the live instances)."""
    bfcl_package(root)
    name = f"{PACKAGE}.multi_turn_utils_copy{next(_copies)}"
    spec = importlib.util.spec_from_file_location(name, root / "multi_turn_utils.py")
    assert spec is not None and spec.loader is not None, root
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class DialogueBackends:
    """One dialogue's instances of its involved classes: the model's and the ground truth's,
    each loaded with the entry's `initial_config`, run by BFCL's own helper."""

    def __init__(self, entry: dict[str, Any], *, root: Path = MULTI_TURN) -> None:
        self._entry = entry
        self._utils = multi_turn_utils(root)

    def run(self, side: Side, calls: list[str]) -> list[str]:
        """Execute call strings on `side`'s instances; their results as BFCL writes them (a
        failure is "Error during execution: ...")."""
        results, _ = self._execute(side, calls)
        return list(results)

    def instances(self, side: Side) -> dict[str, Any]:
        return dict(self._execute(side, [])[1])

    def _execute(self, side: Side, calls: list[str]) -> tuple[list[str], dict[str, Any]]:
        entry = self._entry
        return self._utils.execute_multi_turn_func_call(  # type: ignore[no-any-return]
            calls, entry["initial_config"], entry["involved_classes"], side, entry["id"])


@dataclass(frozen=True)
class TurnChecks:
    """BFCL's two checks after a turn: the classes whose instances' state differs from the
    ground truth's, and the ground truth's results of the turn missing from the model's."""

    state_differs: list[str]
    results_missing: list[str]

    @classmethod
    def after_turn(cls, backends: DialogueBackends, *, model_results: list[str],
                   truth_results: list[str]) -> TurnChecks:
        """`model_results`: every result of the model's calls in the dialogue so far;
        `truth_results`: the ground truth's in this turn."""
        model, truth = backends.instances("model"), backends.instances("truth")
        return cls([name for name in truth if state_differences(model[name], truth[name])],
                   missing_results(model_results, truth_results))


def score_turn(*, truth_calls: list[str], model_calls: int, forced_quit: bool,
               checks: TurnChecks, request_failed: bool = False) -> str:
    """"correct", or why not: "request failed" (the turn ended on a request the server did
    not answer: what the model would have done is unknown), "no call", "call not expected",
    "step limit", "state: <class>" or "results missing"."""
    if request_failed:
        return "request failed"
    if not truth_calls:
        return "correct" if model_calls == 0 else "call not expected"
    if model_calls == 0:
        return "no call"
    if forced_quit:
        return "step limit"
    if checks.state_differs:
        return f"state: {checks.state_differs[0]}"
    return "results missing" if checks.results_missing else "correct"


def state_differences(model: Any, truth: Any) -> dict[str, tuple[Any, Any]]:
    """The public attributes (not starting with "_") of `truth` whose value differs on
    `model` (model's value, truth's value); the instances are of one class."""
    assert type(model) is type(truth), (type(model), type(truth))
    return {name: (getattr(model, name, None), value) for name, value in vars(truth).items()
            if not name.startswith("_") and getattr(model, name, None) != value}


def missing_results(model_results: list[str], truth_results: list[str]) -> list[str]:
    """The ground truth's results not found among the model's, each model result used once."""
    left = Counter(model_results)
    missing = []
    for result in truth_results:
        if left[result] > 0:
            left[result] -= 1
        else:
            missing.append(result)
    return missing
