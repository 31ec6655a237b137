"""Which keyword of a JSON Schema is enforced by what: the enforcement report.

Every keyword occurrence is classified, with its JSON Pointer, into one tier:
- `grammar`: the backend's token mask enforces it; output breaking it cannot be decoded;
- `validator`: the mask does not (or gets it wrong); the post-decode JSON Schema check does.
  Such keywords are left out of the schema the backend compiles (which only relaxes it);
- `annotation`: no effect on what is valid (`title`, `description`, ...);
- `rejected`: nothing here enforces it. The schema is refused (400) naming each one.
A keyword the mask enforces in part (a oneOf it reads as anyOf, a pattern it compiles
without its lookarounds) has two entries: `grammar` for the part it keeps, `validator` for
the rest; it stays in the compiled schema.

Each backend has its own table (`KeywordTable`): what its masks enforce is a fact about that
backend and version, measured, not assumed (see tests/grammars/test_keywords.py).

Layout: `_analyze` walks the schema and dispatches each keyword to its family, which
decides tiers (`classify`) apart from editing the compiled copy (`rewrite`):
`_annotations` (annotations, unknown keywords), `_formats`, `_strings` (lengths, patterns,
escapes), `_numbers` (bounds, multipleOf, draft-4 exclusives), `_unions` (anyOf/oneOf/allOf
and what stands beside them), `_shapes` (objects, arrays, `$ref`, implied types).
`_table` holds the backends' tables and policies, `_report` the report, `_vocabulary` the
keywords the specifications define.
"""

from grammars.keywords._analyze import analyze
from grammars.keywords._report import TIERS, Analysis, EnforcementReport, KeywordUse, Tier, Verdicts
from grammars.keywords._shapes import ALL_TYPES
from grammars.keywords._strings import search_pattern
from grammars.keywords._table import (
                                       JSON_SCHEMA_READING,
                                       LLGUIDANCE_KEYWORDS,
                                       POLICIES,
                                       VLLM_XGRAMMAR_KEYWORDS,
                                       XGRAMMAR_KEYWORDS,
                                       KeywordTable,
                                       departures,
                                       with_policies,
)
from grammars.keywords._vocabulary import (
                                       ANNOTATION_PREFIXES,
                                       ANNOTATIONS,
                                       JSON_SCHEMA_KEYWORDS,
                                       VALIDATOR_FORMATS,
                                       VOCABULARY_ANNOTATIONS,
)

__all__ = [
    "ALL_TYPES", "ANNOTATIONS", "ANNOTATION_PREFIXES", "JSON_SCHEMA_KEYWORDS",
    "JSON_SCHEMA_READING", "LLGUIDANCE_KEYWORDS", "POLICIES", "TIERS", "VALIDATOR_FORMATS",
    "VLLM_XGRAMMAR_KEYWORDS",
    "VOCABULARY_ANNOTATIONS", "XGRAMMAR_KEYWORDS", "Analysis", "EnforcementReport",
    "KeywordTable", "KeywordUse", "Tier", "Verdicts", "analyze", "departures",
    "search_pattern", "with_policies",
]
