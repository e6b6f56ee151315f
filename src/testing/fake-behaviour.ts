/** The fake provider's script language, re-exported from `src/providers/fake/` (product code). */
export * from '../providers/fake/fake-behaviour.ts';
