/**
 * The logger of the long-running commands (`serve`, `executor`): pino, as
 * JSON lines for a log collector, or through pino's own pretty printer
 * (`pino-pretty`) for a person at a terminal.
 *
 * `LOG_FORMAT=json|pretty` chooses; unset, the format follows the output:
 * pretty when stdout is a terminal, JSON otherwise (a pipe, a file, a
 * container's log driver). `LOG_LEVEL` sets the level (default `info`).
 * pino-pretty is loaded only when it is used.
 */
import { pino, type Logger } from 'pino';
import { CliFailure, USAGE_EXIT_CODE } from './cli-errors.ts';

/** Options of {@link createCliLogger}. */
export interface CliLoggerOptions {
  /** The `service` field of every line. */
  readonly service: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  /** Where the lines go. Default `process.stdout`; its `isTTY` picks the default format. */
  readonly destination?: NodeJS.WritableStream & { readonly isTTY?: boolean };
}

/** The formats `LOG_FORMAT` names. */
export const LOG_FORMATS = ['json', 'pretty'] as const;

/**
 * A pino logger for a command, JSON or pretty (see the module comment).
 *
 * @throws CliFailure (usage) for a `LOG_FORMAT` other than `json` or `pretty`.
 * @example const logger = await createCliLogger({ service: 'onejob', env: process.env });
 */
export async function createCliLogger(o: CliLoggerOptions): Promise<Logger> {
  const out = o.destination ?? process.stdout;
  const asked = o.env.LOG_FORMAT;
  if (asked !== undefined && asked !== '' && !(LOG_FORMATS as readonly string[]).includes(asked)) {
    throw new CliFailure(`LOG_FORMAT must be json or pretty, got ${JSON.stringify(asked)}`, USAGE_EXIT_CODE);
  }
  const format = asked === 'json' || asked === 'pretty' ? asked : out.isTTY === true ? 'pretty' : 'json';
  const options = { level: o.env.LOG_LEVEL ?? 'info', base: { service: o.service } };
  if (format === 'json') return o.destination === undefined ? pino(options) : pino(options, o.destination);
  const { default: pretty } = await import('pino-pretty');
  // Synchronous, like pino's own stdout: a line is out before the next statement, so the demo banner follows the startup lines.
  return pino(options, pretty({ destination: out, sync: true, colorize: out.isTTY === true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }));
}
