/**
 * The chaos run's counting tool server: an MCP server over Streamable HTTP
 * (the official SDK's `McpServer`, stateless) whose `charge` tool writes
 * every execution to a JSON-lines log, synchronously, the moment the call
 * arrives (before any delay, so a call cut mid-way still counts as executed).
 * The checker (chaos/tool-checker.ts) holds onejob to that log: at most one
 * execution per intended tool call, and no success told for a call that did
 * not execute. It never dedupes on the key it receives: the log is raw.
 *
 *   node --import tsx chaos/tool-server.ts --log <file>   # prints its URL as the first stdout line
 *
 * Tools: `charge` {call, amount, delayMs?} (not read-only: a job through
 * onejob); `balance` {} (readOnlyHint: passed through, no job).
 */
import { appendFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import * as z from 'zod/v4';
import type { ToolExecution } from './tool-records.ts';

const { values } = parseArgs({ options: { log: { type: 'string' }, port: { type: 'string' } }, strict: true });
if (values.log === undefined) throw new Error('--log <file> is required');
const logFile = values.log;
let executions = 0;

function toolServer(): McpServer {
  const server = new McpServer({ name: 'chaos-tools', version: '1' });
  server.registerTool('charge', {
    description: 'Charges an amount for one intended call (counts every execution).',
    inputSchema: { call: z.string(), amount: z.number(), delayMs: z.number().int().min(0).optional() },
    annotations: { destructiveHint: true, idempotentHint: false },
  }, async ({ call, amount, delayMs }, extra) => {
    const meta = extra._meta ?? {};
    const execution: ToolExecution = {
      exec: `x${process.pid}_${++executions}`, call, amount, at: Date.now(),
      key: typeof meta['onejob/idempotencyKey'] === 'string' ? meta['onejob/idempotencyKey'] : null,
      jobId: typeof meta['onejob/jobId'] === 'string' ? meta['onejob/jobId'] : null,
    };
    appendFileSync(logFile, `${JSON.stringify(execution)}\n`);
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    return {
      content: [{ type: 'text', text: `charged ${amount} for ${call} (${execution.exec})` }],
      structuredContent: { exec: execution.exec, call, amount },
    };
  });
  server.registerTool('balance', { description: 'How many executions so far.', annotations: { readOnlyHint: true } }, async () => ({
    content: [{ type: 'text', text: String(executions) }], structuredContent: { executions },
  }));
  return server;
}

const http = createServer((req, res) => {
  if (req.url === '/healthz') {
    res.writeHead(200).end('ok');
    return;
  }
  if (req.url !== '/mcp' || req.method !== 'POST') {
    res.writeHead(405, { allow: 'POST' }).end();
    return;
  }
  const server = toolServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  void server.connect(transport).then(() => transport.handleRequest(req, res));
});
http.listen(Number(values.port ?? 0), '127.0.0.1', () => {
  const address = http.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  process.stdout.write(`http://127.0.0.1:${port}\n`);
});
