"""The shapes of Pi 0.87.1's session entries and messages, as TypedDicts.

Entries and messages stay plain dicts in Pi's JSON shape (camelCase keys, unknown fields kept);
these types say which keys Pi writes, after ``core/session-manager.d.ts``, ``core/messages.d.ts``
and pi-ai's ``types.d.ts``. A session read from disk may hold anything: pimem checks what it
relies on while loading (see :func:`pimem.load_session`), so the types describe well-formed input,
not a guarantee about every file.

Where they appear: :func:`pimem.convert_to_llm` returns :data:`Message` s,
:attr:`pimem.SessionContext.messages` (:func:`pimem.build_session_context`) holds
:data:`AgentMessage` s, :func:`pimem.get_current_system_message` returns a :class:`SystemMessage`,
``Session.header`` is a :class:`SessionHeader`, ``Session.append_message`` / ``append_context_edit``
/ ``append_compaction`` / ``branch_with_summary`` return the entry they wrote and
``Session.append_entry`` takes any :data:`SessionEntry`. The functions that only read a message
(:func:`pimem.estimate_tokens`, :func:`pimem.serialize_conversation`, ``message_text``, …) take
``Mapping[str, Any]``, which a TypedDict and a plain dict both are.

What stays ``dict``: ``Session.entries``, ``get_entry`` and ``get_branch`` (and so the entry lists
of the pipeline: paths, projections, the context tracker, the replay engine), and the messages of
``session_entry_to_context_messages`` and ``SessionProjection``. Their code reads fields of entries
of every type alike (``entry.get("message")``), and mypy types ``.get`` of a key that some members of a
TypedDict union lack as ``object``: each reader, a user's included, would have to narrow by
``type`` first, and the internals that take or mutate ``dict`` would all have to change with them.
Usage dicts (``SummaryResponse.usage``, ``CompactionResult.usage``) stay ``dict`` too: every
summarizer builds its own, often with fields of its provider.

pimem's own rows have their TypedDicts beside the code that makes them
(:class:`pimem.replays.result.ReplaySummary`, what ``ReplayResult.summary()`` returns;
:class:`pimem.replays.cost.ReplayCost`, what :func:`pimem.replay_cost` returns;
:class:`pimem.experiments.uncertainty.PairedDifference`, what :func:`pimem.paired_difference`
returns). The rows of :func:`pimem.run_measures` (its keys follow the measures asked for) and
:func:`pimem.compaction_metrics` (keys made per fact kind and from the conformance report) stay
``dict[str, Any]``.
"""


from typing import Any, Literal, NotRequired, TypedDict, Union

__all__ = [
    "TextContent", "ThinkingContent", "ImageContent", "ToolCall", "Cost", "Usage", "StopReason",
    "UserMessage", "AssistantMessage", "ToolResultMessage", "SystemMessage", "BashExecutionMessage",
    "CustomMessage", "BranchSummaryMessage", "CompactionSummaryMessage", "AgentMessage", "Message",
    "SessionHeader", "SessionMessageEntry", "ThinkingLevelChangeEntry", "ModelChangeEntry", "UsageEntry",
    "CompactionEntry", "BranchSummaryEntry", "CustomEntry", "CustomMessageEntry", "ContextEditEntry",
    "LabelEntry", "SessionInfoEntry", "SessionEntry",
]

# -- content blocks (pi-ai) ------------------------------------------------------------------------


class TextContent(TypedDict):
    type: Literal["text"]
    text: str
    textSignature: NotRequired[str]


class ThinkingContent(TypedDict):
    type: Literal["thinking"]
    thinking: str
    thinkingSignature: NotRequired[str]
    redacted: NotRequired[bool]


class ImageContent(TypedDict):
    type: Literal["image"]
    data: str
    mimeType: str


class ToolCall(TypedDict):
    type: Literal["toolCall"]
    id: str
    name: str
    arguments: dict[str, Any]
    thoughtSignature: NotRequired[str]
    namespace: NotRequired[str]


class Cost(TypedDict):
    input: float
    output: float
    cacheRead: float
    cacheWrite: float
    total: float


class Usage(TypedDict):
    input: int
    output: int
    cacheRead: int
    cacheWrite: int
    cacheWrite1h: NotRequired[int]
    reasoning: NotRequired[int]
    totalTokens: NotRequired[int]  # absent in sessions of older releases; Pi then sums the parts
    cost: Cost


StopReason = Literal["pending", "stop", "length", "toolUse", "error", "aborted", "deferred"]

# -- messages (pi-ai and core/messages.js) ---------------------------------------------------------


class UserMessage(TypedDict):
    role: Literal["user"]
    content: str | list[TextContent | ImageContent]
    timestamp: int


class AssistantMessage(TypedDict):
    role: Literal["assistant"]
    content: list[TextContent | ThinkingContent | ToolCall]
    api: str
    provider: str
    model: str
    usage: Usage
    stopReason: StopReason
    errorMessage: NotRequired[str]
    responseId: NotRequired[str]
    timestamp: int


class ToolResultMessage(TypedDict):
    role: Literal["toolResult"]
    toolCallId: str
    toolName: str
    content: list[TextContent | ImageContent]
    details: NotRequired[Any]
    isError: bool
    timestamp: int


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: str | list[TextContent]
    sections: NotRequired[dict[str, str | None]]
    toolsAdded: NotRequired[list[dict[str, Any]]]
    toolsRemoved: NotRequired[list[dict[str, Any]]]
    timestamp: int


class BashExecutionMessage(TypedDict):
    role: Literal["bashExecution"]
    command: str
    output: str
    exitCode: int | None
    cancelled: bool
    truncated: bool
    fullOutputPath: NotRequired[str]
    excludeFromContext: NotRequired[bool]
    timestamp: int


class CustomMessage(TypedDict):
    role: Literal["custom"]
    customType: str
    content: str | list[TextContent | ImageContent]
    display: bool
    details: NotRequired[Any]
    timestamp: int


class BranchSummaryMessage(TypedDict):
    role: Literal["branchSummary"]
    summary: str
    fromId: str | None
    timestamp: int


class CompactionSummaryMessage(TypedDict):
    role: Literal["compactionSummary"]
    summary: str
    tokensBefore: int
    timestamp: int


Message = Union[UserMessage, AssistantMessage, ToolResultMessage, SystemMessage]
"""What a model is sent (``convert_to_llm`` output)."""

AgentMessage = Union[
    UserMessage, AssistantMessage, ToolResultMessage, SystemMessage, BashExecutionMessage, CustomMessage,
    BranchSummaryMessage, CompactionSummaryMessage,
]
"""What a session's context holds (``build_session_context(...).messages``)."""

# -- session file lines (core/session-manager.js) --------------------------------------------------


class SessionHeader(TypedDict):
    type: Literal["session"]
    version: NotRequired[int]
    id: str
    timestamp: str
    cwd: str
    parentSession: NotRequired[str]


class _EntryBase(TypedDict):
    id: str
    parentId: str | None
    timestamp: str


class SessionMessageEntry(_EntryBase):
    type: Literal["message"]
    message: AgentMessage


class ThinkingLevelChangeEntry(_EntryBase):
    type: Literal["thinking_level_change"]
    thinkingLevel: str


class ModelChangeEntry(_EntryBase):
    type: Literal["model_change"]
    provider: str
    modelId: str


class UsageEntry(_EntryBase):
    type: Literal["usage"]
    kind: str
    provider: str
    model: str
    usage: Usage
    note: NotRequired[str]


class CompactionEntry(_EntryBase):
    type: Literal["compaction"]
    summary: str
    firstKeptEntryId: str
    tokensBefore: int
    details: NotRequired[Any]
    usage: NotRequired[Usage]
    fromHook: NotRequired[bool]
    systemMessage: NotRequired[SystemMessage]


class BranchSummaryEntry(_EntryBase):
    type: Literal["branch_summary"]
    fromId: str
    summary: str
    details: NotRequired[Any]
    usage: NotRequired[Usage]
    fromHook: NotRequired[bool]


class CustomEntry(_EntryBase):
    type: Literal["custom"]
    customType: str
    data: NotRequired[Any]


class CustomMessageEntry(_EntryBase):
    type: Literal["custom_message"]
    customType: str
    content: str | list[TextContent | ImageContent]
    details: NotRequired[Any]
    display: bool


class _Replacement(TypedDict):
    content: Any


class ContextEditEntry(_EntryBase):
    type: Literal["context_edit"]
    targetId: str
    replacement: _Replacement | None


class LabelEntry(_EntryBase):
    type: Literal["label"]
    targetId: str
    label: NotRequired[str | None]  # absent or empty clears the target's label


class SessionInfoEntry(_EntryBase):
    type: Literal["session_info"]
    name: NotRequired[str]


SessionEntry = Union[
    SessionMessageEntry, ThinkingLevelChangeEntry, ModelChangeEntry, UsageEntry, CompactionEntry,
    BranchSummaryEntry, CustomEntry, CustomMessageEntry, ContextEditEntry, LabelEntry, SessionInfoEntry,
]
"""One line of a session file after the header."""
