/**
 * onejob as a library: the core rules, the store, and (later) the HTTP app,
 * the executor and testing helpers.
 */
export * from './core/states.ts';
export * from './core/errors.ts';
export * from './core/types.ts';
export * from './core/job-rules.ts';
export * from './core/fingerprint.ts';
export * from './core/clock.ts';
export type * from './store/store.ts';
