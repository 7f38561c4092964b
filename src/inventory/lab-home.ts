import { homedir } from 'node:os';
import { join, resolve } from 'node:path';

/** Where the lab keeps its instances: `$KUBE_RUNBOOK_LAB_HOME`, else `${XDG_STATE_HOME:-~/.local/state}/kube-runbook/lab`. */
function labHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.KUBE_RUNBOOK_LAB_HOME) return resolve(env.KUBE_RUNBOOK_LAB_HOME);
  const state = env.XDG_STATE_HOME || join(homedir(), '.local', 'state');
  return join(resolve(state), 'kube-runbook', 'lab');
}

/**
 * The state directory of a lab instance (layout `lab`: its kubeconfig, inventory, pids): the lab's (packages/lab)
 * and `init --layout lab`'s, which writes the default instance's (`lab`) into the starter inventory.
 */
export const labStateDir = (instance: string, env: NodeJS.ProcessEnv = process.env): string => join(labHome(env), instance);
