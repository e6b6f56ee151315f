/**
 * The fake provider's prediction-style task API (CONTRACT §11's `task`
 * provider type): `POST /v1/tasks` (idempotent by `Idempotency-Key`: a second
 * create with the same key answers the same task and counts a submit), `GET
 * /v1/tasks/{id}` (the poll and the lookup), `POST /v1/tasks/{id}/cancel`,
 * and, with `taskCallback`, the signed callback a task sends when it ends.
 * A task is `processing` for `task.runMs`, then `task.status` with its output.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { abortableSleep } from '../abortable-sleep.ts';
import { signCallback, signCallbackV3 } from '../task/callback-signature.ts';
import type { FakeApiContext } from './fake-api-context.ts';
import type { FakeBehaviour } from './fake-behaviour.ts';
import { authorizedHeaders, defaultErrorHeaders, readBody, refusedMethod, sendJson } from './fake-http.ts';

/** A task of the fake's prediction-style API (`POST /v1/tasks`, `GET /v1/tasks/{id}`, `POST /v1/tasks/{id}/cancel`). */
export interface FakeTask {
  readonly id: string;
  /** The `Idempotency-Key` it was created with (onejob sends the attempt id). */
  readonly idempotencyKey: string | null;
  readonly input: unknown;
  readonly status: 'processing' | 'succeeded' | 'failed' | 'canceled';
  readonly output: unknown;
  /** How many create requests carried its idempotency key (1: the work was submitted once). */
  readonly submits: number;
  /** Whether `POST /v1/tasks/{id}/cancel` was received. */
  readonly cancelRequested: boolean;
}

interface TaskState {
  readonly id: string;
  readonly idempotencyKey: string | null;
  readonly input: unknown;
  endsAt: number;
  readonly final: 'succeeded' | 'failed' | 'canceled';
  readonly output: unknown;
  submits: number;
  cancelled: boolean;
  cancelRequested: boolean;
}

/** Where and how tasks call back (`StartFakeProviderOptions.taskCallback`). */
export interface FakeTaskCallbackTarget {
  /** `{attempt}` is replaced by the task's `Idempotency-Key` (onejob's attempt id). */
  readonly url: string;
  readonly secret: string;
  /** The `Onejob-Signature` form (CONTRACT §15): `v4` (default: `t=…,v1=…` over `t.attemptId.body`) or `v3` (`sha256=…` over the body). */
  readonly signature?: 'v4' | 'v3';
}

/** A callback a task sent (`taskCallback`), with the status it was answered (0: not delivered, null: not yet). */
export interface FakeTaskCallback {
  readonly taskId: string;
  readonly status: string;
  readonly answered: number | null;
}

/**
 * The fake task service.
 *
 * @example const api = new FakeTaskApi(context, { url, secret }); await api.handle(req, res, 'POST', undefined, false);
 */
export class FakeTaskApi {
  readonly #context: FakeApiContext;
  readonly #callback: FakeTaskCallbackTarget | undefined;
  readonly #tasks = new Map<string, TaskState>();
  readonly #callbacks: { taskId: string; status: string; answered: number | null }[] = [];

  constructor(context: FakeApiContext, callback: FakeTaskCallbackTarget | undefined) {
    this.#context = context;
    this.#callback = callback;
  }

  /** Every task created, oldest first. */
  get tasks(): readonly FakeTask[] {
    return [...this.#tasks.values()].map((t) => taskView(t));
  }

  /** The callbacks sent, oldest first (the live records: `answered` is filled in when the answer arrives). */
  get callbacks(): readonly FakeTaskCallback[] {
    return this.#callbacks;
  }

  /** Forgets every task (the callbacks sent are kept). */
  reset(): void {
    this.#tasks.clear();
  }

  /** The fake task service: create (idempotent by `Idempotency-Key`), read, cancel. */
  async handle(req: IncomingMessage, res: ServerResponse, method: string, id: string | undefined, cancel: boolean): Promise<void> {
    const headers = authorizedHeaders(req, res, (h) => this.#context.checkAuth('openai', h));
    if (headers === null) return;
    if (id === undefined) {
      if (refusedMethod(res, method, 'POST')) return;
      const text = await readBody(req);
      let body: unknown;
      try {
        body = JSON.parse(text ?? '');
      } catch {
        return sendJson(res, 400, { error: { message: 'request body is not valid JSON' } });
      }
      if (typeof body !== 'object' || body === null || !('input' in body)) return sendJson(res, 422, { error: { message: 'body must be {"input": …}' } });
      const key = headers['idempotency-key'] ?? null;
      this.#context.noteSubmit(headers);
      const existing = key === null ? undefined : [...this.#tasks.values()].find((t) => t.idempotencyKey === key);
      if (existing !== undefined) {
        existing.submits += 1;
        return sendJson(res, 200, taskBody(this.#context.url, existing));
      }
      let chosen: FakeBehaviour;
      try {
        chosen = this.#context.choose('openai', headers, { messages: [], ...(body as object) }).behaviour;
      } catch (err) {
        return sendJson(res, 400, { error: { message: `fake provider: ${(err as Error).message}` } });
      }
      this.#context.noteSubmit(headers, chosen);
      const signal = new AbortController().signal;
      if (chosen.gate !== undefined) await this.#context.waitGate(chosen.gate, signal);
      if (chosen.delayMs !== undefined && chosen.delayMs > 0) await abortableSleep(chosen.delayMs, signal);
      if (chosen.status !== undefined && chosen.status >= 300) return sendJson(res, chosen.status, { error: { message: 'scripted', ...chosen.error } }, { ...defaultErrorHeaders(chosen.status), ...(chosen.headers ?? {}) });
      const input = (body as { input: unknown }).input;
      const t: TaskState = {
        id: `task_fake_${this.#context.idPart}${this.#tasks.size + 1}`, idempotencyKey: key, input,
        endsAt: Date.now() + (chosen.task?.runMs ?? 0), final: chosen.task?.status ?? 'succeeded',
        output: chosen.task?.output ?? chosen.reply ?? { echo: input }, submits: 1, cancelled: false, cancelRequested: false,
      };
      this.#tasks.set(t.id, t);
      this.#scheduleCallback(t);
      if (chosen.hang === true) return; // created, never answered (until the client goes away)
      if (chosen.loseAnswer === true) {
        req.socket.resetAndDestroy();
        return;
      }
      return sendJson(res, 201, taskBody(this.#context.url, t), chosen.headers ?? {});
    }
    const t = this.#tasks.get(id);
    if (t === undefined) return sendJson(res, 404, { error: { message: `no task ${id}` } });
    if (cancel) {
      if (refusedMethod(res, method, 'POST')) return;
      t.cancelRequested = true;
      if (taskStatus(t) === 'processing') {
        t.cancelled = true;
        void this.#callBack(t);
      }
      return sendJson(res, 200, taskBody(this.#context.url, t));
    }
    if (refusedMethod(res, method, 'GET')) return;
    this.#context.countLookup();
    return sendJson(res, 200, taskBody(this.#context.url, t));
  }

  /** With `taskCallback`: the task calls back when it ends (unless cancelled first: then at the cancel). */
  #scheduleCallback(t: TaskState): void {
    if (this.#callback === undefined || t.idempotencyKey === null) return;
    const timer = setTimeout(() => {
      // A timer may fire a millisecond before the wall clock reaches endsAt: the task has ended now.
      t.endsAt = Math.min(t.endsAt, Date.now());
      if (!t.cancelled && !this.#context.closing.aborted) void this.#callBack(t);
    }, Math.max(0, t.endsAt - Date.now()));
    timer.unref();
  }

  async #callBack(t: TaskState): Promise<void> {
    const cb = this.#callback;
    if (cb === undefined || t.idempotencyKey === null) return;
    const body = JSON.stringify(taskBody(this.#context.url, t));
    const record = { taskId: t.id, status: taskStatus(t), answered: null as number | null };
    this.#callbacks.push(record);
    try {
      const res = await fetch(cb.url.replace('{attempt}', encodeURIComponent(t.idempotencyKey)), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'onejob-signature': cb.signature === 'v3' ? signCallbackV3(body, cb.secret) : signCallback(body, cb.secret, t.idempotencyKey),
        },
        body,
      });
      record.answered = res.status;
    } catch {
      record.answered = 0;
    }
  }
}

function taskStatus(t: TaskState): FakeTask['status'] {
  if (t.cancelled) return 'canceled';
  return Date.now() < t.endsAt ? 'processing' : t.final;
}

function taskView(t: TaskState): FakeTask {
  const status = taskStatus(t);
  return { id: t.id, idempotencyKey: t.idempotencyKey, input: t.input, status, output: status === 'succeeded' ? t.output : null, submits: t.submits, cancelRequested: t.cancelRequested };
}

/** A task as the prediction-style API answers it (CONTRACT §11). */
function taskBody(base: string, t: TaskState): Record<string, unknown> {
  const status = taskStatus(t);
  return {
    id: t.id,
    status,
    ...(status === 'succeeded' ? { output: t.output } : {}),
    ...(status === 'failed' ? { error: 'the fake task failed (scripted)' } : {}),
    urls: { get: `${base}/v1/tasks/${t.id}`, cancel: `${base}/v1/tasks/${t.id}/cancel` },
  };
}
