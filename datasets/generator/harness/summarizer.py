"""A deterministic summarizer: the offline stand-in for the summarization model.

Compactions and branch summaries go through pimem's reimplementation of Pi's pipeline; only the
model call is replaced by this extractive summarizer.
"""

from __future__ import annotations

import math
import re
from typing import Iterable

from pimem import SummaryRequest, SummaryResponse, utf16_len

_PATH_RE = re.compile(r"(?<![\w/.-])((?:[\w.\-À-ÿ]+/)+[\w.\-À-ÿ]+\.\w+)")
_CONSTRAINT_RE = re.compile(r"\b(don't|do not|never|always|keep|must|make sure|不要|请)\b", re.IGNORECASE)
_ERROR_RE = re.compile(r"((?:[A-Z]\w*Error|error TS\d+|FAIL|AssertionError|Traceback|exit(?:ed)? (?:with )?code \d+)[^\n]{0,140})")


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?。！？])\s+|\n+", text)
    return [p.strip() for p in parts if p.strip()]


class ScriptSummarizer:
    """Deterministic extractive summaries in Pi's structured template.

    Reads the serialized conversation in the request and pulls out the user's asks,
    constraints, touched files, errors and the assistant's conclusions. Answers are
    pure functions of the request text.
    """

    def complete(self, request: SummaryRequest) -> SummaryResponse:
        """Summarize the conversation in ``request`` (a compaction, a split-turn prefix or a branch)."""
        prompt = request.prompt
        conv = prompt
        m = re.search(r"<conversation>\n?(.*?)\n?</conversation>", prompt, re.S)
        if m:
            conv = m.group(1)
        prev = None
        m = re.search(r"<previous-summary>\n?(.*?)\n?</previous-summary>", prompt, re.S)
        if m:
            prev = m.group(1)
        blocks = re.split(r"\n\n(?=\[(?:User|Assistant|Assistant thinking|Assistant tool calls|Tool result)\]: )", conv)
        users: list[str] = []
        assistants: list[str] = []
        errors: list[str] = []
        files: list[str] = []
        for block in blocks:
            if block.startswith("[User]: "):
                users.append(block[8:].strip())
            elif block.startswith("[Assistant]: "):
                assistants.append(block[13:].strip())
            for e in _ERROR_RE.findall(block):
                e = e.strip()
                if e not in errors:
                    errors.append(e)
            for p in _PATH_RE.findall(block):
                if p not in files and not p.startswith(("http", "www.")):
                    files.append(p)
        constraints: list[str] = []
        for u in users:
            for s in _sentences(u):
                if _CONSTRAINT_RE.search(s) and s not in constraints:
                    constraints.append(s[:200])
        done = [_sentences(a)[0][:180] for a in assistants if _sentences(a)]

        def bullets(items: Iterable[str], empty: str = "(none)", prefix: str = "- ") -> str:
            items = list(items)
            return "\n".join(prefix + i for i in items) if items else f"- {empty}"

        if request.kind == "turn_prefix":
            ask = users[0] if users else "(continuing the previous request)"
            text = (
                "## Original Request\n" + _sentences(ask)[0][:300] if _sentences(ask) else "## Original Request\n(none)"
            )
            text += "\n\n## Early Progress\n" + bullets(done[:6], "(no progress yet)")
            text += "\n\n## Context for Suffix\n" + bullets(files[:8] + errors[:3])
            return SummaryResponse(text=text, usage=None)

        if prev is not None:
            prev_goal = re.search(r"## Goal\n(.*?)\n\n##", prev, re.S)
            prev_cons = re.search(r"## Constraints & Preferences\n(.*?)\n\n##", prev, re.S)
            prev_done = re.search(r"### Done\n(.*?)\n\n###", prev, re.S)
            goal = prev_goal.group(1) if prev_goal else ""
            for u in users[:1]:
                first = _sentences(u)[0][:200] if _sentences(u) else ""
                if first and first not in goal:
                    goal += f"\n- Then: {first}"
            old_cons = [c[2:] for c in (prev_cons.group(1).split("\n") if prev_cons else []) if c.startswith("- ")]
            constraints = [c for c in old_cons if c != "(none)"] + [c for c in constraints if c not in old_cons]
            old_done = [d[6:] for d in (prev_done.group(1).split("\n") if prev_done else []) if d.startswith("- [x] ")]
            done = old_done + [d for d in done if d not in old_done]
        else:
            goal = "\n".join(f"- {_sentences(u)[0][:240]}" for u in users[:3] if _sentences(u)) or "- (unknown)"
        if request.kind == "branch":
            title = "## Goal\n"
        else:
            title = "## Goal\n"
        in_progress = [_sentences(users[-1])[0][:200]] if users and _sentences(users[-1]) else []
        next_steps = [f"{i + 1}. {s}" for i, s in enumerate((in_progress + ["Run the test suite and report the result"])[:3])]
        text = (
            title
            + goal.strip()
            + "\n\n## Constraints & Preferences\n"
            + bullets(constraints[:8])
            + "\n\n## Progress\n### Done\n"
            + bullets(done[-10:], "(nothing yet)", prefix="- [x] ")
            + "\n\n### In Progress\n"
            + bullets(in_progress, "(none)", prefix="- [ ] ")
            + "\n\n### Blocked\n"
            + bullets(errors[-2:], "(none)")
            + "\n\n## Key Decisions\n"
            + bullets([f"**{a.split(':')[0][:60]}**: {a[:160]}" for a in assistants if "decid" in a.lower() or "instead" in a.lower()][:5])
            + "\n\n## Next Steps\n"
            + "\n".join(next_steps)
            + "\n\n## Critical Context\n"
            + bullets(files[:10] + errors[:4])
        )
        out_tokens = math.ceil(utf16_len(text) / 4)
        in_tokens = math.ceil(utf16_len(request.system_prompt + request.prompt) / 4)
        usage = {
            "input": in_tokens,
            "output": out_tokens,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": in_tokens + out_tokens,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        }
        return SummaryResponse(text=text, usage=usage)
