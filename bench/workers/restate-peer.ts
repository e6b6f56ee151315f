/**
 * The Restate peer's service for the bench's durable-peers series (issue
 * 40), in its own process on Node 22 or later (the SDK 1.17 calls
 * `Promise.withResolvers`, which Node 20 lacks; bench/durable-peers.ts finds
 * that Node the way test/engines/restate.test.ts does). Service `intent`,
 * handler `ask` (`{ text }` → `{ answer }`): the one model call to the fake
 * provider (`--provider-url`) inside `ctx.run`, so Restate journals the
 * invocation before the call and the call's result after it. The client
 * invokes it through Restate's ingress with an `idempotency-key` header: a
 * duplicate is answered from the invocation's recorded result.
 *
 * `--port` (required: the deployment is registered at it). Prints `READY {"port", "pid", "node"}`.
 */
import * as restate from '@restatedev/restate-sdk';
import { argMap, emitReady } from '../lib/child.ts';

const args = argMap(process.argv.slice(2));
const providerUrl = args['provider-url'] ?? '';
const port = Number(args.port ?? 0);
if (!providerUrl || !port) throw new Error('restate-peer: --provider-url and --port are required');

const intent = restate.service({
  name: 'intent',
  handlers: {
    ask: async (ctx: restate.Context, input: { text?: string }): Promise<{ answer: string }> => {
      const answer = await ctx.run('ask model', async () => {
        const res = await fetch(`${providerUrl}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer sk-bench' },
          body: JSON.stringify({ model: 'fake-model', messages: [{ role: 'user', content: input.text ?? '' }] }),
        });
        if (!res.ok) throw new Error(`provider answered ${res.status}`);
        const body = (await res.json()) as { choices: { message: { content: string } }[] };
        return body.choices[0]?.message.content ?? '';
      });
      return { answer };
    },
  },
});

await restate.endpoint().bind(intent).listen(port);
process.on('SIGTERM', () => process.exit(0));
emitReady({ port, pid: process.pid, node: process.version });
