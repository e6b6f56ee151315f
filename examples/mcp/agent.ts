/**
 * An "agent" that double-calls a payments tool through onejob: the double
 * click of 2026. It connects to onejob's `/mcp` with the official SDK's
 * client, charges a card, then does what agents do after a timeout or a
 * reconnect: sends the very same call again (twice at once, for good
 * measure); then makes a second, separate purchase of the same thing with
 * onejob/client's `callToolOnce` and a key of its own. The payments server's
 * own `stats` tool (read-only, passed through) says how many charges it
 * really made: two, one per purchase.
 *
 *   bin/onejob serve --config examples/mcp/onejob.config.json     # terminal 1
 *   node --import tsx examples/mcp/agent.ts                        # terminal 2
 *
 * ONEJOB_URL (default http://127.0.0.1:8787) and ONEJOB_TOKEN (default the
 * example config's token) point it elsewhere.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { callToolOnce } from '../../src/client/index.ts';

const url = process.env.ONEJOB_URL ?? 'http://127.0.0.1:8787';
const token = process.env.ONEJOB_TOKEN ?? 'tok_agent_example';

const client = new Client({ name: 'double-calling-agent', version: '1' });
await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));

const { tools } = await client.listTools();
console.log(`tools through onejob: ${tools.map((t) => t.name).join(', ')}`);

const stats = async () => (await client.callTool({ name: 'payments.stats', arguments: {} })).structuredContent as { charges: number; calls: number };
const before = await stats();

// One purchase. The agent sends no key: onejob's fingerprint of (server, tool, arguments) stands for one.
const purchase = { amount: 42, currency: 'EUR', note: `order ${Date.now()}` };
const charge = () => client.callTool({ name: 'payments.charge', arguments: purchase }) as Promise<CallToolResult>;
const first = await charge();
console.log(`first call:   ${text(first)}  (job ${first._meta?.['onejob/jobId']})`);
// "It timed out, let me try again" — twice, concurrently.
const retries = await Promise.all([charge(), charge()]);
for (const r of retries) console.log(`retried call: ${text(r)}  (job ${r._meta?.['onejob/jobId']}, replayed: ${r._meta?.['onejob/replayed']})`);

// A second purchase of the same thing is another intent: onejob/client's callToolOnce gives it a key of its own
// (and would send that key again on every retry of this one call).
const second = await callToolOnce(client, { name: 'payments.charge', arguments: purchase }, { idempotencyKey: `order-2-${Date.now()}` });
console.log(`second order: ${text(second.result as CallToolResult)}  (job ${second.jobId}, its own key ${second.idempotencyKey})`);

const after = await stats();
console.log(`charges made by the payments server: ${after.charges - before.charges} (tool calls it received: ${after.calls - before.calls})`);
await client.close();

function text(r: CallToolResult): string {
  return r.content.map((c) => (c.type === 'text' ? c.text : `[${c.type}]`)).join(' ');
}
