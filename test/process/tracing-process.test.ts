/**
 * One trace per intent across processes (issue 15, docs/tracing.md): an API
 * process (`onejob serve --no-executor`) and an executor process
 * (`onejob executor`), each exporting OTLP/HTTP to a collector this test runs
 * on 127.0.0.1. One intent (a create with a client `traceparent`, two
 * concurrent duplicates, a replay after it finished) shows up as ONE trace:
 * create → attempt (other process) → provider call and completion CAS (won),
 * the duplicates as children of the create span, and the fake provider saw
 * the provider call's `traceparent`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startFakeProvider, type FakeProvider } from '../../src/testing/fake-provider-server.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';
import { freePort } from '../support/free-port.ts';

const BIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'bin', 'onejob');
const TOKEN = 'tok_alice_0123456789';
const INPUT = { messages: [{ role: 'user', content: 'trace me' }] };
const sqlite = TEST_DATABASES.find((d) => d.name === 'sqlite')!;

/** One exported span, flattened from OTLP/JSON. */
interface Span {
  service: string;
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId: string;
  attributes: Record<string, unknown>;
  links: { traceId: string; spanId: string }[];
}

type OtlpValue = { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number };
type OtlpAttr = { key: string; value: OtlpValue };

const valueOf = (v: OtlpValue): unknown => v.stringValue ?? v.boolValue ?? (v.intValue !== undefined ? Number(v.intValue) : v.doubleValue);
const attrs = (list: OtlpAttr[] | undefined) => Object.fromEntries((list ?? []).map((a) => [a.key, valueOf(a.value)]));
/** OTLP/JSON ids are hex; tolerate base64 too. */
const hex = (id: string | undefined) => (!id ? '' : /^[0-9a-f]+$/.test(id) ? id : Buffer.from(id, 'base64').toString('hex'));

/** A tiny OTLP/HTTP (JSON) traces collector. */
async function startCollector(): Promise<{ url: string; spans: Span[]; server: Server }> {
  const spans: Span[] = [];
  const server = createHttpServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'POST' && req.url === '/v1/traces') {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          resourceSpans: { resource: { attributes: OtlpAttr[] }; scopeSpans: { spans: (Omit<Span, 'attributes' | 'links' | 'service'> & { attributes: OtlpAttr[]; links?: { traceId: string; spanId: string }[] })[] }[] }[];
        };
        for (const rs of body.resourceSpans) {
          const service = String(attrs(rs.resource.attributes)['service.name']);
          for (const ss of rs.scopeSpans) {
            for (const s of ss.spans) {
              spans.push({
                service, name: s.name, traceId: hex(s.traceId), spanId: hex(s.spanId), parentSpanId: hex(s.parentSpanId),
                attributes: attrs(s.attributes), links: (s.links ?? []).map((l) => ({ traceId: hex(l.traceId), spanId: hex(l.spanId) })),
              });
            }
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, spans, server };
}

async function until<T>(what: string, f: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await Promise.resolve().then(f).catch(() => null);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('tracing across an API process and an executor process', () => {
  let url: string;
  let cleanup: () => Promise<void>;
  let fake: FakeProvider;
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let dir: string;
  const children: ChildProcess[] = [];
  const stderr: string[] = [];

  beforeEach(async () => {
    ({ url, cleanup } = await createTestStore(sqlite));
    fake = await startFakeProvider();
    collector = await startCollector();
    dir = mkdtempSync(join(tmpdir(), 'onejob-tracing-'));
    writeFileSync(
      join(dir, 'onejob.config.json'),
      JSON.stringify({
        apiKeys: { [TOKEN]: 'alice' },
        providers: { primary: { type: 'openai', baseUrl: `${fake.url}/v1`, model: 'gpt-fake', timeoutMs: 60_000 } },
        routes: { work: { providers: ['primary'] } },
      }),
    );
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await fake.close();
    await new Promise((r) => collector.server.close(r));
    await cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  function start(args: string[]): ChildProcess {
    const child = spawn(process.execPath, [BIN, ...args, '--config', join(dir, 'onejob.config.json')], {
      env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn', OTEL_EXPORTER_OTLP_ENDPOINT: collector.url, OTEL_BSP_SCHEDULE_DELAY: '50' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (d: string) => stderr.push(d));
    children.push(child);
    return child;
  }

  it('one intent, duplicates included, is one trace: create → attempt → provider call + CAS (won); the provider saw traceparent', async () => {
    // Slow enough that the concurrent duplicates arrive while the attempt runs.
    fake.setDefault({ delayMs: 700, reply: 'traced' });
    const port = await freePort();
    start(['serve', '--no-executor', '--port', String(port), '--host', '127.0.0.1']);
    start(['executor', '--concurrency', '4']);
    const base = `http://127.0.0.1:${port}`;
    await until('serve ready', async () => (await fetch(`${base}/readyz`)).status === 200, 60_000);

    const clientTrace = randomBytes(16).toString('hex');
    const clientSpan = randomBytes(8).toString('hex');
    const otherTrace = randomBytes(16).toString('hex');
    const post = (traceparent?: string) =>
      fetch(`${base}/v1/jobs`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${TOKEN}`, 'idempotency-key': 'intent-1', 'content-type': 'application/json',
          ...(traceparent ? { traceparent } : {}),
        },
        body: JSON.stringify({ route: 'work', input: INPUT }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: string; state: string } }));

    const created = await post(`00-${clientTrace}-${clientSpan}-01`);
    expect(created.status).toBe(201);
    const jobId = created.body.id;
    // A double click while the attempt runs: one without a traceparent, one from another trace.
    const twins = await Promise.all([post(), post(`00-${otherTrace}-${randomBytes(8).toString('hex')}-01`)]);
    expect(twins.map((t) => [t.status, t.body.id])).toEqual([[200, jobId], [200, jobId]]);
    const done = await until('job succeeded', async () => {
      const r = await fetch(`${base}/v1/jobs/${jobId}?wait=30`, { headers: { authorization: `Bearer ${TOKEN}` } });
      const j = (await r.json()) as { state: string };
      return j.state === 'succeeded' ? j : null;
    }, 60_000);
    expect(done.state).toBe('succeeded');
    const replay = await post();
    expect([replay.status, replay.body.id]).toEqual([200, jobId]);

    const spans = await until('all spans exported', () => {
      const mine = collector.spans.filter((s) => s.attributes['onejob.job_id'] === jobId);
      const names = mine.map((s) => s.name);
      const ok = names.includes('onejob.job.create') && names.filter((n) => n === 'onejob.job.duplicate').length === 3
        && names.includes('onejob.attempt') && names.includes('onejob.provider.call') && names.includes('onejob.job.complete');
      return ok ? mine : null;
    }, 30_000);

    // ONE trace for the intent: the client's.
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([clientTrace]));
    const one = (name: string) => {
      const found = spans.filter((s) => s.name === name);
      expect(found, name).toHaveLength(1);
      return found[0]!;
    };
    const create = one('onejob.job.create');
    const attempt = one('onejob.attempt');
    const call = one('onejob.provider.call');
    const cas = one('onejob.job.complete');
    expect(create.parentSpanId).toBe(clientSpan);
    expect(create.service).toBe('onejob');
    expect(create.attributes['onejob.created']).toBe(true);
    // The executor process continued the stored context.
    expect(attempt.service).toBe('onejob-executor');
    expect(attempt.parentSpanId).toBe(create.spanId);
    expect(call.parentSpanId).toBe(attempt.spanId);
    expect(cas.parentSpanId).toBe(attempt.spanId);
    expect(cas.attributes['onejob.cas.won']).toBe(true);
    // Duplicates (two concurrent, one replay) are children of the create span; the one from another trace links to it.
    const dups = spans.filter((s) => s.name === 'onejob.job.duplicate');
    expect(dups.every((d) => d.parentSpanId === create.spanId && d.service === 'onejob' && d.attributes['onejob.created'] === false)).toBe(true);
    expect(dups.flatMap((d) => d.links.map((l) => l.traceId))).toEqual([otherTrace]);
    // No other trace holds a span of this job (a provisional duplicate span is never exported).
    expect(collector.spans.filter((s) => s.attributes['onejob.job_id'] === jobId && s.traceId !== clientTrace)).toEqual([]);

    // The provider request carried the provider call span's traceparent; exactly one call for the intent.
    expect(fake.calls).toHaveLength(1);
    expect(fake.calls[0]!.headers.traceparent).toBe(`00-${clientTrace}-${call.spanId}-01`);
  }, 120_000);
});
