/**
 * The signals that roll a run back: Ctrl-C (SIGINT), SIGTERM, and SIGHUP — the terminal or the bastion's ssh
 * session went away. Node resets SIGHUP to its default (exit) at startup even under `nohup`, so without a handler
 * a dropped session killed the run with everything still applied.
 */
const ROLLBACK_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * Sends each of those signals to `interrupt` until the returned function is called. After a hang-up the terminal is
 * gone and writes to it fail (EIO, EPIPE), also the summary printed after the rollback: from here on, for the rest of
 * the process, those errors are dropped so they can neither end the rollback nor turn its exit code into a crash.
 */
export function forwardSignals(interrupt: (signal: NodeJS.Signals) => void): () => void {
  ignoreGoneTerminal();
  for (const s of ROLLBACK_SIGNALS) process.on(s, interrupt);
  return () => {
    for (const s of ROLLBACK_SIGNALS) process.off(s, interrupt);
  };
}

let ignoring = false;
function ignoreGoneTerminal(): void {
  if (ignoring) return;
  ignoring = true;
  const ignore = () => {};
  process.stdout.on('error', ignore);
  process.stderr.on('error', ignore);
}
