"""The conversation, read as people write it: what a grounded value may be copied from
(evidence), the values people write read into field values (reading: dates, numbers,
amounts, in many languages), which fields are grounded, asked or confirmed (marks), their
candidates (grounding), the session's slots across turns (slots), which field a message
means (naming), questions in the user's language (questions, with Babel's message
catalogs in locales/) and how a reply to a confirmation is read (replies).

The pipeline sees one seam (turn): `Dialogue.begin` gives a `DialogueTurn` per request."""

from typing import Any

from server.dialogue.evidence import Bounds
from server.dialogue.grounding import GroundedField, Grounding, draft_lines, ground
from server.dialogue.questions import NeedsInput, Question, Wording
from server.dialogue.turn import Dialogue, DialogueTurn, ToolTurn

__all__ = ["Bounds", "Dialogue", "DialogueTurn", "GroundedField", "Grounding", "NeedsInput",
           "Question", "ToolTurn", "Wording", "draft_lines", "ground", "grounding_bounds"]


def grounding_bounds(settings: Any) -> Bounds:
    """What grounding reads, from the server's Settings (grounding_max_*)."""
    return Bounds(settings.grounding_max_messages, settings.grounding_max_chars,
                  settings.grounding_max_words)
