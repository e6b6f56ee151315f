#!/usr/bin/env bash
# `npm run smoke:pack`: the package as a user gets it. Packs the checkout
# (`npm pack`, which builds through `prepare`), checks what the tarball
# carries, installs it into an empty folder with plain Node (no TypeScript
# loader anywhere in that folder), then:
#   1. `npx onejob serve` (the demo config, SQLite) answers /healthz and
#      /readyz, and a demo chat call through /v1/chat/completions succeeds
#      (and its replay is marked Idempotent-Replayed);
#   2. `import { … } from 'onejob'` and 'onejob/testing' work from an .mjs
#      file (a store opened and migrated from the installed migrations, the
#      fake provider started);
#   3. a TypeScript consumer type-checks against the installed .d.ts files
#      (`tsc --noEmit`), including one deliberate type error that must be
#      reported (so `any` types would fail the check).
# Needs the npm registry (the package's dependencies, typescript and
# @types/node for the consumer). Exits non-zero on the first failure.
# ONEJOB_SMOKE_KEEP=1 keeps the temp folder.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/onejob-pack-smoke.XXXXXX")"
serve_pid=""
cleanup() {
  if [ -n "$serve_pid" ]; then stop_serve; fi
  if [ "${ONEJOB_SMOKE_KEEP:-}" = "1" ]; then echo "smoke: kept $work"; else rm -rf "$work"; fi
}
# npx runs `onejob serve` as a child of its own and does not pass SIGTERM on: stop the whole process group.
stop_serve() {
  kill -TERM -- "-$serve_pid" 2>/dev/null || true
  wait "$serve_pid" 2>/dev/null || true
  serve_pid=""
}
trap cleanup EXIT
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }
step() { echo "smoke [${SECONDS}s]: $*"; }

node_major="$(node -p 'process.versions.node.split(".")[0]')"
step "node $(node --version), npm $(npm --version)"
[ "$node_major" -ge 20 ] || fail "needs Node 20 or later"

# --- pack ---------------------------------------------------------------------
cd "$root"
tarball="$(npm pack --silent --pack-destination "$work" | tail -n 1)"
[ -f "$work/$tarball" ] || fail "npm pack produced no tarball"
step "packed $tarball ($(du -h "$work/$tarball" | cut -f1))"
listing="$work/contents.txt"
tar -tzf "$work/$tarball" > "$listing"
for want in package/package.json package/README.md package/bin/onejob package/dist/index.js package/dist/index.d.ts \
  package/dist/cli/main.js package/dist/testing/index.js package/dist/testing/index.d.ts \
  package/dist/store/sqlite/sqlite-worker.mjs package/dist/store/sqlite/sqlite-engines.mjs package/deploy/haproxy.cfg package/dist/client/index.js \
  package/dist/dbos/index.js package/dist/restate/index.js package/dist/temporal/index.js package/dist/ai-sdk/index.js \
  package/dist/dbos/index.d.ts package/dist/ai-sdk/index.d.ts; do
  grep -qx "$want" "$listing" || fail "the tarball lacks $want"
done
grep -q '^package/migrations/sqlite/0001_.*\.sql$' "$listing" || fail "the tarball lacks the SQLite migrations"
grep -q '^package/migrations/postgres/0001_.*\.sql$' "$listing" || fail "the tarball lacks the PostgreSQL migrations"
if grep -qE '^package/(test|src|chaos|bench|scripts)/|\.test\.' "$listing"; then
  fail "the tarball carries sources or tests: $(grep -E '^package/(test|src|chaos|bench|scripts)/|\.test\.' "$listing" | head -n 3 | tr '\n' ' ')"
fi

# --- install into an empty folder -------------------------------------------------
app="$work/app"
mkdir "$app"
cd "$app"
printf '{ "name": "onejob-smoke-consumer", "version": "1.0.0", "private": true, "type": "module" }\n' > package.json
ts_version="$(node -p "require('$root/package.json').devDependencies.typescript")"
types_node_version="$(node -p "require('$root/package.json').devDependencies['@types/node']")"
step "npm install $tarball typescript@$ts_version @types/node@$types_node_version"
# Install scripts are run below, for better-sqlite3 only (nothing else installed here has one:
# onejob has none). Compiling its SQLite takes minutes on two shared cores, so by default
# the checkout's binding of the same version is reused; ONEJOB_SMOKE_BUILD_NATIVE=1 compiles it.
npm install --ignore-scripts --no-audit --no-fund --loglevel=error "$work/$tarball" "typescript@$ts_version" "@types/node@$types_node_version" > "$work/install.log" 2>&1 \
  || { cat "$work/install.log" >&2; fail "npm install of the tarball"; }
sqlite_version="$(node -p "require('./node_modules/better-sqlite3/package.json').version")"
checkout_binding="$root/node_modules/better-sqlite3/build/Release/better_sqlite3.node"
checkout_sqlite_version="$(node -p "require('$root/node_modules/better-sqlite3/package.json').version" 2>/dev/null || true)"
if [ "${ONEJOB_SMOKE_BUILD_NATIVE:-}" != "1" ] && [ "$sqlite_version" = "$checkout_sqlite_version" ] && [ -f "$checkout_binding" ]; then
  mkdir -p node_modules/better-sqlite3/build/Release
  cp "$checkout_binding" node_modules/better-sqlite3/build/Release/
  step "better-sqlite3 $sqlite_version: reused the checkout's compiled binding (ONEJOB_SMOKE_BUILD_NATIVE=1 compiles it)"
else
  step "better-sqlite3 $sqlite_version: running its install script (prebuilt download, else a compile)"
  npm rebuild better-sqlite3 --foreground-scripts > "$work/rebuild.log" 2>&1 || { tail -n 30 "$work/rebuild.log" >&2; fail "better-sqlite3 did not install"; }
fi
[ ! -e node_modules/tsx ] || fail "tsx was installed: something at run time still depends on it"
[ ! -e node_modules/onejob/src ] || fail "the installed package carries src/"

# --- 1. npx onejob serve ------------------------------------------------------------
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
url="http://127.0.0.1:$port"
step "npx onejob serve --port $port (demo config, SQLite)"
env -u ONEJOB_CONFIG -u ONEJOB_API_KEYS -u ONEJOB_RUN DATABASE_URL="sqlite:$app/onejob.db" LOG_LEVEL=warn \
  setsid npx --no-install onejob serve --port "$port" --host 127.0.0.1 > "$work/serve.log" 2>&1 &
serve_pid=$!
ok=""
for _ in $(seq 1 150); do
  if curl -fsS -o /dev/null "$url/healthz" 2>/dev/null; then ok=1; break; fi
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.2
done
[ -n "$ok" ] || { cat "$work/serve.log" >&2; fail "serve did not answer /healthz"; }
curl -fsS -o /dev/null "$url/readyz" || { cat "$work/serve.log" >&2; fail "/readyz did not answer 200"; }
step "/healthz and /readyz answer 200"
chat() {
  curl -sS -D "$work/chat.headers" -o "$work/chat.json" -w '%{http_code}' "$url/v1/chat/completions" \
    -H 'Authorization: Bearer demo-token' -H 'Idempotency-Key: smoke-1' -H 'Content-Type: application/json' \
    -d '{"model":"demo","messages":[{"role":"user","content":"hello from the smoke test"}]}'
}
code="$(chat)"
[ "$code" = "200" ] || { cat "$work/chat.json" "$work/serve.log" >&2; fail "demo chat call answered $code"; }
node -e 'const b = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); const c = b.choices?.[0]?.message?.content; if (typeof c !== "string" || !c.includes("hello from the smoke test")) { console.error(JSON.stringify(b)); process.exit(1); }' "$work/chat.json" \
  || fail "the demo chat answer does not carry the message back"
code="$(chat)"
[ "$code" = "200" ] || fail "the demo chat replay answered $code"
grep -qi '^idempotent-replayed: true' "$work/chat.headers" || fail "the replay lacks Idempotent-Replayed: true"
step "demo chat call answered 200; its replay is Idempotent-Replayed"
stop_serve
for _ in $(seq 1 50); do pgrep -f "onejob serve --port $port" >/dev/null || break; sleep 0.1; done
pgrep -f "onejob serve --port $port" >/dev/null && fail "onejob serve still runs 5 s after it was stopped"

# --- 2. import from an .mjs file -------------------------------------------------------
cat > check.mjs <<'JS'
import { JOB_STATES, OnejobError, loadConfig, openStore } from 'onejob';
import { startFakeProvider } from 'onejob/testing';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

if (!Array.isArray(JOB_STATES) || !JOB_STATES.includes('succeeded')) throw new Error('JOB_STATES is not the list of states');
if (typeof OnejobError !== 'function') throw new Error('OnejobError is not exported');
const config = loadConfig({ env: {} });
if (typeof config.port !== 'number') throw new Error('loadConfig gave no port');
// The migrations are read from the installed package (migrations/ beside dist/).
const store = await openStore(`sqlite:${join(mkdtempSync(join(tmpdir(), 'onejob-smoke-')), 'x.db')}`);
await store.migrate();
await store.close();
const fake = await startFakeProvider();
const res = await fetch(`${fake.url}/healthz`);
await fake.close();
if (!res.ok) throw new Error(`fake provider /healthz: ${res.status}`);
console.log('imports ok');
JS
node check.mjs > "$work/mjs.log" 2>&1 || { cat "$work/mjs.log" >&2; fail "import from 'onejob' in an .mjs file"; }
step "import { … } from 'onejob' and 'onejob/testing' work from .mjs (store migrated, fake provider started)"

# The durable-engine entry points: their engines are optional peers, none installed here. onejob/client's
# stepKey needs none; onejob/ai-sdk imports only ai's types, so it loads without ai; onejob/dbos needs its
# engine and says which package is missing.
cat > engines.mjs <<'JS'
import { stepKey } from 'onejob/client';
import { onejobStepKeys } from 'onejob/ai-sdk';
if (stepKey('dbos', 'wf-1', 2) !== 'step:dbos:wf-1:2') throw new Error(`stepKey gave ${stepKey('dbos', 'wf-1', 2)}`);
if (typeof onejobStepKeys({ identity: 'run-1' }).transformParams !== 'function') throw new Error('onejobStepKeys is not a middleware');
try {
  await import('onejob/dbos');
  throw new Error('onejob/dbos loaded without @dbos-inc/dbos-sdk installed');
} catch (e) {
  if (!String(e?.message).includes('@dbos-inc/dbos-sdk')) throw e;
}
console.log('engines ok');
JS
node engines.mjs > "$work/engines.log" 2>&1 || { cat "$work/engines.log" >&2; fail "the durable-engine entry points (onejob/client stepKey, onejob/ai-sdk, onejob/dbos without its peer)"; }
step "onejob/client's stepKey and onejob/ai-sdk load with no engine installed; onejob/dbos names its missing peer"

# --- 3. a TypeScript consumer ------------------------------------------------------------
cat > tsconfig.json <<'JSON'
{ "compilerOptions": { "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext", "strict": true, "noEmit": true, "skipLibCheck": false, "types": ["node"] }, "include": ["check.ts"] }
JSON
cat > check.ts <<'TS'
import { loadConfig, openStore, type JobState, type OnejobConfig, type Store } from 'onejob';
import { startFakeProvider, type FakeProvider } from 'onejob/testing';

const config: OnejobConfig = loadConfig({ env: {} });
const port: number = config.port;
const state: JobState = 'succeeded';
async function open(): Promise<Store> {
  return openStore('sqlite::memory:');
}
async function fake(): Promise<FakeProvider> {
  return startFakeProvider();
}
// @ts-expect-error a port is a number: were the types `any`, this line would be an unused directive
const wrong: string = config.port;
export { port, state, open, fake, wrong };
TS
npx --no-install tsc -p tsconfig.json > "$work/tsc.log" 2>&1 || { cat "$work/tsc.log" >&2; fail "tsc --noEmit of a TypeScript consumer"; }
step "a TypeScript consumer type-checks against the installed types (tsc --noEmit, skipLibCheck off)"
echo "smoke: pack-and-install smoke test passed"
