/**
 * What publishing a stream costs (docs/streaming.md): one stream published
 * through the stream hub into PostgreSQL (`stream_events`, migration 0011)
 * by one store, read by a second store (another process's connections) that
 * is woken by `NOTIFY onejob_stream` and reads the new batches. For each
 * time slice and provider chunk interval: statements per stream per second
 * (the writer's inserts, the reader's reads), rows per stream, and the
 * delay from a delta's publication to its arrival at the reader (p50, p99).
 *
 *   node --import tsx bench/stream-publish.ts            # 2 s per combination
 *   node --import tsx bench/stream-publish.ts --seconds 4
 */
import { StreamHub, streamEventsOfBatch } from '../src/executor/stream-hub.ts';
import { openStore } from '../src/store/open-store.ts';
import { dropDatabase, recreateDatabase } from './lib/pg-admin.ts';

const SECONDS = Number(process.argv[process.argv.indexOf('--seconds') + 1] || 2) || 2;
const SLICES = [0, 25, 50, 100];
const INTERVALS = [1, 5, 20];
const DB = 'onejob_bench_stream_publish';

const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function main(): Promise<void> {
  const url = await recreateDatabase(DB);
  const writer = await openStore(url);
  await writer.migrate();
  const reader = await openStore(url);
  const rows: string[] = ['| slice ms | chunk every ms | deltas/s | writes/s per stream | reads/s per reader | rows per stream | delivery p50 ms | delivery p99 ms |', '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'];
  try {
    let n = 0;
    for (const sliceMs of SLICES) {
      for (const everyMs of INTERVALS) {
        const jobId = `job_bench_${++n}`;
        const hub = new StreamHub({ sliceMs });
        let writes = 0;
        const log = { appendStreamBatch: async (row: Parameters<typeof writer.appendStreamBatch>[0]) => (writes++, writer.appendStreamBatch(row)) };
        let reads = 0;
        let after = 0;
        let reading: Promise<void> | null = null;
        let again = false;
        const delays: number[] = [];
        const read = async (): Promise<void> => {
          if (reading) {
            again = true;
            return;
          }
          reading = (async () => {
            do {
              again = false;
              reads++;
              const batches = await reader.readStreamBatches('bench', jobId, 1, after);
              const now = performance.now();
              for (const e of batches.flatMap((b) => streamEventsOfBatch(b))) {
                after = e.seq;
                if (e.type === 'delta' && e.delta.type === 'text') delays.push(now - Number(e.delta.text));
              }
            } while (again);
          })();
          await reading;
          reading = null;
        };
        const off = reader.onStreamAppended((id) => {
          if (id === jobId) void read();
        });
        await new Promise((r) => setTimeout(r, 100)); // the LISTEN is in place
        const w = hub.open(jobId, 'att_bench', { ownerId: 'bench', attemptNumber: 1, log });
        const start = performance.now();
        let pushed = 0;
        while (performance.now() - start < SECONDS * 1000) {
          w.push({ type: 'text', text: String(performance.now()) });
          pushed++;
          await new Promise((r) => setTimeout(r, everyMs));
        }
        w.end({ ok: true, result: null });
        const elapsed = (performance.now() - start) / 1000;
        await new Promise((r) => setTimeout(r, 300 + sliceMs));
        await read();
        off();
        const stored = (await reader.readStreamBatches('bench', jobId, 1, 0)).length;
        rows.push(`| ${sliceMs} | ${everyMs} | ${Math.round(pushed / elapsed)} | ${(writes / elapsed).toFixed(1)} | ${(reads / elapsed).toFixed(1)} | ${stored} | ${pct(delays, 50).toFixed(1)} | ${pct(delays, 99).toFixed(1)} |`);
        console.error(rows.at(-1));
      }
    }
  } finally {
    await reader.close();
    await writer.close();
    await dropDatabase(DB);
  }
  console.log(rows.join('\n'));
}

await main();
