/**
 * How the command line fails: one line `onejob: <reason>` on stderr and an
 * exit code from `ERROR_TABLE` (2 bad input, 3 database unavailable, 4 not
 * found, 5 conflict, 1 anything unexpected).
 */
import { ERROR_TABLE, isOnejobError } from '../core/errors.ts';

/** Exit code for bad usage (unknown flag, missing argument). */
export const USAGE_EXIT_CODE = 2;

/** A failure already described for the user. */
export class CliFailure extends Error {
  override readonly name = 'CliFailure';
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

/** The one line and exit code for any thrown value. */
export function describeFailure(error: unknown): { line: string; exitCode: number } {
  const oneLine = (text: string): string => `onejob: ${text.replace(/\s*\n\s*/g, ' ').trim()}`;
  if (error instanceof CliFailure) return { line: oneLine(error.message), exitCode: error.exitCode };
  if (isOnejobError(error)) return { line: oneLine(error.message), exitCode: ERROR_TABLE[error.code].exitCode };
  const message = error instanceof Error ? error.message : String(error);
  return { line: oneLine(`unexpected error: ${message}`), exitCode: ERROR_TABLE.internal.exitCode };
}
