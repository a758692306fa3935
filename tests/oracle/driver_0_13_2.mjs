// Run Pi 0.13.2's own compaction functions (dist/compaction.js, dist/session-manager.js) over a
// batch of JSON requests.
//
// Usage: node driver_0_13_2.mjs <pi dist dir> <requests.json | -> [results.json]
// Same protocol as driver.mjs. Pi 0.13.2 calls pi-ai's complete() directly, so a module hook
// hands compaction.js a stand-in pi-ai whose complete() records the request and answers with
// canned text. Date.now() is 0 (the messages Pi makes up carry it as their timestamp).
import { register } from "node:module";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { runBatch, sha256 } from "./shared.mjs";

const [distDir, requestPath, resultPath] = process.argv.slice(2);
if (!distDir || !requestPath) {
    process.stderr.write("usage: node driver_0_13_2.mjs <pi dist dir> <requests.json|-> [results.json]\n");
    process.exit(2);
}

const STUB = `export async function complete(model, context, options) { return globalThis.__pimemComplete(model, context, options); }`;
const HOOKS = `
export async function resolve(specifier, context, next) {
    if (specifier === "@mariozechner/pi-ai" && context.parentURL && context.parentURL.endsWith("/dist/compaction.js")) {
        return { url: "data:text/javascript," + encodeURIComponent(${JSON.stringify(STUB)}), shortCircuit: true };
    }
    return next(specifier, context);
}`;
register("data:text/javascript," + encodeURIComponent(HOOKS));
Date.now = () => 0;

const compaction = await import(pathToFileURL(join(distDir, "compaction.js")).href);
const sm = await import(pathToFileURL(join(distDir, "session-manager.js")).href);

const digest = (value) => sha256(value === undefined ? "null" : JSON.stringify(value));
const listDigest = (list) => sha256(list.map(digest).join(","));

const entriesCache = new Map();
function entriesOf(path) {
    let e = entriesCache.get(path);
    if (!e) {
        e = sm.parseSessionEntries(readFileSync(path, "utf8"));
        entriesCache.set(path, e);
    }
    return e;
}
/** End indices named by a request: "all" (1..n) or a list. */
const endsOf = (entries, ends) => (ends === "all" ? entries.map((_, i) => i + 1) : ends);

function guard(items, key, fn) {
    return items.map((item) => {
        try {
            return fn(item);
        } catch (err) {
            return { [key]: item, throws: String(err?.message ?? err) };
        }
    });
}

const ops = {
    info(req) {
        const entries = entriesOf(req.path);
        return { entryCount: entries.length };
    },

    /** Per prefix of the file: tokensBefore and findCutPoint from 0 and after the last compaction. */
    cut_points(req) {
        const all = entriesOf(req.path);
        return guard(endsOf(all, req.ends), "end", (end) => {
            const entries = all.slice(0, end);
            let prev = -1;
            for (let i = entries.length - 1; i >= 0; i--) {
                if (entries[i].type === "compaction") {
                    prev = i;
                    break;
                }
            }
            const usage = compaction.getLastAssistantUsage(entries);
            const starts = [...new Set([0, prev + 1])];
            return {
                end,
                tokensBefore: usage ? compaction.calculateContextTokens(usage) : 0,
                cuts: Object.fromEntries(
                    starts.map((s) => [s, req.keeps.map((k) => compaction.findCutPoint(entries, s, end, k))]),
                ),
            };
        });
    },

    /** loadSessionFromEntries per prefix: message list digest, count, thinking level, model. */
    context(req) {
        const all = entriesOf(req.path);
        return guard(endsOf(all, req.ends), "end", (end) => {
            const c = sm.loadSessionFromEntries(all.slice(0, end));
            return {
                end,
                messages: listDigest(c.messages),
                count: c.messages.length,
                thinkingLevel: c.thinkingLevel ?? null,
                model: c.model,
            };
        });
    },

    /** compact() per prefix with the recording complete(): the request and the entry (no timestamp). */
    async compact(req) {
        const all = entriesOf(req.path);
        const out = [];
        for (const end of endsOf(all, req.ends)) {
            const requests = [];
            globalThis.__pimemComplete = async (model, context, options) => {
                const messages = context.messages;
                requests.push({
                    messages: listDigest(messages),
                    count: messages.length,
                    prompt: messages[messages.length - 1].content,
                    systemPrompt: context.systemPrompt ?? null,
                    maxTokens: options.maxTokens ?? null,
                    modelId: model.id,
                });
                if (req.fail?.throws) throw new Error(req.fail.throws);
                const text = `SUMMARY:${digest(messages).slice(0, 16)}`;
                const content = req.fail?.blocks ?? [{ type: "text", text }, { type: "text", text: "second block" }];
                return { role: "assistant", content, stopReason: req.fail?.stopReason ?? "stop" };
            };
            try {
                const entry = await compaction.compact(
                    all.slice(0, end),
                    { id: "oracle-model" },
                    req.settings,
                    "key",
                    undefined,
                    req.customInstructions ?? undefined,
                );
                const { timestamp, ...rest } = entry;
                out.push({ end, requests, entry: rest, error: null });
            } catch (err) {
                out.push({ end, requests, entry: null, error: String(err?.message ?? err) });
            }
        }
        return out;
    },

    should_compact(req) {
        return req.cases.map(([tokens, window, settings]) => compaction.shouldCompact(tokens, window, settings));
    },
};

await runBatch(ops, requestPath, resultPath);
