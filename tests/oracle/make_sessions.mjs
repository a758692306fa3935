// Write Pi session files with a Pi release's own SessionManager (persisted, as Pi writes them).
//
// Usage: node make_sessions.mjs <pi dist dir> <output dir>
// Writes codemode-nested-calls.jsonl and branches-and-edits.jsonl: every entry type the release's
// SessionManager appends, and message fields new in Pi 1.6.0 (assistant thinkingLevel/durationMs,
// tool-call argumentsError, tool-result nestedCalls/durationMs, cost.totalFromProvider).
// Ids and timestamps are Pi's own (random, current time).
import { mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [distDir, outDir] = process.argv.slice(2);
if (!distDir || !outDir) {
    process.stderr.write("usage: node make_sessions.mjs <pi dist dir> <output dir>\n");
    process.exit(2);
}
const { SessionManager } = await import(pathToFileURL(join(distDir, "core", "session-manager.js")).href);
mkdirSync(outDir, { recursive: true });

let clock = Date.UTC(2026, 10, 20, 9, 0, 0);
const now = () => (clock += 1500);

function usage(input, output, cacheRead, fromProvider) {
    const cost = { input: input * 3e-6, output: output * 15e-6, cacheRead: cacheRead * 3e-7, cacheWrite: 0 };
    cost.total = cost.input + cost.output + cost.cacheRead;
    if (fromProvider !== undefined) cost.totalFromProvider = fromProvider;
    return { input, output, cacheRead, cacheWrite: 0, totalTokens: input + output + cacheRead, cost };
}
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: now() });
function assistant(content, u, extra = {}) {
    return {
        role: "assistant",
        content,
        api: "anthropic-messages",
        provider: "anthropic",
        model: "claude-opus-4-6",
        responseId: `msg_${clock}`,
        thinkingLevel: "high",
        usage: u,
        stopReason: content.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
        timestamp: now(),
        durationMs: 2345,
        ...extra,
    };
}
function toolResult(toolCallId, toolName, text, extra = {}) {
    return {
        role: "toolResult",
        toolCallId,
        toolName,
        content: [{ type: "text", text }],
        isError: false,
        timestamp: now(),
        durationMs: 87,
        ...extra,
    };
}

function finish(manager, name) {
    const file = manager.getSessionFile();
    renameSync(file, join(outDir, name));
}

// 1. A codemode script whose nested calls read, edit and write files; a tool call whose arguments
//    were not JSON; usage entries; a compaction that keeps the latest turn.
{
    const dir = mkdtempSync(join(tmpdir(), "pimem-sessions-"));
    const sm = SessionManager.create("/work/project", dir);
    sm.appendModelChange("anthropic", "claude-opus-4-6");
    sm.appendThinkingLevelChange("high");
    sm.appendMessage(user("Rename parseDate to parseIsoDate across src/ and update the tests."));
    sm.appendMessage(
        assistant(
            [
                { type: "thinking", thinking: "A codemode script can grep, read and edit in one go.", thinkingSignature: "sig-1" },
                { type: "text", text: "I'll do the rename with one script." },
                {
                    type: "toolCall",
                    id: "toolu_01",
                    name: "code",
                    arguments: { script: "const hits = await grep('parseDate'); for (const f of hits) await edit(f);" },
                },
            ],
            usage(5200, 180, 0, true),
        ),
    );
    sm.appendMessage(
        toolResult("toolu_01", "code", "Edited 2 files; wrote src/dates/index.ts; 1 call unfinished.", {
            nestedCalls: {
                calls: [
                    { id: "n1", name: "grep", arguments: { pattern: "parseDate", path: "src" }, status: "ok", durationMs: 12 },
                    { id: "n2", name: "read", arguments: { path: "src/dates/parse.ts" }, status: "ok", durationMs: 3 },
                    { id: "n3", name: "edit", arguments: { path: "src/dates/parse.ts", oldText: "parseDate", newText: "parseIsoDate" }, status: "ok", durationMs: 5 },
                    { id: "n4", name: "edit", arguments: { path: "test/dates.test.ts", oldText: "parseDate", newText: "parseIsoDate" }, status: "error", durationMs: 4, error: "oldText not found" },
                    { id: "n5", name: "write", arguments: { path: "src/dates/index.ts", content: "export * from './parse';\n" }, status: "ok", durationMs: 2 },
                    { id: "n6", name: "read", argumentsBytes: 9000, status: "unfinished" },
                ],
                complete: false,
            },
            usage: usage(0, 0, 0, false),
        }),
    );
    sm.appendMessage(
        assistant(
            [
                { type: "text", text: "One edit failed; retrying it directly." },
                { type: "toolCall", id: "toolu_02", name: "edit", arguments: {}, argumentsError: "Expected ',' or '}' after property value in JSON at position 41: {\"path\": \"test/dates.test.ts\" \"oldText\"" },
            ],
            usage(5600, 90, 5200, true),
        ),
    );
    sm.appendMessage({
        ...toolResult("toolu_02", "edit", "Invalid arguments: Expected ',' or '}' after property value"),
        isError: true,
    });
    sm.appendMessage(
        assistant(
            [{ type: "toolCall", id: "toolu_03", name: "edit", arguments: { path: "test/dates.test.ts", oldText: "parseDate(", newText: "parseIsoDate(" } }],
            usage(5800, 70, 5600, false),
        ),
    );
    const editResult = sm.appendMessage(toolResult("toolu_03", "edit", "Successfully replaced text in test/dates.test.ts."));
    sm.appendUsage("cache_warm", "anthropic", "claude-opus-4-6", usage(5900, 1, 0, true), "kept the prompt cache warm");
    sm.appendContextEdit(editResult, { content: "(edit result elided)" });
    const kept = sm.appendMessage(user("Now run the tests."));
    sm.appendMessage(
        assistant([{ type: "toolCall", id: "toolu_04", name: "bash", arguments: { command: "npm test" } }], usage(6100, 40, 5800, true), {
            thinkingLevel: "medium",
        }),
    );
    sm.appendMessage(toolResult("toolu_04", "bash", "Tests: 48 passed, 48 total"));
    sm.appendMessage(assistant([{ type: "text", text: "All 48 tests pass." }], usage(6300, 20, 6100, true)));
    sm.appendCompaction(
        "## Goal\nRename parseDate to parseIsoDate.\n\n## Progress\nDone; tests pass.",
        kept,
        6320,
        { readFiles: ["src/dates/parse.ts"], modifiedFiles: ["src/dates/index.ts", "src/dates/parse.ts", "test/dates.test.ts"] },
        false,
        usage(6400, 300, 0, true),
    );
    sm.appendMessage(user("Thanks. Anything else to rename?"));
    sm.appendMessage(assistant([{ type: "text", text: "No other call sites remain." }], usage(1200, 15, 0, true)));
    sm.appendSessionInfo("parseDate rename");
    finish(sm, "codemode-nested-calls.jsonl");
    rmSync(dir, { recursive: true, force: true });
}

// 2. Branches with a branch summary, labels, custom entries and messages, a system message and
//    context edits that omit and replace entries.
{
    const dir = mkdtempSync(join(tmpdir(), "pimem-sessions-"));
    const sm = SessionManager.create("/work/project", dir);
    sm.appendModelChange("openai", "gpt-5.5");
    sm.appendThinkingLevelChange("medium");
    sm.appendMessage({ role: "system", content: "You are a careful coding agent.", timestamp: now() });
    const q = sm.appendMessage(user("Why is the CSV export slow? 😀"));
    const a1 = sm.appendMessage(
        assistant(
            [
                { type: "thinking", thinking: "Probably string concatenation in a loop.", thinkingSignature: "" },
                { type: "toolCall", id: "call_1", name: "read", arguments: { path: "src/export/csv.ts" } },
            ],
            usage(3000, 60, 0, true),
            { provider: "openai", api: "openai-responses", model: "gpt-5.5", thinkingLevel: "medium" },
        ),
    );
    sm.appendMessage(toolResult("call_1", "read", "x".repeat(2500) + "😀 end of file"));
    sm.appendLabelChange(a1, "first look");
    sm.appendCustomEntry("todo-state", { open: ["profile export"] });
    const hint = sm.appendCustomMessageEntry("hint", "The export runs once per row.", true, { source: "lint" });
    sm.appendMessage(
        assistant([{ type: "text", text: "Each row re-opens the file: that is the slowdown." }], usage(4200, 40, 3000, true), {
            provider: "openai",
            api: "openai-responses",
            model: "gpt-5.5",
        }),
    );
    const tip1 = sm.appendContextEdit(hint, null);
    sm.branch(q);
    sm.branchWithSummary(q, "The user explored the CSV reader; it re-opens the file per row.", { readFiles: ["src/export/csv.ts"], modifiedFiles: [] }, false, usage(800, 60, 0, true));
    sm.appendMessage(user("Let's try streaming instead."));
    const a2 = sm.appendMessage(
        assistant(
            [{ type: "toolCall", id: "call_2", name: "write", arguments: { path: "src/export/stream.ts", content: "export {}" } }],
            usage(4600, 50, 0, true),
            { provider: "openai", api: "openai-responses", model: "gpt-5.5" },
        ),
    );
    sm.appendMessage(toolResult("call_2", "write", "Wrote src/export/stream.ts"));
    sm.appendContextEdit(a2, { content: "I wrote src/export/stream.ts." });
    sm.appendLabelChange(a1, undefined);
    sm.appendMessage(assistant([{ type: "text", text: "Streaming writer added." }], usage(4800, 12, 4600, true)));
    finish(sm, "branches-and-edits.jsonl");
    rmSync(dir, { recursive: true, force: true });
    process.stdout.write(JSON.stringify({ otherTip: tip1 }) + "\n");
}
