/**
 * Identifiers: a type prefix and a UUIDv7 (time-ordered), e.g. `job_0193…`.
 */
import { v7 as uuidv7 } from 'uuid';

/** The prefixes of onejob's identifiers. */
export type IdPrefix = 'job' | 'att' | 'exe' | 'lease' | 'rec' | 'batch' | 'file';

/**
 * A new time-ordered identifier with the given prefix.
 *
 * @example newId('job') // 'job_01936f3e-…'
 */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${uuidv7()}`;
}
