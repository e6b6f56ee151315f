// Preload for the Portkey gateway process: its server listens on every
// interface by default; the benchmark keeps everything on loopback, so every
// listen() with a bare port is bound to 127.0.0.1. Prints READY when up.
import net from 'node:net';

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function patchedListen(...args) {
  if (typeof args[0] === 'number') {
    const [port, ...rest] = args;
    const host = typeof rest[0] === 'string' ? rest.shift() : '127.0.0.1';
    this.once('listening', () => process.stdout.write(`READY ${JSON.stringify({ url: `http://127.0.0.1:${this.address().port}` })}\n`));
    return listen.call(this, port, host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host, ...rest);
  }
  if (args[0] && typeof args[0] === 'object' && !Array.isArray(args[0]) && args[0].port !== undefined) {
    this.once('listening', () => process.stdout.write(`READY ${JSON.stringify({ url: `http://127.0.0.1:${this.address().port}` })}\n`));
    return listen.call(this, { ...args[0], host: '127.0.0.1' }, ...args.slice(1));
  }
  return listen.apply(this, args);
};
// The gateway clears the console and prints a banner; keep stdout parseable.
console.clear = () => {};
// The gateway (1.15.2) streams an upstream response by handing on the Response
// fetch() returned and then appending its own headers to it; on Node 20 those
// headers are immutable, so every streamed request failed with a 500
// ("TypeError: immutable" in updateHeaders). Streamed answers are re-wrapped
// in a Response of the same body, status and headers (mutable headers, the
// body is not read or copied); every other answer is handed on unchanged.
const upstreamFetch = globalThis.fetch;
globalThis.fetch = async function benchFetch(...args) {
  const res = await upstreamFetch.apply(this, args);
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) return res;
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers: new Headers(res.headers) });
};
