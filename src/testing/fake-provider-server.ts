/**
 * The fake provider server, re-exported for tests: it is product code
 * (`src/providers/fake/`, used by the `fake` provider type and `onejob
 * fake-provider`); this path stays for the tests and tools that import it.
 */
export * from '../providers/fake/fake-provider-server.ts';
