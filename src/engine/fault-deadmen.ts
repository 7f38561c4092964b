import { messageOf } from '../core/errors.js';
import { agentConfigOf } from './agents.js';
import { armScript, DEADMAN_REVERT_LIMIT_MS, deadmanDir, disarmScript, settleScript } from './deadman.js';
import type { AppliedFault, FaultLedgerOptions } from './fault-types.js';
import { type EngineRetry, withRetries } from './retry.js';

/** What arming a fault's dead-man needs besides the ledger's options. */
interface Arming {
  fault: AppliedFault;
  /** The shell text the node runs by itself (the action's nodeSideRevert). */
  nodeSide: string;
  ttlMs: number;
  remediation: boolean;
  signal: AbortSignal;
}

/** Arms the node-side dead-man of a fault on its node (tried again as `retry` says); true once armed, else throws. */
export async function armDeadman(o: FaultLedgerOptions, a: Arming, retry: EngineRetry): Promise<true> {
  const { fault, ttlMs, remediation } = a;
  const node = fault.node!;
  const faultId = fault.ref.faultId;
  const transport = node.transport ?? o.ctx.inventory.spec.transport;
  // the lab's nodes: network namespaces of one machine (reached by netns, or by an agent the lab starts in one)
  const lab = transport.type === 'netns' || (transport.type === 'agent' && transport.enter === 'mount');
  const arm = armScript({
    runId: o.ctx.runId,
    faultId,
    ttlMs,
    revert: a.nodeSide,
    allowSystemd: !lab,
    node: lab ? (node.netns ?? node.name) : node.name,
    onBoot: remediation ? 'rewatch' : 'revert',
    revertLimitMs: DEADMAN_REVERT_LIMIT_MS + (fault.action.meta.nodeSideWaitMs ?? 0),
    bootHook: lab ? 'dir' : 'host',
  });
  const r = await withRetries('arm', () => o.ctx.nodes.exec(node.name, arm, { timeoutMs: 30_000, signal: a.signal }), retry);
  if (r.code !== 0) throw new Error(`could not arm the dead-man on ${node.name}: ${r.stderr.trim() || `exit ${r.code}`}`);
  if (/^boot-hook none$/m.test(r.stdout))
    o.emit({
      type: 'log',
      at: o.ctx.clock.now(),
      level: 'warn',
      message:
        `${faultId} on ${node.name}: no boot hook (neither systemd nor a cron daemon the script may use): if ${node.name} reboots before the revert, ` +
        `its dead-man is gone and ${remediation ? 'the remediation' : 'the fault'} stays until the executor or \`kube-runbook recover\` reverts it`,
    });
  return true;
}

/**
 * Before the executor reverts a fault itself: keeps its dead-man from firing during the revert, or, when it has
 * fired already, waits for the node's own revert to finish, so the two never run at once (both are idempotent,
 * not both at the same moment: a static pod's manifest moved back twice fails the second move). Best effort: an
 * unreachable node fails the revert that follows anyway.
 */
export async function settleDeadman(
  o: FaultLedgerOptions,
  fault: AppliedFault,
  signal: AbortSignal,
  retry: EngineRetry,
  deadline: number,
): Promise<void> {
  const node = fault.node!.name;
  const waitS = Math.max(1, Math.min(600, Math.ceil((deadline - o.ctx.clock.now()) / 1000)));
  const settle = () =>
    o.ctx.nodes.exec(node, settleScript(o.ctx.runId, fault.ref.faultId, waitS), { timeoutMs: (waitS + 30) * 1000, signal });
  // through an agent, a node cut off by the fault answers again once its dead-man has reverted it: wait for that
  const r = await (agentConfigOf(o.ctx.inventory, fault.node!) ? withRetries('settle', settle, retry) : settle()).catch(() => undefined);
  const fired = r && /^fired (\S*)/m.exec(r.stdout);
  if (fired)
    o.ctx.log.info(
      `the node-side dead-man on ${node} reverted ${fault.ref.faultId} first (exit ${fired[1]}); reverting it again to confirm`,
    );
}

/** After a revert: disarms the fault's dead-man; a node that does not answer is journaled and warned about. */
export async function disarmDeadman(o: FaultLedgerOptions, fault: AppliedFault, signal: AbortSignal, retry: EngineRetry): Promise<void> {
  const { clock } = o.ctx;
  const node = fault.node!.name;
  const disarm = disarmScript(o.ctx.runId, fault.ref.faultId);
  const r = await withRetries('disarm', () => o.ctx.nodes.exec(node, disarm, { timeoutMs: 30_000, signal }), retry).catch((e: unknown) => ({
    code: -1,
    stdout: '',
    stderr: messageOf(e),
  }));
  if (r.code !== 0) {
    const error = r.stderr.trim() || `exit ${r.code}`;
    o.journal?.append({ type: 'disarm-failed', at: clock.now(), faultId: fault.ref.faultId, node, error });
    o.emit({
      type: 'log',
      at: clock.now(),
      level: 'warn',
      message:
        `dead-man of ${fault.ref.faultId} on ${node} not disarmed (${error}): without keepalive its watcher runs the fault's revert again ` +
        `(reverts are idempotent); to stop it, remove ${deadmanDir(o.ctx.runId, fault.ref.faultId)} on ${node}`,
    });
  }
  const fired = /^fired (\S*)/m.exec(r.stdout);
  if (fired) o.ctx.log.warn(`the node-side dead-man on ${node} had already reverted ${fault.ref.faultId} (exit ${fired[1] || '?'})`);
}
