// A task service in the shape onejob's `task` provider speaks (CONTRACT §11):
// POST /tasks {"input"} with Idempotency-Key → a task; GET /tasks/{id}; POST /tasks/{id}/cancel.
// Each task "renders" for RENDER_MS, then succeeds with an output. With CALLBACK_URL and
// CALLBACK_SECRET set it also calls back: POST <CALLBACK_URL with {attempt} replaced> signed
// Onejob-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<attempt id>.<body>"> (CONTRACT §15:
// onejob accepts t within 300 s of its clock, each signature once).
//
//   PORT=4100 RENDER_MS=5000 node examples/task-service/server.mjs
import { createHmac, randomUUID } from 'node:crypto';
import { createServer } from 'node:http';

const port = Number(process.env.PORT ?? 4100);
const renderMs = Number(process.env.RENDER_MS ?? 5000);
const callbackUrl = process.env.CALLBACK_URL; // e.g. http://127.0.0.1:8080/v1/attempts/{attempt}/callback
const callbackSecret = process.env.CALLBACK_SECRET;
const tasks = new Map(); // id → task
const byKey = new Map(); // Idempotency-Key → id: the same key never starts a second render

function view(task) {
  const base = `http://127.0.0.1:${port}/tasks/${task.id}`;
  return { id: task.id, status: task.status, ...(task.output === undefined ? {} : { output: task.output }), urls: { get: base, cancel: `${base}/cancel` } };
}

async function callBack(task) {
  if (!callbackUrl || !callbackSecret || !task.key) return;
  const body = JSON.stringify(view(task));
  // Signed when sent (the attempt id is the task's Idempotency-Key): a retry of the delivery signs anew.
  const t = Math.floor(Date.now() / 1000);
  const signature = `t=${t},v1=${createHmac('sha256', callbackSecret).update(`${t}.${task.key}.${body}`).digest('hex')}`;
  await fetch(callbackUrl.replace('{attempt}', encodeURIComponent(task.key)), {
    method: 'POST', headers: { 'content-type': 'application/json', 'onejob-signature': signature }, body,
  }).catch((e) => console.error('callback failed:', e.message));
}

function send(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
}

createServer(async (req, res) => {
  const [, collection, id, action] = new URL(req.url, 'http://x').pathname.split('/');
  if (collection !== 'tasks') return send(res, 404, { error: 'not found' });
  if (req.method === 'POST' && id === undefined) {
    let text = '';
    for await (const chunk of req) text += chunk;
    const { input } = JSON.parse(text || '{}');
    const key = req.headers['idempotency-key'];
    if (key && byKey.has(key)) return send(res, 200, view(tasks.get(byKey.get(key))));
    const task = { id: `task_${randomUUID()}`, key, input, status: 'processing' };
    tasks.set(task.id, task);
    if (key) byKey.set(key, task.id);
    task.timer = setTimeout(() => {
      task.status = 'succeeded';
      task.output = { image: `https://example.invalid/renders/${task.id}.png`, prompt: input?.prompt ?? null };
      void callBack(task);
    }, renderMs);
    return send(res, 201, view(task));
  }
  const task = tasks.get(id);
  if (!task) return send(res, 404, { error: `no task ${id}` });
  if (req.method === 'GET' && action === undefined) return send(res, 200, view(task));
  if (req.method === 'POST' && action === 'cancel') {
    if (task.status === 'processing') {
      clearTimeout(task.timer);
      task.status = 'canceled';
      void callBack(task);
    }
    return send(res, 200, view(task));
  }
  send(res, 405, { error: 'method not allowed' });
}).listen(port, '127.0.0.1', () => console.log(`task service on http://127.0.0.1:${port}/tasks`));
