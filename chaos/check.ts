/**
 * Checks a finished run's directory again, without the cluster:
 * `node --import tsx chaos/check.ts tmp/chaos/<run>`. Prints the report and
 * exits 1 on any violation (the fuzzer's findings are in `fuzz.json`).
 */
import { checkRun, formatReport } from './checker.ts';
import { loadRun } from './snapshot.ts';
import { checkToolCalls, loadToolRun } from './tool-checker.ts';

const dir = process.argv[2];
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx chaos/check.ts <run directory>\n');
  process.exit(2);
}
const run = loadRun(dir);
const checked = checkRun(run);
const tools = checkToolCalls(loadToolRun(dir, run.db));
const report = { ...checked, violations: [...checked.violations, ...tools.violations], notes: { ...checked.notes, ...tools.notes } };
process.stdout.write(`${formatReport(report)}\n`);
process.exit(report.violations.length === 0 ? 0 : 1);
