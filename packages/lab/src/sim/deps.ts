import type { Clock } from 'kube-runbook/internal/core/clock.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import type { KubeletCalls } from './api.js';
import type { RuntimeStore } from './runtime.js';
import type { AgentProcesses } from './agent-process.js';
import type { NodeLite } from './types.js';

/** What one simulated kubelet is given: the apiserver calls, a clock, a log, its runtime store. */
export interface NodeSimDeps {
  api: KubeletCalls;
  clock: Clock;
  log: Logger;
  runtime: RuntimeStore;
  random: () => number;
  /** Called after each successful lease renewal. */
  onRenewed?: (atMs: number) => void;
  /**
   * Called on each failed renewal after the first in a row, as the kubelet's lease controller calls
   * onRepeatedHeartbeatFailure (the caller drops its connections).
   */
  onRepeatedFailure?: () => void;
  /** Called when the apiserver answers again after failures (the caller relists pods). */
  onReconnect?: () => void;
  /** The Node as a shared watch sees it (fleet mode); when absent the simulator GETs its Node. */
  cachedNode?: () => NodeLite | undefined;
  /** Runs the pods of the node agent's image for real (absent: every pod is a simulated container). */
  processes?: AgentProcesses;
  /** Delay before the first renewal (fleet mode spreads nodes over the interval). */
  firstRenewDelayMs?: number;
}
