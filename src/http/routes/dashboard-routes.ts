/**
 * The dashboard at `/ui` (CONTRACT §10): the static files Vite built from
 * `web/` into `web/dist/` (at install time, `npm run build:web`), served from
 * memory by this process. Nothing comes from a CDN; the page talks to this
 * server only over the public HTTP API, with the token the user signs in
 * with. No token is needed to load the files themselves.
 *
 * Files are read once, at registration. `index.html` is never cached;
 * the hashed files under `assets/` are immutable. A strict
 * Content-Security-Policy allows nothing but this origin.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** Where `npm run build:web` writes the dashboard. */
export const DASHBOARD_DIST = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'web', 'dist');

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.json': 'application/json',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json',
};

const CSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

interface StaticFile {
  readonly body: Buffer;
  readonly type: string;
  readonly immutable: boolean;
}

function loadFiles(root: string): Map<string, StaticFile> {
  const files = new Map<string, StaticFile>();
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else {
        const rel = relative(root, path).split(sep).join('/');
        files.set(rel, { body: readFileSync(path), type: TYPES[extname(name)] ?? 'application/octet-stream', immutable: rel.startsWith('assets/') });
      }
    }
  };
  walk(root);
  return files;
}

/** Options of {@link registerDashboardRoutes}. */
export interface DashboardRoutesOptions {
  /** The built dashboard's folder. Default {@link DASHBOARD_DIST}. */
  readonly dist?: string;
}

/** Registers `GET /ui` and the files under it, and `GET /` as a redirect to the dashboard. */
export function registerDashboardRoutes(app: FastifyInstance, options: DashboardRoutesOptions = {}): void {
  const dist = options.dist ?? DASHBOARD_DIST;
  const files = existsSync(join(dist, 'index.html')) ? loadFiles(dist) : null;

  const send = (reply: FastifyReply, path: string) => {
    if (files === null) {
      return reply.code(503).type('text/plain; charset=utf-8')
        .send('The dashboard is not built. Run `npm run build:web` (npm install runs it), then restart onejob.\n');
    }
    const file = files.get(path);
    if (file === undefined) return reply.code(404).type('text/plain; charset=utf-8').send('Not found\n');
    return reply
      .header('content-security-policy', CSP)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('cache-control', file.immutable ? 'public, max-age=31536000, immutable' : 'no-cache')
      .type(file.type)
      .send(file.body);
  };

  const hidden = { schema: { hide: true } };
  // Whoever opens the server's address in a browser lands on the dashboard, not on a JSON 404.
  app.get('/', hidden, async (_request, reply) => reply.redirect('/ui/', 302));
  app.get('/ui', hidden, async (_request, reply) => reply.redirect('/ui/', 302));
  app.get('/ui/', hidden, async (_request, reply) => send(reply, 'index.html'));
  app.get<{ Params: { '*': string } }>('/ui/*', hidden, async (request, reply) => {
    const path = request.params['*'];
    // Only files that were built are served: there is no path to walk out of the folder.
    return send(reply, path === '' ? 'index.html' : path);
  });
}
