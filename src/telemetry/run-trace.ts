import { type Attributes, type Context, type Span, SpanStatusCode, type Tracer, context, trace } from '@opentelemetry/api';
import type { FaultRef } from '../engine/events.js';
import type { RedactedEvent } from '../engine/sinks.js';

/** What the run's root span says of where it ran, besides what `run-start` says. */
export interface RunTarget {
  /** The cluster's apiserver, host and port only (never the kubeconfig, never a token). */
  clusterHost?: string;
  /** The inventory's nodes. */
  nodes: readonly string[];
}

/** A reading's detail as a span may carry it: short, one line. */
const short = (text: string, max = 200) => {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
};

/** One kind of the run's events. */
type EventOf<T extends RedactedEvent['type']> = Extract<RedactedEvent, { type: T }>;

const faultAttributes = (f: FaultRef): Attributes => ({
  'kube_runbook.fault.id': f.faultId,
  'kube_runbook.action': f.action,
  'kube_runbook.step': f.step,
  'kube_runbook.remediation': f.remediation,
  ...(f.node ? { 'k8s.node.name': f.node } : {}),
});

/**
 * The run as one trace, built from its events as they come: the run is the root span; each step, each fault's
 * apply and revert, the rollback (and its wait) and each remediation a child span; guard firings and objectives
 * events on the root. Spans take the events' own times, so the trace shows the run's clock. An apply span starts
 * where its step started or its step's previous apply ended; a revert span where the rollback started or the
 * previous revert ended (the engine reports when each finished). Nothing a reading holds goes in but its status
 * and a short detail.
 */
export class RunTrace {
  private root?: Span;
  private rootCtx?: Context;
  /** Open steps by index; `label` is how a FaultRef names its step (`2 stop the apiserver`). */
  private readonly steps = new Map<string, { span: Span; ctx: Context; label: string; lastAt: number }>();
  private rollback?: { span: Span; ctx: Context; lastAt: number };
  private rollbackWait?: Span;
  private remediation?: { span: Span; ctx: Context; lastAt: number };
  private readonly lastReading = new Map<string, { status: string; detail: string }>();

  constructor(
    private readonly tracer: Tracer,
    private readonly target: RunTarget,
  ) {}

  readonly onEvent = (e: RedactedEvent): void => {
    switch (e.type) {
      case 'run-start':
        return this.runStarted(e);
      case 'step-start':
        return this.stepStarted(e);
      case 'step-end':
        return this.stepEnded(e);
      case 'fault-applied':
      case 'fault-apply-failed':
        return this.faultApplied(e);
      case 'fault-reverted':
      case 'fault-revert-failed':
        return this.faultReverted(e);
      case 'rollback-start':
        return this.rollbackStarted(e);
      case 'rollback-wait':
        return this.rollbackWaited(e);
      case 'rollback-end':
        return this.rollbackEnded(e);
      case 'remediation':
        return this.remediated(e);
      case 'guard-reading':
        this.lastReading.set(e.guard, { status: e.reading.status, detail: e.reading.detail });
        return;
      case 'guard-fired':
        return this.guardFired(e);
      case 'objective':
        return this.objective(e);
      case 'run-end':
        return this.runEnded(e);
      default:
        return;
    }
  };

  private runStarted(e: EventOf<'run-start'>): void {
    this.root = this.tracer.startSpan(`run ${e.runbook}`, {
      root: true,
      startTime: e.at,
      attributes: {
        'kube_runbook.run.id': e.runId,
        'kube_runbook.runbook': e.runbook,
        'kube_runbook.context': e.context,
        'kube_runbook.dry_run': e.dryRun,
        ...(this.target.clusterHost ? { 'kube_runbook.cluster': this.target.clusterHost } : {}),
        'kube_runbook.nodes': [...this.target.nodes],
      },
    });
    this.rootCtx = trace.setSpan(context.active(), this.root);
  }

  private stepStarted(e: EventOf<'step-start'>): void {
    const parent = this.steps.get(e.index.split('.').slice(0, -1).join('.'))?.ctx ?? this.rootCtx;
    const span = this.child(
      `step ${e.name}`,
      e.at,
      { 'kube_runbook.step': e.name, 'kube_runbook.step.index': e.index, 'kube_runbook.step.kind': e.kind },
      parent,
    );
    if (span) this.steps.set(e.index, { span, ctx: trace.setSpan(parent!, span), label: `${e.index} ${e.name}`, lastAt: e.at });
  }

  private stepEnded(e: EventOf<'step-end'>): void {
    const s = this.steps.get(e.index);
    if (!s) return;
    s.span.setAttribute('kube_runbook.step.status', e.status);
    if (e.status === 'failed' || e.status === 'aborted') s.span.setStatus({ code: SpanStatusCode.ERROR, message: short(e.detail) });
    s.span.end(e.at);
    this.steps.delete(e.index);
  }

  private faultApplied(e: EventOf<'fault-applied' | 'fault-apply-failed'>): void {
    const owner = this.ownerOfApply(e.fault);
    const span = this.child(`apply ${e.fault.action}`, owner?.lastAt ?? e.at, faultAttributes(e.fault), owner?.ctx);
    if (owner) owner.lastAt = e.at;
    if (e.type === 'fault-apply-failed') span?.setStatus({ code: SpanStatusCode.ERROR, message: short(e.error) });
    span?.end(e.at);
  }

  private faultReverted(e: EventOf<'fault-reverted' | 'fault-revert-failed'>): void {
    const owner = this.rollback ?? [...this.steps.values()].at(-1) ?? this.remediation;
    const span = this.child(
      `revert ${e.fault.action}`,
      owner?.lastAt ?? e.at,
      { ...faultAttributes(e.fault), 'kube_runbook.attempts': e.attempts },
      owner?.ctx,
    );
    if (owner) owner.lastAt = e.at;
    if (e.type === 'fault-revert-failed') span?.setStatus({ code: SpanStatusCode.ERROR, message: short(e.error) });
    span?.end(e.at);
  }

  private rollbackStarted(e: EventOf<'rollback-start'>): void {
    const span = this.child(
      'rollback',
      e.at,
      { 'kube_runbook.rollback.reason': short(e.reason), 'kube_runbook.rollback.faults': e.faults.length },
      this.rootCtx,
    );
    if (span) this.rollback = { span, ctx: trace.setSpan(this.rootCtx!, span), lastAt: e.at };
  }

  private rollbackWaited(e: EventOf<'rollback-wait'>): void {
    if (e.phase === 'start')
      this.rollbackWait = this.child('rollback wait', e.at, { 'kube_runbook.detail': short(e.detail) }, this.rollback?.ctx);
    else if (this.rollbackWait) {
      this.rollbackWait.setAttribute('kube_runbook.rollback.wait', e.phase);
      if (e.phase === 'timeout') this.rollbackWait.setStatus({ code: SpanStatusCode.ERROR, message: short(e.detail) });
      this.rollbackWait.end(e.at);
      this.rollbackWait = undefined;
      if (this.rollback) this.rollback.lastAt = e.at;
    }
  }

  private rollbackEnded(e: EventOf<'rollback-end'>): void {
    if (!this.rollback) return;
    this.rollback.span.setAttribute('kube_runbook.rollback.complete', e.complete);
    if (!e.complete) this.rollback.span.setStatus({ code: SpanStatusCode.ERROR, message: `${e.remaining.length} fault(s) remain` });
    this.rollback.span.end(e.at);
    this.rollback = undefined;
  }

  private remediated(e: EventOf<'remediation'>): void {
    if (e.phase === 'start') {
      const span = this.child('remediation', e.at, { 'kube_runbook.detail': short(e.detail) }, this.rootCtx);
      if (span) this.remediation = { span, ctx: trace.setSpan(this.rootCtx!, span), lastAt: e.at };
    } else if (this.remediation) {
      this.remediation.span.end(e.at);
      this.remediation = undefined;
    }
  }

  private guardFired(e: EventOf<'guard-fired'>): void {
    const reading = this.lastReading.get(e.guard);
    this.root?.addEvent(
      'guard fired',
      {
        'kube_runbook.guard': e.guard,
        'kube_runbook.guard.response': e.response,
        'kube_runbook.detail': short(e.detail),
        ...(reading ? { 'kube_runbook.reading.status': reading.status, 'kube_runbook.reading.detail': short(reading.detail) } : {}),
      },
      e.at,
    );
  }

  private objective(e: EventOf<'objective'>): void {
    this.root?.addEvent(
      `objective ${e.phase}`,
      {
        'kube_runbook.objective': e.name,
        'kube_runbook.objective.within_ms': e.withinMs,
        'kube_runbook.detail': short(e.detail),
        ...(e.recoveryMs === undefined ? {} : { 'kube_runbook.objective.recovery_ms': e.recoveryMs }),
      },
      e.at,
    );
    if (e.phase !== 'start') this.root?.setAttribute(`kube_runbook.objective.${e.name}`, e.phase);
  }

  /** Ends what is still open, then the root span with the run's status. */
  private runEnded(e: EventOf<'run-end'>): void {
    if (!this.root) return;
    for (const open of [this.rollbackWait, this.rollback?.span, this.remediation?.span, ...[...this.steps.values()].map((s) => s.span)])
      open?.end(e.at);
    this.root.setAttributes({ 'kube_runbook.status': e.status, 'kube_runbook.faults.remaining': e.remaining.length });
    if (e.status !== 'passed') this.root.setStatus({ code: SpanStatusCode.ERROR, message: `${e.status}: ${short(e.reason)}` });
    this.root.end(e.at);
    this.root = undefined;
  }

  /** The step a fault was applied by, else an open remediation. */
  private ownerOfApply(f: FaultRef): { ctx: Context; lastAt: number } | undefined {
    if (f.remediation && this.remediation) return this.remediation;
    return [...this.steps.values()].reverse().find((s) => s.label === f.step) ?? this.remediation;
  }

  private child(name: string, at: number, attributes: Attributes, parent: Context | undefined): Span | undefined {
    if (!this.root) return undefined;
    return this.tracer.startSpan(name, { startTime: at, attributes }, parent ?? this.rootCtx);
  }
}
