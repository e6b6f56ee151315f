/**
 * The fake provider (`src/testing/fake-provider-server.ts`) in its own
 * process, on loopback. `--delay-ms` sets the default behaviour's delay
 * (0: answers at once). With `--forget`, the call log is cleared every 500 ms
 * (a throughput run would otherwise keep every call in memory); without it,
 * `GET /calls` counts provider executions.
 *
 * Prints `READY {"url"}`.
 */
import { startFakeProvider } from '../../src/testing/fake-provider-server.ts';
import { argMap, emitReady } from '../lib/child.ts';

const args = argMap(process.argv.slice(2));
const delayMs = Number(args['delay-ms'] ?? 0);
const behaviour = { reply: 'ok', ...(delayMs > 0 ? { delayMs } : {}) };
const fake = await startFakeProvider({ host: '127.0.0.1', port: 0 });
fake.setDefault(behaviour);
if (args.forget === 'true') {
  setInterval(() => {
    fake.reset();
    fake.setDefault(behaviour);
  }, 500).unref();
}
const shutdown = (): void => void fake.close().finally(() => process.exit(0));
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
emitReady({ url: fake.url });
