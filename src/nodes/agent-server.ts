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
  leasePath,
  nodeLabel,
  readRequest,
  readResult,
  resultObject,
  runLabel,
  runLeaseName,
  statusOf,
} from './agent-protocol.js';
import type { KeyObject } from 'node:crypto';
import { formatDuration } from '../core/duration.js';
import { keepaliveScript } from './keepalive.js';
import type { ExecResult } from './types.js';
import { wireScript } from './wire.js';

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
  /** How often the requests are listed (500 ms by default). */
  pollMs?: number;
  /** How often the run Lease is read (1 s by default). */
  leasePollMs?: number;
  /** The dead-men's directory on the host (tests). */
  deadmanRoot?: string;
}

export interface AgentServerDeps {
  api: AgentApi;
  clock: Clock;
  log: Logger;
  signal: AbortSignal;
  /** Runs a wired script on the host (nsenter into PID 1's namespaces, or `sh -s` where the agent is the host's stand-in). */
  run(wired: string, timeoutMs: number): Promise<ExecResult>;
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
  try {
    const [, gone] = await Promise.all([takeRequests(o, inner), followLease(o, inner).finally(stop)]);
    return gone && !d.signal.aborted ? 'run gone' : 'stopped';
  } finally {
    d.signal.removeEventListener('abort', stop);
  }
}

/** How long a request's name is remembered after its deadline: a copy written again later is refused as expired anyway. */
const REMEMBER_MS = 60_000;

async function takeRequests(o: AgentServerOptions, d: AgentServerDeps): Promise<void> {
  const seen = new Set<string>();
  // every request taken, until well after its deadline: the same signed request written again is a replay
  const taken = new Map<string, number>();
  const selector = `${LABEL_KIND}=request,${LABEL_RUN}=${runLabel(o.runId)},${LABEL_NODE}=${nodeLabel(o.node)}`;
  const running = new Set<Promise<void>>();
  let failing = false;
  while (!d.signal.aborted) {
    try {
      const list = await d.api.json<{ items: ConfigMapLite[] }>(configMapsPath(o.namespace), {
        query: { labelSelector: selector },
        timeoutMs: 10_000,
        signal: d.signal,
      });
      if (failing) d.log.info('the apiserver answers again');
      failing = false;
      const names = new Set(list.items.map((c) => c.metadata.name));
      for (const name of seen) if (!names.has(name)) seen.delete(name);
      for (const [name, deadline] of taken) if (deadline + REMEMBER_MS < d.clock.now()) taken.delete(name);
      for (const cm of list.items) {
        if (seen.has(cm.metadata.name)) continue;
        seen.add(cm.metadata.name);
        const p = handle(o, d, cm, taken).catch((e: unknown) => d.log.warn(`request ${cm.metadata.name}: ${messageOf(e)}`));
        running.add(p);
        void p.finally(() => running.delete(p));
      }
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
async function handle(o: AgentServerOptions, d: AgentServerDeps, cm: ConfigMapLite, taken: Map<string, number>): Promise<void> {
  const read = readRequest(cm, { node: o.node, runId: o.runId, namespace: o.namespace, executorKey: o.executorKey });
  if ('refused' in read) return d.log.warn(`refused request ${cm.metadata.name}: ${read.refused}; nothing run`);
  const req = read.request;
  if (taken.has(req.name)) return d.log.warn(`refused request ${req.name}: it was taken before (a replay); nothing run`);
  if (d.clock.now() > req.deadline) return d.log.info(`request ${req.name} came after its deadline; not run`);
  taken.set(req.name, req.deadline);
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

interface LeaseLite {
  spec?: { holderIdentity?: string; renewTime?: string };
}

/**
 * Touches the run's keepalives on this node each time the run's Lease shows a renewal it has not seen: the
 * dead-men then fire `faultTtl` after the last renewal this node saw, whether the executor died or the node lost the
 * apiserver. Renewals are told apart by their renewTime as written, never compared with this node's clock; how long
 * none came is measured on this node's clock. Returns true when a read of the Lease shows none came for faultTtl (a
 * node cut off from the apiserver reads nothing: once back, it finds the renewals made meanwhile, and serves on).
 */
async function followLease(o: AgentServerOptions, d: AgentServerDeps): Promise<boolean> {
  const path = leasePath(o.namespace, runLeaseName(o.runId));
  const touch = wireScript(keepaliveScript(o.runId, o.deadmanRoot));
  let last: string | undefined;
  let lastSeenAt = d.clock.now();
  // A renewal counts once this agent has seen the Lease change. The one it finds when it starts may be long stale (its
  // executor killed, the agent started again since): touching the keepalives for it would put every dead-man of the
  // run back by faultTtl, and an agent that keeps restarting would keep the faults applied.
  let readOnce = false;
  while (!d.signal.aborted) {
    // whether the Lease was read (or found gone): only then can the agent tell a run gone from a node cut off
    let read: boolean;
    try {
      const lease = await d.api.json<LeaseLite>(path, { timeoutMs: 5_000, signal: d.signal });
      read = true;
      const renewed = lease.spec?.holderIdentity === o.runId ? lease.spec.renewTime : undefined;
      if (renewed && renewed !== last && !readOnce) last = renewed;
      else if (renewed && renewed !== last) {
        lastSeenAt = d.clock.now();
        const r = await d.run(touch, 15_000);
        if (r.code === 0) last = renewed;
        else d.log.warn(`keepalive failed: ${r.stderr.trim()}`);
      }
    } catch (e) {
      read = statusOf(e) === 404;
      if (!d.signal.aborted && !read) d.log.debug(`run Lease: ${messageOf(e)}`);
    }
    if (read) readOnce = true;
    if (read && d.clock.now() - lastSeenAt > o.faultTtlMs) {
      d.log.warn(
        `the run Lease has not been renewed for ${formatDuration(d.clock.now() - lastSeenAt)} (faultTtl ${formatDuration(o.faultTtlMs)}): the run is gone; ending`,
      );
      return true;
    }
    await d.clock.sleep(o.leasePollMs ?? 1000, d.signal).catch(() => undefined);
  }
  return false;
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
