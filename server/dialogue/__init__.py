"""The conversation, read as people write it: what a grounded value may be copied from
(evidence), the values people write read into field values (reading: dates, numbers,
amounts, in many languages), which fields are grounded, asked or confirmed (marks), their
candidates (grounding), the session's slots across turns (slots), which field a message
means (naming), questions in the user's language (questions, with Babel's message
catalogs in locales/) and how a reply to a confirmation is read (replies).

The pipeline sees one seam (turn): `Dialogue.begin` gives a `DialogueTurn` per request."""

from server.dialogue.grounding import GroundedField, Grounding, draft_lines, ground
from server.dialogue.questions import NeedsInput, Question, Wording
from server.dialogue.turn import Dialogue, DialogueTurn, ToolTurn

__all__ = ["Dialogue", "DialogueTurn", "GroundedField", "Grounding", "NeedsInput",
           "Question", "ToolTurn", "Wording", "draft_lines", "ground"]
