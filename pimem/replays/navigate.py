"""``/tree`` navigation on a copy of a session, step for step as Pi 0.87.1's ``AgentSession.navigateTree``."""

from __future__ import annotations

from pimem.core.agent_session import Hooks, TreeOutcome, run_tree_navigation
from pimem.core.compaction.compaction import ModelInfo
from pimem.core.llm import Summarizer
from pimem.core.session_manager import Session, build_session_projection
from pimem.replays.config import resolve_model, with_window
from pimem.sessions.load import SessionLike, as_session
from pimem.summarizers.registry import default_summarizer

__all__ = ["navigate"]


def navigate(
    session: SessionLike,
    target_id: str,
    summarize: bool = True,
    summarizer: Summarizer | None = None,
    hooks: Hooks | None = None,
    *,
    model: ModelInfo | None = None,
    context_window: int | None = None,
    reserve_tokens: int = 16384,
    custom_instructions: str | None = None,
    replace_instructions: bool | None = None,
    label: str | None = None,
    old_leaf_id: str | None = None,
    timestamp: str | int | float | None = None,
    with_outcome: bool = False,
) -> Session | tuple[Session, TreeOutcome]:
    """A copy of ``session`` after Pi 0.87.1's ``/tree`` navigation to ``target_id``.

    Follows ``AgentSession.navigateTree`` step by step (through
    :func:`pimem.core.agent_session.run_tree_navigation`): collect the entries from the old leaf (the
    session's leaf, or ``old_leaf_id``) back to the common ancestor; fire ``before_tree``
    (a hook may cancel, supply the summary — the entry then gets ``fromHook: true`` — or
    override ``custom_instructions`` / ``replace_instructions`` / ``label``); summarize with
    ``summarizer`` (default: the offline extractive one) when ``summarize`` and there is
    something to summarize; then move the leaf:

    * target a ``user`` message or a ``custom_message``: the leaf goes to its **parent**
      (``None`` for a root entry) and the message text is what Pi puts in the editor for the
      user to edit and resend. It is returned as ``outcome.editor_text`` (``with_outcome``);
      nothing is appended for it — in Pi it only becomes an entry if the user sends it.
    * any other entry: the leaf goes to the entry itself.

    With a summary, a ``branch_summary`` entry (``fromId`` = old leaf, or ``"root"``) is
    appended at that new leaf position and a ``label`` entry naming the summary entry follows
    when ``label`` is set; without one, a ``label`` names the target itself. ``model`` (a
    ``ModelInfo``; default from the session's current model, ``context_window`` overrides)
    gives the budget ``context_window − reserve_tokens`` (Pi's ``branchSummary.reserveTokens``)
    and ``maxTokens = min(4096, model.max_tokens)``. A summarizer failure raises
    ``RuntimeError`` with Pi's message, as Pi's ``navigateTree`` throws. New entries get ids
    from the copy's generator and ``timestamp`` (default: now, as Pi).

    The source session is not modified. Returns the new ``Session``, or ``(session,
    TreeOutcome)`` with ``with_outcome`` (``cancelled``, ``aborted``, ``editor_text``,
    ``summary_entry``, ``entries_to_summarize``, ``common_ancestor_id``).

    Args:
        session: the session, a replay result (its replayed session) or a session file's path.
        target_id: the entry to move to.
        summarize: leave a summary of the abandoned branch.
        summarizer: the model that writes it (default: the offline extractive one).
        hooks: extension hooks (``before_tree`` may cancel, supply the summary or override options).
        model: the model's limits (default: the session's current model).
        context_window: overrides the model's window.
        reserve_tokens: tokens left out of the window for the summary's budget.
        custom_instructions: instructions added to (or replacing) the prompt's.
        replace_instructions: ``custom_instructions`` replace the prompt's instead of being added.
        label: a label for the summary entry (or the target, without one).
        old_leaf_id: the leaf being left (default: the session's).
        timestamp: the new entries' time (default: now).
        with_outcome: also return the navigation's outcome.
    """
    original = as_session(session)
    copied = original.copy()
    if old_leaf_id is not None:
        copied.leaf_id = old_leaf_id
    if summarizer is None and summarize:
        summarizer = default_summarizer()
    if model is None:
        ctx_model = build_session_projection(copied).model
        model = resolve_model(None, context_window, ctx_model)
    elif context_window is not None:
        model = with_window(model, context_window)
    outcome = run_tree_navigation(
        copied, target_id, summarizer, summarize=summarize, hooks=hooks, model=model,
        reserve_tokens=reserve_tokens, custom_instructions=custom_instructions,
        replace_instructions=replace_instructions, label=label, timestamp=timestamp,
    )
    return (copied, outcome) if with_outcome else copied
