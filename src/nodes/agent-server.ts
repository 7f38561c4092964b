import type { Clock } from '../core/clock.js';
import { EXIT, KrError, messageOf } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import {
  type AgentApi,
  type AgentResult,
  type ConfigMapLite,
  LABEL_KIND,
  LABEL_NODE,
  LABEL_RUN,
  configMapsPath,
  nodeLabel,
  readRequest,
  readResult,
  resultObject,
  runLabel,
  runLeaseName,
  statusOf,
} from './agent-protocol.js';
import type { KeyObject } from 'node:crypto';
import { keyFingerprint } from './agent-auth.js';
import { AGENT_STATE_ROOT, AgentMemory, type HostFiles, agentStateDir, hostFiles } from './agent-memory.js';
import { followLease } from './agent-lease.js';
import { followHalt } from './agent-halt.js';
import type { ExecResult } from './types.js';

export interface AgentServerOptions {
  node: string;
  namespace: string;
  runId: string;
  /** This agent, for the results it writes (its pod's name). */
  agent: string;
  /** The public key of the executor that started this agent: requests not signed with its private half are refused. */
  executorKey: KeyObject;
  /** The key this agent signs its results with (its Secret, through the pod's environment). */
  resultKey: Buffer;
  /** The run's faultTtl: this long without a renewal of the run Lease, the agent ends (the dead-men have fired). */
  faultTtlMs: number;
  /** Where the halts that stop the run are (the cluster's, the run lock's namespace's): followed (src/nodes/agent-halt.ts). */
  haltNamespaces?: string[];
  /** How often the requests are listed (500 ms by default). */
  pollMs?: number;
  /** How often the run Lease is read (1 s by default). */
  leasePollMs?: number;
  /** The dead-men's directory on the host (tests). */
  deadmanRoot?: string;
  /** Where the agent remembers the requests it took and the last renewal it counted, on the host (tests). */
  stateRoot?: string;
}

export interface AgentServerDeps {
  api: AgentApi;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
  /** Runs a wired script on the host (nsenter into PID 1's namespaces, or `sh -s` where the agent is the host's stand-in). */
  run(wired: string, timeoutMs: number): Promise<ExecResult>;
  /** The host's files, for the agent's memory (by default through `run`). */
  files?: HostFiles;
}

/** What an agent needs, checked when it starts (SelfSubjectAccessReview): without them it exits saying which. */
export function agentNeeds(namespace: string, runId: string): { verb: string; resource: string; group?: string; name?: string }[] {
  return [
    { verb: 'list', resource: 'configmaps' },
    { verb: 'get', resource: 'configmaps' },
    { verb: 'create', resource: 'configmaps' },
    { verb: 'update', resource: 'configmaps' },
    { verb: 'get', resource: 'leases', group: 'coordination.k8s.io', name: runLeaseName(runId) },
  ].map((n) => ({ ...n, namespace }));
}

/** Refuses to start (exit 3, the permissions named) when the agent's ServiceAccount lacks one of its needs. */
export async function checkAgentAccess(o: Pick<AgentServerOptions, 'namespace' | 'runId'>, api: AgentApi): Promise<void> {
  const missing: string[] = [];
  for (const n of agentNeeds(o.namespace, o.runId)) {
    const review = await api.json<{ status?: { allowed?: boolean } }>('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      method: 'POST',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SelfSubjectAccessReview',
        spec: { resourceAttributes: { ...n, namespace: o.namespace } },
      },
      timeoutMs: 10_000,
    });
    if (!review.status?.allowed) missing.push(`${n.verb} ${n.group ? `${n.resource}.${n.group}` : n.resource} in ${o.namespace}`);
  }
  if (missing.length)
    throw new KrError('AGENT_RBAC', `the agent's ServiceAccount may not ${missing.join(', ')}`, {
      exit: EXIT.refused,
      details: [`grant them with: kube-runbook agent manifests -i INVENTORY | kubectl apply -f -`],
    });
}

/** Why `serveAgent` returned. */
export type AgentEnd = 'stopped' | 'run gone';

/**
 * `kube-runbook agent`: takes the run's scripts for this node from request ConfigMaps, runs each on the host and
 * writes its result (src/nodes/agent-protocol.ts); and, each time it sees the run's Lease renewed, touches the
 * node's dead-man keepalives of the run. Talks to the apiserver only (never to the kubelet), so it works with the
 * kubelet stopped. Runs until its signal aborts (the pod deleted), or until the run Lease has not been renewed for
 * faultTtl (the executor gone: the dead-men have fired, nothing is left for this agent to do).
 */
export async function serveAgent(o: AgentServerOptions, d: AgentServerDeps): Promise<AgentEnd> {
  const end = new AbortController();
  const stop = () => end.abort();
  d.signal.addEventListener('abort', stop, { once: true });
  const inner = { ...d, signal: end.signal };
  const dir = agentStateDir(o.stateRoot ?? AGENT_STATE_ROOT, o.runId, nodeLabel(o.node), keyFingerprint(o.executorKey));
  const memory = new AgentMemory(d.files ?? hostFiles(d.run), dir, () => d.clock.now());
  let gone = false;
  try {
    if (!(await recall(memory, inner))) return 'stopped';
    [, gone] = await Promise.all([
      takeRequests(o, inner, memory),
      followLease(o, inner, memory).finally(stop),
      o.haltNamespaces?.length ? followHalt({ ...o, haltNamespaces: o.haltNamespaces }, inner, memory) : undefined,
    ]);
    return gone && !d.signal.aborted ? 'run gone' : 'stopped';
  } finally {
    d.signal.removeEventListener('abort', stop);
    // the run is over on this node, or this agent's pod deleted: nothing of it stays, unless a request it took could
    // still be written back within its deadline (a container stopped and started again: a node rebooted)
    if (gone || ![...memory.taken.values()].some((deadline) => deadline >= d.clock.now()))
      await memory.forget().catch((e: unknown) => d.log.warn(`cannot remove ${dir}: ${messageOf(e)}`));
  }
}

/** Reads what this agent remembers from before a restart, tried until it can (nothing is taken before); false when stopped. */
async function recall(memory: AgentMemory, d: AgentServerDeps): Promise<boolean> {
  for (let attempt = 1; !d.signal.aborted; attempt++) {
    try {
      await memory.load();
      if (memory.taken.size || memory.renewal)
        d.log.info(`remembers ${memory.taken.size} request(s) taken and renewal ${memory.renewal} of the run Lease from before a restart`);
      return true;
    } catch (e) {
      if (attempt === 1) d.log.warn(`cannot read what this agent remembers (${messageOf(e)}); no request is taken until it can`);
    }
    await d.clock.sleep(1000, d.signal).catch(() => undefined);
  }
  return false;
}

/** How many requests one list asks for: a request can be 1 MiB, and the agent's pod has 256 MiB. */
export const REQUEST_PAGE = 20;
/** How many requests for this node the agent considers in one pass; more are left for a later pass, said once. */
export const MAX_REQUESTS = 1000;

async function takeRequests(o: AgentServerOptions, d: AgentServerDeps, memory: AgentMemory): Promise<void> {
  const seen = new Set<string>();
  const selector = `${LABEL_KIND}=request,${LABEL_RUN}=${runLabel(o.runId)},${LABEL_NODE}=${nodeLabel(o.node)}`;
  const running = new Set<Promise<void>>();
  let failing = false;
  let flooded = false;
  while (!d.signal.aborted) {
    try {
      // page by page, each dropped once its requests are handed on, up to MAX_REQUESTS: whoever may write ConfigMaps
      // in the namespace cannot make the agent hold them all at once
      const names = new Set<string>();
      let next: string | undefined;
      let truncated = false;
      do {
        const page = await d.api.json<{ items: ConfigMapLite[]; metadata?: { continue?: string } }>(configMapsPath(o.namespace), {
          query: { labelSelector: selector, limit: REQUEST_PAGE, continue: next },
          timeoutMs: 10_000,
          signal: d.signal,
        });
        const room = MAX_REQUESTS - names.size;
        for (const cm of page.items.slice(0, room)) {
          names.add(cm.metadata.name);
          if (seen.has(cm.metadata.name)) continue;
          seen.add(cm.metadata.name);
          const p = handle(o, d, cm, memory).catch((e: unknown) => d.log.warn(`request ${cm.metadata.name}: ${messageOf(e)}`));
          running.add(p);
          void p.finally(() => running.delete(p));
        }
        next = page.metadata?.continue || undefined;
        if (page.items.length > room || (next && names.size >= MAX_REQUESTS)) truncated = true;
      } while (next && names.size < MAX_REQUESTS);
      if (failing) d.log.info('the apiserver answers again');
      failing = false;
      if (truncated && !flooded)
        d.log.warn(
          `more than ${MAX_REQUESTS} requests are written for this node: only the first ${MAX_REQUESTS} are read (someone who may write ConfigMaps in ${o.namespace} floods it)`,
        );
      flooded = truncated;
      for (const name of seen) if (!names.has(name)) seen.delete(name);
      memory.prune();
    } catch (e) {
      if (d.signal.aborted) break;
      if (!failing) d.log.warn(`cannot list this node's requests: ${messageOf(e)}`);
      failing = true;
    }
    await d.clock.sleep(o.pollMs ?? 500, d.signal).catch(() => undefined);
  }
  await Promise.all(running);
}

/** One request: claimed by creating its result (`running`), run, then the result written (retried until it lands or the request is gone). */
async function handle(o: AgentServerOptions, d: AgentServerDeps, cm: ConfigMapLite, memory: AgentMemory): Promise<void> {
  const read = readRequest(cm, {
    node: o.node,
    runId: o.runId,
    namespace: o.namespace,
    executorKey: o.executorKey,
    resultKey: o.resultKey,
  });
  if ('refused' in read) return d.log.warn(`refused request ${cm.metadata.name}: ${read.refused}; nothing run`);
  const req = read.request;
  if (memory.taken.has(req.name)) return d.log.warn(`refused request ${req.name}: it was taken before (a replay); nothing run`);
  if (d.clock.now() > req.deadline) return d.log.info(`request ${req.name} came after its deadline; not run`);
  // remembered on the node before anything else: a copy written back after this agent restarts is refused as well
  try {
    await memory.take(req.name, req.deadline);
  } catch (e) {
    return d.log.warn(`request ${req.name} not run: this agent cannot remember it was taken (${messageOf(e)})`);
  }
  const me = { runId: o.runId, node: o.node, resultKey: o.resultKey };
  const claimBody = resultObject(o.namespace, cm, { state: 'running', agent: o.agent }, me);
  let claim: ConfigMapLite;
  try {
    claim = await d.api.json<ConfigMapLite>(configMapsPath(o.namespace), { method: 'POST', body: claimBody, timeoutMs: 10_000 });
  } catch (e) {
    if (statusOf(e) !== 409) throw e;
    // a result is there already: this agent's own (taken), or one someone else wrote first, which it replaces
    const there = await d.api.json<ConfigMapLite>(configMapsPath(o.namespace, claimBody.metadata.name), { timeoutMs: 10_000 });
    if (readResult(there, req.name, me) !== 'forged') return;
    d.log.warn(`the result of request ${req.name} was written by someone else first; replaced with this agent's own`);
    claim = await d.api.json<ConfigMapLite>(configMapsPath(o.namespace, claimBody.metadata.name), {
      method: 'PUT',
      body: { ...claimBody, metadata: { ...claimBody.metadata, resourceVersion: there.metadata.resourceVersion } },
      timeoutMs: 10_000,
    });
  }
  // the executor may have given up between the list and the claim: then it deleted the request, and nothing runs
  try {
    await d.api.json(configMapsPath(o.namespace, req.name), { timeoutMs: 10_000 });
  } catch (e) {
    if (statusOf(e) === 404) {
      await d.api.json(configMapsPath(o.namespace, claim.metadata.name), { method: 'DELETE', timeoutMs: 10_000 }).catch(() => undefined);
      return;
    }
    throw e;
  }
  const t0 = d.clock.now();
  let result: AgentResult;
  try {
    const r = await d.run(req.wired, req.timeoutMs);
    result = { state: 'done', agent: o.agent, ...r };
  } catch (e) {
    const timedOut = e instanceof KrError && e.code === 'EXEC_TIMEOUT';
    result = {
      state: 'done',
      agent: o.agent,
      code: timedOut ? 124 : 127,
      stdout: '',
      stderr: messageOf(e),
      ...(timedOut ? { timedOut: true } : {}),
    };
  }
  d.log.info(`request ${req.name}: exit ${result.state === 'done' ? result.code : '?'} after ${d.clock.now() - t0} ms`);
  await writeResult(o, d, claim, cm, result);
}

async function writeResult(
  o: AgentServerOptions,
  d: AgentServerDeps,
  claim: ConfigMapLite,
  request: ConfigMapLite,
  result: AgentResult,
): Promise<void> {
  const body = resultObject(o.namespace, request, result, { runId: o.runId, node: o.node, resultKey: o.resultKey });
  body.metadata.resourceVersion = claim.metadata.resourceVersion;
  const path = configMapsPath(o.namespace, claim.metadata.name);
  for (let attempt = 1; ; attempt++) {
    try {
      await d.api.json(path, { method: 'PUT', body, timeoutMs: 10_000 });
      return;
    } catch (e) {
      // the executor gave up and deleted the request and its result: nobody waits for this answer any more
      if (statusOf(e) === 404 || d.signal.aborted) return;
      // changed since this agent's claim (someone wrote over it): this agent's answer goes over theirs
      if (statusOf(e) === 409) {
        const now = await d.api.json<ConfigMapLite>(path, { timeoutMs: 10_000 }).catch(() => undefined);
        if (now) {
          d.log.warn(`the result of request ${request.metadata.name} was changed by someone else; written over`);
          body.metadata.resourceVersion = now.metadata.resourceVersion;
          continue;
        }
      }
      if (attempt === 1) d.log.warn(`cannot write the result of ${request.metadata.name} yet (${messageOf(e)}); trying again`);
    }
    await d.clock.sleep(Math.min(5000, 250 * 2 ** Math.min(attempt, 5)), d.signal).catch(() => undefined);
  }
}

/**
 * The argv a wired script is run with: in the namespaces of the host's first process (`host`), or in its mount
 * namespace only (`mount`: the lab, whose agent runs in its node's network namespace already, with its group reset to
 * root's, so what the script starts is not let through as the lab's agents are by block-kubelet-egress).
 */
export function hostArgv(enter: 'host' | 'mount', hostPid = 1): [string, ...string[]] {
  const target: [string, ...string[]] = ['nsenter', '--target', String(hostPid)];
  return enter === 'host'
    ? [...target, '--mount', '--uts', '--ipc', '--net', '--pid', '--', 'sh', '-s']
    : [...target, '--mount', '--', 'setpriv', '--regid=0', '--keep-groups', '--', 'sh', '-s'];
}
