import { z } from 'zod';
import { NODE_FACT_KINDS, type NodeFactKind } from '../contract/node-facts.js';
import { RUN_STATUS } from '../engine/events.js';

/**
 * The version of report.json's shape. It grows by one when a field changes meaning or goes away (a new optional field
 * does not change it); `kube-runbook report` refuses a report of a newer version than its own.
 */
export const REPORT_VERSION = 1;

const at = z.string().describe('ISO 8601 time');
const eviction = z.object({ at, pod: z.string(), node: z.string() }).describe('the eviction its probe predicted first at that reading');
const numbers = z.record(z.string(), z.number()).describe('the numbers its probe declares of the value (meta.numbers), charted as curves');
const reading = z.object({
  at,
  status: z.string(),
  detail: z.string(),
  value: z.unknown(),
  numbers: numbers.optional(),
  eviction: eviction.optional(),
});

const faultRef = z.object({
  faultId: z.string(),
  action: z.string(),
  node: z.string().optional(),
  step: z.string(),
  remediation: z.boolean(),
  manualRevert: z.string().optional(),
});

const retriedOp = z.enum(['revert', 'disarm', 'keepalive', 'arm', 'prepare', 'preflight', 'settle', 'apply', 'leave', 'lock', 'agents']);
const stepKind = z.enum(['action', 'expect', 'wait', 'confirm', 'revert', 'parallel']);
const stepStatus = z.enum(['passed', 'failed', 'aborted', 'skipped']);
const runStatus = z.enum(Object.keys(RUN_STATUS) as [keyof typeof RUN_STATUS, ...(keyof typeof RUN_STATUS)[]]);

const nodeSeries = z.object({
  node: z.string(),
  lease: z.array(z.object({ at, ageMs: z.number().nullable(), stale: z.boolean() })),
  ready: z.array(z.object({ at, status: z.string() })),
  taints: z.array(z.object({ at, keys: z.array(z.string()) })),
  deleted: z.array(z.object({ at, pod: z.string(), cause: z.string() })),
  dropped: z.number().optional(),
});

/** report.json, as a run writes it and `kube-runbook report` reads it back. */
export const Report = z.object({
  reportVersion: z.literal(REPORT_VERSION),
  runId: z.string(),
  runbook: z.string(),
  context: z.string(),
  status: z.union([runStatus, z.literal('running')]),
  reason: z.string(),
  startedAt: z.string(),
  endedAt: at.optional(),
  durationMs: z.number().optional(),
  preflight: z.array(z.object({ check: z.string(), ok: z.boolean(), detail: z.string() })),
  steps: z.array(
    z.object({
      index: z.string(),
      name: z.string(),
      kind: stepKind,
      startedAt: at,
      endedAt: at.optional(),
      status: stepStatus.optional(),
      detail: z.string().optional(),
      readings: z.array(reading).optional(),
    }),
  ),
  guardFirings: z.array(z.object({ at, guard: z.string(), response: z.string(), detail: z.string() })),
  guardTransitions: z.array(z.object({ at, guard: z.string(), status: z.string(), detail: z.string() })),
  guardReadings: z.record(z.string(), z.array(reading)),
  readingsThinned: z.record(z.string(), z.object({ seen: z.number(), kept: z.number(), every: z.number() })).optional(),
  faults: z.array(
    faultRef.extend({
      appliedAt: at.optional(),
      revertedAt: at.optional(),
      error: z.string().optional(),
      status: z.enum(['applied', 'reverted', 'apply-failed', 'revert-failed']),
      attempts: z.number().optional(),
      retried: z.array(z.string()).optional(),
    }),
  ),
  attempts: z.array(
    z.object({
      op: retriedOp,
      attempt: z.number(),
      error: z.string(),
      transient: z.string().optional(),
      retryInMs: z.number().optional(),
      at,
      faultId: z.string().optional(),
      fault: faultRef.optional(),
      node: z.string().optional(),
      what: z.string().optional(),
    }),
  ),
  attemptsDropped: z.number().optional(),
  rollback: z.object({ startedAt: at, endedAt: at.optional(), reason: z.string(), complete: z.boolean().optional() }).optional(),
  remaining: z.array(faultRef),
  recoverCommand: z.string().optional(),
  warnings: z.array(z.object({ at, message: z.string() })).optional(),
  observations: z.record(z.string(), z.unknown()),
  nodes: z.array(nodeSeries),
  nodesLeftOut: z.number().optional(),
  nodeFacts: z.array(z.enum(Object.keys(NODE_FACT_KINDS) as [NodeFactKind, ...NodeFactKind[]])).optional(),
  objectives: z
    .array(
      z.object({
        name: z.string(),
        status: z.enum(['running', 'met', 'missed', 'unmeasured']),
        withinMs: z.number(),
        startedAt: at.optional(),
        endedAt: at.optional(),
        recoveryMs: z.number().optional(),
        nodes: z
          .object({
            recovered: z.number(),
            p50Ms: z.number().optional(),
            maxMs: z.number().optional(),
            slowest: z.string().optional(),
            notRecovered: z.number(),
            notRecoveredNames: z.array(z.string()),
          })
          .optional(),
        detail: z.string(),
      }),
    )
    .optional(),
});
