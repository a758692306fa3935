// What the oracle drivers share: the batch protocol, the canned summary answer, the model and
// Pi's own AgentSession over an in-memory session.
//
// A driver imports Pi itself (each its own release) and hands this module what it needs: nothing
// here loads Pi, so a driver can set up its module hooks before Pi is imported.
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";

export const sha256 = (text) => createHash("sha256").update(text, "utf8").digest("hex");

export function zeroCost() {
    return { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 };
}

/**
 * The canned answer to a summary request: text "SUMMARY:" + sha256(prompt)[:16], usage from the
 * sizes; `fail` ({kind, stopReason, errorMessage, toolCall, emptyText}) turns it into a failure.
 */
export function cannedReply(kind, prompt, fail) {
    const input = prompt.length;
    const output = 100 + (kind === "turn_prefix" ? 1 : 0);
    const usage = {
        input,
        output,
        cacheRead: 0,
        cacheWrite: 0,
        totalTokens: input + output,
        cost: zeroCost(),
    };
    const content = [{ type: "text", text: `SUMMARY:${sha256(prompt).slice(0, 16)}` }];
    let stopReason = "stop";
    let errorMessage;
    if (fail && (fail.kind === undefined || fail.kind === null || fail.kind === kind)) {
        if (fail.stopReason) stopReason = fail.stopReason;
        if (fail.errorMessage !== undefined) errorMessage = fail.errorMessage;
        if (fail.toolCall) {
            content.push({ type: "toolCall", id: "call_1", name: "read", arguments: { path: "x" } });
            if (!fail.stopReason) stopReason = "toolUse";
        }
        if (fail.emptyText) content.splice(0, 1);
    }
    return {
        role: "assistant",
        content,
        api: "openai-completions",
        provider: "oracle",
        model: "oracle-model",
        usage,
        stopReason,
        ...(errorMessage !== undefined ? { errorMessage } : {}),
        timestamp: 0,
    };
}

/** The model a request names ({id, provider, reasoning, contextWindow, maxTokens}, all optional). */
export function modelFrom(m) {
    const model = m ?? {};
    return {
        id: model.id ?? "oracle-model",
        name: model.id ?? "oracle-model",
        api: "openai-completions",
        provider: model.provider ?? "oracle",
        baseUrl: "http://127.0.0.1:9",
        reasoning: model.reasoning ?? false,
        input: ["text"],
        cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 },
        contextWindow: model.contextWindow ?? 200000,
        maxTokens: model.maxTokens ?? 32000,
    };
}

/**
 * Pi's own AgentSession (`idx`: Pi's index.js) on `manager`, working in `agentDir`, with no
 * retries and `settings` on top, no extensions, skills, prompt templates or themes but the
 * inline `extensionFactories`, and the model `model` names (see modelFrom).
 */
export async function createOracleSession(idx, { agentDir, manager, settings, model, extensionFactories }) {
    const settingsManager = idx.SettingsManager.inMemory({ retry: { enabled: false }, ...settings });
    const resourceLoader = new idx.DefaultResourceLoader({
        cwd: agentDir,
        agentDir,
        settingsManager,
        noExtensions: true,
        noSkills: true,
        noPromptTemplates: true,
        noThemes: true,
        ...(extensionFactories === undefined ? {} : { extensionFactories }),
    });
    await resourceLoader.reload();
    const { session } = await idx.createAgentSession({
        cwd: agentDir,
        agentDir,
        sessionManager: manager,
        settingsManager,
        resourceLoader,
        model: modelFrom(model),
    });
    return session;
}

/**
 * The batch protocol: read {"requests": [{"op", ...}]} from `requestPath` ("-": stdin), answer
 * each with `ops[op](req)` and write {"results": [{"ok": true, "result"} | {"ok": false,
 * "error"}]} to `resultPath` (none: stdout). One failed request does not stop the batch.
 */
export async function runBatch(ops, requestPath, resultPath) {
    const text = requestPath === "-" ? readFileSync(0, "utf8") : readFileSync(requestPath, "utf8");
    const { requests } = JSON.parse(text);
    const results = [];
    for (const req of requests) {
        const op = ops[req.op];
        if (!op) {
            results.push({ ok: false, error: `unknown op: ${req.op}` });
            continue;
        }
        try {
            results.push({ ok: true, result: await op(req) });
        } catch (err) {
            results.push({ ok: false, error: String(err?.stack ?? err) });
        }
    }
    const payload = JSON.stringify({ results });
    if (resultPath) writeFileSync(resultPath, payload, "utf8");
    else process.stdout.write(payload);
}

/** A finished response as the agent loop consumes it: an event stream with a result(). */
export function streamOf(message) {
    const event = message.stopReason === "error"
        ? { type: "error", reason: "error", error: message }
        : { type: "done", reason: message.stopReason, message };
    return {
        async *[Symbol.asyncIterator]() {
            yield event;
        },
        result: async () => message,
    };
}

/** Wait for the clock's next millisecond. Pi tells an answer from before a compaction by comparing
 * millisecond timestamps (the message's ``timestamp`` <= the compaction entry's), so an instant
 * answer stamped in the millisecond of the compaction written just before its request would read
 * as older than that compaction, at random. A real model takes longer than a millisecond. */
export function nextMillisecond() {
    const asked = Date.now();
    while (Date.now() <= asked) {
        // spin: at most one millisecond
    }
}

const SUMMARY_SYSTEM = "You are a context summarization assistant.";

/** The canned answer (cannedReply) when a model request is one of Pi's summary requests, else null. */
export function cannedSummary(context) {
    const [system, user] = context.messages;
    const systemText = typeof system?.content === "string" ? system.content : "";
    if (system?.role !== "system" || !systemText.startsWith(SUMMARY_SYSTEM)) return null;
    const prompt = user.content.map((b) => b.text).join("");
    const reply = cannedReply(prompt.startsWith("# Conversation\n") ? "turn_prefix" : "history", prompt);
    return { result: async () => reply };
}
