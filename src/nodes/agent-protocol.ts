import { createHash, type KeyObject } from 'node:crypto';
import {
  type AgentKeys,
  type RequestClaims,
  type ResultClaims,
  openInput,
  signResult,
  verifyRenewal,
  verifyRequest,
  verifyResult,
} from './agent-auth.js';
import { wireScript } from './wire.js';

/**
 * What the executor and `kube-runbook agent` exchange through the apiserver, in the agent namespace:
 *
 * - a **request** per script: a ConfigMap the executor creates, `immutable`, labelled with the run and the node
 *   (hashed: label values are short), holding the wired script (src/nodes/wire.ts) or, when the script has an input,
 *   the script and its input sealed for the node's agent alone (`sealInput`), its timeout and a deadline after which no
 *   agent may start it;
 * - a **result** per request: a ConfigMap `<request>-result` the agent creates when it takes the request (`state:
 *   running`, so the executor knows the script started) and replaces with `state: done`, the exit code, stdout and
 *   stderr. Only the agent that created the result may finish it (the create is the claim).
 *
 * ConfigMaps, and not a custom resource: they exist on every cluster (no CRD to install before a game day, none to
 * leave behind), RBAC scopes them to one namespace, `immutable` keeps a request from being changed once an agent
 * may read it, and their 1 MiB holds a script and bounded output. Not pod exec or logs: those go through the
 * kubelet, which the faults stop or cut off.
 *
 * Both are signed (src/nodes/agent-auth.ts): an agent runs only what this run's executor signed for its node, and the
 * executor believes only results its node's agent signed.
 *
 * The **run Lease** (`kr-run-<run>`) is the executor's heartbeat: it renews it while the run lives, each renewal
 * signed with its key (`renewalAnnotations`); an agent touches its node's dead-man keepalives only when it sees a new
 * renewal its executor signed (`readRenewal`), so an executor gone, or a node cut off from the apiserver, ends in the
 * dead-men firing `faultTtl` after the last renewal the node saw, whoever else writes the Lease.
 */

export const AGENT_APP = 'kube-runbook-agent';

export const LABEL_RUN = 'kube-runbook/run';
export const LABEL_NODE = 'kube-runbook/node';
export const LABEL_KIND = 'kube-runbook/kind';
export const ANNOTATION_NODE = 'kube-runbook/node-name';
export const ANNOTATION_RUN = 'kube-runbook/run-id';
/** On the run Lease: the renewal's sequence number and the executor's signature over it (RenewalClaims). */
export const ANNOTATION_RENEWAL_SEQ = 'kube-runbook/renewal-seq';
export const ANNOTATION_RENEWAL_SIGNATURE = 'kube-runbook/renewal-signature';

const hash = (s: string, n: number) => createHash('sha256').update(s).digest('hex').slice(0, n);

/** The run as a label value. */
export const runLabel = (runId: string) => hash(`run/${runId}`, 12);
/** The node as a label value (Node names can be longer than a label value). */
export const nodeLabel = (node: string) => hash(`node/${node}`, 12);

/**
 * The agent pod of a run on a node for one executor key (its fingerprint): readable, a valid pod name, unique per run,
 * node and key, so `recover`'s agents (a key of their own) never meet the pods of the run's executor.
 */
export function agentPodName(runId: string, node: string, keyFingerprint: string): string {
  const readable = node
    .slice(0, 30)
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/-+$/, '');
  return `kr-agent-${readable}-${hash(`${runId}/${node}/${keyFingerprint}`, 8)}`;
}

/** The key of the Secret holding a node's result key, as the agent pod's environment reads it. */
export const RESULT_KEY_ENV = 'KUBE_RUNBOOK_RESULT_KEY';
export const RESULT_KEY_FIELD = 'result-key';

/** The Lease the executor renews while the run lives. */
export const runLeaseName = (runId: string) => `kr-run-${runLabel(runId)}`;

export const resultName = (request: string) => `${request}-result`;

export interface ConfigMapLite {
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    ownerReferences?: { apiVersion: string; kind: string; name: string; uid: string }[];
  };
  immutable?: boolean;
  data?: Record<string, string>;
}

/** What a request carries. */
export interface AgentRequest {
  name: string;
  node: string;
  /** The wired script (wireScript), fed to `sh -s`; with `input`, the script alone, which the agent wires with it. */
  wired: string;
  timeoutMs: number;
  /** Milliseconds since the epoch: an agent that sees the request later does not start it. */
  deadline: number;
  /** The script's input, sealed for the node (sealInput). */
  input?: string;
}

/** A request, signed by `sign` (the executor's AgentKeys.signRequest) over everything the agent acts on. */
export function requestObject(namespace: string, runId: string, r: AgentRequest, sign: (c: RequestClaims) => string): ConfigMapLite {
  const signature = sign({
    run: runId,
    node: r.node,
    namespace,
    name: r.name,
    script: r.wired,
    timeoutMs: r.timeoutMs,
    deadline: r.deadline,
    ...(r.input !== undefined ? { input: r.input } : {}),
  });
  return {
    metadata: {
      name: r.name,
      namespace,
      labels: {
        'app.kubernetes.io/managed-by': 'kube-runbook',
        [LABEL_KIND]: 'request',
        [LABEL_RUN]: runLabel(runId),
        [LABEL_NODE]: nodeLabel(r.node),
      },
      annotations: { [ANNOTATION_NODE]: r.node, [ANNOTATION_RUN]: runId },
    },
    immutable: true,
    data: {
      script: r.wired,
      ...(r.input !== undefined ? { input: r.input } : {}),
      timeoutMs: String(r.timeoutMs),
      deadline: new Date(r.deadline).toISOString(),
      signature,
    },
  };
}

/** Who an agent is: what it checks each request against. */
export interface AgentIdentity {
  node: string;
  runId: string;
  namespace: string;
  /** The executor's public key (`--executor-key`). */
  executorKey: KeyObject;
  /** This node's result key: it opens a request's sealed input. */
  resultKey?: Buffer;
}

/**
 * A request as an agent reads it, or why it is refused: not for this node or run, malformed, or not signed by the
 * executor that started this agent (a request written by anyone else, or changed, renamed or moved after signing).
 */
export function readRequest(cm: ConfigMapLite, me: AgentIdentity): { request: AgentRequest } | { refused: string } {
  const d = cm.data ?? {};
  const node = cm.metadata.annotations?.[ANNOTATION_NODE];
  if (node !== me.node) return { refused: `it is for node ${JSON.stringify(node ?? null)}` };
  if (cm.metadata.annotations?.[ANNOTATION_RUN] !== me.runId) return { refused: 'it is for another run' };
  const timeoutMs = Number(d.timeoutMs);
  const deadline = Date.parse(d.deadline ?? '');
  if (d.script === undefined || !(timeoutMs > 0) || !Number.isFinite(deadline)) return { refused: 'it is malformed' };
  const claims = {
    run: me.runId,
    node,
    namespace: me.namespace,
    name: cm.metadata.name,
    script: d.script,
    timeoutMs,
    deadline,
    ...(d.input !== undefined ? { input: d.input } : {}),
  };
  if (!verifyRequest(me.executorKey, claims, d.signature))
    return { refused: d.signature ? "its signature is not this run's executor's" : 'it is not signed' };
  if (d.input === undefined) return { request: { name: cm.metadata.name, node, wired: d.script, timeoutMs, deadline } };
  const input = me.resultKey && openInput(me.resultKey, { run: me.runId, node, name: cm.metadata.name }, d.input);
  if (input === undefined) return { refused: "its input is not sealed for this node's key" };
  return { request: { name: cm.metadata.name, node, wired: wireScript(d.script, input), timeoutMs, deadline } };
}

/** The run Lease as both sides read it. */
export interface LeaseLite {
  metadata?: { annotations?: Record<string, string> };
  spec?: { holderIdentity?: string; renewTime?: string };
}

/** The annotations of a renewal at `renewTime` of the run Lease in `namespace`, signed with the executor's key. */
export function renewalAnnotations(
  namespace: string,
  runId: string,
  renewTime: string,
  keys: Pick<AgentKeys, 'signRenewal'>,
): Record<string, string> {
  const { seq, signature } = keys.signRenewal({ run: runId, namespace, holder: runId, renewTime });
  return { [ANNOTATION_RENEWAL_SEQ]: String(seq), [ANNOTATION_RENEWAL_SIGNATURE]: signature };
}

/**
 * The renewal a run Lease shows, as an agent reads it: its sequence number when this run's executor signed it, or why
 * it does not count. A Lease held by another run shows none (undefined).
 */
export function readRenewal(
  lease: LeaseLite,
  me: Pick<AgentIdentity, 'runId' | 'namespace' | 'executorKey'>,
): { seq: number } | { ignored: string; kind: 'unsigned' | 'malformed' | 'signature' } | undefined {
  const holder = lease.spec?.holderIdentity;
  const renewTime = lease.spec?.renewTime;
  if (holder !== me.runId || !renewTime) return undefined;
  const a = lease.metadata?.annotations ?? {};
  const signature = a[ANNOTATION_RENEWAL_SIGNATURE];
  if (!signature) return { ignored: `it is not signed (renewTime ${renewTime})`, kind: 'unsigned' };
  const seq = Number(a[ANNOTATION_RENEWAL_SEQ]);
  if (!Number.isSafeInteger(seq) || seq < 1)
    return { ignored: `its sequence number ${JSON.stringify(a[ANNOTATION_RENEWAL_SEQ] ?? null)} is not one`, kind: 'malformed' };
  if (!verifyRenewal(me.executorKey, { run: me.runId, namespace: me.namespace, holder, renewTime, seq }, signature))
    return {
      ignored: `its signature (renewal ${seq}, renewTime ${renewTime}) is not this agent's executor's: changed since it was signed, or signed with another key`,
      kind: 'signature',
    };
  return { seq };
}

export type AgentResult =
  | { state: 'running'; agent: string }
  | {
      state: 'done';
      agent: string;
      code: number;
      stdout: string;
      stderr: string;
      /** the agent killed it at its timeout */ timedOut?: boolean;
    };

const claimsOf = (run: string, node: string, request: string, r: AgentResult): ResultClaims =>
  r.state === 'done'
    ? { run, node, request, agent: r.agent, state: 'done', code: r.code, stdout: r.stdout, stderr: r.stderr, timedOut: r.timedOut === true }
    : { run, node, request, agent: r.agent, state: 'running' };

/** A result, signed with the node's result key over the request it answers and everything it says. */
export function resultObject(
  namespace: string,
  request: ConfigMapLite,
  r: AgentResult,
  me: { runId: string; node: string; resultKey: Buffer },
): ConfigMapLite {
  const data: Record<string, string> = { state: r.state, agent: r.agent };
  if (r.state === 'done')
    Object.assign(data, { code: String(r.code), stdout: r.stdout, stderr: r.stderr }, r.timedOut ? { timedOut: 'true' } : {});
  data.signature = signResult(me.resultKey, claimsOf(me.runId, me.node, request.metadata.name, r));
  return {
    metadata: {
      name: resultName(request.metadata.name),
      namespace,
      labels: {
        'app.kubernetes.io/managed-by': 'kube-runbook',
        [LABEL_KIND]: 'result',
        ...pick(request.metadata.labels, [LABEL_RUN, LABEL_NODE]),
      },
      // deleted with its request by the garbage collector, should the executor not delete both itself
      ...(request.metadata.uid
        ? { ownerReferences: [{ apiVersion: 'v1', kind: 'ConfigMap', name: request.metadata.name, uid: request.metadata.uid }] }
        : {}),
    },
    data,
  };
}

function parseResult(cm: ConfigMapLite): AgentResult | undefined {
  const d = cm.data ?? {};
  if (d.state === 'running') return { state: 'running', agent: d.agent ?? '' };
  if (d.state !== 'done') return undefined;
  const code = Number(d.code);
  if (!Number.isInteger(code)) return undefined;
  return {
    state: 'done',
    agent: d.agent ?? '',
    code,
    stdout: d.stdout ?? '',
    stderr: d.stderr ?? '',
    ...(d.timedOut === 'true' ? { timedOut: true } : {}),
  };
}

/**
 * The result of `request` on `node` if its node's agent signed it, else why not: undefined (nothing readable yet),
 * or `forged` (a result this agent did not write, or changed since: not believed, whatever it says).
 */
export function readResult(
  cm: ConfigMapLite,
  request: string,
  me: { runId: string; node: string; resultKey: Buffer },
): AgentResult | 'forged' | undefined {
  const r = parseResult(cm);
  if (!r) return cm.data?.signature === undefined ? undefined : 'forged';
  return verifyResult(me.resultKey, claimsOf(me.runId, me.node, request, r), cm.data?.signature) ? r : 'forged';
}

function pick(from: Record<string, string> | undefined, keys: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of keys) if (from?.[k] !== undefined) out[k] = from[k];
  return out;
}

/** The few API calls both sides make; the executor and the agent hand in their client's `json` (src/kube/http.ts). */
export interface AgentApi {
  json<T>(
    path: string,
    options?: {
      method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
      query?: Record<string, string | number | boolean | undefined>;
      body?: unknown;
      timeoutMs?: number;
      signal?: AbortSignal;
    },
  ): Promise<T>;
}

/** The HTTP status of an API error (ApiStatusError of src/kube/source.ts carries it). */
export const statusOf = (e: unknown): number | undefined => {
  const s = (e as { status?: unknown } | null)?.status;
  return typeof s === 'number' ? s : undefined;
};

export const configMapsPath = (ns: string, name?: string) =>
  `/api/v1/namespaces/${encodeURIComponent(ns)}/configmaps${name ? `/${encodeURIComponent(name)}` : ''}`;
export const leasePath = (ns: string, name?: string) =>
  `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases${name ? `/${encodeURIComponent(name)}` : ''}`;
