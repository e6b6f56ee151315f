/** `onejob fake-provider`'s entry point, re-exported from `src/providers/fake/` (product code). */
export * from '../providers/fake/fake-provider-cli.ts';
