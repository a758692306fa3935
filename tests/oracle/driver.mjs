// Run Pi's own session-memory functions (0.87.1, or 1.6.0 from its dist dir) over a batch of JSON requests.
//
// Usage: node driver.mjs <pi dist dir> <requests.json | -> [results.json]
// The request file holds {"requests": [{"op": ..., ...}, ...]}; the results file gets
// {"results": [{"ok": true, "result": ...} | {"ok": false, "error": "..."}, ...]}.
// One process handles a whole batch. Session files are never written: every load works on
// a private temporary copy. Strings travel as JSON; JSON.stringify escapes lone surrogates,
// so they survive both ways.
import { copyFileSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { pathToFileURL } from "node:url";
import { cannedReply, createOracleSession, modelFrom, runBatch, sha256 } from "./shared.mjs";

const [distDir, requestPath, resultPath] = process.argv.slice(2);
if (!distDir || !requestPath) {
    process.stderr.write("usage: node driver.mjs <pi dist dir> <requests.json|-> [results.json]\n");
    process.exit(2);
}
const load = (rel) => import(pathToFileURL(join(distDir, rel)).href);
const sm = await load("core/session-manager.js");
const messagesMod = await load("core/messages.js");
const compactionMod = await load("core/compaction/compaction.js");
const branchMod = await load("core/compaction/branch-summarization.js");
const utilsMod = await load("core/compaction/utils.js");
const { getCurrentSystemMessage } = await import(
    pathToFileURL(join(distDir, "..", "..", "pi-ai", "dist", "utils", "transcript.js")).href
);

const { convertToLlm } = messagesMod;
const {
    estimateTokens,
    estimateContextTokens,
    estimateProjectedContextTokens,
    findCutPoint,
    findTurnStartIndex,
    prepareCompaction,
    compact,
    calculateContextTokens,
    shouldCompact,
} = compactionMod;
const { collectEntriesForBranchSummary, prepareBranchEntries, generateBranchSummary } = branchMod;
const { serializeConversation, computeFileLists, formatFileOperations } = utilsMod;

const workDir = mkdtempSync(join(tmpdir(), "pimem-oracle-"));
let copyCounter = 0;
function privateCopy(path) {
    const target = join(workDir, `${copyCounter++}-${basename(path)}`);
    copyFileSync(path, target);
    return target;
}

/** Either the value itself or the sha256 of its JSON.stringify text (undefined counts as null). */
function emit(value, hash) {
    if (!hash) return value === undefined ? null : value;
    return sha256(value === undefined ? "null" : JSON.stringify(value));
}
// Digests of objects already hashed, by identity: projections of many leaves share messages.
const digestCache = new WeakMap();
function digestOf(value) {
    if (value === null || typeof value !== "object") return sha256(JSON.stringify(value));
    let d = digestCache.get(value);
    if (d === undefined) {
        d = sha256(JSON.stringify(value));
        digestCache.set(value, d);
    }
    return d;
}
/**
 * A list, or its list digest: sha256 of the comma-joined sha256 digests of each element's
 * JSON.stringify text. Equal digests mean equal JSON.stringify text of the whole list.
 */
function emitList(list, hash) {
    if (!hash) return list;
    return sha256(list.map(digestOf).join(","));
}

// ---------------------------------------------------------------------------------------------
// Sessions: loaded once per batch with Pi's own reader and migration, from a private copy.
// ---------------------------------------------------------------------------------------------
const sessions = new Map();
function getSession(path) {
    let s = sessions.get(path);
    if (s) return s;
    const fileEntries = sm.loadEntriesFromFile(privateCopy(path));
    if (fileEntries.length === 0) throw new Error(`not a Pi session (no header): ${path}`);
    sm.migrateSessionEntries(fileEntries);
    const header = fileEntries.find((e) => e.type === "session");
    const entries = fileEntries.filter((e) => e.type !== "session");
    const byId = new Map();
    const children = new Map();
    for (const e of entries) {
        byId.set(e.id, e);
        if (!children.has(e.parentId)) children.set(e.parentId, 0);
        children.set(e.parentId, children.get(e.parentId) + 1);
    }
    let manager;
    s = {
        path,
        header,
        fileEntries,
        entries,
        byId,
        tips: entries.filter((e) => !children.has(e.id)).map((e) => e.id),
        get manager() {
            // An in-memory SessionManager over the same entries (never persisted).
            manager ??= sm.SessionManager.inMemory(header.cwd ?? "/", undefined, fileEntries);
            return manager;
        },
    };
    sessions.set(path, s);
    return s;
}

/** Leaves named by a request: a list of ids (null = Pi's default leaf), "all" entries, or "tips". */
function resolveLeaves(s, leaves) {
    if (leaves === undefined || leaves === null) return [null];
    if (leaves === "all") return s.entries.map((e) => e.id);
    if (leaves === "tips") return s.tips;
    return leaves;
}

function pathFor(s, leafId) {
    // Pi's buildSessionPath: a missing leaf falls back to the last entry.
    let leaf = leafId ? s.byId.get(leafId) : undefined;
    leaf ??= s.entries[s.entries.length - 1];
    const path = [];
    for (let cur = leaf; cur; cur = cur.parentId ? s.byId.get(cur.parentId) : undefined) path.push(cur);
    return path.reverse();
}

const projectionOf = (s, leafId) => sm.buildSessionProjection(s.entries, leafId ?? undefined, s.byId);

/** Map with a guard: an item on which Pi throws becomes {key: item, throws: message}. */
function guardMap(items, key, fn) {
    return items.map((item) => {
        try {
            return fn(item);
        } catch (err) {
            return { [key]: key === "id" ? item.id : item, throws: String(err?.message ?? err) };
        }
    });
}
async function guardMapAsync(items, key, fn) {
    const out = [];
    for (const item of items) {
        try {
            out.push(await fn(item));
        } catch (err) {
            out.push({ [key]: item, throws: String(err?.message ?? err) });
        }
    }
    return out;
}

/**
 * For every leaf of the request: `fn(preparation)` per settings under `key` (null where
 * prepareCompaction finds nothing to compact), as {leafId, [key]: [...]}.
 */
function perPreparation(req, key, fn) {
    const s = getSession(req.path);
    return guardMap(resolveLeaves(s, req.leaves), "leafId", (leafId) => {
        const path = pathFor(s, leafId);
        return {
            leafId,
            [key]: req.settings.map((settings) => {
                const prep = prepareCompaction(path, settings);
                return prep ? fn(prep) : null;
            }),
        };
    });
}

function fileOpsJson(fileOps) {
    return { read: [...fileOps.read], written: [...fileOps.written], edited: [...fileOps.edited] };
}

// ---------------------------------------------------------------------------------------------
// Summaries: a stream function that records each request and answers deterministically.
// ---------------------------------------------------------------------------------------------
function recordingStream(requests, defaultKind, fail) {
    return async (model, context, options) => {
        const [system, user, ...rest] = context.messages;
        const prompt = user.content.map((b) => b.text).join("");
        const kind = prompt.startsWith("# Conversation\n") ? "turn_prefix" : defaultKind;
        requests.push({
            kind,
            systemRole: system?.role ?? null,
            systemPrompt: typeof system?.content === "string" ? system.content : null,
            userRole: user.role,
            userBlocks: user.content.length,
            extraMessages: rest.length,
            prompt,
            maxTokens: Number.isFinite(options.maxTokens) ? options.maxTokens : null,
            reasoning: options.reasoning ?? null,
            cacheRetention: options.cacheRetention ?? null,
            sessionIdIsUuid:
                typeof options.sessionId === "string" &&
                /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(options.sessionId),
            modelId: model.id ?? null,
        });
        const reply = cannedReply(kind, prompt, fail);
        return { result: async () => reply };
    };
}

function preparationJson(prep) {
    if (!prep) return null;
    return {
        firstKeptEntryId: prep.firstKeptEntryId,
        messagesToSummarize: prep.messagesToSummarize,
        turnPrefixMessages: prep.turnPrefixMessages,
        isSplitTurn: prep.isSplitTurn,
        tokensBefore: prep.tokensBefore,
        previousSummary: prep.previousSummary ?? null,
        fileOps: fileOpsJson(prep.fileOps),
        settings: prep.settings,
    };
}

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------
const ops = {
    /** Pi's raw reader + migration, and SessionManager.open on a private copy. */
    load(req) {
        const original = readFileSync(req.path);
        const raw = sm.loadEntriesFromFile(privateCopy(req.path));
        const rawCount = raw.length;
        sm.migrateSessionEntries(raw);
        const copy = privateCopy(req.path);
        let opened = null;
        let openError = null;
        try {
            const manager = sm.SessionManager.open(copy, workDir);
            opened = {
                header: manager.getHeader(),
                entries: manager.getEntries(),
                leafId: manager.getLeafId(),
                sessionId: manager.getSessionId(),
                name: manager.getSessionName() ?? null,
            };
        } catch (err) {
            openError = String(err?.message ?? err);
        }
        const after = readFileSync(copy);
        return {
            rawCount,
            migrated: raw,
            opened,
            openError,
            rewritten: !after.equals(original),
        };
    },

    /** buildSessionProjection per leaf: messages, thinking level, model, provenance, LLM view. */
    project(req) {
        const s = getSession(req.path);
        const hash = req.hash ?? false;
        return guardMap(resolveLeaves(s, req.leaves), "leafId", (leafId) => {
            const p = projectionOf(s, leafId);
            return {
                leafId,
                messages: emitList(p.messages, hash),
                thinkingLevel: p.thinkingLevel,
                model: p.model,
                entryIds: emit(
                    p.entries.map((e) => [e.sourceEntry.id, e.messages.length]),
                    hash,
                ),
                llm: emitList(convertToLlm(p.messages), hash),
                currentSystem: emit(getCurrentSystemMessage(p.messages), hash),
                messageCount: p.messages.length,
            };
        });
    },

    /** convertToLlm over given messages (inline). */
    convert(req) {
        return emitList(convertToLlm(req.messages), req.hash ?? false);
    },

    /** Every entry's own context messages (sessionEntryToContextMessages) and their estimates. */
    entry_messages(req) {
        const s = getSession(req.path);
        const hash = req.hash ?? false;
        return guardMap(s.entries, "id", (e) => {
            const msgs = sm.sessionEntryToContextMessages(e);
            return { id: e.id, messages: emitList(msgs, hash), estimates: msgs.map(estimateTokens) };
        });
    },

    /** Token estimates per projected message, the context estimate and the projected estimate. */
    estimate(req) {
        const s = getSession(req.path);
        return guardMap(resolveLeaves(s, req.leaves), "leafId", (leafId) => {
            const p = projectionOf(s, leafId);
            return {
                leafId,
                perMessage: p.messages.map(estimateTokens),
                context: estimateContextTokens(p.messages),
                projected: estimateProjectedContextTokens(p, pathFor(s, leafId)),
            };
        });
    },

    /** Inline helpers: estimateTokens / calculateContextTokens / shouldCompact. */
    estimate_messages(req) {
        return {
            perMessage: req.messages.map(estimateTokens),
            context: estimateContextTokens(req.messages),
        };
    },
    should_compact(req) {
        return req.cases.map(([tokens, window, settings]) => shouldCompact(tokens, window, settings));
    },
    calculate_context_tokens(req) {
        return req.usages.map(calculateContextTokens);
    },

    /** findCutPoint over the path entries for many keepRecentTokens values. */
    cut_points(req) {
        const s = getSession(req.path);
        return guardMap(resolveLeaves(s, req.leaves), "leafId", (leafId) => {
            const path = pathFor(s, leafId);
            let lastCompaction = -1;
            path.forEach((e, i) => {
                if (e.type === "compaction") lastCompaction = i;
            });
            const starts = req.starts ?? [0, lastCompaction + 1];
            const out = {};
            for (const start of [...new Set(starts)]) {
                out[start] = req.keeps.map((keep) => {
                    const c = findCutPoint(path, start, path.length, keep);
                    return [c.firstKeptEntryIndex, c.turnStartIndex, c.isSplitTurn];
                });
            }
            const turnStarts = req.turnStarts
                ? path.map((_, i) => findTurnStartIndex(path, i, 0))
                : null;
            return { leafId, pathLength: path.length, cuts: out, turnStarts };
        });
    },

    /** prepareCompaction(path entries, settings) per leaf and settings. */
    prepare(req) {
        const hash = req.hash ?? false;
        return perPreparation(req, "preparations", (prep) => {
            const j = preparationJson(prep);
            return {
                ...j,
                settings: undefined,
                previousSummary: hash ? emit(j.previousSummary, true) : j.previousSummary,
                messagesToSummarize: emitList(j.messagesToSummarize, hash),
                turnPrefixMessages: emitList(j.turnPrefixMessages, hash),
                counts: [j.messagesToSummarize.length, j.turnPrefixMessages.length],
                ...(req.serialize
                    ? {
                          serialized: emit(serializeConversation(convertToLlm(prep.messagesToSummarize)), hash),
                          serializedTurnPrefix: emit(serializeConversation(convertToLlm(prep.turnPrefixMessages)), hash),
                          fileLists: computeFileLists(prep.fileOps),
                      }
                    : {}),
            };
        });
    },

    /** serializeConversation(convertToLlm(messagesToSummarize)) per leaf and settings, or inline. */
    serialize(req) {
        if (req.messages) return serializeConversation(convertToLlm(req.messages));
        const hash = req.hash ?? false;
        return perPreparation(req, "texts", (prep) => [
            emit(serializeConversation(convertToLlm(prep.messagesToSummarize)), hash),
            emit(serializeConversation(convertToLlm(prep.turnPrefixMessages)), hash),
        ]);
    },

    /** File list helpers over inline file ops. */
    file_lists(req) {
        const fileOps = { read: new Set(req.read), written: new Set(req.written), edited: new Set(req.edited) };
        const lists = computeFileLists(fileOps);
        return { ...lists, formatted: formatFileOperations(lists.readFiles, lists.modifiedFiles) };
    },

    /** Pi's real compact() on prepareCompaction's result, with a recording stream function. */
    async compact(req) {
        const s = getSession(req.path);
        const hash = req.hash ?? false;
        return guardMapAsync(resolveLeaves(s, req.leaves), "leafId", async (leafId) => {
            const path = pathFor(s, leafId);
            const prep = prepareCompaction(path, req.settings);
            if (!prep) return { leafId, prepared: false };
            const requests = [];
            const model = modelFrom(req.model);
            let result = null;
            let error = null;
            try {
                result = await compact(
                    prep,
                    model,
                    undefined,
                    undefined,
                    req.customInstructions ?? undefined,
                    undefined,
                    req.thinkingLevel ?? undefined,
                    recordingStream(requests, "history", req.fail),
                );
            } catch (err) {
                // Pi's own failures are plain Errors; anything else is a crash of the leaf.
                if (err?.constructor !== Error) throw err;
                error = String(err?.message ?? err);
            }
            return {
                leafId,
                prepared: true,
                requests: requests.map((r) => ({ ...r, prompt: emit(r.prompt, hash) })),
                result,
                error,
            };
        });
    },

    /** Branch summary: entry collection, budgets, and generateBranchSummary with recording. */
    async branch(req) {
        const s = getSession(req.path);
        const hash = req.hash ?? false;
        return guardMapAsync(req.pairs, "pair", async ([oldLeafId, targetId]) => {
            const { entries, commonAncestorId } = collectEntriesForBranchSummary(s.manager, oldLeafId, targetId);
            const budgets = (req.budgets ?? [0]).map((budget) => {
                const prep = prepareBranchEntries(entries, budget);
                return {
                    budget,
                    messages: emitList(prep.messages, hash),
                    count: prep.messages.length,
                    fileOps: fileOpsJson(prep.fileOps),
                    totalTokens: prep.totalTokens,
                };
            });
            let summary = null;
            let requests = [];
            if (req.summarize !== false) {
                let error = null;
                let result = null;
                try {
                    result = await generateBranchSummary(entries, {
                        model: modelFrom(req.model),
                        reserveTokens: req.reserveTokens ?? 16384,
                        customInstructions: req.customInstructions ?? undefined,
                        replaceInstructions: req.replaceInstructions ?? undefined,
                        thinkingLevel: req.thinkingLevel ?? undefined,
                        streamFn: recordingStream(requests, "branch", req.fail),
                    });
                } catch (err) {
                    if (err?.constructor !== Error) throw err; // a crash of this pair
                    error = String(err?.message ?? err);
                }
                summary = { result, error };
                requests = requests.map((r) => ({ ...r, prompt: emit(r.prompt, hash) }));
            }
            return {
                oldLeafId,
                targetId,
                entryIds: entries.map((e) => e.id),
                commonAncestorId,
                budgets,
                summary,
                requests,
            };
        });
    },

    /**
     * Pi's own AgentSession.navigateTree (/tree) on an in-memory SessionManager, one fresh
     * AgentSession per case. The agent's stream function is the recording one (canned answer);
     * an optional inline extension answers session_before_tree with the case's `hook` object
     * (or nothing) and records the preparation it saw. Entries the session appended while
     * being set up (a missing thinking_level_change) are reported as `setupEntries`.
     */
    async navigate_tree(req) {
        const idx = await load("index.js");
        const agentDir = mkdtempSync(join(workDir, "agent-"));
        const out = [];
        for (const c of req.navigations) {
            const fileEntries = sm.loadEntriesFromFile(privateCopy(req.path));
            sm.migrateSessionEntries(fileEntries);
            const header = fileEntries.find((e) => e.type === "session");
            const manager = idx.SessionManager.inMemory(header.cwd ?? "/", undefined, fileEntries);
            if (c.oldLeafId) manager.branch(c.oldLeafId);
            const initialCount = manager.getEntries().length;
            const hookEvents = [];
            const factories = [];
            if (c.hook !== undefined) {
                factories.push((pi) => {
                    pi.on("session_before_tree", async (event) => {
                        const p = event.preparation;
                        hookEvents.push({
                            targetId: p.targetId,
                            oldLeafId: p.oldLeafId,
                            commonAncestorId: p.commonAncestorId,
                            entryIds: p.entriesToSummarize.map((e) => e.id),
                            userWantsSummary: p.userWantsSummary,
                            customInstructions: p.customInstructions ?? null,
                            replaceInstructions: p.replaceInstructions ?? null,
                            label: p.label ?? null,
                        });
                        return c.hook ?? undefined;
                    });
                });
            }
            const session = await createOracleSession(idx, {
                agentDir,
                manager,
                settings:
                    c.reserveTokens !== undefined && c.reserveTokens !== null
                        ? { branchSummary: { reserveTokens: c.reserveTokens } }
                        : {},
                model: c.model,
                extensionFactories: factories,
            });
            const setupEntries = manager.getEntries().slice(initialCount);
            const oldLeafId = manager.getLeafId();
            const requests = [];
            session.agent.streamFunction = recordingStream(requests, "branch", c.fail);
            let result = null;
            let error = null;
            try {
                result = await session.navigateTree(c.targetId, {
                    summarize: c.summarize ?? false,
                    customInstructions: c.customInstructions ?? undefined,
                    replaceInstructions: c.replaceInstructions ?? undefined,
                    label: c.label ?? undefined,
                });
            } catch (err) {
                if (err?.constructor !== Error) throw err;
                error = String(err?.message ?? err);
            }
            const all = manager.getEntries();
            out.push({
                targetId: c.targetId,
                oldLeafId,
                setupEntries,
                result: result && {
                    cancelled: result.cancelled ?? null,
                    aborted: result.aborted ?? null,
                    editorText: result.editorText ?? null,
                    summaryEntryId: result.summaryEntry?.id ?? null,
                },
                error,
                newEntries: all.slice(initialCount + setupEntries.length),
                entryCount: all.length,
                leafId: manager.getLeafId(),
                labels: Object.fromEntries(
                    all.filter((e) => e.type === "label").map((e) => [e.targetId, manager.getLabel(e.targetId) ?? null]),
                ),
                requests: requests.map((r) => ({ ...r, prompt: emit(r.prompt, req.hash ?? false) })),
                hookEvents,
            });
            session.dispose?.();
        }
        return out;
    },

    /**
     * SessionManager.open on a private copy, in digests: whether it opens, is rewritten, the
     * header, every entry, the leaf, the name and the entries per type (messages per role).
     */
    open_digest(req) {
        const original = readFileSync(req.path);
        const copy = privateCopy(req.path);
        const out = { openError: null };
        try {
            const manager = sm.SessionManager.open(copy, workDir);
            const entries = manager.getEntries();
            const types = {};
            for (const e of entries) {
                const k = e.type === "message" ? `message:${e.message?.role}` : e.type;
                types[k] = (types[k] ?? 0) + 1;
            }
            Object.assign(out, {
                header: emit(manager.getHeader(), true),
                entries: emitList(entries, true),
                entryCount: entries.length,
                types,
                leafId: manager.getLeafId(),
                name: manager.getSessionName() ?? null,
            });
        } catch (err) {
            out.openError = String(err?.message ?? err);
        }
        out.rewritten = !readFileSync(copy).equals(original);
        rmSync(copy, { force: true });
        return out;
    },

    /** Drop a session from the batch's cache (keeps memory flat over many large files). */
    forget(req) {
        sessions.delete(req.path);
        return true;
    },

    /** Session facts: tips (childless entries) and the count of entries. */
    info(req) {
        const s = getSession(req.path);
        return { tips: s.tips, entryCount: s.entries.length, header: s.header };
    },
};

try {
    await runBatch(ops, requestPath, resultPath);
} finally {
    rmSync(workDir, { recursive: true, force: true });
}
