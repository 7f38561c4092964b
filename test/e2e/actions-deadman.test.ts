import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { series } from '../../src/kube/prometheus.js';
import { readLimitsScript, type IoTarget } from '../../src/actions/parts/cgroup-io.js';
import { DEADMAN_MARGIN_MS } from '../../src/engine/deadman.js';
import { until } from './helpers/lab.js';
import { BIN, cliLab, killAfterEach } from './helpers/cli-lab.js';
import { labContext, type LabContext } from './helpers/lab-context.js';
import { countLoadApart, loadIdentitiesLeft } from './helpers/overload.js';
import { writeRunbookYaml } from './helpers/runbook-file.js';
import { deadmanFired, deadmanRecords, journalEntries, untilJournalApplied, type AppliedFault } from './helpers/kills.js';

/**
 * The executor killed with SIGKILL after each apply of four kinds of fault, as its journal records it: every node-side
 * dead-man fires and reverts its own fault within faultTtl + DEADMAN_MARGIN_MS of the last keepalive, as the node's own
 * record shows; and, with a long faultTtl,
 * `kube-runbook recover` reverts them at once. load-apiserver `from: nodes`
 * likewise: the nodes' loads stop within faultTtl + 5 s; `from: executor`, the identity the run made is deleted by the
 * executor's exit watcher moments after the kill (and, with the watcher killed too, stays until `recover`).
 */
const INSTANCE = 'act2';
const fx = cliLab(INSTANCE);
let child: ChildProcess | undefined;

killAfterEach(() => child);

const sleep = (ms: number) => realClock.sleep(ms);

function runbook(name: string, faultTtl: string): string {
  return writeRunbookYaml(
    fx.work,
    name,
    fx.lab.context,
    `faultTtl: ${faultTtl}, maxUnavailable: {worker: 2}`,
    `    - {name: cut node-1 off, action: block-kubelet-egress, with: {nodes: {names: [node-1]}}}
    - {name: stop node-2's kubelet, action: stop-kubelet, with: {nodes: {names: [node-2]}}}
    - {name: hold, wait: 5m}
`,
  );
}

const BOTH_APPLIED = [
  { action: 'block-kubelet-egress', node: 'node-1' },
  { action: 'stop-kubelet', node: 'node-2' },
];

/** Starts `kube-runbook run`; resolves once its journal records every fault of `applied` (or that many) applied. */
function startRun(file: string, applied: { action: string; node?: string }[] | number = BOTH_APPLIED) {
  const c = spawn(process.execPath, [BIN, 'run', file, '-i', fx.lab.inventoryFile, '--yes', '-o', 'text'], {
    env: fx.env(),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child = c;
  let out = '';
  c.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  c.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return untilJournalApplied({ out: () => out, ended: () => c.exitCode !== null || c.signalCode !== null }, applied);
}

const sh = (node: string, script: string) => fx.nodes.exec(node, script, { timeoutMs: 20_000 });
/** A node's own shell, for its dead-man records. */
const onNode = (node: string) => async (script: string) => (await sh(node, script)).stdout;
const chainGone = async () => !(await sh('node-1', 'iptables -w -S')).stdout.includes('KR-EGRESS');
const kubeletBack = async () => (await sh('node-2', `${fx.lab.stateDir}/nodes/node-2/kubelet/health`)).code === 0;
describe('executor killed with SIGKILL at each point of the apply sequence', () => {
  /**
   * Four kinds of fault, two of them on cp-1: the scheduler's revert waits for its health, which etcd's throttled disk
   * keeps away; the throttle's revert must not wait for it. Round k SIGKILLs the executor as soon as its journal records
   * the k-th fault applied (the next one's prepare, arm or apply may be under way: it goes on without the executor),
   * once every applied fault is seen in place on its node; then, without `recover`, reads each fault from its node
   * until faultTtl + DEADMAN_MARGIN_MS after the kill, and each dead-man's firing from the node's own record.
   */
  const TTL_S = 10;
  const FAULTS = ['block-kubelet-egress', 'stop-kubelet', 'throttle-etcd-disk', 'stop-scheduler'];

  function allFour(): string {
    return writeRunbookYaml(
      fx.work,
      'deadman-all',
      fx.lab.context,
      `faultTtl: ${TTL_S}s, maxUnavailable: {worker: 2}`,
      `    - {name: cut node-1 off, action: block-kubelet-egress, with: {nodes: {names: [node-1]}}}
    - {name: stop node-2's kubelet, action: stop-kubelet, with: {nodes: {names: [node-2]}}}
    - {name: slow etcd's disk, action: throttle-etcd-disk, with: {writeIops: 2, writeBps: 64Ki}}
    - {name: stop the scheduler, action: stop-scheduler}
    - {name: hold, wait: 5m}
`,
    );
  }

  type Fault = Pick<AppliedFault, 'faultId' | 'action' | 'node' | 'state'>;

  /** Whether the fault is in place now, seen from its node. */
  async function inPlace(f: Fault): Promise<boolean> {
    const s = f.state;
    const dir = (node: string, service: string) => `${fx.lab.stateDir}/nodes/${node}/${service}`;
    switch (f.action) {
      case 'block-kubelet-egress':
        return (await sh(f.node!, 'iptables -w -S')).stdout.includes(String(s.chain));
      case 'stop-kubelet':
        return (await sh(f.node!, `${dir(f.node!, 'kubelet')}/status`)).code !== 0;
      case 'stop-scheduler':
        return (await sh(f.node!, `${dir(f.node!, 'kube-scheduler')}/status`)).code !== 0;
      case 'throttle-etcd-disk': {
        const r = await sh(f.node!, readLimitsScript(s as unknown as IoTarget));
        if (r.code !== 0) throw new Error(`cannot read etcd's io limits on ${f.node}: ${r.stderr}`);
        return /=\d/.test(r.stdout);
      }
      default:
        throw new Error(`no check for ${f.action}`);
    }
  }

  it(`every fault is reverted by its node's dead-man within faultTtl + ${DEADMAN_MARGIN_MS / 1000} s of the last keepalive, killed after each of ${FAULTS.length} applies`, async () => {
    const file = allFour();
    const latencies: number[] = [];
    const perFault = new Map<string, number[]>();
    const t0 = realClock.now();
    for (let k = 1; k <= FAULTS.length; k++) {
      const { runId, file: journalFile, applied } = await startRun(file, k);
      // the apply confirmed: the journal says so, and each node shows its fault in place
      expect(
        applied.map((f) => f.action),
        `round ${k}: the faults applied before the kill`,
      ).toEqual(FAULTS.slice(0, applied.length));
      for (const f of applied) expect(await inPlace(f), `round ${k}: ${f.action} on ${f.node} in place before the kill`).toBe(true);
      child!.kill('SIGKILL');
      const killedAt = realClock.now();
      const prepared: Fault[] = journalEntries(journalFile)
        .filter((r) => r.type === 'prepared')
        .map((r) => ({ faultId: r.faultId!, action: r.action!, node: r.node, state: r.state! }));
      // every fault prepared may be in place (an apply under way at the kill goes on without the executor): watch them
      // all until each is out of place, or the bound
      const revertedAt = new Map<string, number>();
      const seenInPlace = new Set<string>();
      const now = new Set<string>();
      const bound = killedAt + TTL_S * 1000 + DEADMAN_MARGIN_MS;
      for (;;) {
        for (const f of prepared) {
          if (await inPlace(f)) {
            seenInPlace.add(f.faultId);
            now.add(f.faultId);
          } else if (now.delete(f.faultId) || !revertedAt.has(f.faultId)) revertedAt.set(f.faultId, realClock.now());
        }
        if (!now.size || realClock.now() > bound) break;
        await sleep(250);
      }
      const line = prepared.map((f) => {
        const at = revertedAt.get(f.faultId)!;
        const state = now.has(f.faultId)
          ? 'STILL APPLIED'
          : seenInPlace.has(f.faultId) || applied.some((a) => a.faultId === f.faultId)
            ? `${((at - killedAt) / 1000).toFixed(1)} s`
            : 'never seen applied';
        return `${f.action}@${f.node}: ${state}`;
      });
      console.log(`round ${k}: killed once applied #${k} was journaled (run ${runId}); ${line.join(', ')}`);
      expect([...now], `round ${k}: faults still in place ${TTL_S} s + margin after the kill`).toEqual([]);
      // each applied fault: its node's record says its dead-man fired within faultTtl + margin of the last keepalive
      // (no later than the kill) and its revert succeeded (the scheduler's waits for its health)
      for (const f of applied) {
        const d = await deadmanFired(onNode(f.node!), runId, f.faultId, { ttlMs: TTL_S * 1000, killedAt, timeoutMs: 150_000 });
        // the watcher polls each second and counts the keepalive's age in whole seconds
        expect(d.firedAt! - d.keepalive, `round ${k}: ${f.faultId}'s dead-man fired after the last keepalive`).toBeLessThanOrEqual(
          TTL_S + 2,
        );
        expect(await inPlace(f), `round ${k}: ${f.action} on ${f.node} after its dead-man's revert`).toBe(false);
        const at = revertedAt.get(f.faultId)! - killedAt;
        latencies.push(at);
        perFault.set(f.action, [...(perFault.get(f.action) ?? []), at]);
        console.log(`  ${f.action}@${f.node}: fired ${d.firedAt! - d.keepalive} s after its last keepalive, revert exit ${d.exit}`);
      }
      // a fault prepared but not yet applied at the kill: its dead-man, if armed, ends its revert too, successfully
      await until(
        `round ${k}: every dead-man's revert ended`,
        async () => (await deadmanRecords(onNode('cp-1'), runId)).every((d) => d.fired && d.exit !== undefined),
        150_000,
        500,
      );
      for (const d of await deadmanRecords(onNode('cp-1'), runId)) expect(d.exit, `round ${k}: ${d.faultId}'s revert exit`).toBe('0');
      // recover finds nothing left to do but the dead-men's records; it also releases the run lock for the next round
      const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
      expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    }
    const ms = (v: number[]) => {
      const sorted = [...v].sort((a, b) => a - b);
      return `p50 ${((sorted[Math.floor((sorted.length - 1) / 2)] ?? 0) / 1000).toFixed(1)} s, max ${((sorted.at(-1) ?? 0) / 1000).toFixed(1)} s (${v.length})`;
    };
    console.log(
      `dead-man rounds: revert latency after the kill: ${ms(latencies)}; faultTtl ${TTL_S} s; ${((realClock.now() - t0) / 1000).toFixed(0)} s for ${FAULTS.length} rounds`,
    );
    for (const [action, v] of perFault) console.log(`  ${action}: ${ms(v)}`);
  }, 900_000);
});

describe('executor killed with SIGKILL right after apply', () => {
  it('`kube-runbook recover` reverts them at once and disarms the dead-men', async () => {
    const { runId } = await startRun(runbook('act-recover', '10m'));
    expect(await chainGone(), "node-1's chain, once the journal records it applied").toBe(false);
    expect(await kubeletBack(), "node-2's kubelet, once the journal records its stop applied").toBe(false);
    child!.kill('SIGKILL');
    await sleep(500);
    expect(await chainGone()).toBe(false);
    const t0 = realClock.now();
    // at once: the operator who killed it says so (--force), since its lock was renewed a moment ago
    const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    const took = realClock.now() - t0;
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
    expect(await chainGone()).toBe(true);
    expect(await kubeletBack()).toBe(true);
    console.log(`recover: both faults reverted in ${(took / 1000).toFixed(1)} s (faultTtl 10 m)`);
    const armed = await sh('node-1', `ls -d /var/lib/kube-runbook/deadman/${runId}/* 2>/dev/null | grep -v '[.]fired$' || true`);
    expect(armed.stdout.trim(), 'no dead-man left armed').toBe('');
  });
});

describe('load-apiserver from: nodes, executor killed with SIGKILL', () => {
  /**
   * Counts apart the load's requests (pods, of kr-load's ServiceAccounts, where the run makes the load's identity); not
   * the executor's reviews as that identity, nor the dead-man's removal of it.
   */
  const FS = { name: 'kr-nodeload-e2e', subject: { group: 'system:serviceaccounts:kr-load' }, resources: ['pods'] };
  let lc: LabContext;
  const kube = () => lc.ctx.kube;
  const dispatched = async () =>
    series((await kube().raw('/metrics', { timeoutMs: 5000 })).body, 'apiserver_flowcontrol_dispatched_requests_total')
      .filter((x) => x.labels.flow_schema === FS.name)
      .reduce((n, x) => n + x.value, 0);
  /** The processes of this run's loads (the nodes are namespaces of one machine: one process table). */
  const loads = async (runId: string) =>
    (await sh('node-1', `pgrep -f /var/lib/kube-runbook/load/${runId}/ || true`)).stdout.trim().split('\n').filter(Boolean);
  /** The answers curl got on a node so far. */
  const answered = async (node: string, runId: string) =>
    Number(
      (await sh(node, `cat /var/lib/kube-runbook/load/${runId}/*-${node}/codes.* 2>/dev/null | grep -c '^200$' || true`)).stdout.trim(),
    );

  /** `recover` of a killed run: nothing left to revert by now; it releases the run lock for the next test. */
  const release = (runId: string) => {
    const r = spawnSync(process.execPath, [BIN, 'recover', runId, '--force'], { env: fx.env(), encoding: 'utf8', timeout: 120_000 });
    expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  };
  beforeAll(async () => {
    lc = await labContext(fx.lab);
    await countLoadApart(kube(), FS);
  });
  afterAll(async () => lc?.close());

  it("each node sends its share as the ServiceAccount; the node-side dead-man stops every node's load within faultTtl + 5 s", async () => {
    const ttlMs = 10_000;
    const file = join(fx.work, 'nodeload.yaml');
    writeFileSync(
      file,
      `apiVersion: kube-runbook/v1
kind: Runbook
metadata: {name: nodeload}
spec:
  safety: {allowContexts: [${JSON.stringify(fx.lab.context)}], faultTtl: 10s, maxDuration: 10m, maxUnavailable: {worker: 2}}
  steps:
    - name: load from the nodes
      action: load-apiserver
      with:
        from: nodes
        nodes: {names: [node-1, node-2]}
        qps: 20
        concurrency: 4
        userAgent: kubelet-liveness-like
        requests: [{verb: list, resource: pods}]
    - {name: hold, wait: 5m}
`,
    );
    const before = await dispatched();
    const { runId, applied } = await startRun(file, [
      { action: 'load-apiserver', node: 'node-1' },
      { action: 'load-apiserver', node: 'node-2' },
    ]);
    const appliedAt = realClock.now();
    await sleep(2000);
    expect((await loads(runId)).length, 'curl loops running on the nodes').toBeGreaterThanOrEqual(4);
    expect(await answered('node-1', runId), 'answers node-1 got').toBeGreaterThan(0);
    expect(await answered('node-2', runId), 'answers node-2 got').toBeGreaterThan(0);
    expect(await dispatched(), 'requests its FlowSchema dispatched').toBeGreaterThan(before);
    child!.kill('SIGKILL');
    const t0 = realClock.now();
    const killedAt = t0;
    // the load ends by itself faultTtl after it started, and the dead-man, faultTtl after the last keepalive, removes its files
    const loadDirs = async () => (await sh('node-1', `ls /var/lib/kube-runbook/load/${runId} 2>/dev/null || true`)).stdout.trim();
    while (((await loads(runId)).length || (await loadDirs())) && realClock.now() - t0 < ttlMs + 5000) await sleep(200);
    const stoppedAt = realClock.now();
    const took = stoppedAt - t0;
    const dispatchedBy = await dispatched();
    console.log(
      `load-apiserver from nodes: ${dispatchedBy - before} requests dispatched; stopped and cleaned ${(took / 1000).toFixed(1)} s after SIGKILL (faultTtl 10 s)`,
    );
    expect(await loads(runId), 'load processes left').toEqual([]);
    expect(took).toBeLessThanOrEqual(ttlMs + 5000);
    expect(await loadDirs(), 'load files (the token among them) left').toBe('');
    // each node's own record: its dead-man fired within faultTtl + 10 s of the last keepalive, its revert exited 0
    for (const f of applied) await deadmanFired(onNode(f.node!), runId, f.faultId, { ttlMs, killedAt, timeoutMs: 30_000 });
    // no executor is left to remove the load's identity: the dead-men deleted its ClusterRole, and with it the rest
    await until('the identity garbage-collected', async () => (await loadIdentitiesLeft(kube())).length === 0, 15_000, 500).catch(() => {});
    expect(await loadIdentitiesLeft(kube()), "the load's identity, faultTtl + 20 s after SIGKILL").toEqual([]);
    // qps 20 from the applies (a second before the run said so, at most) until the loads stopped, the 2 s before the kill
    // and up to faultTtl after it (the 4 curl processes may each start one more as it ends), and each kind of request
    // once on each node before its load starts
    const loadSeconds = (stoppedAt - appliedAt) / 1000 + 1;
    expect(dispatchedBy - before, `requests within qps 20 over ${loadSeconds.toFixed(1)} s`).toBeLessThanOrEqual(
      Math.ceil(20 * loadSeconds) + 4 + 2,
    );
    release(runId);
  });

  /** A run holding a load from the executor as an identity it made (and a Lease of its own the load patches). */
  const executorLoad = (name: string) =>
    writeRunbookYaml(
      fx.work,
      name,
      fx.lab.context,
      'faultTtl: 10s',
      `    - name: load from the executor
      action: load-apiserver
      with:
        qps: 10
        concurrency: 2
        requests: [{verb: list, resource: pods}, {verb: patch, resource: leases}]
    - {name: hold, wait: 5m}
`,
    );
  const ownLeases = async (runId: string) =>
    (
      await kube().json!<{ items: { metadata: { name: string; labels?: Record<string, string> } }[] }>(
        '/apis/coordination.k8s.io/v1/namespaces/kr-load/leases',
        { timeoutMs: 10_000 },
      )
    ).items.filter((l) => l.metadata.labels?.['kube-runbook/run'] === runId);
  const watcher = (runId: string) => spawnSync('pgrep', ['-f', `__exit-watch ${runId}`], { encoding: 'utf8' }).stdout.trim();

  it("from the executor: its exit watcher deletes the load's identity moments after a SIGKILL; with the watcher killed too, it stays until recover", async () => {
    // guarded: the executor alone killed
    const { runId } = await startRun(executorLoad('execload'), [{ action: 'load-apiserver' }]);
    expect(await loadIdentitiesLeft(kube()), 'the identity while the load runs').not.toEqual([]);
    expect((await ownLeases(runId)).length, "the load's own Lease").toBe(1);
    expect(watcher(runId), 'the exit watcher runs').not.toBe('');
    child!.kill('SIGKILL');
    const t0 = realClock.now();
    await until('the identity deleted', async () => (await loadIdentitiesLeft(kube())).length === 0, 20_000, 250).catch(() => {});
    const took = realClock.now() - t0;
    expect(await loadIdentitiesLeft(kube()), "the load's identity, 20 s after SIGKILL").toEqual([]);
    expect(await ownLeases(runId), "the load's own Lease").toEqual([]);
    await until('the watcher ended', async () => watcher(runId) === '', 10_000, 250).catch(() => {});
    expect(watcher(runId), 'the exit watcher ended').toBe('');
    console.log(`load-apiserver from the executor: identity deleted ${(took / 1000).toFixed(1)} s after SIGKILL`);
    release(runId);

    // unguarded: the watcher killed with the executor: nothing removes the identity, which can still be impersonated
    const { runId: bare } = await startRun(executorLoad('execload-bare'), [{ action: 'load-apiserver' }]);
    spawnSync('pkill', ['-KILL', '-f', `__exit-watch ${bare}`]);
    child!.kill('SIGKILL');
    await sleep(15_000);
    const left = await loadIdentitiesLeft(kube());
    expect(left, 'the identity 15 s after both were killed').toEqual(
      expect.arrayContaining([expect.stringMatching(/^ClusterRole\/kube-runbook-load-/), expect.stringMatching(/^ServiceAccount\//)]),
    );
    release(bare);
    await until('the identity deleted by recover', async () => (await loadIdentitiesLeft(kube())).length === 0, 20_000, 250).catch(
      () => {},
    );
    expect(await loadIdentitiesLeft(kube()), 'the identity after recover').toEqual([]);
  });
});
