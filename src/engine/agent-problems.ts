import { messageOf } from '../core/errors.js';
import { defaultAgentImage } from '../inventory/schema.js';
import { statusOf } from '../nodes/agent-protocol.js';
import type { AgentTarget } from './agent-pod.js';

interface Terminated {
  exitCode?: number;
  reason?: string;
  message?: string;
}

export interface PodLite {
  metadata: { name: string; deletionTimestamp?: string };
  status?: {
    phase?: string;
    reason?: string;
    message?: string;
    containerStatuses?: {
      ready?: boolean;
      state?: { running?: object; waiting?: { reason?: string; message?: string }; terminated?: Terminated };
      lastState?: { terminated?: Terminated };
    }[];
  };
}

/** Container states that will not pass by themselves (the image, its registry, the command). */
const STUCK = new Set([
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'CrashLoopBackOff',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

/** Why an agent pod cannot run, with the fix; undefined while it may still start. */
export function podProblem(pod: PodLite, t: AgentTarget): string | undefined {
  const image = t.config.image ?? defaultAgentImage();
  const cs = pod.status?.containerStatuses?.[0];
  const s = cs?.state;
  const exited = s?.terminated ?? cs?.lastState?.terminated;
  if (exited && (s?.terminated || s?.waiting?.reason === 'CrashLoopBackOff')) {
    const said = (exited.message ?? '').trim().split('\n').slice(-3).join(' ').slice(0, 400);
    return `the agent exited${exited.exitCode === undefined ? '' : ` with ${exited.exitCode}`}${said ? `: ${said}` : ''}`;
  }
  if (s?.waiting?.reason && STUCK.has(s.waiting.reason)) {
    const said = s.waiting.message ? `: ${s.waiting.message.slice(0, 300)}` : '';
    return /Image|ImageName/.test(s.waiting.reason)
      ? `image ${image} cannot be pulled (${s.waiting.reason}${said}); fix spec.transport.image, or give the registry's credentials as spec.transport.imagePullSecret (a Secret in ${t.config.namespace})`
      : `the agent container cannot start (${s.waiting.reason}${said})`;
  }
  if (pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded')
    return `the agent pod ended (${pod.status.phase}${pod.status.message ? `: ${pod.status.message.slice(0, 300)}` : ''})`;
  return undefined;
}

/** Why the agent's Secret could not be created, with the fix. */
export function secretProblem(e: unknown, t: AgentTarget): string {
  const ns = t.config.namespace;
  if (statusOf(e) === 404)
    return `the namespace ${ns} does not exist; create it with kube-runbook agent manifests -i INVENTORY | kubectl apply -f -`;
  if (statusOf(e) === 403)
    return `not allowed to create the agent's Secret in ${ns} (${messageOf(e).slice(0, 300)}); the executor needs create, list and delete on secrets there (kube-runbook manifests grants them)`;
  return `cannot create the agent's Secret: ${messageOf(e).slice(0, 300)}`;
}

/** Why the pod could not be created, with the fix (Pod Security, RBAC, namespace, ServiceAccount, priority class). */
export function createProblem(e: unknown, t: AgentTarget): string {
  const said = messageOf(e);
  const ns = t.config.namespace;
  if (/PodSecurity|pod security/i.test(said))
    return `the namespace ${ns} refuses privileged pods (Pod Security: ${said.slice(0, 300)}); label it for the privileged level: kubectl label namespace ${ns} pod-security.kubernetes.io/enforce=privileged --overwrite (kube-runbook agent manifests does)`;
  if (/serviceaccount/i.test(said) && /not found/i.test(said))
    return `the ServiceAccount ${ns}/${t.config.serviceAccount} does not exist (${said.slice(0, 200)}); create it with kube-runbook agent manifests -i INVENTORY | kubectl apply -f -`;
  if (statusOf(e) === 404)
    return `the namespace ${ns} does not exist; create it with kube-runbook agent manifests -i INVENTORY | kubectl apply -f -`;
  if (statusOf(e) === 403)
    return `not allowed to create the agent pod in ${ns} (${said.slice(0, 300)}); the executor needs create, get and delete on pods there (kube-runbook manifests grants them)`;
  return `cannot create the agent pod: ${said.slice(0, 300)}`;
}
