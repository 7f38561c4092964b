import { messageOf } from '../core/errors.js';
import type { Ctx } from '../contract/context.js';
import type { ObserverProbe } from '../engine/access.js';
import type { Confirmer } from '../engine/confirm.js';
import type { Plan } from '../engine/plan.js';
import { preflight } from '../engine/preflight.js';
import { type RunHandle, type RunOptions, type RunResult, startRun } from '../engine/run.js';
import { toSinks } from '../engine/sinks.js';
import type { ConfigMapRef } from '../kube/configmap.js';
import { type RunReport, ReportCollector } from '../report/collect.js';
import { liveRenderer } from '../report/live.js';
import { plainRenderer } from '../report/plain.js';
import type { OtelSettings } from '../telemetry/settings.js';
import { type RunTelemetry, startTelemetry, type TelemetryOptions } from '../telemetry/telemetry.js';
import { openRunJournal } from './journal.js';
import { POD_DELETIONS, runObservers } from './observers.js';
import { redactedReport, writeReports } from './report-files.js';
import { writeReportConfigMap } from './report-configmap.js';

/** What a run needs besides the engine: where its journal, its events and its report go. */
export interface SessionOptions {
  plan: Plan;
  /** The run's id, clock, log, inventory and cluster (whose client the session closes at the end). */
  ctx: Ctx;
  confirmer: Confirmer;
  /** Recorded in the journal so `recover` can reach the cluster and the nodes again. */
  inventoryFile: string;
  kubeconfig?: string;
  guards: boolean;
  /** Where the journal goes; and the ConfigMap that keeps its copy, checked before anything is applied. */
  journal: { dir: string; configMap?: ConfigMapRef };
  /** Where the report goes besides the result: its files (report.json, junit.xml, timeline.html), a ConfigMap. */
  report: { dir?: string; configMap?: ConfigMapRef };
  /** The live task list (it redraws the screen), or a line per event written to `write`. */
  view: { live: true } | { live: false; write: (line: string) => void };
  /** OpenTelemetry export, when on. */
  otel?: OtelSettings;
  /** One line for the user on stderr: what went wrong on the way out (a copy, a write), never the run's outcome. */
  warn: (line: string) => void;
  /** Hands `interrupt` the signals that roll the run back until the returned function is called. */
  interrupts: (interrupt: (signal: NodeJS.Signals) => void) => () => void;
}

/** The parts a session starts: the real ones, but for those a test hands as fakes. */
export interface SessionParts {
  observers: () => Promise<ObserverProbe[]>;
  startRun: (o: RunOptions) => RunHandle;
  startTelemetry: (o: TelemetryOptions) => RunTelemetry;
  liveView: (plan: Plan) => { onEvent: ReturnType<typeof plainRenderer>; stop(): Promise<void> };
}

const realParts: SessionParts = { observers: runObservers, startRun, startTelemetry, liveView: liveRenderer };

export interface SessionResult {
  result: RunResult;
  /** The report as collected (redact it before it leaves: `redactedReport`). */
  report: RunReport;
  /** What the pod-deletions observer saw, in one line; undefined when its watch never synced. */
  podsDeleted?: string;
}

/**
 * One run: its journal (and the journal's copy in the cluster), the observers every run starts, and the sinks its
 * events go to, redacted once (the report, the view, telemetry); then, in this order, whether the copy has the last
 * records, the view stopped, telemetry flushed (unless the run was stopped at once), the report written to its
 * ConfigMap, the cluster client closed, the report files written. The view, telemetry and the client are closed also
 * when the run throws; the report is then not written.
 */
export async function runSession(o: SessionOptions, given: Partial<SessionParts> = {}): Promise<SessionResult> {
  const parts: SessionParts = { ...realParts, ...given };
  const { ctx, plan } = o;
  const kube = ctx.kube;
  const journal = await openRunJournal({ kube, runId: ctx.runId, dir: o.journal.dir, configMap: o.journal.configMap, log: ctx.log });
  const observers = await parts.observers();
  const collector = new ReportCollector(
    Object.fromEntries(observers.flatMap((ob) => (ob.probe.meta.report ? [[ob.name, (v: unknown) => ob.probe.meta.report!(v)]] : []))),
  );
  const view = o.view.live ? parts.liveView(plan) : { onEvent: plainRenderer(o.view.write), stop: async () => {} };
  const telemetry =
    o.otel &&
    parts.startTelemetry({
      settings: o.otel,
      target: { clusterHost: serverHost(kube.server), nodes: ctx.inventory.spec.nodes.map((n) => n.name) },
      clock: ctx.clock,
      warn: o.warn,
    });
  let result: RunResult | undefined;
  try {
    // every sink takes the run's events only through here: redacted once, then shown, kept and sent
    const emit = toSinks(collector.onEvent, view.onEvent, telemetry?.onEvent);
    const handle = parts.startRun({
      plan,
      ctx,
      journal,
      emit,
      confirmer: o.confirmer,
      inventoryFile: o.inventoryFile,
      kubeconfig: o.kubeconfig,
      guards: o.guards,
      observers,
    });
    const stopForwarding = o.interrupts((sig) => handle.interrupt(sig));
    try {
      result = await handle.result;
    } finally {
      stopForwarding();
    }
    const ref = o.journal.configMap;
    // the journal's last records (the reverts, the end) in the cluster's copy too, unless stopped at once
    if (ref && !result.forced && !(await journal.synced()))
      o.warn(
        `kube-runbook: the journal's copy in ConfigMap ${ref.namespace}/${ref.name} lacks the last records; the local journal ${journal.file} has them`,
      );
  } finally {
    await view.stop();
    // a second Ctrl-C stops at once: what is still queued is dropped
    if (!result?.forced) await telemetry?.shutdown();
    const ref = o.report.configMap;
    if (result && ref)
      await writeReportConfigMap(kube, ref, redactedReport(collector.report)).catch((e: unknown) =>
        o.warn(`kube-runbook: the report was not written to ConfigMap ${ref.namespace}/${ref.name}: ${messageOf(e)}`),
      );
    kube.close?.();
  }
  if (o.report.dir) writeReports(o.report.dir, collector.report);
  const seen = collector.report.observations[POD_DELETIONS] as { detail?: string } | undefined;
  return { result, report: collector.report, podsDeleted: seen?.detail };
}

/**
 * `run --dry-run`: the whole preflight, which only reads, its lines written to `write`; the cluster client closed
 * after it. What a real run would be refused for, the dry run is refused for too.
 */
export async function dryRunSession(o: {
  plan: Plan;
  ctx: Ctx;
  confirmer: Confirmer;
  write: (line: string) => void;
}): Promise<{ ok: boolean; failures: string[] }> {
  return preflight(o.plan, o.ctx, o.confirmer, toSinks(plainRenderer(o.write))).finally(() => o.ctx.kube.close?.());
}

/** The apiserver's host and port, as the trace names the cluster: nothing of the URL's user or path. */
const serverHost = (server: string) => {
  try {
    return new URL(server).host;
  } catch {
    return undefined;
  }
};
