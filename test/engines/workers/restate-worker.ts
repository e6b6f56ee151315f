/**
 * A Restate service for test/engines/restate.test.ts, run as its own process
 * on Node 22 or later (the SDK calls Promise.withResolvers): service `agent`,
 * handler `summarize`, whose one model call goes through onejob
 * (`MODE=onejob`: `restateChat`, the key is the invocation id and the call's
 * ordinal) or straight to the fake provider inside a `ctx.run` (`MODE=direct`,
 * the control). Writes one JSON line per event on stdout.
 *
 * Env: PORT, MODE, ONEJOB_URL, ONEJOB_TOKEN, FAKE_URL; HOLD_AFTER_ANSWER=1
 * stops the call after its answer arrived, before the `ctx.run` returns (so
 * before Restate journals it): the test kills the process there.
 */
import * as restate from '@restatedev/restate-sdk';
import { OnejobClient } from '../../../src/client/index.ts';
import { restateChat } from '../../../src/restate/index.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined || value === '') throw new Error(`restate-worker: ${name} is not set`);
  return value;
};
const emit = (event: Record<string, unknown>): void => {
  process.stdout.write(`${JSON.stringify(event)}\n`);
};
const mode = env('MODE');
const hold = process.env.HOLD_AFTER_ANSWER === '1';
const never = (): Promise<never> => new Promise(() => undefined);

/** The fetch under the client: in hold mode, the first answer of a chat call is read, announced, and never handed back. */
const holdingFetch: typeof fetch = async (input, init) => {
  const res = await fetch(input, init);
  if (hold && res.ok && String(input).endsWith('/v1/chat/completions')) {
    const body = (await res.json()) as { choices: { message: { content: string } }[] };
    emit({ event: 'answered', content: body.choices[0]?.message.content, idempotencyKey: new Headers(init?.headers).get('idempotency-key') });
    emit({ event: 'holding' });
    return never();
  }
  return res;
};
const onejob = new OnejobClient({ baseUrl: env('ONEJOB_URL'), token: env('ONEJOB_TOKEN'), fetch: holdingFetch });

const agent = restate.service({
  name: 'agent',
  handlers: {
    summarize: async (ctx: restate.Context, text: string): Promise<string> => {
      emit({ event: 'handler-start', invocationId: ctx.request().id });
      const request = { model: 'gpt', messages: [{ role: 'user' as const, content: `summarize: ${text}` }] };
      let content: string;
      if (mode === 'onejob') {
        const { body, jobId, idempotencyKey } = await restateChat(ctx, onejob, request, { name: 'ask model' });
        content = body.choices[0]?.message.content ?? '';
        emit({ event: 'answered', content, jobId, idempotencyKey });
      } else {
        content = await ctx.run('ask model', async () => {
          const res = await fetch(`${env('FAKE_URL')}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(request) });
          const body = (await res.json()) as { choices: { message: { content: string } }[] };
          const answer = body.choices[0]?.message.content ?? '';
          emit({ event: 'answered', content: answer });
          if (hold) {
            emit({ event: 'holding' });
            await never();
          }
          return answer;
        });
      }
      return `summary: ${content}`;
    },
  },
});

const port = Number(env('PORT'));
await restate.endpoint().bind(agent).listen(port);
emit({ event: 'listening', port, node: process.version });
