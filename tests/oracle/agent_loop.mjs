// Drive Pi's own agent loop (AgentSession.prompt over an in-memory session) with a canned model.
//
// Usage: node agent_loop.mjs <pi dist dir> <requests.json> <results.json>
// Each request {"op": "agent_run", "turns": [{"prompt": text, "responses": [reply, ...]}, ...],
// "model": {"contextWindow", "maxTokens"}, "settings": {"enabled", "reserveTokens", "keepRecentTokens"}}
// runs the prompts one after the other. The canned model measures every agent request as Pi's own
// chars/4 estimate of the messages sent (estimateTokens) and refuses one larger than the context
// window with an overflow error, as a provider does; otherwise it answers with the turn's next
// reply ({"text"} or {"text", "tool": {"name", "arguments"}}), reporting usage input = that size and
// output = the estimate of the reply, so that Pi's usage-based checks read exactly chars/4 sizes.
// Summary requests get the oracle's canned summary ("SUMMARY:" + sha256(prompt)[:16]).
// The result lists what happened, in order: {"kind": "accepted" | "refused", "tokens"},
// {"kind": "compaction", "reason", "willRetry"}, {"kind": "compact_failed", "reason", "errorMessage"},
// and the session's entries (the recording a replay can start from).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { cannedSummary, createOracleSession, nextMillisecond, runBatch, streamOf, zeroCost } from "./shared.mjs";

const [distDir, requestPath, resultPath] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(distDir, rel)).href);
const idx = await load("index.js");
const { estimateTokens } = await load("core/compaction/compaction.js");

function assistant(content, usage, stopReason, errorMessage) {
    return {
        role: "assistant",
        content,
        api: "openai-completions",
        provider: "openai",
        model: "oracle-model",
        usage: { ...usage, cost: zeroCost() },
        stopReason,
        ...(errorMessage === undefined ? {} : { errorMessage }),
        timestamp: Date.now(),
    };
}

function cannedModel(state, log, manager) {
    return async (model, context) => {
        nextMillisecond();
        const summary = cannedSummary(context);
        if (summary) return summary;
        // the projected context of the request, as the replay's "chars" token source counts it
        const projected = manager.buildSessionProjection().messages;
        const tokens = projected.reduce((sum, m) => sum + estimateTokens(m), 0);
        const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 };
        if (tokens > model.contextWindow) {
            log.push({ kind: "refused", tokens });
            const error = `prompt is too long: ${tokens} tokens > ${model.contextWindow} maximum`;
            return streamOf(assistant([], zero, "error", error));
        }
        const next = state.replies.shift();
        if (!next) throw new Error("the canned model has no reply left for this turn");
        log.push({ kind: "accepted", tokens });
        const content = [{ type: "text", text: next.text }];
        if (next.tool) content.push({ type: "toolCall", id: `call_${state.calls++}`, name: next.tool.name, arguments: next.tool.arguments });
        const draft = assistant(content, zero, next.tool ? "toolUse" : "stop");
        const output = estimateTokens(draft);
        draft.usage = { input: tokens, output, cacheRead: 0, cacheWrite: 0, totalTokens: tokens + output, cost: zeroCost() };
        return streamOf(draft);
    };
}

async function agentRun(req, workDir) {
    const agentDir = mkdtempSync(join(workDir, "agent-"));
    writeFileSync(join(agentDir, "auth.json"), JSON.stringify({ openai: { type: "api_key", key: "canned" } }));
    for (const [name, text] of Object.entries(req.files ?? {})) writeFileSync(join(agentDir, name), text);
    const manager = idx.SessionManager.inMemory(agentDir);
    const session = await createOracleSession(idx, {
        agentDir,
        manager,
        settings: { compaction: req.settings },
        model: { ...req.model, provider: "openai" }, // the provider auth.json has a key for
    });
    const log = [];
    const state = { replies: [], calls: 0 };
    session.agent.streamFunction = cannedModel(state, log, manager);
    session.subscribe((event) => {
        if (event.type === "compaction_end") {
            if (event.result) log.push({ kind: "compaction", reason: event.reason, willRetry: !!event.willRetry });
            else if (!event.aborted) log.push({ kind: "compact_failed", reason: event.reason, errorMessage: event.errorMessage ?? null });
        }
    });
    for (const turn of req.turns) {
        state.replies = [...turn.responses];
        log.push({ kind: "prompt" });
        await session.prompt(turn.prompt);
    }
    const entries = manager.getEntries();
    const header = manager.getHeader();
    session.dispose?.();
    return { log, header, entries };
}

const workDir = mkdtempSync(join(tmpdir(), "pimem-agent-loop-"));
try {
    await runBatch({ agent_run: (req) => agentRun(req, workDir) }, requestPath, resultPath);
} finally {
    rmSync(workDir, { recursive: true, force: true });
}
