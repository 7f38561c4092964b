import { formatDuration } from '../core/duration.js';
import { KrError, messageOf } from '../core/errors.js';
import type { Ctx } from '../contract/context.js';
import type { AgentTransport, Inventory, InventoryNode } from '../inventory/schema.js';
import type { Plan, PlannedAction } from './plan.js';
import {
  LABEL_RUN,
  agentPodName,
  configMapsPath,
  leasePath,
  renewalAnnotations,
  runLabel,
  runLeaseName,
  statusOf,
} from '../nodes/agent-protocol.js';
import type { AgentKeys } from '../nodes/agent-auth.js';
import { microTime } from '../kube/lease-api.js';
import { haltNamespaces } from '../kube/halt.js';
import { agentPod, agentSecret, type AgentTarget, type Owner } from './agent-pod.js';
import { createProblem, podProblem, secretProblem, type PodLite } from './agent-problems.js';

/** The agent settings of a node, when it is reached through an agent. */
export function agentConfigOf(inventory: Inventory, node: InventoryNode): AgentTransport | undefined {
  const t = node.transport ?? inventory.spec.transport;
  return t.type === 'agent' ? t : undefined;
}

/** The nodes among `nodes` reached through agents, each once. */
export function agentTargets(inventory: Inventory, nodes: readonly InventoryNode[]): AgentTarget[] {
  const out = new Map<string, AgentTarget>();
  for (const node of nodes) {
    const config = agentConfigOf(inventory, node);
    if (config && !out.has(node.name)) out.set(node.name, { node, config });
  }
  return [...out.values()];
}

interface LeaseBody {
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec: { holderIdentity: string; leaseDurationSeconds: number; acquireTime?: string; renewTime: string };
}

function api(ctx: Ctx) {
  const json = ctx.kube.json;
  if (!json) throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot reach the node agents', { exit: 3 });
  return json.bind(ctx.kube);
}

function keysOf(ctx: Ctx): AgentKeys {
  if (!ctx.agentKeys) throw new KrError('AGENT_KEYS_MISSING', "this run has no keys to sign its node agents' requests with", { exit: 3 });
  return ctx.agentKeys;
}

const podsPath = (ns: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(ns)}/pods${name ? `/${encodeURIComponent(name)}` : ''}`;
const secretsPath = (ns: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(ns)}/secrets${name ? `/${encodeURIComponent(name)}` : ''}`;

/**
 * The agents of one run: their pods and the run Lease, in each agent namespace the targets use. `start` creates them
 * and waits until every agent answers; `renew` is the executor's heartbeat; `stop` deletes everything of the run.
 */
export class RunAgents {
  constructor(
    private readonly ctx: Ctx,
    readonly targets: readonly AgentTarget[],
    /** How long a renewal counts (faultTtl): for people reading the Lease; agents follow renewals, not this. */
    private readonly leaseMs: number,
    /** Called before the first pod is created (the run journals itself then, so `recover` finds pods it leaves). */
    private readonly beforeStart: () => void = () => {},
    /** The run lock's namespace: the agents follow the halts that stop its runs (the cluster's and its own). */
    private readonly lockNamespace?: string,
  ) {}

  /** Whether `start` was called (pods may exist). */
  started = false;
  /** The run Lease of each namespace, as last written: the agents' objects hang from it. */
  private readonly owners = new Map<string, Owner>();

  get namespaces(): string[] {
    return [...new Set(this.targets.map((t) => t.config.namespace))].sort();
  }

  /**
   * Creates (or takes back, for recover) the run Lease of each namespace with a fresh renewal, signed with this
   * executor's key: its agents count no renewal it did not sign (src/nodes/agent-protocol.ts, readRenewal).
   */
  async renew(signal?: AbortSignal): Promise<void> {
    const json = api(this.ctx);
    const keys = keysOf(this.ctx);
    const now = microTime(this.ctx.clock.now());
    for (const ns of this.namespaces) {
      const path = leasePath(ns, runLeaseName(this.ctx.runId));
      let lease: LeaseBody | undefined;
      try {
        lease = await json<LeaseBody>(path, { timeoutMs: 10_000, signal });
      } catch (e) {
        if (statusOf(e) !== 404) throw e;
      }
      const body: LeaseBody = {
        metadata: {
          name: runLeaseName(this.ctx.runId),
          namespace: ns,
          labels: { 'app.kubernetes.io/managed-by': 'kube-runbook', [LABEL_RUN]: runLabel(this.ctx.runId) },
          annotations: renewalAnnotations(ns, this.ctx.runId, now, keys),
          ...(lease ? { resourceVersion: lease.metadata.resourceVersion } : {}),
        },
        spec: {
          holderIdentity: this.ctx.runId,
          leaseDurationSeconds: Math.max(1, Math.ceil(this.leaseMs / 1000)),
          acquireTime: lease?.spec.acquireTime ?? now,
          renewTime: now,
        },
      };
      const written = lease
        ? await json<LeaseBody>(path, { method: 'PUT', body, timeoutMs: 10_000, signal })
        : await json<LeaseBody>(leasePath(ns), { method: 'POST', body, timeoutMs: 10_000, signal });
      if (written?.metadata?.uid) this.owners.set(ns, { name: runLeaseName(this.ctx.runId), uid: written.metadata.uid });
    }
  }

  /**
   * Creates every agent pod (an existing one of this run is kept) and waits until each agent answers a script, a pod
   * cannot run, or `startTimeout` passes. Returns one problem per node that failed, with its cause and fix.
   */
  async start(signal: AbortSignal): Promise<string[]> {
    this.beforeStart();
    this.started = true;
    const json = api(this.ctx);
    const { clock } = this.ctx;
    const problems = new Map<string, string>();
    try {
      await this.renew(signal);
    } catch (e) {
      return [`cannot write the run Lease ${this.namespaces.join(', ')}/${runLeaseName(this.ctx.runId)}: ${messageOf(e)}`];
    }
    const keys = keysOf(this.ctx);
    await Promise.all(
      this.targets.map(async (t) => {
        const ns = t.config.namespace;
        const owner = this.owners.get(ns);
        try {
          await json(secretsPath(ns), { method: 'POST', body: agentSecret(this.ctx.runId, t, keys, owner), timeoutMs: 30_000, signal });
        } catch (e) {
          if (statusOf(e) !== 409) return void problems.set(t.node.name, secretProblem(e, t));
        }
        try {
          await json(podsPath(ns), {
            method: 'POST',
            body: agentPod(
              this.ctx.runId,
              t,
              keys,
              this.leaseMs,
              owner,
              this.lockNamespace === undefined ? [] : haltNamespaces(this.lockNamespace),
            ),
            timeoutMs: 30_000,
            signal,
          });
        } catch (e) {
          if (statusOf(e) !== 409) problems.set(t.node.name, createProblem(e, t));
        }
      }),
    );
    await Promise.all(
      this.targets
        .filter((t) => !problems.has(t.node.name))
        .map(async (t) => {
          const p = await this.waitAnswering(t, clock.now() + t.config.startTimeout, signal);
          if (p) problems.set(t.node.name, p);
        }),
    );
    return [...problems.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([n, p]) => `${n}: ${p}`);
  }

  private async waitAnswering(t: AgentTarget, deadline: number, signal: AbortSignal): Promise<string | undefined> {
    const json = api(this.ctx);
    const { clock } = this.ctx;
    const name = agentPodName(this.ctx.runId, t.node.name, keysOf(this.ctx).fingerprint);
    const path = podsPath(t.config.namespace, name);
    for (;;) {
      let last: string;
      try {
        const pod = await json<PodLite>(path, { timeoutMs: 10_000, signal });
        const problem = podProblem(pod, t);
        if (problem) return problem;
        const running = pod.status?.containerStatuses?.[0]?.state?.running !== undefined;
        if (!running) {
          const waiting = pod.status?.containerStatuses?.[0]?.state?.waiting?.reason;
          last = `${pod.status?.phase ?? 'Pending'}${waiting ? ` (${waiting})` : ''}`;
        } else {
          const r = await this.ctx.nodes
            .exec(t.node.name, 'echo kube-runbook-agent-ok', { timeoutMs: 10_000, signal })
            .catch((e: unknown) => ({ code: -1, stdout: '', stderr: messageOf(e) }));
          if (r.code === 0 && r.stdout.includes('kube-runbook-agent-ok')) return undefined;
          last = `running, but its agent did not answer (${r.stderr.trim().slice(0, 200) || `exit ${r.code}`})`;
        }
      } catch (e) {
        last = `cannot read pod ${t.config.namespace}/${name}: ${messageOf(e)}`;
      }
      if (clock.now() >= deadline)
        return `its agent pod ${t.config.namespace}/${name} did not start within ${formatDuration(t.config.startTimeout)}: ${last}; is node ${t.node.name} Ready? (kubectl -n ${t.config.namespace} describe pod ${name})`;
      await clock.sleep(1000, signal);
    }
  }

  /**
   * Deletes every agent pod of the run (whichever executor started it: the run's, or an earlier `recover`'s), their
   * Secrets, the run Lease and any request left behind; returns what could not be deleted.
   */
  async stop(): Promise<string[]> {
    const json = api(this.ctx);
    const failed: string[] = [];
    const del = async (path: string, what: string) => {
      try {
        await json(path, { method: 'DELETE', timeoutMs: 15_000 });
      } catch (e) {
        if (statusOf(e) !== 404) failed.push(`${what}: ${messageOf(e)}`);
      }
    };
    const labelSelector = `${LABEL_RUN}=${runLabel(this.ctx.runId)}`;
    const each = async (ns: string, kind: string, path: (ns: string, name?: string) => string) => {
      try {
        const left = await json<{ items: { metadata: { name: string } }[] }>(path(ns), { query: { labelSelector }, timeoutMs: 15_000 });
        await Promise.all(left.items.map((o) => del(path(ns, o.metadata.name), `${kind} ${ns}/${o.metadata.name}`)));
      } catch (e) {
        failed.push(`${kind}s of the run in ${ns}: ${messageOf(e)}`);
      }
    };
    for (const ns of this.namespaces) {
      await each(ns, 'pod', podsPath);
      await each(ns, 'Secret', secretsPath);
      await del(leasePath(ns, runLeaseName(this.ctx.runId)), `Lease ${ns}/${runLeaseName(this.ctx.runId)}`);
      await each(ns, 'ConfigMap', configMapsPath);
    }
    return failed;
  }
}

/**
 * How a planned action on nodes reached through agents is undone, for `plan`: by the agent, or, when the fault cuts
 * the node (and so its agent) off from the apiserver, only by the node's dead-man after faultTtl. Undefined when no
 * target is reached through an agent.
 */
export function undoneThroughAgents(plan: Plan, a: PlannedAction): string | undefined {
  const via = agentTargets(plan.inventory, a.targets ?? []).map((t) => t.node.name);
  if (!via.length) return undefined;
  const ttl = formatDuration(a.revertLast ? (plan.safety.remediationTtl ?? plan.safety.faultTtl) : plan.safety.faultTtl);
  const on = via.length === (a.targets ?? []).length ? '' : ` on ${via.join(', ')}`;
  const isolates = a.action.meta.isolatesNode?.(a.params as never) ?? 'no';
  if (isolates === 'yes')
    return `undone${on} only by the node's dead-man, ${ttl} after the last run Lease renewal the node saw: it cuts the node's agent off from the apiserver too`;
  if (isolates === 'maybe')
    return `undone${on} by the node's agent; where it cuts the node off from the apiserver, only by the node's dead-man ${ttl} after the last renewal the node saw`;
  return `undone${on} by the node's agent (its dead-man after ${ttl} if the executor or the apiserver is gone)`;
}

/**
 * Steps that act on nodes reached through agents while an earlier step keeps every apiserver stopped (and its revert
 * step has not come yet): no script can reach an agent then. One line per such step, for plan and preflight.
 */
export function agentsDuringOutage(plan: Plan): string[] {
  return agentOutageSteps(plan).map((o) => o.message);
}

/** agentsDuringOutage with the step each line is about (the `agents` static check reports it there). */
export function agentOutageSteps(plan: Plan): { step: PlannedAction; message: string }[] {
  const controlPlane = plan.inventory.spec.nodes.filter((n) => n.roles.includes('control-plane')).map((n) => n.name);
  const down = new Set<PlannedAction>();
  const out: { step: PlannedAction; message: string }[] = [];
  const visit = (s: Plan['steps'][number]) => {
    if (s.kind === 'parallel') return s.children.forEach(visit);
    if (s.kind === 'revert') return void down.delete(s.target);
    if (s.kind !== 'action') return;
    const via = agentTargets(plan.inventory, s.targets ?? []).map((t) => t.node.name);
    const outage = [...down][0];
    if (via.length && outage)
      out.push({
        step: s,
        message:
          `step ${s.index} (${s.actionId} on ${via.join(', ')}) acts through node agents while step ${outage.index} (${outage.actionId}) keeps every apiserver stopped, ` +
          'and agents are reached through the apiserver: act on those nodes before the outage, or reach them by ssh',
      });
    const targets = new Set((s.targets ?? []).map((n) => n.name));
    if (s.action.meta.stopsApiserver && controlPlane.length && controlPlane.every((n) => targets.has(n))) down.add(s);
  };
  plan.steps.forEach(visit);
  return out;
}
