// Drive Pi's own agent loop (AgentSession.prompt) through a recorded session, answering every
// request with the recorded response: the whole-replay oracle of `pimem.replay(..., token_source="estimate")`.
//
// Usage: node replay_loop.mjs <pi dist dir> <requests.json> <results.json>
// Each request {"op": "replay_run", "path": <session file>, "model": {"contextWindow", "maxTokens"},
// "settings": {"enabled", "reserveTokens", "keepRecentTokens"}} opens a private copy of the file with
// Pi's SessionManager, walks its current branch and sends each recorded user message with
// `session.prompt` (a user message recorded right after tool results is queued with `session.steer`
// when the response asking for those tools comes back, as it was typed while the tools ran; a recorded
// `bashExecution` goes in with `recordBashResult`; a recorded model change with `setModel`). The
// canned model measures each agent request as Pi's own `estimateProjectedContextTokens` of the
// session's projection (what pimem's "estimate" source reads) and refuses one larger than the context
// window with an overflow error, as a provider does; otherwise it answers with the next recorded
// response of the run (content, usage, stop reason, error), stamped with the live clock. A run that
// fails (a refusal compaction could not fix) drops the rest of its recorded responses. Canned tools
// answer each tool call with its recorded result. Summary requests get the oracle's canned summary.
// The driver keeps the system messages Pi writes on its own (its system prompt and tool declarations)
// out of the session: the recordings hold none, and pimem replays the recording as it is.
// The result: the compactions in order ({reason, willRetry, tokensBefore, firstKept, after}: the
// positions on the recorded branch of the first kept entry and of the last recorded entry before the
// compaction),
// the failed compactions, the number of requests answered and refused, and the CPU time of the run.
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { cannedSummary, createOracleSession, modelFrom, nextMillisecond, runBatch, streamOf } from "./shared.mjs";

const [distDir, requestPath, resultPath] = process.argv.slice(2);
const load = (rel) => import(pathToFileURL(join(distDir, rel)).href);
const idx = await load("index.js");
const { estimateProjectedContextTokens } = await load("core/compaction/compaction.js");

function textOf(content) {
    if (typeof content === "string") return content;
    return (content ?? []).filter((b) => b?.type === "text").map((b) => b.text).join("");
}

/** The recorded branch as a script: prompts, each a list of segments (the prompt, then each user
 * message recorded right after tool results) with the recorded responses that follow it. */
function scriptOf(branch) {
    const steps = [];
    const results = new Map(); // toolCallId -> [{message, id}] recorded tool results in order
    let run = null;
    let lastRole = null;
    for (const entry of branch) {
        if (entry.type === "model_change") {
            steps.push({ kind: "model", provider: entry.provider, modelId: entry.modelId });
            continue;
        }
        if (entry.type !== "message") continue;
        const m = entry.message;
        if (m.role === "user") {
            const segment = { text: textOf(m.content), id: entry.id, replies: [] };
            if (run && lastRole === "toolResult") run.segments.push(segment);
            else {
                run = { kind: "prompt", segments: [segment] };
                steps.push(run);
            }
        } else if (m.role === "assistant") {
            if (!run) throw new Error(`an assistant message before any prompt (${entry.id})`);
            run.segments.at(-1).replies.push({ message: m, id: entry.id });
        } else if (m.role === "toolResult") {
            const list = results.get(m.toolCallId) ?? [];
            list.push({ message: m, id: entry.id });
            results.set(m.toolCallId, list);
        } else if (m.role === "bashExecution") {
            steps.push({ kind: "bash", message: m, id: entry.id });
            run = null;
        }
        lastRole = m.role;
    }
    return { steps, results };
}

function cannedTools(names, results, ids) {
    return [...names].map((name) => ({
        name,
        label: name,
        description: `the recorded ${name}`,
        parameters: { type: "object" },
        async execute(toolCallId) {
            const recorded = results.get(toolCallId)?.shift();
            if (!recorded) throw new Error(`no recorded result for tool call ${toolCallId}`);
            ids.pendingToolResults.set(toolCallId, recorded.id);
            if (recorded.message.isError) throw new Error(textOf(recorded.message.content));
            return { content: recorded.message.content, details: recorded.message.details };
        },
    }));
}

async function replayRun(req, workDir) {
    const cpuStart = process.cpuUsage();
    const agentDir = mkdtempSync(join(workDir, "agent-"));
    const copy = join(agentDir, basename(req.path));
    copyFileSync(req.path, copy);
    const recordedManager = idx.SessionManager.open(copy, agentDir);
    const branch = recordedManager.getBranch();
    const { steps, results } = scriptOf(branch);
    const firstModel = branch.find((e) => e.type === "message" && e.message.role === "assistant")?.message;
    const model = (provider, id) => ({ ...req.model, provider, id });
    writeFileSync(join(agentDir, "auth.json"), JSON.stringify(Object.fromEntries(
        ["anthropic", "openai", "google", firstModel?.provider ?? "oracle"].map((p) => [p, { type: "api_key", key: "canned" }]))));
    const manager = idx.SessionManager.inMemory(agentDir);
    const session = await createOracleSession(idx, {
        agentDir,
        manager,
        settings: { compaction: req.settings },
        model: model(firstModel?.provider ?? "oracle", firstModel?.model ?? "oracle-model"),
    });
    // the recordings hold no system message: Pi's own (its prompt, its tool declarations) stay out
    const appendMessage = manager.appendMessage.bind(manager);
    manager.appendMessage = (message) => (message.role === "system" ? undefined : appendMessage(message));
    const recordedIds = new Map(); // Pi's entry id -> the recorded entry id it stands for
    const ids = { pendingToolResults: new Map() };
    const toolNames = new Set();
    for (const entry of branch) {
        for (const block of entry.message?.role === "assistant" ? entry.message.content ?? [] : []) {
            if (block?.type === "toolCall") toolNames.add(block.name);
        }
    }
    const tools = cannedTools(toolNames, results, ids);
    session._preparePromptAndToolLoadout = () => {
        session.agent.state.tools = tools;
        return undefined;
    };
    const log = [];
    // the run's recorded responses from its current segment on; steering[k]: the segment whose user
    // message is queued when the k-th response of the run is given; delivered: the last segment sent
    const state = { replies: [], steering: new Map(), answered: 0, delivered: 0, pendingUserIds: [] };
    const byObject = new Map(); // answered message object -> recorded entry id
    session.agent.streamFunction = async (m, context) => {
        nextMillisecond();
        const summary = cannedSummary(context);
        if (summary) return summary;
        const tokens = estimateProjectedContextTokens(manager.buildSessionProjection(), manager.getBranch()).tokens;
        const next = state.replies[0];
        if (!next) throw new Error("the canned model has no recorded response left for this run");
        if (tokens > m.contextWindow) {
            log.push({ kind: "refused", tokens });
            const zero = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } };
            return streamOf({ role: "assistant", content: [], api: next.message.api, provider: next.message.provider, model: next.message.model, usage: zero, stopReason: "error", errorMessage: `prompt is too long: ${tokens} tokens > ${m.contextWindow} maximum`, timestamp: Date.now() });
        }
        state.replies.shift();
        log.push({ kind: "accepted", tokens, id: next.id });
        const reply = { ...next.message, timestamp: Date.now() };
        byObject.set(reply, next.id);
        const steer = state.steering.get(state.answered);
        state.answered += 1;
        if (steer) {
            state.delivered = steer.index;
            state.pendingUserIds.push(steer.segment.id);
            await session.steer(steer.segment.text);
        }
        return streamOf(reply);
    };
    session.subscribe((event) => {
        if (event.type === "compaction_end") {
            if (event.result) {
                log.push({ kind: "compaction", reason: event.reason, willRetry: !!event.willRetry,
                    tokensBefore: event.result.tokensBefore, firstKeptEntryId: event.result.firstKeptEntryId });
            } else if (!event.aborted) {
                log.push({ kind: "compact_failed", reason: event.reason, errorMessage: event.errorMessage ?? null });
            }
        }
    });
    for (const step of steps) {
        if (step.kind === "model") {
            await session.setModel(modelFrom(model(step.provider, step.modelId)));
        } else if (step.kind === "bash") {
            const b = step.message;
            state.pendingUserIds.push(step.id);
            session.recordBashResult(b.command, { output: b.output, exitCode: b.exitCode, cancelled: b.cancelled, truncated: b.truncated, fullOutputPath: b.fullOutputPath }, { excludeFromContext: b.excludeFromContext });
        } else {
            // a steering message whose run failed before it was typed is a prompt of its own
            for (let first = 0; first < step.segments.length; first = state.delivered + 1) {
                const segments = step.segments.slice(first);
                state.replies = segments.flatMap((seg) => seg.replies);
                state.steering = new Map();
                let answered = 0;
                segments.forEach((seg, j) => {
                    if (j > 0) state.steering.set(answered - 1, { segment: seg, index: first + j });
                    answered += seg.replies.length;
                });
                state.answered = 0;
                state.delivered = first;
                state.pendingUserIds.push(segments[0].id);
                await session.prompt(segments[0].text);
            }
        }
    }
    // Pi's entries -> the recorded entries they stand for (users and bash runs in order, answers by
    // object, tool results by call id), so that compactions can be named by recorded entry ids.
    let users = 0;
    let after = null;
    const compactions = [];
    const position = new Map(branch.map((e, i) => [e.id, i])); // ids of a migrated v1 file are Pi's own
    for (const entry of manager.getEntries()) {
        if (entry.type === "message") {
            const m = entry.message;
            let id;
            if (m.role === "user" || m.role === "bashExecution") id = state.pendingUserIds[users++];
            else if (m.role === "assistant") id = byObject.get(m);
            else if (m.role === "toolResult") id = ids.pendingToolResults.get(m.toolCallId);
            if (id !== undefined) {
                recordedIds.set(entry.id, position.get(id));
                after = position.get(id);
            }
        } else if (entry.type === "compaction") {
            compactions.push({ after, firstKept: recordedIds.get(entry.firstKeptEntryId) ?? null,
                tokensBefore: entry.tokensBefore });
        }
    }
    const events = log.filter((e) => e.kind === "compaction" || e.kind === "compact_failed");
    let c = 0;
    for (const e of events) {
        if (e.kind === "compaction") Object.assign(e, compactions[c++] ?? {});
        delete e.firstKeptEntryId;
    }
    session.dispose?.();
    const cpu = process.cpuUsage(cpuStart);
    return {
        events,
        cpuSeconds: (cpu.user + cpu.system) / 1e6, // the whole run in this process, file copy and open included
        // every request in order: its recorded answer's position and its size (refusals: position null)
        requests: log.filter((e) => e.kind === "accepted" || e.kind === "refused").map((e) =>
            [e.id === undefined ? null : position.get(e.id), e.tokens]),
        accepted: log.filter((e) => e.kind === "accepted").length,
        refused: log.filter((e) => e.kind === "refused").length,
    };
}

const workDir = mkdtempSync(join(tmpdir(), "pimem-replay-loop-"));
try {
    await runBatch({ replay_run: (req) => replayRun(req, workDir) }, requestPath, resultPath);
} finally {
    rmSync(workDir, { recursive: true, force: true });
}
