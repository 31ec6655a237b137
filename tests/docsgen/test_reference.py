"""The generated reference pages follow the code: a setting, a metric or a problem type
added to the code appears on its page (the generators are pure functions of what they are
given), and what they are given is everything the server has."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from docsgen.reference import (
    flags_page,
    metrics_page,
    problem_rows,
    problems_page,
    service_errors,
    setting_rows,
)
from server import errors
from server.errors import OUTCOME_PROBLEMS, ServiceError, problem_slug, problem_type
from server.metrics import Metrics, Series
from server.settings import Settings, setting

ROOT = Path(__file__).resolve().parents[2]


class _WithANewSetting(Settings):
    frobnicate_level: int = setting(3, "how hard to frobnicate", group="records", ge=1, le=9)


def test_a_new_setting_is_a_row_with_its_flag_variable_default_and_help() -> None:
    before = flags_page(setting_rows(), {})
    page = flags_page(setting_rows(_WithANewSetting), {})
    assert "frobnicate" not in before
    row = next(line for line in page.splitlines() if "--frobnicate-level" in line)
    assert "`STRICTCALL_FROBNICATE_LEVEL`" in row and "`3`" in row
    assert "integer (>= 1, <= 9)" in row and "how hard to frobnicate" in row
    # in its group's table, not the first one
    assert page.index("## Records") < page.index("--frobnicate-level")


def test_every_setting_is_on_the_flags_page_with_its_variable() -> None:
    page = flags_page(setting_rows(), {})
    for name in Settings.model_fields:
        if name != "policies":  # the grammar policies stand in its place
            assert f"`STRICTCALL_{name.upper()}`" in page, name
    assert "`--strict-objects / --no-strict-objects`" in page
    assert "| `--max-tools` | `STRICTCALL_MAX_TOOLS` | `20` |" in page


def test_a_new_metric_is_a_row_with_its_kind_and_labels() -> None:
    series = [*Metrics().series(),
              Series("strictcall:frobs_total", "counter", "Frobs | made.", ("tool", "kind"))]
    page = metrics_page(series)
    assert "| `strictcall:frobs_total` | counter | `tool`, `kind` | Frobs \\| made. |" in page


def test_the_metrics_page_lists_exactly_what_get_metrics_serves() -> None:
    metrics = Metrics("m")
    metrics.watch(cache=lambda: {}, engine=lambda: {"running": 1, "queued": 0, "prefills": 2})
    text = metrics.render().decode()
    # prometheus_client's own `_created` timestamps (the metrics page says so) aside
    served = {n for n in re.findall(r"^# TYPE (\S+) \w+$", text, re.M)
              if not n.endswith("_created")}
    served = {re.sub(r"^strictcall_engine_\w+_total$", "strictcall_engine_<counter>_total", n)
              for n in served}
    assert served == {s.name for s in metrics.series()}


class _Frobnicated(ServiceError):
    """The frobnicator refused: turn it off and on."""

    status, slug, title = 418, "frobnicated", "Frobnicated"


def test_a_new_problem_type_is_a_section_its_type_uri_lands_on() -> None:
    rows = problem_rows([*service_errors(), _Frobnicated], OUTCOME_PROBLEMS)
    page = problems_page(rows)
    assert "| [`frobnicated`](#frobnicated) | 418 | Frobnicated | no |" in page
    assert "## frobnicated {#frobnicated}" in page
    assert "The frobnicator refused: turn it off and on." in page
    uri = _Frobnicated("x").problem("/v1/x")["type"]
    assert uri == errors.PROBLEMS_URL + "#frobnicated" and problem_slug(uri) == "frobnicated"


def test_every_problem_in_server_errors_has_a_section() -> None:
    declared = {cls.slug for cls in vars(errors).values()
                if isinstance(cls, type) and issubclass(cls, ServiceError)}
    page = problems_page(problem_rows(service_errors(), OUTCOME_PROBLEMS))
    for slug in declared | {o.slug for o in OUTCOME_PROBLEMS}:
        assert f"{{#{slug}}}" in page, slug
        assert problem_type(slug).endswith(f"reference/problems/#{slug}")
    # a tool's outcome says itself whether to retry (a timed-out read may be retried)
    assert "| [`tool-timed-out`](#tool-timed-out) | in an invoke answer | Tool timed out | " \
           "per answer |" in page


def test_every_error_class_explains_itself() -> None:
    for cls in service_errors():
        assert (cls.__doc__ or "").strip(), f"{cls.__name__} has no explanation for its page"


def test_problem_types_point_into_the_site_mkdocs_builds() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["site_url"] == errors.DOCS_URL
    assert config["site_url"] + "reference/problems/" == errors.PROBLEMS_URL
