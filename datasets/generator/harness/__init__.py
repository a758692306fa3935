"""The harness the stories are written against.

- ``Recorder`` (recorder.py): appends entries to a session the way Pi records them: prompts, responses
  whose tool calls really run, user ``!`` commands, labels, model changes, compactions, ``/tree``.
- ``step`` and the tool calls ``read``/``edit``/``write``/``ls``/``grep``/``bash`` (calls.py).
- ``Project`` and ``load_fixture`` (project.py): the in-memory working directory and Pi's file tools.
- ``ScriptSummarizer`` (summarizer.py): the deterministic stand-in for the summarization model.
- ``MODELS`` (models.py): the model table with Pi 0.87.1's prices and limits.
- ``terminal_screenshot`` (images.py): a small PNG to attach to a prompt.
"""

from .calls import Call, Step, bash, bash_truncated, edit, grep, ls, read, step, write
from .images import terminal_screenshot, tiny_png
from .models import MODELS, SYSTEM_PROMPT_TOKENS, Model, calculate_cost
from .project import Project, ToolError, load_fixture, unified_diff_details
from .recorder import Recorder, approx_tokens
from .summarizer import ScriptSummarizer

__all__ = [
    "MODELS", "SYSTEM_PROMPT_TOKENS", "Call", "Model", "Project", "Recorder", "ScriptSummarizer", "Step", "ToolError",
    "approx_tokens", "bash", "bash_truncated", "calculate_cost", "edit", "grep", "load_fixture", "ls", "read", "step",
    "terminal_screenshot", "tiny_png", "unified_diff_details", "write",
]
