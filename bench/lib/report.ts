/**
 * The benchmark's human outputs: a Markdown table (bench/results/latest.md)
 * and a hand-written SVG chart (bench/results/latest.svg) of the ratios
 * against their targets and of the latency distributions.
 */
import type { RunSummary } from './stats.ts';

/** The parts of a result the reports read. */
export interface ReportInput {
  readonly date: string;
  readonly machine: Record<string, unknown>;
  readonly ratios: Record<string, number | null>;
  readonly addedLatencyMs: Record<string, number | null>;
  readonly medians: Record<string, RunSummary | null>;
  readonly storm: unknown;
  readonly chat: unknown;
  readonly timeout: unknown;
  /** Time to first token added over the fake provider direct (ms). */
  readonly ttftAddedMs?: Record<string, number | null>;
  /** The same with the fake's content 50 ms apart. */
  readonly ttftAddedMs50?: Record<string, number | null>;
  readonly stream?: unknown;
  readonly waiting?: unknown;
  /** CPU ms per chat request per side (32 connections), medians over rounds (`bench/lib/cpu.ts`). */
  readonly chatCpuPerRequestMs?: Record<string, { processMs: number | null; databaseMs: number | null; totalMs: number | null }>;
  /** The chat ratios per round and their spread (`bench/lib/chat-spread.ts`). */
  readonly chatSpread?: Record<string, { rounds: (number | null)[]; median: number | null; min: number | null; max: number | null; spread: number | null }>;
  readonly errors: Record<string, string>;
  readonly durability: string;
  /** The peers' versions (the queue libraries, Portkey, the durable peers). */
  readonly peers?: Record<string, string>;
  /** The floor of the floor-corrected ratios: two one-row durable commits at one client (ms). */
  readonly floorMs?: { postgres: number | null; sqlite: number | null };
  /** Added p50 at one connection over the provider direct, per durable-peers side (ms). */
  readonly durableAddedLatencyMs?: Record<string, number | null>;
  /** The durable-peers section's own output (bench/durable-peers.ts). */
  readonly durablePeers?: unknown;
  /** The parity check after each onejob series (`bench/lib/parity.ts`). */
  readonly parity?: readonly { series: string; answered2xx: number; cutOff: number; rows: number; providerCalls: number | null; ok: boolean; problems: readonly string[] }[];
}

/** Each ratio's target: `min` (at least), `max` (at most) or `eq` (exactly). */
export const TARGETS: Record<string, { readonly op: 'min' | 'max' | 'eq'; readonly value: number; readonly label: string }> = {
  create_http_vs_pgbench: { op: 'min', value: 0.6, label: 'POST /v1/jobs (HTTP) ÷ pgbench, same SQL, same concurrency' },
  store_vs_pgbench: { op: 'min', value: 0, label: 'store alone ÷ pgbench (where the time goes)' },
  store_vs_pgboss: { op: 'min', value: 2, label: 'store keyed create ÷ pg-boss keyed send' },
  store_vs_graphile: { op: 'min', value: 4, label: 'store keyed create ÷ graphile-worker keyed addJob' },
  store_vs_raw_insert: { op: 'min', value: 1, label: 'store keyed create ÷ raw pg single-row insert' },
  create_http_sqlite_vs_pg: { op: 'min', value: 1, label: 'POST /v1/jobs on SQLite ÷ on PostgreSQL' },
  chat_rps_vs_portkey: { op: 'min', value: 2, label: '/v1/chat/completions req/s ÷ Portkey req/s (PostgreSQL, 32 connections)' },
  chat_added_p50_vs_portkey: { op: 'max', value: 1, label: 'added p50 latency ÷ Portkey added p50 (PostgreSQL, 1 connection)' },
  chat_rps_vs_portkey_sqlite: { op: 'min', value: 2.5, label: 'the same req/s ratio on SQLite (issue 40: 2.5)' },
  chat_added_p50_vs_portkey_sqlite: { op: 'max', value: 1, label: 'the same added-p50 ratio on SQLite' },
  chat_added_p50_beyond_floor_vs_portkey: { op: 'max', value: 1, label: "(onejob's added p50 − the floor: two pgbench one-row commits at -c 1, p50) ÷ Portkey's added p50 (PostgreSQL, 1 connection; issue 40)" },
  chat_added_p50_beyond_floor_vs_portkey_sqlite: { op: 'max', value: 1, label: 'the same on SQLite, the floor two synchronous=FULL one-row commits of the SQLite job insert at one client' },
  durable_rps_vs_best_peer: { op: 'min', value: 5, label: 'durable intent (one keyed LLM call), req/s at 32 connections: onejob ÷ the best of DBOS, Restate, pg-boss (issue 40)' },
  durable_added_p50_vs_best_peer: { op: 'max', value: 0.33, label: "the same intent, added p50 at 1 connection: onejob ÷ the lowest peer's" },
  durable_rps_vs_dbos: { op: 'min', value: 5, label: 'req/s at 32 connections: onejob ÷ DBOS Transact (workflow id = key, one step)' },
  durable_added_p50_vs_dbos: { op: 'max', value: 0.33, label: "added p50 at 1 connection: onejob ÷ DBOS's" },
  durable_cpu_per_request_vs_dbos: { op: 'min', value: 0, label: 'CPU per request (process + PostgreSQL backends): onejob ÷ DBOS (anchor)' },
  durable_rps_vs_restate: { op: 'min', value: 5, label: 'req/s at 32 connections: onejob ÷ Restate (ingress idempotency-key, ctx.run)' },
  durable_added_p50_vs_restate: { op: 'max', value: 0.33, label: "added p50 at 1 connection: onejob ÷ Restate's" },
  durable_cpu_per_request_vs_restate: { op: 'min', value: 0, label: "CPU per request: onejob (process + backends) ÷ Restate (server + service processes) (anchor)" },
  durable_rps_vs_pgboss: { op: 'min', value: 5, label: 'req/s at 32 connections: onejob ÷ pg-boss (send singletonKey, worker completes)' },
  durable_added_p50_vs_pgboss: { op: 'max', value: 0.33, label: "added p50 at 1 connection: onejob ÷ pg-boss's" },
  durable_cpu_per_request_vs_pgboss: { op: 'min', value: 0, label: 'CPU per request (process + PostgreSQL backends): onejob ÷ pg-boss (anchor)' },
  chat_cpu_per_request_vs_portkey: { op: 'max', value: 1, label: 'CPU per chat request: onejob process + its PostgreSQL backends ÷ the Portkey process (32 connections, /proc utime+stime; median of the rounds\' ratios)' },
  chat_cpu_per_request_vs_portkey_sqlite: { op: 'max', value: 1, label: 'the same on SQLite (the onejob process, its SQLite worker thread included)' },
  chat_process_cpu_per_request_vs_portkey: { op: 'max', value: 1, label: 'the onejob process alone (PostgreSQL, without its backends) ÷ the Portkey process' },
  parity_failures: { op: 'eq', value: 0, label: 'onejob series whose jobs ≠ 2xx answers or provider calls ≠ jobs' },
  portkey_rps_vs_direct: { op: 'min', value: 0, label: 'Portkey req/s ÷ fake provider direct (anchor)' },
  dup_storm_rows: { op: 'eq', value: 1, label: 'rows created by 1,000 concurrent creates of one key' },
  dup_storm_callers_with_id: { op: 'eq', value: 1000, label: 'callers of the storm that got the job id' },
  dup_storm_p99_vs_distinct: { op: 'max', value: 2, label: 'storm p99 ÷ p99 of 1,000 distinct keys' },
  timeout_provider_calls_per_request: { op: 'eq', value: 1, label: 'provider executions per request, 1 s primary, 200 ms timeout, no hedge' },
  timeout_provider_calls_per_request_hedged: { op: 'max', value: 2, label: 'the same with a 100 ms hedge (at most one per attempt)' },
  portkey_timeout_provider_calls_per_request: { op: 'min', value: 0, label: 'Portkey, same scenario (anchor)' },
  stream_ttft_added_p50_vs_portkey: { op: 'max', value: 1, label: 'streaming: time to first token added over the provider direct, p50 ÷ Portkey\'s (PostgreSQL, 1 connection)' },
  stream_ttft_added_p50_vs_portkey_sqlite: { op: 'max', value: 1, label: 'the same on SQLite' },
  stream50_ttft_added_p50_vs_portkey: { op: 'max', value: 1, label: 'the same, PostgreSQL, the provider streaming content 50 ms apart (full run, --only stream)' },
  stream50_ttft_added_p50_vs_portkey_sqlite: { op: 'max', value: 1, label: 'the same on SQLite, content 50 ms apart' },
  timeout_non_winner_usd_per_request: { op: 'min', value: 0, label: 'timeout scenario: USD per request spent on attempts that did not win (onejob\'s account, no hedge)' },
  timeout_non_winner_usd_per_request_hedged: { op: 'min', value: 0, label: 'the same with a 100 ms hedge (onejob\'s account: attempts\' cost_usd)' },
  portkey_timeout_non_winner_usd_per_request: { op: 'min', value: 0, label: 'Portkey: duplicate executions × the per-call price, per request' },
  waiting_statements_per_waiter_per_second: { op: 'max', value: 0.01, label: 'statements to PostgreSQL per waiter per second, 2,004 long-polls + 2,000 chats waiting (target: none per waiter)' },
  waiting_statements_per_waiter_per_second_400: { op: 'min', value: 0, label: 'the same with 204 long-polls + 200 chats (anchor: the constant background, heartbeat and one sweep, over fewer waiters)' },
  waiting_marginal_statements_per_waiter_per_second: { op: 'max', value: 0.01, label: 'statements/s one more waiter adds: (2,000 tier − 200 tier) ÷ waiters added (target: none per waiter)' },
  waiting_wake_own_waiters_answered_share: { op: 'eq', value: 1, label: 'share of the changed job\'s 5 waiters answered after its cancel (2,000 tier)' },
  waiting_wake_other_waiters_answered: { op: 'eq', value: 0, label: 'other waiters answered after that one change (2,000 tier)' },
  doubt_responses_provider_executions_per_request: { op: 'eq', value: 1, label: 'openai-responses primary, work 1 s, 200 ms timeout, a fallback: provider executions per request (bench/timeout-responses.ts)' },
  doubt_portkey_provider_executions_per_request: { op: 'min', value: 0, label: 'Portkey, same scenario over Chat Completions, fallback on timeout (anchor)' },
  doubt_responses_succeeded_without_person_share: { op: 'eq', value: 1, label: 'share of those jobs that end succeeded with nobody resolving anything' },
  doubt_responses_resolution_p50_ms: { op: 'min', value: 0, label: 'ms from the attempt going unknown to its end, p50 (the executor still polling: a late answer)' },
  doubt_responses_resolution_p99_ms: { op: 'min', value: 0, label: 'the same, p99' },
  doubt_lookup_provider_executions_per_request: { op: 'eq', value: 1, label: 'the same scenario with no late-answer grace (the reconciler lookup ends the doubt): executions per request' },
  doubt_lookup_succeeded_without_person_share: { op: 'eq', value: 1, label: 'its share of jobs that end succeeded with nobody resolving anything' },
  doubt_lookup_resolution_p50_ms: { op: 'min', value: 0, label: 'ms from unknown to resolved by lookup, p50' },
  doubt_lookup_resolution_p99_ms: { op: 'min', value: 0, label: 'the same, p99' },
};

function verdict(name: string, v: number | null): string {
  const t = TARGETS[name];
  if (v === null) return 'not measured';
  if (!t || (t.value === 0 && t.op !== 'eq')) return 'anchor';
  const ok = t.op === 'min' ? v >= t.value : t.op === 'max' ? v <= t.value : v === t.value;
  const want = `${t.op === 'min' ? '≥' : t.op === 'max' ? '≤' : '='} ${t.value}`;
  return `${ok ? 'met' : '**missed**'} (${want})`;
}

const fmt = (v: number | null | undefined): string => (v === null || v === undefined || Number.isNaN(v) ? '–' : String(v));

const SERIES_LABELS: Record<string, string> = {
  pgbench_insert: 'pgbench, jobInsert SQL (prepared, 1 row/commit)',
  http_create_pg: 'onejob POST /v1/jobs, PostgreSQL',
  store_create_pg: 'onejob store.createJob, PostgreSQL',
  raw_pg_insert: 'raw pg Pool, jobInsert SQL, 1 row/round trip',
  pgboss_send: 'pg-boss 10 send(singletonKey)',
  graphile_add_job: 'graphile-worker 0.17 addJob(jobKey)',
  http_create_sqlite: 'onejob POST /v1/jobs, SQLite',
  store_create_sqlite: 'onejob store.createJob, SQLite',
  storm_same: '1,000 concurrent creates, one key (HTTP)',
  storm_distinct: '1,000 concurrent creates, distinct keys (HTTP)',
  chat_direct: 'fake provider, direct',
  chat_portkey: 'Portkey gateway → fake provider',
  chat_onejob: 'onejob /v1/chat/completions → fake provider',
  chat_direct_c1: 'fake provider direct, 1 connection',
  chat_portkey_c1: 'Portkey, 1 connection',
  chat_onejob_c1: 'onejob chat, 1 connection',
  chat_onejob_sqlite: 'onejob /v1/chat/completions → fake provider, SQLite',
  chat_onejob_sqlite_c1: 'onejob chat, 1 connection, SQLite',
  floor_pg_commit_c1: 'pgbench -c 1, jobInsert SQL: one durable commit (the floor)',
  floor_sqlite_commit_c1: 'SQLite job insert, synchronous=FULL, 1 client: one commit',
  durable_onejob: 'durable intent: onejob chat (PostgreSQL), 32 connections',
  durable_dbos: 'durable intent: DBOS workflow, 32 connections',
  durable_restate: 'durable intent: Restate handler, 32 connections',
  durable_pgboss: 'durable intent: pg-boss send + worker, 32 connections',
  durable_direct_c1: 'durable series: fake provider direct, 1 connection',
  durable_onejob_c1: 'durable intent: onejob, 1 connection',
  durable_dbos_c1: 'durable intent: DBOS, 1 connection',
  durable_restate_c1: 'durable intent: Restate, 1 connection',
  durable_pgboss_c1: 'durable intent: pg-boss, 1 connection',
  stream_direct_c1: 'streamed, fake provider direct: time to first token',
  stream_portkey_c1: 'streamed, Portkey: time to first token',
  stream_onejob_c1: 'streamed, onejob chat: time to first token',
  stream_onejob_sqlite_c1: 'streamed, onejob chat, SQLite: time to first token',
  stream50_direct_c1: 'streamed (50 ms chunks), fake provider direct: TTFT',
  stream50_portkey_c1: 'streamed (50 ms chunks), Portkey: TTFT',
  stream50_onejob_c1: 'streamed (50 ms chunks), onejob chat: TTFT',
  stream50_onejob_sqlite_c1: 'streamed (50 ms chunks), onejob chat, SQLite: TTFT',
};

const usdFmt = (v: unknown): string => (typeof v === 'number' ? `$${v.toFixed(4)}` : '–');

/** The Markdown report. */
export function renderMarkdown(r: ReportInput): string {
  const m = r.machine;
  const lines: string[] = [];
  lines.push(`# onejob benchmark — ${r.date.slice(0, 10)} (${String(m.mode)} mode)`, '');
  lines.push(
    `Machine: ${String(m.nproc)} CPUs (${String(m.cpu)}), ${String(m.memoryGiB)} GiB RAM, ${String(m.os)}; ` +
      `${String(m.postgres).split(' on ')[0]} (${Object.entries((m.postgresSettings ?? {}) as Record<string, string>).map(([k, v]) => `${k}=${v}`).join(', ')}); ` +
      `Node ${String(m.node)}. Load average (1, 5, 15 min) at the start ${Array.isArray(m.loadAverageAtStart) ? m.loadAverageAtStart.join(', ') : '?'}` +
      `${Array.isArray((r as { loadAverageAtEnd?: number[] }).loadAverageAtEnd) ? `, at the end ${(r as unknown as { loadAverageAtEnd: number[] }).loadAverageAtEnd.join(', ')}` : ''}; run ${String((r as { startedAt?: string }).startedAt ?? r.date).slice(11, 16)}–${r.date.slice(11, 16)} UTC. Load generators, servers and the database share the same cores. ` +
      `${String(m.secondsPerRun)} s per run, ${String(m.rounds)} interleaved rounds, medians shown; concurrency ${String(m.concurrency)}.`,
    '',
  );
  lines.push(`Durability: ${r.durability}`, '');
  lines.push('## Ratios', '', '| ratio | value | target | meaning |', '| --- | ---: | --- | --- |');
  for (const [k, v] of Object.entries(r.ratios)) lines.push(`| \`${k}\` | ${fmt(v)} | ${verdict(k, v)} | ${TARGETS[k]?.label ?? ''} |`);
  lines.push('', `Added latency at one connection (ms, p50): Portkey ${fmt(r.addedLatencyMs.portkey_p50)}, onejob ${fmt(r.addedLatencyMs.onejob_p50)} on PostgreSQL, ${fmt(r.addedLatencyMs.onejob_sqlite_p50)} on SQLite (onejob writes a job and an attempt durably per request; Portkey writes nothing).`, '');
  if (r.floorMs && (r.floorMs.postgres !== null || r.floorMs.sqlite !== null)) {
    lines.push(`The floor (two one-row durable commits at one client, p50 × 2): ${fmt(r.floorMs.postgres)} ms on PostgreSQL (pgbench -c 1), ${fmt(r.floorMs.sqlite)} ms on SQLite (synchronous=FULL); \`chat_added_p50_beyond_floor_vs_portkey*\` subtract it from onejob's added p50.`, '');
  }
  const durable = r.durablePeers as { versions?: Record<string, string>; sides?: string[]; cpuPerRequestMs?: Record<string, { processMs: number | null; databaseMs: number | null; totalMs: number | null }>; duplicates?: Record<string, { statuses: number[]; providerCalls: number; ok: boolean }>; notes?: string[] } | null | undefined;
  if (durable?.sides?.length) {
    lines.push('## Durable peers: one keyed LLM call per intent, durable before and after it, a duplicate answered from the record', '');
    lines.push(`Versions: ${Object.entries(durable.versions ?? {}).map(([k, v]) => `${k} ${v}`).join(', ')}.`, '');
    lines.push('| side | req/s, 32 connections | added p50 ms, 1 connection | CPU per request ms (process / database / total) | duplicate: statuses, provider calls |', '| --- | ---: | ---: | --- | --- |');
    for (const side of durable.sides) {
      const s = r.medians[`durable_${side}`];
      const c = durable.cpuPerRequestMs?.[`durable_${side}`];
      const d = durable.duplicates?.[side];
      lines.push(`| ${side} | ${fmt(s?.rps)} | ${fmt(r.durableAddedLatencyMs?.[side])} | ${fmt(c?.processMs)} / ${fmt(c?.databaseMs)} / ${fmt(c?.totalMs)} | ${d ? `${d.statuses.join(', ')}; ${d.providerCalls} call${d.providerCalls === 1 ? '' : 's'}${d.ok ? '' : ' (**not answered from the record**)'}` : '–'} |`);
    }
    if (durable.notes?.length) lines.push('', ...durable.notes.map((n) => `- ${n}`));
    lines.push('');
  }
  lines.push('## Series (medians of the rounds)', '', '| series | ops/s | p50 ms | p90 ms | p99 ms | errors |', '| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const [k, s] of Object.entries(r.medians)) {
    if (!s) continue;
    lines.push(`| ${SERIES_LABELS[k] ?? k} | ${fmt(s.rps)} | ${fmt(s.p50)} | ${fmt(s.p90)} | ${fmt(s.p99)} | ${fmt(s.errors)} |`);
  }
  if (r.chatCpuPerRequestMs && Object.keys(r.chatCpuPerRequestMs).length) {
    lines.push('', '## CPU per chat request (32 connections; utime + stime from /proc, medians of the rounds, ms)', '');
    lines.push('| side | server process | database backends | total |', '| --- | ---: | ---: | ---: |');
    for (const [k, c] of Object.entries(r.chatCpuPerRequestMs)) lines.push(`| ${SERIES_LABELS[k] ?? k} | ${fmt(c.processMs)} | ${fmt(c.databaseMs)} | ${fmt(c.totalMs)} |`);
  }
  if (r.chatSpread && Object.values(r.chatSpread).some((v) => v.median !== null)) {
    lines.push('', '## Chat ratios per round (each taken within one round) and their spread', '');
    lines.push('| ratio | per round | median | min – max | spread (max − min) ÷ median |', '| --- | --- | ---: | --- | ---: |');
    for (const [k, v] of Object.entries(r.chatSpread)) lines.push(`| \`${k}\` | ${v.rounds.map((x) => fmt(x)).join(', ')} | ${fmt(v.median)} | ${fmt(v.min)} – ${fmt(v.max)} | ${fmt(v.spread)} |`);
  }
  const storm = r.storm as { peers?: Record<string, Record<string, unknown>> } | null;
  if (storm?.peers) {
    lines.push('', '## Duplicate storm on the libraries (1,000 concurrent enqueues of one key, then one with a different payload)', '');
    lines.push('| system | rows | callers given the id | callers given nothing | different payload | p50 ms | p99 ms |', '| --- | ---: | ---: | ---: | --- | ---: | ---: |');
    for (const [k, p] of Object.entries(storm.peers)) {
      const d = p.differentPayload as { gotId: boolean; error: string | null; payloadReplaced: boolean };
      const what = d.error ? `rejected: \`${d.error}\`` : d.payloadReplaced ? 'accepted, payload REPLACED on the existing job' : d.gotId ? 'accepted, same job' : 'returns nothing (null)';
      lines.push(`| ${k === 'store' ? 'onejob store' : k} | ${fmt(p.rows as number)} | ${fmt(p.callersWithId as number)} | ${fmt(p.callersWithNothing as number)} | ${what} | ${fmt(p.p50 as number)} | ${fmt(p.p99 as number)} |`);
    }
  }
  const timeout = r.timeout as Record<string, Record<string, unknown>> | null;
  if (timeout) {
    lines.push('', '## Provider executions under a timeout (primary answers after 1 s, 200 ms timeout, a fallback)', '');
    lines.push('| side | requests | primary calls | fallback calls | executions / request | answers |', '| --- | ---: | ---: | ---: | ---: | --- |');
    const sides = Object.entries(timeout).filter((e): e is [string, Record<string, unknown>] => typeof e[1] === 'object' && e[1] !== null && ('requests' in e[1] || 'error' in e[1]));
    for (const [k, v] of sides) {
      if (v.error) {
        lines.push(`| ${k} | – | – | – | – | ${String(v.error)} |`);
        continue;
      }
      lines.push(`| ${k}${v.via ? ` (${String(v.via)})` : ''} | ${fmt(v.requests as number)} | ${fmt(v.primaryCalls as number)} | ${fmt(v.fallbackCalls as number)} | ${fmt(v.providerCallsPerRequest as number)} | ${JSON.stringify(v.statuses)} |`);
    }
    if (sides.some(([, v]) => v.cost)) {
      const t = timeout as { perCallUsd?: number; usagePerCall?: unknown; pricing?: unknown };
      lines.push('', `### What it cost (every call reports ${JSON.stringify(t.usagePerCall)}, priced ${JSON.stringify(t.pricing)}: ${usdFmt(t.perCallUsd)} per call)`, '');
      lines.push(
        "onejob's account is its attempts' `cost_usd` (CONTRACT §8; winner = the succeeded attempt); \"priced from provider calls\" is every call the providers received × the per-call price, the way Portkey's duplicate executions are priced (winner: one call per request answered 200 for Portkey, per job that succeeded for onejob, whose late answer can win after a 409).",
        '',
        '| side | account | total / request | winners / request | non-winners / request | total | attempts without a cost |',
        '| --- | --- | ---: | ---: | ---: | ---: | ---: |',
      );
      for (const [k, v] of sides) {
        const rows: [string, Record<string, unknown> | undefined][] = v.costByProviderCalls
          ? [["onejob's account", v.cost as Record<string, unknown>], ['priced from provider calls', v.costByProviderCalls as Record<string, unknown>]]
          : [['priced from provider calls', v.cost as Record<string, unknown> | undefined]];
        for (const [label, c] of rows) {
          if (!c) continue;
          lines.push(`| ${k} | ${label} | ${usdFmt(c.totalUsdPerRequest)} | ${usdFmt(c.winnersUsdPerRequest)} | ${usdFmt(c.nonWinnersUsdPerRequest)} | ${usdFmt(c.totalUsd)} | ${c.attemptsWithoutCost === undefined ? '–' : String(c.attemptsWithoutCost)} |`);
        }
      }
    }
  }
  const streams = (r.stream ?? {}) as Record<string, { chunks?: string[]; chunkDelayMs?: number; requestsPerRun?: number }>;
  const timings: [Record<string, number | null> | undefined, { chunks?: string[]; chunkDelayMs?: number; requestsPerRun?: number } | undefined][] = [
    [r.ttftAddedMs, streams.stream], [r.ttftAddedMs50, streams.stream50],
  ];
  if (timings.some(([t]) => t && Object.values(t).some((v) => v !== null))) {
    lines.push('', '## Streaming: time to first token at one connection', '');
    lines.push('From sending the request to the first SSE event carrying content; added = a side minus the fake provider direct (ms).', '');
    lines.push('| provider streams | requests per run | Portkey p50 / p99 | onejob PostgreSQL p50 / p99 | onejob SQLite p50 / p99 |', '| --- | ---: | --- | --- | --- |');
    for (const [t, st] of timings) {
      if (!t || !Object.values(t).some((v) => v !== null)) continue;
      lines.push(`| ${st?.chunks?.length ?? '?'} content chunks ${st?.chunkDelayMs ?? '?'} ms apart (the first too) | ${st?.requestsPerRun ?? '?'} | ${fmt(t.portkey_p50)} / ${fmt(t.portkey_p99)} | ${fmt(t.onejob_p50)} / ${fmt(t.onejob_p99)} | ${fmt(t.onejob_sqlite_p50)} / ${fmt(t.onejob_sqlite_p99)} |`);
    }
  }
  const waiting = r.waiting as Record<string, { fdLimit?: { soft: number }; waiting?: Record<string, unknown>; wake?: Record<string, unknown>; rampSeconds?: number; claimSeconds?: number }> | null;
  if (waiting && Object.keys(waiting).length) {
    lines.push('', '## Waiting is free? One onejob process (PostgreSQL, pool 10) holding long-polls and chat requests on a provider that answers after 120 s', '');
    lines.push(
      'Measured over a window once every waiter is open; a wait the server answered before its job finished is re-sent after its Retry-After (default 1 s) and counted as cut short. Event-loop delay: `monitorEventLoopDelay` inside the server (what exceeds its 10 ms tick).',
      '',
      '| tier | waiting | cut short /s | RSS MiB | loop delay p50 / p99 / max ms | statements/s | per waiter /s | store reads per waiter /s | xact_commit/s | top statements /s | changed job: own waiters answered | others answered |',
      '| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | --- | --- | ---: |',
    );
    for (const [tier, t] of Object.entries(waiting)) {
      const wt = t.waiting ?? {};
      const wk = t.wake ?? {};
      const d = (wt.eventLoopDelayMs ?? {}) as Record<string, number>;
      const top = Object.entries((wt.statementsByName ?? {}) as Record<string, number>).slice(0, 3).map(([k, v]) => `${k} ${v}`).join(', ');
      lines.push(`| ${tier} | ${fmt(wt.waiters as number)} | ${fmt(wt.cutShortDuringWindowPerSecond as number)} | ${fmt(wt.rssMiB as number)} | ${fmt(d.p50)} / ${fmt(d.p99)} / ${fmt(d.max)} | ${fmt(wt.statementsPerSecond as number)} | ${fmt(wt.statementsPerWaiterPerSecond as number)} | ${fmt(wt.getJobCallsPerWaiterPerSecond as number)} | ${fmt(wt.xactCommitsPerSecond as number)} | ${top} | ${fmt(wk.ownWaitersAnswered as number)} of ${fmt(wk.ownWaiters as number)}${wk.ownLatestAnswerMs === null ? '' : ` in ${fmt(wk.ownLatestAnswerMs as number)} ms`} (cancel ${String(wk.cancelStatus)}${Number(wk.cancelTries) > 1 ? ` after ${String(wk.cancelTries)} tries` : ''}) | ${fmt(wk.otherWaitersAnswered as number)} |`);
    }
    const first = Object.values(waiting)[0];
    if (first?.fdLimit) lines.push('', `Open-file limit of the bench's processes: ${first.fdLimit.soft}.`);
  }
  if (r.parity && r.parity.length > 0) {
    lines.push('', '## Parity after each onejob series (jobs = 2xx answers, provider calls = jobs)', '');
    lines.push('| series | answered 2xx | cut off in flight | jobs | provider calls | verdict |', '| --- | ---: | ---: | ---: | ---: | --- |');
    for (const p of r.parity) {
      lines.push(`| ${p.series} | ${p.answered2xx} | ${p.cutOff} | ${p.rows} | ${fmt(p.providerCalls)} | ${p.ok ? 'ok' : `**FAILED**: ${p.problems.join('; ')}`} |`);
    }
  }
  if (!waiting || Object.keys(waiting).length === 0) {
    lines.push('', '"Waiting is free" is not part of quick mode: `npm run bench -- --only waiting` (results in `bench/results/<date>-only-waiting.md`) or `--full`.');
  }
  const chat = r.chat as { notes?: string[] } | null;
  const notes = [...(chat?.notes ?? []), ...Object.entries(r.errors).map(([k, e]) => `${k}: ${e.split('\n')[0]}`)];
  if (notes.length) lines.push('', '## Notes', '', ...notes.map((n) => `- ${n}`));
  lines.push('', 'Chart: [latest.svg](latest.svg). Raw data: [latest.json](latest.json). How to read and reproduce: [docs/performance.md](../../docs/performance.md).', '');
  return lines.join('\n');
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A two-panel SVG: ratios against targets (left), p50/p99 latency per series on a log scale (right). */
export function renderSvg(r: ReportInput): string {
  const W = 1200;
  const rowH = 26;
  const ratioRows = Object.entries(r.ratios).filter(([k, v]) => v !== null && TARGETS[k] && TARGETS[k]!.op !== 'eq' && TARGETS[k]!.value > 0);
  const eqRows = Object.entries(r.ratios).filter(([k]) => TARGETS[k]?.op === 'eq');
  const series = Object.entries(r.medians).filter((e): e is [string, RunSummary] => e[1] !== null && Number.isFinite(e[1].p50));
  const h1 = 70 + ratioRows.length * rowH + 30 + eqRows.length * 20;
  const h2 = 70 + series.length * rowH;
  const H = Math.max(h1, h2) + 40;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  out.push(`<text x="20" y="24" font-size="16" font-weight="bold">onejob benchmark ${esc(r.date.slice(0, 16).replace('T', ' '))} UTC — ${esc(String(r.machine.nproc))} CPUs, ${esc(String(r.machine.postgres).split(' on ')[0]!)}, Node ${esc(String(r.machine.node))}</text>`);

  // Left: ratios as bars on a log scale from 0.1 to 100, target marked.
  const lx = 20, lw = 560, labelW = 230, bx = lx + labelW, bw = lw - labelW - 50;
  const logX = (v: number): number => bx + (Math.log10(Math.min(100, Math.max(0.1, v))) + 1) / 3 * bw;
  out.push(`<text x="${lx}" y="52" font-weight="bold">Ratios (log scale; | = target; green met, red missed)</text>`);
  for (const t of [0.1, 1, 10, 100]) {
    out.push(`<line x1="${logX(t)}" y1="60" x2="${logX(t)}" y2="${60 + ratioRows.length * rowH}" stroke="#ddd"/>`);
    out.push(`<text x="${logX(t)}" y="${72 + ratioRows.length * rowH}" text-anchor="middle" fill="#777">${t}×</text>`);
  }
  ratioRows.forEach(([k, v], i) => {
    const t = TARGETS[k]!;
    const y = 62 + i * rowH;
    const ok = t.op === 'min' ? v! >= t.value : v! <= t.value;
    out.push(`<text x="${lx}" y="${y + 15}">${esc(k)}</text>`);
    out.push(`<rect x="${bx}" y="${y + 3}" width="${Math.max(1, logX(v!) - bx)}" height="${rowH - 8}" fill="${ok ? '#3a9a5b' : '#d0463c'}"/>`);
    out.push(`<line x1="${logX(t.value)}" y1="${y}" x2="${logX(t.value)}" y2="${y + rowH - 2}" stroke="#000" stroke-width="2"/>`);
    out.push(`<text x="${Math.min(logX(v!), bx + bw) + 6}" y="${y + 15}">${v}</text>`);
  });
  let ey = 62 + ratioRows.length * rowH + 30;
  for (const [k, v] of eqRows) {
    const t = TARGETS[k]!;
    const ok = v !== null && (t.op === 'eq' ? v === t.value : v <= t.value);
    out.push(`<text x="${lx}" y="${ey}" fill="${v === null ? '#777' : ok ? '#3a9a5b' : '#d0463c'}">${esc(k)} = ${v === null ? 'not measured' : v} (target ${t.value})</text>`);
    ey += 20;
  }

  // Right: latency p50 (bar) and p99 (tick) per series, log scale 0.1 ms .. 10 s.
  const rx = 620, rLabel = 300, rbx = rx + rLabel, rbw = W - rbx - 60;
  const lat = (ms: number): number => rbx + (Math.log10(Math.min(10_000, Math.max(0.1, ms))) + 1) / 5 * rbw;
  out.push(`<text x="${rx}" y="52" font-weight="bold">Latency: bar = p50, dark tick = p99 (ms, log scale); ops/s at right</text>`);
  for (const t of [0.1, 1, 10, 100, 1000, 10000]) {
    out.push(`<line x1="${lat(t)}" y1="60" x2="${lat(t)}" y2="${60 + series.length * rowH}" stroke="#ddd"/>`);
    out.push(`<text x="${lat(t)}" y="${72 + series.length * rowH}" text-anchor="middle" fill="#777">${t}</text>`);
  }
  series.forEach(([k, s], i) => {
    const y = 62 + i * rowH;
    const color = k.includes('onejob') || k.includes('create') || k.startsWith('storm') ? '#2f6db5' : '#999';
    out.push(`<text x="${rx}" y="${y + 15}">${esc((SERIES_LABELS[k] ?? k).slice(0, 46))}</text>`);
    out.push(`<rect x="${rbx}" y="${y + 4}" width="${Math.max(1, lat(s.p50) - rbx)}" height="${rowH - 10}" fill="${color}"/>`);
    out.push(`<line x1="${lat(s.p99)}" y1="${y + 1}" x2="${lat(s.p99)}" y2="${y + rowH - 3}" stroke="#222" stroke-width="2"/>`);
    out.push(`<text x="${W - 10}" y="${y + 15}" text-anchor="end" fill="#333">${Math.round(s.rps)}</text>`);
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
