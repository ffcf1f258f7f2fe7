"""The scripted model: an offline OpenAI-compatible server that plays back a script."""

from worker.scripted_model.script import Reply, Script, ScriptError, load_script, pick_reply
from worker.scripted_model.server import CHAT_PATH, RecordedRequest, ScriptedModel

__all__ = [
    "CHAT_PATH",
    "RecordedRequest",
    "Reply",
    "Script",
    "ScriptError",
    "ScriptedModel",
    "load_script",
    "pick_reply",
]
