/**
 * `node --import tsx bench/c1-anatomy.ts [--engine postgres|sqlite] [--n 400] [--rounds 8] [--warm-rounds 2] [--trigger-ab]`
 *
 * Where a chat request's added latency goes at one connection (issue 26's
 * "added p50"), with every side in its own process as in the bench: the
 * fake provider called directly, then the same request through the bench's
 * onejob server (`bench/workers/onejob-server.ts --executor --observe`), one
 * request at a time, `n` each per round. Per round it prints the medians of
 * the client's round trip on both, onejob's own `Server-Timing` (`onejob`,
 * `provider`), and, from the server's `--observe` listener, the statements
 * the requests sent with their mean round trip as the server waited for
 * them.
 *
 * `--trigger-ab` (PostgreSQL): the rounds alternate the `jobs_state_notify`
 * trigger on and off (`ALTER TABLE jobs … TRIGGER`), so the notification's
 * share of the settle's round trip and of the added latency is read from
 * neighbouring rounds. The first `--warm-rounds` are printed and left out of
 * the summary: on this kind of machine every round trip shrinks for the
 * first minute of steady traffic (the direct call from 0.7 to 0.15 ms).
 */
import { resolve } from 'node:path';
import { rmSync } from 'node:fs';
import { BENCH_DIR, argMap, runWorker, startServer } from './lib/child.ts';
import { adminQuery, dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import { median, type RunSummary } from './lib/stats.ts';

const args = argMap(process.argv.slice(2));
const ENGINE = String(args.engine ?? 'postgres');
const N = Number(args.n ?? 400);
const ROUNDS = Number(args.rounds ?? 8);
const WARM_ROUNDS = Number(args['warm-rounds'] ?? 2);
const TRIGGER_AB = args['trigger-ab'] !== undefined && args['trigger-ab'] !== 'false' && ENGINE === 'postgres';
const DB_NAME = 'onejob_bench_c1_anatomy';
const SQLITE_PATH = resolve(BENCH_DIR, '.scratch', 'c1-anatomy.db');
const MESSAGES = [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }];

interface Timed { total: number; onejob: number | null; provider: number | null }

/** `N` sequential requests over one kept-alive connection (`bench/workers/latency-probe.ts`): medians of the round trip and of Server-Timing's parts. */
async function probe(url: string, body: string, headers: Record<string, string>, freshKeys: boolean): Promise<Timed> {
  const r = await runWorker<RunSummary & { serverTimingP50Ms: { onejob: number; provider: number | null } | null }>(resolve(BENCH_DIR, 'workers', 'latency-probe.ts'),
    ['--url', url, '--n', String(N), '--warmup', '0', '--headers', JSON.stringify(headers), '--body', body, ...(freshKeys ? ['--fresh-key', 'true'] : [])]);
  if (r.errors > 0) throw new Error(`${url}: ${r.errors} of ${N} requests were not answered 2xx`);
  return { total: r.p50, onejob: r.serverTimingP50Ms?.onejob ?? null, provider: r.serverTimingP50Ms?.provider ?? null };
}

const round3 = (x: number | null | undefined): string => (x === null || x === undefined ? '–' : x.toFixed(3));

const db = ENGINE === 'postgres' ? await recreateDatabase(DB_NAME) : `sqlite:${SQLITE_PATH}`;
if (ENGINE !== 'postgres') for (const s of ['', '-wal', '-shm']) rmSync(SQLITE_PATH + s, { force: true });
const fake = await startServer<{ url: string }>(resolve(BENCH_DIR, 'workers', 'fake-provider.ts'), ['--forget']);
const server = await startServer<{ url: string; observeUrl: string }>(resolve(BENCH_DIR, 'workers', 'onejob-server.ts'),
  ['--db', db, '--provider-url', fake.info.url, '--executor', '--pool', '10', '--observe']);
const rows: { round: number; trigger: boolean | null; direct: number; onejob: Timed; statements: Record<string, number>; means: Record<string, number> }[] = [];
try {
  for (let r = 0; r < ROUNDS + WARM_ROUNDS; r++) {
    const trigger = TRIGGER_AB ? r % 2 === 0 : null;
    if (trigger !== null) await adminQuery(`ALTER TABLE jobs ${trigger ? 'ENABLE' : 'DISABLE'} TRIGGER jobs_state_notify`, db);
    const direct = await probe(fake.info.url, JSON.stringify({ model: 'fake-model', messages: MESSAGES }), {}, false);
    await fetch(server.info.observeUrl, { method: 'POST' });
    const onejob = await probe(server.info.url, JSON.stringify({ model: 'summarize', messages: MESSAGES }), { authorization: 'Bearer tok_bench' }, true);
    const seen = (await (await fetch(server.info.observeUrl)).json()) as { statements: Record<string, number>; statementMeanMs: Record<string, number> };
    const perRequest = Object.fromEntries(Object.entries(seen.statements).filter(([, n]) => n >= N / 2).map(([k, n]) => [k, n / N]));
    const means = Object.fromEntries(Object.keys(perRequest).map((k) => [k, seen.statementMeanMs[k] ?? NaN]));
    rows.push({ round: r, trigger, direct: direct.total, onejob, statements: perRequest, means });
    console.log(`round ${r + 1}${r < WARM_ROUNDS ? ' (warm-up)' : ''}${trigger === null ? '' : trigger ? ', trigger on' : ', trigger off'}: ` +
      `direct ${round3(direct.total)} ms, onejob ${round3(onejob.total)} ms (Server-Timing onejob ${round3(onejob.onejob)}, provider ${round3(onejob.provider)}), ` +
      `added ${round3(onejob.total - direct.total)} ms; statements per request ${Object.entries(means).map(([k, ms]) => `${k} ${perRequest[k]} × ${round3(ms)} ms`).join(', ')}`);
  }
  const measured = rows.filter((x) => x.round >= WARM_ROUNDS);
  const summary = (xs: typeof measured, label: string): void => {
    if (xs.length === 0) return;
    const stmt = [...new Set(xs.flatMap((x) => Object.keys(x.means)))];
    console.log(`${label} (${xs.length} rounds): added ${round3(median(xs.map((x) => x.onejob.total - x.direct)))} ms, ` +
      `Server-Timing onejob ${round3(median(xs.map((x) => x.onejob.onejob ?? NaN)))} ms; ` +
      stmt.map((k) => `${k} ${round3(median(xs.map((x) => x.means[k] ?? NaN)))} ms`).join(', '));
  };
  if (TRIGGER_AB) {
    summary(measured.filter((x) => x.trigger === true), 'medians, trigger on');
    summary(measured.filter((x) => x.trigger === false), 'medians, trigger off');
  } else summary(measured, 'medians');
} finally {
  await server.stop();
  await fake.stop();
  if (ENGINE === 'postgres') await dropDatabase(DB_NAME);
  else for (const s of ['', '-wal', '-shm']) rmSync(SQLITE_PATH + s, { force: true });
}
process.exit(0);
