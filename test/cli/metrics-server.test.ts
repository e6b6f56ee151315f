/**
 * The executor process's own metrics port (`onejob executor --metrics-port`):
 * `GET /metrics` behind the configured `metricsToken` (open without one), and
 * `/healthz` 503 when the store says the process cannot serve.
 */
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { startMetricsServer } from '../../src/cli/serve-command.ts';
import { createMetrics } from '../../src/http/metrics.ts';

describe('the executor metrics server', () => {
  it('needs the metricsToken when one is configured, and reports liveness on /healthz', async () => {
    let reason: string | null = null;
    const server = await startMetricsServer(createMetrics({ processMetrics: false }), 0, '127.0.0.1', { metricsToken: 'tok_scrape_0123', liveness: () => reason });
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect((await fetch(`${base}/metrics`)).status).toBe(401);
      expect((await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
      const ok = await fetch(`${base}/metrics`, { headers: { authorization: 'Bearer tok_scrape_0123' } });
      expect(ok.status).toBe(200);
      expect(await ok.text()).toContain('# TYPE onejob_attempts_total');
      expect((await fetch(`${base}/healthz`)).status).toBe(200);
      reason = 'the SQLite worker died and 3 restarts failed';
      const sick = await fetch(`${base}/healthz`);
      expect(sick.status).toBe(503);
      expect(await sick.json()).toEqual({ status: 'unavailable', reason });
    } finally {
      await new Promise((r) => server.close(r));
    }
    const open = await startMetricsServer(createMetrics({ processMetrics: false }), 0, '127.0.0.1');
    try {
      expect((await fetch(`http://127.0.0.1:${(open.address() as AddressInfo).port}/metrics`)).status).toBe(200);
    } finally {
      await new Promise((r) => open.close(r));
    }
  });
});
