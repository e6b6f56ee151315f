import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runStoreConformance } from '../../src/store/conformance/store-conformance.ts';
import { openStore } from '../../src/store/open-store.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

for (const db of TEST_DATABASES) {
  runStoreConformance({
    name: db.name,
    test: { describe, it, expect, beforeEach, afterEach },
    skip: db.skip,
    repetitions: db.name === 'postgres' ? 30 : 10,
    createStore: async (clock) => {
      const t = await createTestStore(db, { clock, databaseClock: clock });
      return { ...t, openAnother: () => openStore(t.url, { clock, databaseClock: clock, poolSize: 20 }) };
    },
  });
}
