"""The one pipeline every API shares (server/pipeline/chat.py composes its stages). What the
APIs may use of it is exported here: the pipeline, the answer, its events and its opening;
nothing under server/api imports the pipeline's modules (tests/test_layers.py)."""

from server.pipeline.answer import (
    Answer,
    ArgumentsDelta,
    Call,
    CallDone,
    CallStarted,
    Event,
    Finish,
    Finished,
    Opening,
    ReasoningDelta,
    RepairUsage,
    TextDelta,
    Usage,
)
from server.pipeline.chat import ChatPipeline, Parts

__all__ = [
    "Answer", "ArgumentsDelta", "Call", "CallDone", "CallStarted", "ChatPipeline", "Event",
    "Finish", "Finished", "Opening", "Parts", "ReasoningDelta", "RepairUsage", "TextDelta",
    "Usage",
]
