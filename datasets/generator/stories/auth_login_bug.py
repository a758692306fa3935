"""Story 1: a login bug in a TypeScript auth service (long; three compactions).

Mara reports that users are logged out right after logging in. The agent finds a unit mismatch
(``SESSION_TTL_SECONDS`` added to ``Date.now()``), fixes it, then a mixed-case email bug, adds
regression tests and a Postgres migration, runs into user ``!`` commands (a failing lint, a truncated
coverage run, a ``!!`` command excluded from the context), fixes the same bug in refresh tokens,
injects a ``Clock`` over many small steps (a split turn when compacted), hits an overloaded API error,
writes the changelog and audits the code base. Rules that recur: don't touch ``src/routes/auth.ts``
(the public API) and run ``npm test`` before claiming a fix.
"""

from __future__ import annotations

import random
import re

from ..harness import Recorder, bash, edit, grep, load_fixture, ls, read, step, write

NAME = "auth-login-bug"
CWD = "/home/mara/src/acme-auth"
FILES = load_fixture("auth_login_bug")


def record(seed: int) -> Recorder:
    """The session, recorded with ``seed``."""
    r = Recorder(NAME, CWD, FILES, seed, "2026-03-02T09:14:07.412Z", "claude-sonnet-4-5",
                 thinking="medium")
    rng = r.rng
    r.project.files["src/users/postgres-repository.ts"] = _postgres_repository(rng)
    r.project.files["openapi.yaml"] = _openapi(rng)
    suites = {
        "test/login.test.ts": [("login > returns a session for valid credentials", True),
                               ("login > rejects a wrong password", True),
                               ("login > rejects an unknown email", True),
                               ("login > locks the account after five failures", True)],
        "test/refresh.test.ts": [("refreshSession > rotates the refresh token", True)],
        "test/session-store.test.ts": [("InMemorySessionStore > creates a session for a user", True),
                                       ("InMemorySessionStore > expires a session after the TTL", True),
                                       ("InMemorySessionStore > touch extends the session", True),
                                       ("InMemorySessionStore > destroy removes the session", True)],
    }

    def tests(fail: dict[str, list[str]] | None = None, failure: str = "") -> str:
        res = {f: [(n, not (fail and n in fail.get(f, []))) for n, _ in ts] for f, ts in suites.items()}
        return vitest_report(res, rng, failure)

    # 1. the report and the investigation
    r.turn(
        "Users on staging get logged out immediately after logging in: the first request after POST /v1/login "
        "answers 401 {\"error\":\"session_expired\"}. Can you find out why?\n\n"
        "Two rules for this whole job: don't touch the public API in src/routes/auth.ts (the mobile app pins the "
        "response shapes), and always run the tests (`npm test`) before you tell me something is fixed.",
        step("I'll start by looking at the project layout and the login flow.", ls(), ls("src/auth"),
             thinking="The user reports sessions expiring immediately after login. Likely candidates: the session "
                      "TTL unit, clock skew between gateway and service, or the cookie/header name. Let me look at "
                      "the routes, the session store and the config."),
        step(None, read("src/routes/auth.ts"), read("src/auth/session-store.ts"), read("src/config.ts")),
        step(None, grep("SESSION_TTL", "src"), read("docs/architecture.md"),
             thinking="SESSION_TTL is SESSION_TTL_SECONDS (3600, seconds) but session-store adds it to Date.now(), "
                      "which is in milliseconds. So expiresAt = now + 3600 ms = 3.6 seconds. That matches the "
                      "report. Redis EX uses seconds correctly, so Redis keeps the key, but get() checks "
                      "expiresAt <= Date.now() and returns undefined."),
        step("Let me get a baseline of the test suite before changing anything.",
             bash("npm test", tests())),
        step("Found it. **Root cause: a unit mismatch in `src/auth/session-store.ts`.**\n\n"
             "`SESSION_TTL` comes from `SESSION_TTL_SECONDS` (3600, in **seconds**), but both stores compute\n\n"
             "```ts\nexpiresAt: now + SESSION_TTL   // now is Date.now(), in milliseconds\n```\n\n"
             "so a session expires 3.6 seconds after it is created. Redis still holds the key (the `EX` argument "
             "is correctly in seconds), but `get()` compares `session.expiresAt <= Date.now()` and returns "
             "`undefined`, and `/v1/me` answers `401 session_expired`.\n\n"
             "The existing test `expires a session after the TTL` advances fake timers by 3601 ms, so it encodes "
             "the bug instead of catching it. All 9 tests pass on the current code.\n\n"
             "Proposed fix: convert at the boundary, `SESSION_TTL * 1000`, in `create()` and `touch()` of both "
             "stores, and fix the test to advance by `3601 * 1000`. `src/routes/auth.ts` stays untouched."),
    )
    r.turn(
        "Makes sense. Fix it, but keep SESSION_TTL_SECONDS in seconds in the config — the gateway reads the same "
        "variable.",
        step("I'll add a millisecond constant next to the config value and use it in both stores.",
             edit("src/config.ts",
                  "export const SESSION_TTL = loadConfig().SESSION_TTL_SECONDS;",
                  "export const SESSION_TTL = loadConfig().SESSION_TTL_SECONDS;\n/** Session lifetime in milliseconds, for comparisons with Date.now(). */\nexport const SESSION_TTL_MS = SESSION_TTL * 1000;")),
        step(None, edit("src/auth/session-store.ts",
                        'import { SESSION_TTL } from "../config.js";',
                        'import { SESSION_TTL, SESSION_TTL_MS } from "../config.js";',
                        ("\tasync create(userId: string): Promise<Session> {\n\t\tconst now = Date.now();\n\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL };\n\t\tthis.sessions.set(session.id, session);",
                         "\tasync create(userId: string): Promise<Session> {\n\t\tconst now = Date.now();\n\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL_MS };\n\t\tthis.sessions.set(session.id, session);"))),
        step("The in-memory store is fixed; now `touch()` and the Redis store.",
             edit("src/auth/session-store.ts",
                  "\t\tif (session) session.expiresAt = Date.now() + SESSION_TTL;",
                  "\t\tif (session) session.expiresAt = Date.now() + SESSION_TTL_MS;"),
             edit("src/auth/session-store.ts",
                  "\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL };\n\t\tawait this.redis.set(",
                  "\t\tconst session: Session = { id: newSessionId(), userId, createdAt: now, expiresAt: now + SESSION_TTL_MS };\n\t\tawait this.redis.set(",
                  ("\t\tsession.expiresAt = Date.now() + SESSION_TTL;\n", "\t\tsession.expiresAt = Date.now() + SESSION_TTL_MS;\n"))),
        step(None, bash("npm test", tests(
            {"test/session-store.test.ts": ["InMemorySessionStore > expires a session after the TTL"]},
            " FAIL  test/session-store.test.ts > InMemorySessionStore > expires a session after the TTL\n"
            "AssertionError: expected { id: 'Xk3…', userId: 'u1', …(2) } to be undefined\n"
            " ❯ test/session-store.test.ts:19:37\n     17|   const session = await store.create(\"u1\");\n"
            "     18|   vi.advanceTimersByTime(3601);\n     19|   expect(await store.get(session.id)).toBeUndefined();\n"
            "       |                                     ^"), exit_code=1)),
        step("As expected, the old test encoded the bug (3601 ms). Updating it to the real TTL:",
             edit("test/session-store.test.ts", "\t\tvi.advanceTimersByTime(3601);",
                  "\t\tvi.advanceTimersByTime(3600 * 1000 + 1);"),
             edit("test/session-store.test.ts",
                  "\t\tvi.advanceTimersByTime(3000);\n\t\tawait store.touch(session.id);\n\t\tvi.advanceTimersByTime(3000);",
                  "\t\tvi.advanceTimersByTime(3000 * 1000);\n\t\tawait store.touch(session.id);\n\t\tvi.advanceTimersByTime(3000 * 1000);")),
        step(None, bash("npm test", tests())),
        step("Fixed and verified: all 9 tests pass.\n\n- `src/config.ts`: new `SESSION_TTL_MS = SESSION_TTL * 1000`; "
             "`SESSION_TTL_SECONDS` stays in seconds.\n- `src/auth/session-store.ts`: both stores use `SESSION_TTL_MS` "
             "for `expiresAt`; Redis `EX` still gets seconds.\n- `test/session-store.test.ts`: the expiry and touch tests "
             "now advance by real TTLs.\n\n`src/routes/auth.ts` was not touched."),
    )
    fix_entry = r.leaf
    r.user_bash("git diff --stat", " src/auth/session-store.ts  | 10 +++++-----\n src/config.ts              |  2 ++\n test/session-store.test.ts |  6 +++---\n 3 files changed, 13 insertions(+), 5 deletions(-)")
    r.label(fix_entry, "ttl-fix")
    r.session_info("Login: session TTL units + email case")

    # 2. second bug: email case
    r.turn(
        "Second report from support: alice@example.com can't log in at all, she registered as Alice@Example.com 🙃 "
        "Please look at that too.",
        step(None, read("src/users/repository.ts"), read("src/users/register.ts"),
             thinking="findByEmail lowercases, but registerUser only trims, and insert keys byEmail by the raw "
                      "email. So 'Alice@Example.com' is stored under that key and the lookup for "
                      "'alice@example.com' misses."),
        step(None, grep("toLowerCase|normalizeEmail", "src")),
        step("`findByEmail` lowercases the lookup, but `registerUser` stores the email as typed, so mixed-case "
             "registrations are unreachable. I'll normalize in one place, in the repository.",
             edit("src/users/repository.ts",
                  "\tasync insert(user: User): Promise<void> {\n\t\tif (this.byEmail.has(user.email)) throw new Error(`User ${user.email} already exists`);",
                  "\tasync insert(user: User): Promise<void> {\n\t\tconst key = normalizeEmail(user.email);\n\t\tif (this.byEmail.has(key)) throw new Error(`User ${user.email} already exists`);")),
        step(None, edit("src/users/repository.ts",
                        "\t\tthis.byEmail.set(user.email, user);",
                        "\t\tthis.byEmail.set(key, user);"),
             edit("src/users/repository.ts",
                  "\t\treturn this.byEmail.get(email.trim().toLowerCase());",
                  "\t\treturn this.byEmail.get(normalizeEmail(email));"),
             edit("src/users/repository.ts",
                  "export interface User {",
                  "export function normalizeEmail(email: string): string {\n\treturn email.trim().toLowerCase();\n}\n\nexport interface User {")),
        step(None, bash("npm test", tests())),
        step("Tests pass. I also want the throttle keyed by the normalized email, otherwise `Bob@x` and `bob@x` "
             "get separate failure counters.",
             edit("src/auth/login.ts",
                  "\tconst locked = deps.throttle.lockedFor(email);",
                  "\tconst key = normalizeEmail(email);\n\tconst locked = deps.throttle.lockedFor(key);")),
        step(None, edit("src/auth/login.ts",
                        "\t\tdeps.throttle.fail(email);",
                        "\t\tdeps.throttle.fail(key);",
                        ("\tdeps.throttle.reset(email);", "\tdeps.throttle.reset(key);"),
                        ('import type { UserRepository, User } from "../users/repository.js";',
                         'import { normalizeEmail, type UserRepository, type User } from "../users/repository.js";'))),
        step(None, bash("npx tsc --noEmit",
                        "src/auth/login.ts(2,10): error TS2305: Module '\"../users/repository.js\"' has no exported member 'normalizeEmail'.",
                        exit_code=2),
             thinking="Hmm, normalizeEmail is exported... unless tsc picked up a stale dist/ declaration. "
                      "Check the file."),
        step(None, read("src/users/repository.ts", 1, 12)),
        step("The export is there; the error came from a stale `dist/` declaration shadowing the source. Rebuilding:",
             bash("rm -rf dist && npx tsc --noEmit", "")),
        step(None, bash("npm test", tests())),
        step("Both fixes are in and the suite is green (9/9):\n\n- `normalizeEmail()` in `src/users/repository.ts` "
             "is now the single place that lowercases; `insert` and `findByEmail` use it.\n- `login()` keys the "
             "throttle by the normalized email.\n\nExisting users stored with mixed case (like Alice@Example.com) "
             "need a one-off migration in Postgres: `UPDATE users SET email = lower(trim(email));` — check for "
             "duplicates first."),
    )
    r.turn(
        "Add regression tests for both bugs in test/login.test.ts, one per bug.",
        step(None, read("test/login.test.ts")),
        step(None, edit("test/login.test.ts",
                        "\tit(\"locks the account after five failures\", async () => {",
                        "\tit(\"finds users registered with mixed-case email\", async () => {\n\t\tconst deps = await setup();\n\t\tawait registerUser(deps.users, { email: \"Alice@Example.com\", password: \"pw-alice-1\", displayName: \"Alice\" });\n\t\tconst { user } = await login(deps, \"alice@example.com\", \"pw-alice-1\");\n\t\texpect(user.displayName).toBe(\"Alice\");\n\t});\n\n\tit(\"keeps the session valid for the configured TTL\", async () => {\n\t\tconst deps = await setup();\n\t\tconst { session } = await login(deps, \"bob@example.com\", \"hunter22\");\n\t\texpect(session.expiresAt - session.createdAt).toBe(3600 * 1000);\n\t});\n\n\tit(\"locks the account after five failures\", async () => {")),
        step(None, bash("npm test", tests())),
    )
    suites["test/login.test.ts"][3:3] = [("login > finds users registered with mixed-case email", True),
                                         ("login > keeps the session valid for the configured TTL", True)]
    r.turn(None, step(None, bash("npm test", tests())),
           step("Added two regression tests; 11/11 pass:\n\n- `finds users registered with mixed-case email`\n"
                "- `keeps the session valid for the configured TTL` (asserts `expiresAt - createdAt === 3600 * 1000`)."))

    # production repository: the same normalization is needed there (large files, many steps)
    r.turn(
        "Production doesn't use the in-memory repository, it uses src/users/postgres-repository.ts. Check that one "
        "too, and the OpenAPI doc for anything that describes the email or expiresAt semantics.",
        step("Reading the Postgres repository and the OpenAPI document.", read("src/users/postgres-repository.ts"),
             read("openapi.yaml"),
             thinking="The Postgres findByEmail compares email = $1 exactly; if rows were stored mixed-case the "
                      "lookup misses. Either normalize in SQL with lower(email) (needs a functional index) or "
                      "normalize on write and on lookup."),
        step(None, grep("email", "src/users/postgres-repository.ts"), grep("expiresAt", ".", "*.yaml")),
        step("`PostgresUserRepository.findByEmail` compares `email = $1` exactly. I'll normalize the argument with "
             "the same `normalizeEmail()` and add a migration that lowercases stored emails and adds a unique index "
             "on `lower(email)`.",
             edit("src/users/postgres-repository.ts",
                  'import type { User } from "./repository.js";',
                  'import { normalizeEmail, type User } from "./repository.js";',
                  ('"SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL", [email]);',
                   '"SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL", [normalizeEmail(email)]);'))),
        step(None, write("db/migrations/0042_lowercase_emails.sql",
                         "-- Lowercase stored emails so lookups by normalizeEmail() find them.\n"
                         "-- Abort if two accounts would collide; support resolves those by hand.\n"
                         "DO $$\nBEGIN\n  IF EXISTS (SELECT lower(trim(email)) FROM users GROUP BY 1 HAVING count(*) > 1) THEN\n"
                         "    RAISE EXCEPTION 'duplicate emails after normalization';\n  END IF;\nEND $$;\n\n"
                         "UPDATE users SET email = lower(trim(email)) WHERE email <> lower(trim(email));\n"
                         "CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS users_email_lower_idx ON users (lower(email));\n")),
        step(None, read("src/users/postgres-repository.ts", 1, 40), bash("npm test", tests())),
        step("Done: the Postgres repository normalizes lookups, and `db/migrations/0042_lowercase_emails.sql` "
             "lowercases stored emails (aborting on collisions) and adds `users_email_lower_idx`. `openapi.yaml` "
             "only says `expiresAt` is a string; I left it alone since it is part of the public contract. "
             "Tests: 11/11 pass."),
    )

    # user-run commands: lint fails, coverage truncated, a private git log
    lint_out = ("\n/home/mara/src/acme-auth/src/auth/session-store.ts\n  3:10  error  'SESSION_TTL' is defined but never used  @typescript-eslint/no-unused-vars\n\n"
                "✖ 1 problem (1 error, 0 warnings)\n")
    r.user_bash("npm run lint", "> @acme/auth-service@2.14.3 lint\n> eslint 'src/**/*.ts' 'test/**/*.ts'\n" + lint_out, 1)
    r.turn("lint is failing, see above",
           step(None, read("src/auth/session-store.ts", 1, 5),
                thinking="The in-memory store no longer uses SESSION_TTL... but the Redis store does for EX. Let me check."),
           step(None, grep("SESSION_TTL\\b", "src/auth/session-store.ts")),
           step("Redis still uses `SESSION_TTL` for `EX`, so the import is used there... the linter flags the "
                "in-memory module scope. Looking closer, the Redis `EX` calls use `SESSION_TTL` — the lint error is "
                "from an outdated cache. Re-running with `--cache` disabled:",
                bash("npx eslint --no-cache 'src/**/*.ts' 'test/**/*.ts'", "")),
           step("Lint passes with a fresh cache: the error came from a stale `.eslintcache`. Nothing to change in the code."))
    cov_lines = ["> @acme/auth-service@2.14.3 test:coverage", "> vitest run --coverage", ""]
    for i in range(140):
        cov_lines.append(f"stdout | test/login.test.ts > login > case {i}\n[fastify] request completed in {rng.randint(1, 9)}ms reqId=req-{i:04x}")
    cov_lines += ["", " % Coverage report from v8", "-------------------|---------|----------|---------|---------|",
                  "File               | % Stmts | % Branch | % Funcs | % Lines |",
                  "-------------------|---------|----------|---------|---------|",
                  "All files          |   81.42 |    76.19 |   84.61 |   81.42 |",
                  " auth/login.ts     |     100 |      100 |     100 |     100 |",
                  " auth/refresh.ts   |   91.66 |       75 |     100 |   91.66 |",
                  " auth/session-store.ts | 58.33 | 50 | 62.5 | 58.33 |",
                  " auth/throttle.ts  |     100 |    83.33 |     100 |     100 |",
                  " routes/auth.ts    |       0 |        0 |       0 |       0 |",
                  " users/repository.ts |  95.23 |     100 |   85.71 |   95.23 |",
                  "-------------------|---------|----------|---------|---------|"]
    r.user_bash("npm run test:coverage", "\n".join(cov_lines), 0, truncated_path="/tmp/pi-bash-7c1e93a0d2b4f518.log", keep_lines=60)
    r.user_bash("git log --oneline -5", "b41c0de (HEAD -> fix/session-ttl) wip\n9a7f3e1 Bump fastify to 4.28.1\n"
                "5de0c2a Add login throttle\n71b9a44 Refresh token rotation\n0c3f5d7 Initial import", 0, exclude=True)
    r.compact(keep_recent_tokens=6000)

    # 3. follow-up: refresh token TTL has the same bug
    r.turn(
        "Coverage on session-store.ts is low (58%). Before we ship: does the refresh token have the same unit "
        "problem? REFRESH_TTL is in seconds too.",
        step(None, read("src/auth/refresh.ts"), grep("REFRESH_TTL", "src")),
        step("Yes — `RefreshTokenStore.issue()` does `Date.now() + REFRESH_TTL` with `REFRESH_TTL` in seconds, so "
             "refresh tokens live 43 minutes instead of 30 days. Same fix:",
             edit("src/config.ts", "export const REFRESH_TTL = loadConfig().REFRESH_TTL_SECONDS;",
                  "export const REFRESH_TTL = loadConfig().REFRESH_TTL_SECONDS;\nexport const REFRESH_TTL_MS = REFRESH_TTL * 1000;")),
        step(None, edit("src/auth/refresh.ts", 'import { REFRESH_TTL } from "../config.js";',
                        'import { REFRESH_TTL_MS } from "../config.js";',
                        ("\t\t\texpiresAt: Date.now() + REFRESH_TTL,", "\t\t\texpiresAt: Date.now() + REFRESH_TTL_MS,"))),
        step(None, bash("npm test", tests())),
        step("Fixed; 11/11 pass. `refresh.ts` now uses `REFRESH_TTL_MS`."),
    )
    r.compact(keep_recent_tokens=-1)  # keeps the previous compaction inside its kept range

    # 4. long refactor turn: inject a Clock, many small steps (a split turn when compacted)
    r.thinking_level_change("high")
    r.turn(
        "OK. Now make the time handling testable so this can't happen again: introduce a `Clock` interface "
        "(`now(): number` in ms) and inject it into both session stores, the refresh store and the throttle. "
        "Default to the system clock. Still: don't touch the public API, and run the tests after each file.",
        step("Plan: add `src/time/clock.ts`, then thread it through `InMemorySessionStore`, `RedisSessionStore`, "
             "`RefreshTokenStore` and `LoginThrottle` one file at a time, running the suite after each.",
             write("src/time/clock.ts",
                   "/** A source of the current time in epoch milliseconds. */\nexport interface Clock {\n\tnow(): number;\n}\n\n"
                   "export const systemClock: Clock = { now: () => Date.now() };\n\n"
                   "/** A clock that only moves when told to, for tests. */\nexport class ManualClock implements Clock {\n"
                   "\tconstructor(private current = 0) {}\n\tnow(): number {\n\t\treturn this.current;\n\t}\n"
                   "\tadvance(ms: number): void {\n\t\tthis.current += ms;\n\t}\n}\n"),
             thinking="Keep constructor signatures backwards compatible: optional clock parameter defaulting to "
                      "systemClock. RedisSessionStore(url) is constructed in src/index.ts — keep url first."),
    )
    for cls, path, old_ctor, new_ctor in [
        ("InMemorySessionStore", "src/auth/session-store.ts",
         "export class InMemorySessionStore implements SessionStore {\n\tprivate sessions = new Map<string, Session>();\n",
         "export class InMemorySessionStore implements SessionStore {\n\tprivate sessions = new Map<string, Session>();\n\n\tconstructor(private clock: Clock = systemClock) {}\n"),
        ("RedisSessionStore", "src/auth/session-store.ts",
         "\tconstructor(url: string) {\n\t\tthis.redis = new Redis(url, { lazyConnect: true });\n\t}",
         "\tconstructor(url: string, private clock: Clock = systemClock) {\n\t\tthis.redis = new Redis(url, { lazyConnect: true });\n\t}"),
        ("RefreshTokenStore", "src/auth/refresh.ts",
         "export class RefreshTokenStore {\n\tprivate tokens = new Map<string, RefreshToken>();\n",
         "export class RefreshTokenStore {\n\tprivate tokens = new Map<string, RefreshToken>();\n\n\tconstructor(private clock: Clock = systemClock) {}\n"),
        ("LoginThrottle", "src/auth/throttle.ts",
         "export class LoginThrottle {\n\tprivate failures = new Map<string, { count: number; lockedUntil: number }>();\n",
         "export class LoginThrottle {\n\tprivate failures = new Map<string, { count: number; lockedUntil: number }>();\n\n\tconstructor(private clock: Clock = systemClock) {}\n"),
    ]:
        r.assistant(step(f"Next: `{cls}` in `{path}`.", read(path)))
        r.assistant(step(None, edit(path, old_ctor, new_ctor)))
        body = r.project.files[r.project.rel(path)]
        if "import { systemClock" not in body:
            first_line = body.split("\n", 1)[0]
            r.assistant(step(None, edit(path, first_line, first_line + '\nimport { type Clock, systemClock } from "../time/clock.js";')))
        # replace Date.now() uses inside the file one occurrence at a time (the first attempt fails once)
        body = r.project.files[r.project.rel(path)]
        occurrences = [ln for ln in body.split("\n") if "Date.now()" in ln]
        for k, ln in enumerate(dict.fromkeys(occurrences)):
            if body.count(ln) > 1:
                r.assistant(step(None, edit(path, ln, ln.replace("Date.now()", "this.clock.now()"))))
                r.assistant(step("That line occurs twice; I'll include the surrounding method.", read(path)))
                continue
            if k == 0 and cls == "RefreshTokenStore":
                r.assistant(step(None, edit(path, ln.replace("\t", "  "), ln.replace("Date.now()", "this.clock.now()"))))
            r.assistant(step(None, edit(path, ln, ln.replace("Date.now()", "this.clock.now()"))))
            body = r.project.files[r.project.rel(path)]
        body = r.project.files[r.project.rel(path)]
        while "Date.now()" in body:
            idx = body.index("Date.now()")
            start = body.rfind("\n", 0, idx - 80) + 1
            end = body.find("\n", idx) + 1
            chunk = body[start:end]
            r.assistant(step(None, edit(path, chunk, chunk.replace("Date.now()", "this.clock.now()", 1))))
            body = r.project.files[r.project.rel(path)]
        r.assistant(step(None, bash("npm test", tests())))
    r.assistant(step(None, grep("Date\\.now\\(\\)", "src")))
    r.assistant(step("No `Date.now()` left outside `src/time/clock.ts`. Now the tests can use `ManualClock` instead "
                     "of fake timers.", read("test/session-store.test.ts")))
    r.compact(keep_recent_tokens=3000)
    r.assistant(step(None, write("test/session-store.test.ts",
                                 "import { describe, expect, it } from \"vitest\";\nimport { InMemorySessionStore } from \"../src/auth/session-store.js\";\n"
                                 "import { ManualClock } from \"../src/time/clock.js\";\n\nconst HOUR = 3600 * 1000;\n\n"
                                 "describe(\"InMemorySessionStore\", () => {\n\tit(\"creates a session for a user\", async () => {\n"
                                 "\t\tconst store = new InMemorySessionStore(new ManualClock(1_000));\n\t\tconst session = await store.create(\"u1\");\n"
                                 "\t\texpect(session.userId).toBe(\"u1\");\n\t\texpect(await store.get(session.id)).toEqual(session);\n\t});\n\n"
                                 "\tit(\"expires a session after the TTL\", async () => {\n\t\tconst clock = new ManualClock();\n"
                                 "\t\tconst store = new InMemorySessionStore(clock);\n\t\tconst session = await store.create(\"u1\");\n"
                                 "\t\tclock.advance(HOUR - 1);\n\t\texpect(await store.get(session.id)).toBeDefined();\n"
                                 "\t\tclock.advance(1);\n\t\texpect(await store.get(session.id)).toBeUndefined();\n\t});\n\n"
                                 "\tit(\"touch extends the session\", async () => {\n\t\tconst clock = new ManualClock();\n"
                                 "\t\tconst store = new InMemorySessionStore(clock);\n\t\tconst session = await store.create(\"u1\");\n"
                                 "\t\tclock.advance(HOUR - 10);\n\t\tawait store.touch(session.id);\n\t\tclock.advance(HOUR - 10);\n"
                                 "\t\texpect(await store.get(session.id)).toBeDefined();\n\t});\n\n"
                                 "\tit(\"destroy removes the session\", async () => {\n\t\tconst store = new InMemorySessionStore();\n"
                                 "\t\tconst session = await store.create(\"u1\");\n\t\tawait store.destroy(session.id);\n"
                                 "\t\texpect(await store.get(session.id)).toBeUndefined();\n\t});\n});\n")))
    r.assistant(step(None, bash("npm test", tests())))
    r.assistant(step("Done. `Clock` is injected everywhere time is read:\n\n- `src/time/clock.ts`: `Clock`, `systemClock`, "
                     "`ManualClock`.\n- `InMemorySessionStore`, `RedisSessionStore`, `RefreshTokenStore`, `LoginThrottle` "
                     "take an optional `clock` (default `systemClock`), so `src/index.ts` and `src/routes/auth.ts` are "
                     "unchanged.\n- `test/session-store.test.ts` uses `ManualClock` and checks the boundary "
                     "(`HOUR - 1` valid, `HOUR` expired).\n\n11/11 tests pass."))

    # 5. an overloaded API error and a retry, then wrap-up
    r.user("Great. Can you write a short CHANGELOG entry and a PR description? Mention the migration for "
           "mixed-case emails.")
    r.assistant(step(None), stop="error",
                error='529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}')
    r.user("retry")
    r.assistant(step(None, read("README.md")))
    r.assistant(step(None, write("CHANGELOG.md",
                                 "# Changelog\n\n## 2.14.4\n\n### Fixed\n- Sessions expired 3.6 s after login: `SESSION_TTL_SECONDS` was "
                                 "added to `Date.now()` without converting to milliseconds. Same bug for refresh tokens.\n"
                                 "- Users registered with a mixed-case email (e.g. `Alice@Example.com`) could not log in.\n\n"
                                 "### Changed\n- Time is read through an injectable `Clock` (`src/time/clock.ts`).\n\n"
                                 "### Migration\n- Run `UPDATE users SET email = lower(trim(email));` after checking for duplicates.\n")))
    r.assistant(step("**CHANGELOG.md** is written. PR description:\n\n> **Fix immediate logout after login and "
                     "mixed-case email logins**\n>\n> - Convert `SESSION_TTL_SECONDS`/`REFRESH_TTL_SECONDS` to ms at the "
                     "boundary (`SESSION_TTL_MS`, `REFRESH_TTL_MS`).\n> - Normalize emails in `UserRepository` "
                     "(`normalizeEmail`).\n> - Inject a `Clock`; tests use `ManualClock`.\n> - No change to the public "
                     "API (`src/routes/auth.ts`).\n> - Migration: lowercase existing emails (see CHANGELOG).\n\nAll 11 tests pass."))

    # 6. a final audit across the code base (long tool outputs: the context keeps growing)
    r.turn(
        "Before I open the PR: audit the whole code base for any other place that mixes seconds and milliseconds "
        "(Redis EX, cookies, retry-after, SQL intervals). Read everything relevant; I'd rather you over-read.",
        step("Starting with a listing and a search for time-related names.", ls("src"), ls("src/auth"), ls("src/users"),
             grep("TTL|_SECONDS|EX\\b|retry-after|interval|expires", "src", ignore_case=True)),
        step(None, read("src/auth/session-store.ts"), read("src/auth/refresh.ts"), read("src/auth/throttle.ts")),
        step(None, read("src/routes/auth.ts"), read("src/config.ts"), read("docs/architecture.md")),
        step("The Postgres repository is long; reading it in two parts.", read("src/users/postgres-repository.ts", 1, 200)),
        step(None, read("src/users/postgres-repository.ts", 201)),
        step(None, read("openapi.yaml")),
        step(None, bash("npx vitest run --reporter=verbose", tests())),
        step("Audit result — every remaining time value is consistent:\n\n| place | unit | verdict |\n| --- | --- | --- |\n"
             "| `RedisSessionStore` `EX` | seconds (`SESSION_TTL`) | ✅ correct |\n| `expiresAt` fields | ms (`*_TTL_MS`) | ✅ |\n"
             "| `LoginThrottle` `retry-after` | seconds (`Math.ceil(ms / 1000)`) | ✅ |\n"
             "| `LOGIN_LOCKOUT_SECONDS * 1000` | ms | ✅ |\n| SQL | no intervals | — |\n\n"
             "Nothing else mixes units. `src/routes/auth.ts` and `openapi.yaml` are untouched, and all 11 tests pass."),
    )
    r.turn(
        "One more: the gateway team asks whether `expiresAt` in the /v1/login response changed format. Check the "
        "route and the README and answer precisely.",
        step(None, read("src/routes/auth.ts"), read("README.md"), grep("toISOString", "src")),
        step("No format change. `/v1/login` still returns `expiresAt: new Date(session.expiresAt).toISOString()` "
             "(ISO-8601, as the README documents). Only the **value** changed: it is now one hour after login "
             "instead of 3.6 seconds, which is what the gateway expected all along."),
    )
    r.label(fix_entry, None)
    r.label(r.leaf, "ready-for-pr")
    return r


# --------------------------------------------------------------------------------------
# Files added to the project at the start, and scripted tool outputs
# --------------------------------------------------------------------------------------


def _postgres_repository(rng: random.Random) -> str:
    """A long, realistic Postgres repository file (the production twin of UserRepository)."""
    fields = ["email", "display_name", "locale", "created_at", "last_login_at", "failed_logins", "mfa_enabled",
              "avatar_url", "time_zone", "marketing_opt_in", "deleted_at", "plan", "org_id", "role", "phone",
              "phone_verified_at", "email_verified_at", "password_changed_at", "lockout_until", "referrer",
              "signup_source", "country", "tos_version", "sso_provider", "sso_subject", "invited_by"]
    out = ['import type { Pool } from "pg";', 'import type { User } from "./repository.js";', "",
           "/** Postgres-backed users table. Same interface as UserRepository. */",
           "export class PostgresUserRepository {", "\tconstructor(private pool: Pool) {}", ""]
    out += ["\tasync findByEmail(email: string): Promise<User | undefined> {",
            "\t\tconst { rows } = await this.pool.query(\"SELECT * FROM users WHERE email = $1 AND deleted_at IS NULL\", [email]);",
            "\t\treturn rows[0] ? toUser(rows[0]) : undefined;", "\t}", ""]
    for f in fields:
        camel = re.sub(r"_(\w)", lambda m: m.group(1).upper(), f)
        cap = camel[0].upper() + camel[1:]
        out += [f"\t/** Find users by {f.replace('_', ' ')}. */",
                f"\tasync findBy{cap}(value: unknown, limit = {rng.choice([50, 100, 200])}): Promise<User[]> {{",
                "\t\tconst { rows } = await this.pool.query(",
                f"\t\t\t\"SELECT * FROM users WHERE {f} = $1 AND deleted_at IS NULL ORDER BY created_at DESC LIMIT $2\",",
                "\t\t\t[value, limit],", "\t\t);", "\t\treturn rows.map(toUser);", "\t}", "",
                f"\tasync update{cap}(id: string, value: unknown): Promise<void> {{",
                f"\t\tawait this.pool.query(\"UPDATE users SET {f} = $2, updated_at = now() WHERE id = $1\", [id, value]);",
                "\t}", "",
                f"\t/** Count live users grouped by {f.replace('_', ' ')} (admin dashboard). */",
                f"\tasync countBy{cap}(): Promise<Array<{{ value: unknown; count: number }}>> {{",
                "\t\tconst { rows } = await this.pool.query(",
                f"\t\t\t\"SELECT {f} AS value, count(*)::int AS count FROM users WHERE deleted_at IS NULL GROUP BY {f} ORDER BY count DESC\",",
                "\t\t);", "\t\treturn rows as Array<{ value: unknown; count: number }>;", "\t}", ""]
    out += ["}", "", "function toUser(row: Record<string, unknown>): User {", "\treturn {",
            "\t\tid: String(row.id),", "\t\temail: String(row.email),", "\t\tdisplayName: String(row.display_name),",
            "\t\tpasswordHash: String(row.password_hash),", "\t\tcreatedAt: new Date(String(row.created_at)).toISOString(),",
            "\t\tlocale: String(row.locale ?? \"en\"),", "\t};", "}", ""]
    return "\n".join(out)


def _openapi(rng: random.Random) -> str:
    """The service's OpenAPI document (the public contract)."""
    out = ["openapi: 3.1.0", "info:", "  title: Acme auth service", "  version: 2.14.3", "paths:"]
    routes = [("/v1/login", "post", "Log in with email and password"), ("/v1/logout", "post", "End the session"),
              ("/v1/refresh", "post", "Rotate the refresh token"), ("/v1/me", "get", "The current user")]
    for path, method, summary in routes:
        out += [f"  {path}:", f"    {method}:", f"      summary: {summary}", "      responses:"]
        for code, desc in [("200", "OK"), ("400", "invalid_request"), ("401", "invalid_credentials or session_expired"),
                           ("429", "locked"), ("500", "internal error")]:
            out += [f"        \"{code}\":", f"          description: {desc}", "          content:",
                    "            application/json:", "              schema:",
                    f"                $ref: '#/components/schemas/{'Error' if code != '200' else 'Session'}'"]
    out += ["components:", "  schemas:"]
    for name in ["Session", "User", "Error", "RefreshResponse", "LoginRequest", "RefreshRequest"]:
        out += [f"    {name}:", "      type: object", "      properties:"]
        for prop in ["sessionId", "expiresAt", "user", "id", "email", "displayName", "error", "refreshToken"][: rng.randint(3, 8)]:
            out += [f"        {prop}:", "          type: string",
                    f"          description: The {prop} field of {name}; see docs/architecture.md for its semantics."]
    return "\n".join(out) + "\n"


def vitest_report(results: dict[str, list[tuple[str, bool]]], rng: random.Random, failure: str = "",
                  coverage: bool = False) -> str:
    """Text output of ``vitest run`` for the given per-file test outcomes."""
    lines = [" RUN  v2.1.2 /home/mara/src/acme-auth", ""]
    n_pass = n_fail = files_fail = 0
    for file, tests in results.items():
        failed = [t for t, ok in tests if not ok]
        ms = rng.randint(8, 140)
        mark = "❯" if failed else "✓"
        lines.append(f" {mark} {file} ({len(tests)} test{'s' if len(tests) != 1 else ''}"
                     f"{f' | {len(failed)} failed' if failed else ''}) {ms}ms")
        for name, ok in tests:
            if not ok:
                lines.append(f"   × {name} {rng.randint(2, 40)}ms")
                lines.append(f"     → {failure.splitlines()[0] if failure else 'assertion failed'}")
        n_pass += sum(1 for _, ok in tests if ok)
        n_fail += len(failed)
        files_fail += bool(failed)
    if n_fail:
        lines += ["", "⎯⎯⎯⎯⎯⎯⎯ Failed Tests " + str(n_fail) + " ⎯⎯⎯⎯⎯⎯⎯", "", failure, ""]
    lines.append("")
    total_files = len(results)
    lines.append(" Test Files  " + (f"{files_fail} failed | " if files_fail else "") + f"{total_files - files_fail} passed ({total_files})")
    lines.append("      Tests  " + (f"{n_fail} failed | " if n_fail else "") + f"{n_pass} passed ({n_pass + n_fail})")
    lines.append("   Start at  10:" + f"{rng.randint(10, 59)}:{rng.randint(10, 59)}")
    lines.append(f"   Duration  {rng.randint(900, 2400)}ms (transform {rng.randint(80, 300)}ms, setup 0ms, collect {rng.randint(200, 600)}ms, tests {rng.randint(100, 400)}ms)")
    return "\n".join(lines)
