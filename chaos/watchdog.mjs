// The chaos run's dead-man switch, a separate process so that it outlives a
// runner killed with SIGKILL. It reads process-group ids from a file the
// runner keeps up to date, and kills exactly those groups when the runner is
// gone or the hard deadline has passed. It never looks at other processes.
//
// usage: node chaos/watchdog.mjs <runner-pid> <pgid-file> <deadline-epoch-ms>
import { readFileSync } from 'node:fs';

const [runnerPid, pgidFile, deadline] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4])];

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function killAll() {
  let groups = [];
  try {
    groups = readFileSync(pgidFile, 'utf8').split('\n').map(Number).filter((n) => Number.isInteger(n) && n > 1);
  } catch {
    // nothing recorded
  }
  for (const g of groups) {
    try { process.kill(-g, 'SIGCONT'); } catch { /* gone */ }
    try { process.kill(-g, 'SIGKILL'); } catch { /* gone */ }
  }
}

const timer = setInterval(() => {
  const runnerGone = !alive(runnerPid);
  if (runnerGone || Date.now() > deadline) {
    if (!runnerGone) {
      process.stderr.write(`chaos watchdog: hard deadline passed; killing the run's processes and the runner ${runnerPid}\n`);
      killAll();
      try { process.kill(runnerPid, 'SIGKILL'); } catch { /* gone */ }
    } else {
      killAll();
    }
    clearInterval(timer);
    process.exit(0);
  }
}, 500);
process.on('SIGTERM', () => process.exit(0));
