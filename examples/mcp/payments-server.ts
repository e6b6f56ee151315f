/**
 * A fake "payments" MCP server that counts charges: the tool server of
 * `docs/mcp.md`'s walk-through and of onejob's own MCP tests. It speaks MCP
 * over stdio (the default) or Streamable HTTP (`--http <port>`), built on the
 * official SDK's `McpServer`.
 *
 * Tools:
 * - `charge` ({amount, currency?}, plus test knobs `delayMs`, `hang`,
 *   `crash`): "charges a card". Not read-only: through onejob every call
 *   of it is a job. It honours the key onejob sends in
 *   `params._meta["onejob/idempotencyKey"]`: a key it has seen answers the
 *   stored charge again instead of charging twice (how a tool server of
 *   your own can dedupe too).
 * - `stats` (readOnlyHint: true): how many `charge` calls arrived, how many
 *   charges were made, and the keys received. Passed through by onejob.
 * - `enable_refunds`: adds a `refund` tool and tells the client its tool
 *   list changed (`notifications/tools/list_changed`).
 *
 *   node --import tsx examples/mcp/payments-server.ts            # stdio
 *   node --import tsx examples/mcp/payments-server.ts --http 7070 # http://127.0.0.1:7070/mcp
 */
import { createServer, type Server as HttpServer } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import * as z from 'zod/v4';

/** What the payments server has seen (one per process). */
export interface PaymentsLedger {
  /** `charge` calls received. */
  calls: number;
  /** Charges made (a call whose key was seen before makes none). */
  charges: number;
  /** The `onejob/idempotencyKey` of every `charge` call received, in order (null: none sent). */
  keys: (string | null)[];
  /** The charge made for each key, answered again for a repeated key. */
  byKey: Map<string, { id: string; amount: number; currency: string }>;
}

/** A new, empty ledger. */
export function newLedger(): PaymentsLedger {
  return { calls: 0, charges: 0, keys: [], byKey: new Map() };
}

/** The payments MCP server over `ledger` (one `McpServer` per connection; the ledger is shared). */
export function paymentsServer(ledger: PaymentsLedger): McpServer {
  const server = new McpServer({ name: 'payments', version: '1.0.0' });
  server.registerTool('charge', {
    description: 'Charge a card. Charges money: never call it twice for one purchase.',
    inputSchema: {
      amount: z.number().positive(), currency: z.string().optional(), note: z.string().optional(),
      delayMs: z.number().int().min(0).optional(), hang: z.boolean().optional(), crash: z.boolean().optional(),
    },
    annotations: { title: 'Charge a card', readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
  }, async ({ amount, currency, delayMs, hang, crash }, extra) => {
    ledger.calls++;
    const key = typeof extra._meta?.['onejob/idempotencyKey'] === 'string' ? extra._meta['onejob/idempotencyKey'] : null;
    ledger.keys.push(key);
    if (crash) setTimeout(() => process.exit(3), 20);
    if (hang || crash) {
      // Until the client gives up (notifications/cancelled): then nothing is charged.
      await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve(), { once: true }));
      throw new Error('the charge was cancelled before it was made');
    }
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    const seen = key === null ? undefined : ledger.byKey.get(key);
    const charge = seen ?? { id: `ch_${ledger.charges + 1}`, amount, currency: currency ?? 'EUR' };
    if (!seen) {
      ledger.charges++;
      if (key !== null) ledger.byKey.set(key, charge);
    }
    return {
      content: [{ type: 'text', text: `charged ${charge.amount} ${charge.currency} (${charge.id})` }],
      structuredContent: { ...charge, received_key: key, charges_so_far: ledger.charges, pid: process.pid },
    };
  });
  server.registerTool('stats', {
    description: 'How many charge calls arrived and how many charges were made.',
    annotations: { title: 'Payment statistics', readOnlyHint: true },
  }, async () => {
    const stats = { calls: ledger.calls, charges: ledger.charges, keys: ledger.keys, pid: process.pid };
    return { content: [{ type: 'text', text: JSON.stringify(stats) }], structuredContent: stats };
  });
  server.registerTool('enable_refunds', {
    description: 'Adds the refund tool.',
    annotations: { idempotentHint: true },
  }, async () => {
    server.registerTool('refund', { description: 'Refund a charge.', inputSchema: { charge: z.string() }, annotations: { destructiveHint: true } }, async ({ charge }) => ({
      content: [{ type: 'text', text: `refunded ${charge}` }],
    }));
    return { content: [{ type: 'text', text: 'refunds enabled' }] };
  });
  return server;
}

/**
 * The payments server over Streamable HTTP at `http://127.0.0.1:<port>/mcp`
 * (stateless: one server per request, one ledger for all).
 *
 * @example const payments = await startPaymentsHttp(); // payments.url, payments.ledger
 */
export async function startPaymentsHttp(port = 0): Promise<{ url: string; ledger: PaymentsLedger; close(): Promise<void>; http: HttpServer }> {
  const ledger = newLedger();
  const http = createServer((req, res) => {
    if (req.url !== '/mcp' || req.method !== 'POST') {
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const server = paymentsServer(ledger);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    void server.connect(transport).then(() => transport.handleRequest(req, res));
  });
  await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', resolve));
  const address = http.address();
  const actual = typeof address === 'object' && address ? address.port : port;
  return {
    url: `http://127.0.0.1:${actual}/mcp`,
    ledger,
    http,
    close: () => new Promise<void>((resolve) => {
      http.closeAllConnections();
      http.close(() => resolve());
    }),
  };
}

if (process.argv[1]?.endsWith('payments-server.ts')) {
  const at = process.argv.indexOf('--http');
  if (at >= 0) {
    const payments = await startPaymentsHttp(Number(process.argv[at + 1] ?? 7070));
    process.stderr.write(`payments MCP server at ${payments.url}\n`);
  } else {
    await paymentsServer(newLedger()).connect(new StdioServerTransport());
  }
}
