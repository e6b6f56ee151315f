/**
 * Shared helpers of the provider tests.
 */
import { createServer } from 'node:net';
import type { ChatRequest, ProviderRequest } from '../../src/providers/provider.ts';

let counter = 0;

/** A provider request for a fresh job, with a never-firing signal unless one is given. */
export function attemptRequest(overrides: Partial<ProviderRequest> = {}): ProviderRequest {
  counter += 1;
  const input: ChatRequest = { messages: [{ role: 'user', content: 'Say hello' }] };
  return {
    input,
    jobId: `job_test_${counter}`,
    attemptId: `att_test_${counter}`,
    attemptNumber: 1,
    signal: new AbortController().signal,
    ...overrides,
  };
}

/** A loopback port nobody listens on (bound, then released). */
export async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (typeof address !== 'object' || address === null) throw new Error('no address');
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return address.port;
}
