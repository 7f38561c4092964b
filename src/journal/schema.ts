import { z } from 'zod';
import { EXIT, KrError, quote } from '../core/errors.js';
import { durationsAsText } from '../core/zod-helpers.js';
import type { Json } from '../contract/action.js';
import { checkInventory } from '../inventory/load.js';
import { Inventory } from '../inventory/schema.js';
import { RUN_STATUS, type RetriedOp } from './outcomes.js';
import type { JournalRecord } from './journal.js';

/**
 * The shape of every journal record (src/journal/journal.ts), for a journal that comes from somewhere else than this
 * machine's state dir: the cluster's copy, checked by `recover --from-cluster` before anything in it runs. Fields
 * absent in journals of older versions are optional, as in the types.
 */
const json: z.ZodType<Json> = z.lazy(() =>
  z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(json), z.record(z.string(), json)]),
);
const at = z.number().finite();
const id = z.string().min(1);
const ms = z.number().int().min(0);
const moduleId = z.string().regex(/^[a-z][a-z0-9-]*$/);
const version = z.string().optional();

/** Every op, so that a new one cannot be left out here (the compiler says so). */
const OPS: Record<RetriedOp, true> = {
  revert: true,
  disarm: true,
  keepalive: true,
  arm: true,
  prepare: true,
  preflight: true,
  settle: true,
  apply: true,
  leave: true,
  lock: true,
  agents: true,
};
const status = z.enum(Object.keys(RUN_STATUS) as [keyof typeof RUN_STATUS]);

const RunRecordSchema = z.strictObject({
  type: z.literal('run'),
  at,
  runId: id,
  runbookFile: z.string(),
  runbookName: z.string(),
  inventoryFile: z.string(),
  // checked as an inventory file is, below
  inventory: z.record(z.string(), z.unknown()),
  kubeconfig: z.string().optional(),
  context: z.string(),
  allowContexts: z.array(z.string()).optional(),
  lockNamespace: z.string().optional(),
  faultTtlMs: ms,
  remediationTtlMs: ms.optional(),
  waitFor: z.strictObject({ probe: moduleId, with: z.record(z.string(), z.unknown()), withinMs: ms }).optional(),
  pid: z.number().int(),
  host: z.string(),
  version,
});

const JournalRecordSchema = z.discriminatedUnion('type', [
  RunRecordSchema,
  z.strictObject({
    type: z.literal('prepared'),
    at,
    faultId: id,
    action: moduleId,
    node: id.optional(),
    step: z.string(),
    remediation: z.boolean(),
    state: z.record(z.string(), json),
    deadman: z.boolean(),
    version,
  }),
  z.strictObject({ type: z.literal('applied'), at, faultId: id, state: z.record(z.string(), json), version }),
  z.strictObject({ type: z.literal('apply-failed'), at, faultId: id, error: z.string(), version }),
  z.strictObject({
    type: z.literal('attempt'),
    at,
    op: z.enum(Object.keys(OPS) as [RetriedOp]),
    attempt: z.number().int().min(1),
    error: z.string(),
    transient: z.string().optional(),
    retryInMs: ms.optional(),
    faultId: id.optional(),
    node: id.optional(),
    version,
  }),
  z.strictObject({
    type: z.literal('reverted'),
    at,
    faultId: id,
    by: z.enum(['executor', 'recover']),
    attempts: z.number().int().min(0).optional(),
    version,
  }),
  z.strictObject({
    type: z.literal('revert-failed'),
    at,
    faultId: id,
    error: z.string(),
    attempts: z.number().int().min(0).optional(),
    version,
  }),
  z.strictObject({ type: z.literal('disarm-failed'), at, faultId: id, node: id, error: z.string(), version }),
  z.strictObject({ type: z.literal('left-in-place'), at, faultId: id, reason: z.string(), version }),
  z.strictObject({ type: z.literal('end'), at, status, version }),
]);
/** Per record type, whether the schema has exactly the fields of its type in journal.ts (and `version`). */
type Fields<U, T> = U extends { type: T } ? keyof U : never;
type Shaped = z.output<typeof JournalRecordSchema>;
type SameFields<T> = [Fields<JournalRecord, T> | 'version'] extends [Fields<Shaped, T>]
  ? [Fields<Shaped, T>] extends [Fields<JournalRecord, T> | 'version']
    ? true
    : false
  : false;
/** Does not compile when a record type gains or loses a field the schema does not: a new field is added here too. */
type _EveryRecordChecked = { [T in JournalRecord['type']]: SameFields<T> } extends { [T in JournalRecord['type']]: true } ? true : never;
const _everyRecordChecked: _EveryRecordChecked = true;

const refuse = (where: string, why: string) => new KrError('JOURNAL_INVALID', `${where}: ${why}; nothing was run`, { exit: EXIT.invalid });

/**
 * Checks a journal's text as strictly as a file the user wrote: every line a record of the right shape (no torn
 * line), one run record first and for `runId`, its inventory valid by the inventory file's own schema, every fault a
 * record names prepared before, on a node of that inventory. KrError JOURNAL_INVALID (exit 2) naming `where` and the
 * line otherwise.
 */
export async function checkJournalText(text: string, where: string, runId: string): Promise<void> {
  const lines = text.split('\n');
  if (lines.at(-1) === '') lines.pop();
  const faults = new Set<string>();
  let nodes: Set<string> | undefined;
  for (const [i, line] of lines.entries()) {
    const at = `line ${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw refuse(where, `${at} is not JSON: ${quote(line, 80)}`);
    }
    const parsed = JournalRecordSchema.safeParse(value);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw refuse(where, `${at} is not a journal record: ${issue.path.join('.') || 'the record'}: ${issue.message}`);
    }
    const r = parsed.data;
    if (i === 0 && r.type !== 'run') throw refuse(where, `${at} is a "${r.type}" record, not the run record`);
    if (r.type === 'run') {
      if (i !== 0) throw refuse(where, `${at} is a second run record`);
      if (r.runId !== runId) throw refuse(where, `${at}: the run record is of run ${quote(r.runId)}, not ${quote(runId)}`);
      nodes = await inventoryNodes(r.inventory, where);
      continue;
    }
    // the schema's records are the journal's (the run record's inventory aside): the compiler keeps the two together
    const record: JournalRecord = r;
    if (record.type === 'prepared') {
      if (faults.has(record.faultId)) throw refuse(where, `${at} prepares fault ${quote(record.faultId)} a second time`);
      if (record.node !== undefined && !nodes!.has(record.node))
        throw refuse(where, `${at}: node ${quote(record.node)} is not in the journal's inventory`);
      faults.add(record.faultId);
    } else if ('faultId' in record && record.faultId !== undefined && !faults.has(record.faultId))
      throw refuse(where, `${at}: fault ${quote(record.faultId)} was not prepared before`);
  }
  if (!nodes) throw refuse(where, 'it has no run record');
}

/** The run record's inventory, checked by the inventory file's schema (its durations written back as text first). */
async function inventoryNodes(inventory: unknown, where: string): Promise<Set<string>> {
  const file = `${where} (its inventory)`;
  const checked = await checkInventory(JSON.stringify(durationsAsText(Inventory, inventory)), file);
  if (!checked.ok) {
    const first = checked.problems[0]!;
    throw refuse(where, `its inventory is not valid: ${first.path ? `${first.path}: ` : ''}${first.message}`);
  }
  return new Set(checked.value.inventory.spec.nodes.map((n) => n.name));
}
