"""Per-message memos of the port's answers: token estimates and serialized texts, kept by message object.

Messages are Pi's JSON and the pipeline never changes them, so an answer stays valid while the message
object lives; each memo holds a reference to the message so that its identity is not reused while
remembered. Every answer is the port's (:func:`~pimem.core.compaction.compaction.estimate_tokens`,
:func:`~pimem.core.compaction.utils.serialize_message` of :func:`~pimem.core.messages.convert_to_llm`),
computed once per message.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable, Mapping, Sequence

from pimem.core.compaction.compaction import estimate_tokens
from pimem.core.compaction.utils import join_message_texts, serialize_conversation, serialize_message
from pimem.core.messages import convert_to_llm
from pimem.core.porting import derived

__all__ = ["TokenCache", "SerializationCache", "serialize_messages"]


class TokenCache:
    """Per-message :func:`~pimem.core.compaction.compaction.estimate_tokens` memo keyed by object identity.

    Entries are Pi's JSON and are never mutated by the pipeline, so an estimate stays valid
    as long as the message object lives; the cache keeps a reference to each message so
    that an identity is never reused while cached. It remembers the messages estimated last:
    two generations of at most ``limit`` messages each (a message read from the older one moves
    up), so a replay of millions of entries holds the estimates of its recent context, not of
    every message it passed.

    Args:
        limit: the messages of one generation.
    """

    __slots__ = ("_memo", "_held", "_older", "_older_held", "limit", "hits", "misses")

    def __init__(self, limit: int = 1 << 17) -> None:
        self._memo: dict[int, int] = {}  # id(message) → its estimate
        self._held: list[Mapping[str, Any]] = []  # the messages estimated: no identity is reused while cached
        self._older: dict[int, int] = {}  # the generation before, and its messages
        self._older_held: list[Mapping[str, Any]] = []
        self.limit = limit
        self.hits = 0
        self.misses = 0

    @derived("compaction/compaction.js", "estimateTokens", port=estimate_tokens)
    def estimate(self, message: Mapping[str, Any]) -> int:
        """``estimate_tokens(message)``, computed once per message object while remembered."""
        tokens = self._memo.get(id(message))
        if tokens is not None:
            return tokens
        tokens = self._older.get(id(message))
        if tokens is None:
            tokens = estimate_tokens(message)
        if len(self._held) >= self.limit:
            self._older, self._older_held = self._memo, self._held
            self._memo, self._held = {}, []
        self._memo[id(message)] = tokens
        self._held.append(message)
        return tokens

    def clear(self) -> None:
        self._memo, self._held, self._older, self._older_held = {}, [], {}, []

    def __len__(self) -> int:
        return len(self._memo.keys() | self._older.keys())


class SerializationCache:
    """Serialized text per agent message, keyed by object identity, and the last conversation.

    ``cache.text(m)`` is ``serialize_conversation(convert_to_llm([m]))``. Messages are Pi's
    JSON and the pipeline never mutates them: a cached text stays valid while the message
    object is unchanged. The cache holds a reference to each message, so an identity cannot
    be reused while its text is cached. Do not mutate a message after it has been cached
    (call :meth:`clear` if you must).

    :func:`serialize_messages` also remembers the last sequence it serialized: a sequence
    that starts with the same message objects reuses that text and only serializes and
    appends the new messages (the messages to summarize along a growing session).
    """

    __slots__ = ("_memo", "_last_messages", "_last_text")

    def __init__(self) -> None:
        self._memo: dict[int, tuple[dict, str]] = {}
        self._last_messages: list[dict] = []
        self._last_text = ""

    def text(self, message: dict) -> str:
        """``serialize_conversation(convert_to_llm([message]))``, computed once per message object."""
        hit = self._memo.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        llm = convert_to_llm((message,))
        text = serialize_message(llm[0]) if llm else ""
        self._memo[id(message)] = (message, text)
        return text

    def conversation(self, messages: Sequence[dict]) -> str:
        """``serialize_conversation(convert_to_llm(messages))`` from cached parts."""
        if not isinstance(messages, list):
            messages = list(messages)
        last = self._last_messages
        n = len(last)
        text = self.text
        if n and len(messages) >= n and all(map(operator.is_, last, messages)):
            if len(messages) == n:
                return self._last_text
            result = join_message_texts((self._last_text, join_message_texts(map(text, messages[n:]))))
        else:
            result = join_message_texts(map(text, messages))
        self._last_messages = messages[:]
        self._last_text = result
        return result

    def clear(self) -> None:
        self._memo.clear()
        self._last_messages = []
        self._last_text = ""

    def __len__(self) -> int:
        return len(self._memo)


def _serialized(messages: Iterable[dict]) -> str:
    """The port's text: ``serialize_conversation(convert_to_llm(messages))``."""
    return serialize_conversation(convert_to_llm(messages))


@derived("compaction/utils.js", "serializeConversation", port=serialize_conversation)
def serialize_messages(messages: Iterable[dict], cache: SerializationCache | None = None) -> str:
    """``serialize_conversation(convert_to_llm(messages))``, reusing ``cache``'s texts if given.

    Args:
        messages: agent messages, in order.
        cache: per-message texts to reuse.
    """
    if cache is None:
        return _serialized(messages)
    return cache.conversation(messages if isinstance(messages, list) else list(messages))
