/**
 * The fake provider (`src/testing/fake-provider-server.ts`) in its own
 * process, on loopback. `--delay-ms` sets the default behaviour's delay
 * (0: answers at once); `--behaviour <json>` adds to it any field of the
 * fake's script language (`usage`, `chunks`, `chunkDelayMs`, `hang`…). With `--forget`, the call log is cleared every 500 ms
 * (a throughput run would otherwise keep every call in memory); without it,
 * `GET /calls` counts provider executions.
 *
 * Either way the process keeps the running total of the calls onejob made
 * (those carrying an `Onejob-Job-Id` header; added up before each clearing),
 * served at `GET <countUrl>/` as `{"calls": n}`, so the bench's parity check
 * can compare provider executions with jobs. Calls of the other sides (the
 * direct and Portkey runs share this provider, and their stragglers can
 * arrive during a onejob run) carry no such header and are not counted
 * there; `all` counts every call (the durable peers' duplicate check).
 *
 * Prints `READY {"url", "countUrl"}`.
 */
import { createServer } from 'node:http';
import { startFakeProvider } from '../../src/testing/fake-provider-server.ts';
import { argMap, emitReady } from '../lib/child.ts';

const args = argMap(process.argv.slice(2));
const delayMs = Number(args['delay-ms'] ?? 0);
const behaviour = { reply: 'ok', ...(delayMs > 0 ? { delayMs } : {}), ...(args.behaviour ? (JSON.parse(args.behaviour) as object) : {}) };
const fake = await startFakeProvider({ host: '127.0.0.1', port: 0 });
fake.setDefault(behaviour);
let forgotten = 0;
let forgottenAll = 0;
const onejobCalls = (): number => fake.calls.filter((c) => c.jobId !== null).length;
if (args.forget === 'true') {
  setInterval(() => {
    // Counted and cleared in one synchronous step: no call falls between.
    forgotten += onejobCalls();
    forgottenAll += fake.calls.length;
    fake.reset();
    fake.setDefault(behaviour);
  }, 500).unref();
}
const counter = createServer((_req, res) => {
  res.setHeader('content-type', 'application/json');
  res.end(JSON.stringify({ calls: forgotten + onejobCalls(), all: forgottenAll + fake.calls.length }));
});
await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
const address = counter.address();
const countPort = typeof address === 'object' && address ? address.port : 0;
const shutdown = (): void => void fake.close().finally(() => process.exit(0));
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
emitReady({ url: fake.url, countUrl: `http://127.0.0.1:${countPort}` });
