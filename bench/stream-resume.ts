/**
 * The bench's resume section (`npm run bench`, quick and full, and `--only
 * stream`; registered in bench/run.ts): time to first token for a resumed
 * stream and for a duplicate, on the process that runs the attempt and on
 * another process (CONTRACT §13, docs/streaming.md).
 *
 * Two onejob servers on one PostgreSQL database, each its own process: `a`
 * with the executor, `b` without (another API process: it follows the
 * stream from `stream_events`, woken by NOTIFY). The fake provider streams
 * 12 chunks 20 ms apart. Per round a fresh job is streamed from `a`
 * (`fresh`: its own time to first token, the baseline) and then
 * (bench/workers/resume-probe.ts):
 *
 * - `resume_same` / `resume_other`: dropped after 3 content events, resumed
 *   60 ms later with `Last-Event-ID` on `a` / `b`, while the job still runs;
 * - `duplicate_same` / `duplicate_other`: after 3 content events, the same
 *   request (same key) sent to `a` / `b` while the first goes on.
 *
 * Timed from sending the resume (duplicate) to its first content event;
 * every round checks that the client assembled the reply once, and the
 * series pass the bench's parity check (one job and one provider call per
 * round).
 */
import { runWorker, startServer, type Started } from './lib/child.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';
import type { RunSummary } from './lib/stats.ts';

/** What the section needs from bench/run.ts. */
export interface StreamResumeBench {
  readonly full: boolean;
  readonly keep: boolean;
  /** The database's name (created and dropped here). */
  readonly db: string;
  /** Runs per series, interleaved (bench/run.ts: 1 in quick mode, so the quick bench stays under 4 minutes). */
  readonly rounds: number;
  readonly log: (msg: string) => void;
  /** A worker script's path. */
  readonly worker: (name: string) => string;
  readonly auth: Record<string, string>;
  /** Records a run of a series. */
  readonly record: (name: string, s: RunSummary) => void;
  /** Runs a series and checks its parity (jobs = rounds answered, provider calls = jobs). */
  readonly withParity: (series: string, db: string, run: () => Promise<RunSummary & { answered2xx: number; cutOff: number }>, calls?: () => Promise<number>) => Promise<RunSummary>;
}

const CHUNKS = Array.from({ length: 12 }, (_, i) => `w${i} `);
const CHUNK_DELAY_MS = 20;

/** Runs the series, interleaved over `rounds`; resolves with the section's settings (the figures go to `record`). */
export async function sectionStreamResume(o: StreamResumeBench): Promise<Record<string, unknown>> {
  o.log(`3r: resumed streams and duplicates — time to first token on the executor's process and on another (PostgreSQL), chunks every ${CHUNK_DELAY_MS} ms`);
  const url = await recreateDatabase(o.db);
  const fake = await startServer<{ url: string; countUrl: string }>(o.worker('fake-provider.ts'), [
    '--forget', '--behaviour', JSON.stringify({ chunks: CHUNKS, chunkDelayMs: CHUNK_DELAY_MS, usage: { prompt_tokens: 20, completion_tokens: 12 } }),
  ]);
  const calls = async (): Promise<number> => ((await (await fetch(fake.info.countUrl)).json()) as { calls: number }).calls;
  const servers: Started<{ url: string }>[] = [];
  try {
    const a = await startServer<{ url: string }>(o.worker('onejob-server.ts'), ['--db', url, '--provider-url', fake.info.url, '--executor', '--pool', '10']);
    servers.push(a);
    const b = await startServer<{ url: string }>(o.worker('onejob-server.ts'), ['--db', url, '--provider-url', fake.info.url, '--pool', '10']);
    servers.push(b);
    const n = o.full ? 60 : 10; // quick mode stays short: the bench's quick run must stay under 4 minutes
    const body = JSON.stringify({ model: 'summarize', stream: true, messages: [{ role: 'user', content: 'Summarize: the quick brown fox jumps over the lazy dog.' }] });
    const probe = (mode: 'resume' | 'duplicate', target: string) => () =>
      runWorker<RunSummary & { answered2xx: number; cutOff: number }>(o.worker('resume-probe.ts'), [
        '--a', a.info.url, '--target', target, '--mode', mode, '--n', String(n), '--warmup', '2', '--take', '3', '--gap-ms', mode === 'resume' ? '60' : '0',
        '--headers', JSON.stringify(o.auth), '--body', body, '--expect', CHUNKS.join(''),
      ]);
    const series: [string, () => Promise<RunSummary & { answered2xx: number; cutOff: number }>][] = [
      ['resume_same', probe('resume', a.info.url)],
      ['resume_other', probe('resume', b.info.url)],
      ['duplicate_same', probe('duplicate', a.info.url)],
      ['duplicate_other', probe('duplicate', b.info.url)],
    ];
    /** The first streams' own time to first token (p50 per run): the baseline. */
    const freshP50: number[] = [];
    for (let r = 0; r < o.rounds; r++) {
      for (const [name, run] of series.map((_, i) => series[(i + r) % series.length]!)) {
        let fresh: { p50: number; p99: number } | undefined;
        const s = await o.withParity(name, url, async () => {
          const x = await run();
          fresh = (x as unknown as { fresh?: { p50: number; p99: number } }).fresh;
          const first = (x as { firstError?: string }).firstError;
          if (first) o.log(`   ${name}: ${x.errors} failed rounds, first: ${first}`);
          return x;
        }, calls);
        o.record(name, s);
        if (fresh) {
          freshP50.push(fresh.p50);
          o.log(`   ${name}: the first streams' own time to first token p50 ${fresh.p50} ms`);
        }
      }
    }
    return { chunks: CHUNKS.length, chunkDelayMs: CHUNK_DELAY_MS, takeBeforeDrop: 3, resumeGapMs: 60, requestsPerRun: n, freshP50 };
  } finally {
    for (const s of servers) await s.stop();
    await fake.stop();
    if (!o.keep) await dropDatabase(o.db);
  }
}

/**
 * Run alone (`node --import tsx bench/stream-resume.ts [--full]`): the same
 * series with the same parity check, the medians printed as a table.
 */
async function main(): Promise<void> {
  const { resolve, dirname } = await import('node:path');
  const { checkParity, countJobs, settled } = await import('./lib/parity.ts');
  const { median } = await import('./lib/stats.ts');
  const started = Date.now();
  const log = (msg: string): void => void process.stderr.write(`[stream-resume ${((Date.now() - started) / 1000).toFixed(0).padStart(3)}s] ${msg}\n`);
  const runs: Record<string, RunSummary[]> = {};
  let failed = 0;
  const full = process.argv.includes('--full');
  const settings = await sectionStreamResume({
    full, keep: false, db: 'onejob_bench_resume_alone', rounds: full ? 3 : 2, log,
    worker: (name) => resolve(dirname(new URL(import.meta.url).pathname), 'workers', name),
    auth: { authorization: 'Bearer tok_bench', 'content-type': 'application/json' },
    record: (name, s) => {
      (runs[name] ??= []).push(s);
      log(`${name.padEnd(16)} p50 ${s.p50} ms  p99 ${s.p99} ms${s.errors ? `  errors ${s.errors}` : ''}`);
    },
    withParity: async (series, db, run, calls) => {
      const rowsBefore = await countJobs(db);
      const callsBefore = calls ? await calls() : 0;
      const s = await run();
      await settled(db);
      const check = checkParity({ series, answered2xx: s.answered2xx, cutOff: s.cutOff, rows: (await countJobs(db)) - rowsBefore, providerCalls: calls ? (await calls()) - callsBefore : null });
      if (!check.ok) failed++;
      log(`   parity ${series}: ${check.ok ? 'ok' : `FAILED: ${check.problems.join('; ')}`}`);
      return s;
    },
  });
  const lines = ['| series | p50 ms (median of runs) | p99 ms (median of runs) |', '| --- | ---: | ---: |'];
  for (const [name, xs] of Object.entries(runs)) lines.push(`| ${name} | ${median(xs.map((x) => x.p50)).toFixed(1)} | ${median(xs.map((x) => x.p99)).toFixed(1)} |`);
  lines.push(`| first streams (fresh) | ${median((settings.freshP50 as number[]) ?? []).toFixed(1)} | |`);
  process.stdout.write(`${lines.join('\n')}\n`);
  if (failed > 0) process.exitCode = 1;
}

if (process.argv[1] !== undefined && new URL(import.meta.url).pathname === (await import('node:path')).resolve(process.argv[1])) await main();
