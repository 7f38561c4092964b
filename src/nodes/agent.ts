import { randomBytes } from 'node:crypto';
import { realClock } from '../core/clock.js';
import { formatDuration } from '../core/duration.js';
import { EXIT, KrError, messageOf, quote } from '../core/errors.js';
import type { AgentTransport as AgentConfig, InventoryNode } from '../inventory/schema.js';
import { type AgentKeys, sealInput } from './agent-auth.js';
import {
  type AgentApi,
  type ConfigMapLite,
  agentPodName,
  configMapsPath,
  nodeLabel,
  readResult,
  requestObject,
  resultName,
  statusOf,
} from './agent-protocol.js';
import type { TransportDeps } from './exec-process.js';
import type { ExecOptions, ExecResult, Transport } from './types.js';
import { wireScript } from './wire.js';

export interface AgentTransportDeps extends TransportDeps {
  /** The executor's cluster client (its `json`); absent where no cluster is reachable. */
  api?: AgentApi;
  runId?: string;
  /** The executor's keys: requests are signed with them, results believed only when the node's agent signed them. */
  keys?: AgentKeys;
  /** How long an agent has to take a request before the node counts as unreachable (15 s by default). */
  pickupMs?: number;
  /** How often the executor reads the result (250 ms by default). */
  pollMs?: number;
}

/** A script without a timeout of its own gets this long on the node. */
const DEFAULT_TIMEOUT_MS = 10 * 60_000;
/** How long after a request's deadline a claim still counts (it was made in time, and is read a poll later). */
const PICKUP_GRACE_MS = 2_000;
/** What the agent's own timeout and its answer get on top of the script's timeout. */
const ANSWER_GRACE_MS = 15_000;

/**
 * Runs scripts through the node's agent pod (`kube-runbook agent`): a request ConfigMap in, a result ConfigMap out
 * (src/nodes/agent-protocol.ts). An agent that does not take the request within `pickupMs` (the pod gone, the node
 * cut off from the apiserver) throws `NODE_UNREACHABLE`, transient; so does an apiserver the executor cannot reach.
 * The request is deleted when the call ends, however it ends: an agent that has not taken it by then never will
 * (it reads the request again before starting it). A result the node's agent did not sign is not believed: the call
 * waits on, as if nothing had been written, and says so once.
 */
export function agentTransport(config: AgentConfig, deps: AgentTransportDeps): Transport {
  const clock = deps.clock ?? realClock;
  const pickupMs = deps.pickupMs ?? 15_000;
  const pollMs = deps.pollMs ?? 250;
  const ns = config.namespace;
  return {
    kind: 'agent',
    async exec(node: InventoryNode, script: string, options: ExecOptions = {}): Promise<ExecResult> {
      const { api, runId, keys } = deps;
      if (!api || !runId || !keys)
        throw new KrError(
          'AGENT_UNAVAILABLE',
          `node ${quote(node.name)} is reached through its agent pod, which needs the cluster (no kubeconfig loaded)`,
          {
            exit: EXIT.refused,
          },
        );
      if (options.timeoutMs !== undefined && !(options.timeoutMs > 0))
        throw new KrError('EXEC_BAD_TIMEOUT', `a timeout must be more than 0ms (got ${quote(options.timeoutMs)})`, { exit: EXIT.invalid });
      // refuses what a shell cannot carry, as every transport does; the input itself travels sealed for the node
      const wired = wireScript(script, options.input);
      const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
      const pod = `${ns}/${agentPodName(runId, node.name, keys.fingerprint)}`;
      const name = `kr-exec-${nodeLabel(node.name).slice(0, 8)}-${randomBytes(6).toString('hex')}`;
      const started = clock.now();
      const sent =
        options.input === undefined
          ? { wired }
          : { wired: script, input: sealInput(keys.resultKey(node.name), { run: runId, node: node.name, name }, options.input) };
      const body = requestObject(ns, runId, { name, node: node.name, ...sent, timeoutMs, deadline: started + pickupMs }, keys.signRequest);
      const me = { runId, node: node.name, resultKey: keys.resultKey(node.name) };
      let forgedSeen = false;
      let unsent: KrError | undefined;
      const signal = options.signal;
      const cleanup = async () => {
        for (const n of [resultName(name), name])
          await api.json(configMapsPath(ns, n), { method: 'DELETE', timeoutMs: 10_000 }).catch(() => undefined);
      };
      try {
        await api.json(configMapsPath(ns), { method: 'POST', body, timeoutMs: 10_000, signal });
      } catch (e) {
        const failed = requestFailed(node.name, ns, e);
        // a write that timed out (or failed on the way back) may have been made: waited on as if it were, so an agent
        // that took it is followed to its result, and it is withdrawn below when none did; never sent a second time
        // beside itself
        if (!failed.transient) throw failed;
        unsent = failed;
        deps.log?.debug(`node ${quote(node.name)}: the request may not have been written (${messageOf(e)}); waiting for it all the same`);
      }
      try {
        let takenAt: number | undefined;
        for (;;) {
          if (signal?.aborted) throw aborted(node.name, signal);
          const now = clock.now();
          let cm: ConfigMapLite | undefined;
          try {
            cm = await api.json<ConfigMapLite>(configMapsPath(ns, resultName(name)), { timeoutMs: 10_000, signal });
          } catch (e) {
            if (statusOf(e) !== 404 && statusOf(e) !== undefined && statusOf(e)! < 500) throw requestFailed(node.name, ns, e);
          }
          let r = cm && readResult(cm, name, me);
          if (r === 'forged') {
            if (!forgedSeen)
              deps.log?.warn(
                `node ${quote(node.name)}: the result ${ns}/${resultName(name)} is not signed by the node's agent; not believed (waiting for the agent's own)`,
              );
            forgedSeen = true;
            r = undefined;
          }
          if (r?.state === 'done') {
            if (r.timedOut) throw timedOut(node.name, timeoutMs);
            return { code: r.code, stdout: r.stdout, stderr: r.stderr };
          }
          if (r?.state === 'running') takenAt ??= now;
          // the agent starts nothing after the deadline (pickupMs) by its own clock: a claim made just before it is given
          // time to show before the request is withdrawn, so a script is never left running beside its retry
          if (takenAt === undefined && now - started >= pickupMs + PICKUP_GRACE_MS)
            throw (
              unsent ??
              new KrError(
                'NODE_UNREACHABLE',
                `node ${quote(node.name)}: its agent (pod ${pod}) did not take the script within ${formatDuration(pickupMs)} ` +
                  '(the pod is not running, or the node cannot reach the apiserver)',
                { transient: 'agent silence' },
              )
            );
          if (takenAt !== undefined && options.silenceMs !== undefined && now - takenAt >= options.silenceMs)
            throw new KrError(
              'NODE_UNREACHABLE',
              `node ${quote(node.name)}: its agent took the script and went silent for ${formatDuration(options.silenceMs)}`,
              {
                transient: 'agent silence',
              },
            );
          if (takenAt !== undefined && now - takenAt >= timeoutMs + ANSWER_GRACE_MS) throw timedOut(node.name, timeoutMs);
          try {
            await clock.sleep(pollMs, signal);
          } catch {
            throw aborted(node.name, signal!);
          }
        }
      } finally {
        await cleanup();
      }
    },
  };
}

function timedOut(node: string, timeoutMs: number): KrError {
  return new KrError(
    'EXEC_TIMEOUT',
    `the script on node ${quote(node)} (agent) did not finish within ${formatDuration(timeoutMs)}; it was killed`,
  );
}

function aborted(node: string, signal: AbortSignal): KrError {
  return new KrError('EXEC_ABORTED', `the script on node ${quote(node)} (agent) was interrupted`, {
    exit: EXIT.interrupted,
    cause: signal.reason,
  });
}

/** The request could not be written: permissions and a missing namespace are settled; the rest can pass. */
function requestFailed(node: string, ns: string, e: unknown): KrError {
  const status = statusOf(e);
  if (status === 403)
    return new KrError('AGENT_FORBIDDEN', `node ${quote(node)}: not allowed to hand scripts to its agent: ${messageOf(e)}`, {
      exit: EXIT.refused,
      details: [`the executor needs create, get and delete on configmaps in ${ns} (kube-runbook manifests grants them)`],
    });
  if (status === 404)
    return new KrError('AGENT_NAMESPACE_MISSING', `node ${quote(node)}: the agent namespace ${quote(ns)} does not exist`, {
      exit: EXIT.refused,
      details: ['create it with `kube-runbook agent manifests -i INVENTORY | kubectl apply -f -`'],
    });
  const transient = status === undefined || status >= 500 || status === 429 ? 'apiserver failure' : undefined;
  return new KrError('NODE_UNREACHABLE', `node ${quote(node)}: cannot reach its agent through the apiserver: ${messageOf(e)}`, {
    transient,
  });
}
