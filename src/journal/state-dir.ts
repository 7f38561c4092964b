import { homedir } from 'node:os';
import { join } from 'node:path';

/** Where runs keep their journals: $KUBE_RUNBOOK_STATE_DIR, else $XDG_STATE_HOME/kube-runbook, else ~/.local/state/kube-runbook. */
function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KUBE_RUNBOOK_STATE_DIR) return env.KUBE_RUNBOOK_STATE_DIR;
  const base = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(base, 'kube-runbook');
}

/** Where journals are: under `--state-dir` when given, else under the default state dir. */
export const runsDir = (env: NodeJS.ProcessEnv = process.env, given?: string): string => join(given ?? stateDir(env), 'runs');
