import { runStoreConformance } from '../../src/store/conformance/store-conformance.ts';
import { createTestStore, TEST_DATABASES } from '../support/databases.ts';

for (const db of TEST_DATABASES) {
  runStoreConformance({
    name: db.name,
    skip: db.skip,
    repetitions: db.name === 'postgres' ? 30 : 10,
    createStore: (clock) => createTestStore(db, { clock }),
  });
}
