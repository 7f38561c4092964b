/**
 * What an SRE asks before trusting a run on a cluster they care about, on the lab's real control plane:
 * - the executor SIGKILLed while the controller-manager is frozen as a remediation and leases are stale: the faults
 *   are reverted by their dead-men, the controller-manager stays stopped (its dead-man waits for remediationTtl),
 *   `recover` restarts it only once every lease is fresh, and no pod is evicted;
 * - SIGHUP (the session dropped, its terminal gone) during a fault: the run rolls back and exits;
 * - a node rebooted with a component stopped by a fault: its boot step brings it back;
 * - the executor SIGKILLed with taint eviction disabled and the kubelets stopped: the kubelets come back first (their
 *   dead-men, faultTtl), and the node-side dead-man of disable-taint-eviction restores evictions only once every
 *   node is Ready again and untainted, so no pod is evicted;
 * - a remediation left in place (rollback.waitFor did not hold) keeps its node-side dead-man, and the run lock.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { realClock } from '../../src/core/clock.js';
import { BOOT_ROOT } from '../../src/nodes/boot-dir.js';
import { DEADMAN_ROOT } from '../../src/nodes/keepalive.js';
import { readRuntime } from '../../packages/lab/src/index.js';
import { LAB_VERSION, cli, coreApi, startLab, stopLab, until, type LabInfo, labCli } from './helpers/lab.js';

const INSTANCE = 'sf1';
const BIN = resolve('bin/kube-runbook.js');
let lab: LabInfo;
let work: string;
let child: ChildProcess | undefined;

beforeAll(async () => {
  lab = await startLab({ instance: INSTANCE, nodes: 2 });
  work = mkdtempSync(join(tmpdir(), 'kr-e2e-safety-'));
}, 1_200_000);

afterEach(() => {
  // a test that failed half-way: its run killed and whatever it left reverted, so the next test is not refused
  if (child && child.exitCode === null) {
    child.kill('SIGKILL');
    spawnSync(process.execPath, [BIN, 'recover', '--all', '--force'], { env: env(), encoding: 'utf8', timeout: 300_000 });
  }
});

afterAll(async () => {
  if (work) spawnSync(process.execPath, [BIN, 'recover', '--all', '--force'], { env: env(), encoding: 'utf8', timeout: 300_000 });
  await stopLab(INSTANCE);
  if (work) rmSync(work, { recursive: true, force: true });
});

const env = () => ({ ...process.env, KUBE_RUNBOOK_STATE_DIR: join(work, 'state'), NO_COLOR: '1' });
const service = (node: string, svc: string, script: 'status' | 'health') => join(lab.stateDir, 'nodes', node, svc, script);
const running = (node: string, svc: string) => spawnSync(service(node, svc, 'status')).status === 0;
const healthy = (node: string, svc: string) => spawnSync(service(node, svc, 'health')).status === 0;

function writeRunbook(name: string, body: string): string {
  const file = join(work, `${name}.yaml`);
  writeFileSync(file, `apiVersion: kube-runbook/v1\nkind: Runbook\nmetadata: {name: ${name}}\n${body}`);
  return file;
}

/** Stops node-2's kubelet and holds (faultTtl 10m: only the executor, a reboot or recover reverts it). */
const stopKubeletRunbook = (name: string) =>
  writeRunbook(
    name,
    `spec:
  safety: {allowContexts: [${JSON.stringify(lab.context)}], faultTtl: 10m, maxDuration: 10m}
  steps:
    - {name: stop node-2's kubelet, action: stop-kubelet, with: {nodes: {names: [node-2]}}}
    - {name: hold, wait: 5m}
`,
  );

/** Starts `kube-runbook run`; resolves with the run id and the output so far once `ready` matches the output. */
function startRun(file: string, ready: RegExp): Promise<{ runId: string; out: () => string }> {
  return new Promise((resolvePromise, reject) => {
    const c = spawn(process.execPath, [BIN, 'run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text'], {
      env: env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child = c;
    let out = '';
    let runId = '';
    let done = false;
    const onData = (d: Buffer) => {
      out += d.toString();
      runId ||= /run (\S+): /.exec(out)?.[1] ?? '';
      if (!done && ready.test(out)) {
        done = true;
        resolvePromise({ runId, out: () => out });
      }
    };
    c.stdout!.on('data', onData);
    c.stderr!.on('data', onData);
    c.on('exit', (code) => done || reject(new Error(`the run ended (exit ${code}) before ${ready}:\n${out}`)));
  });
}

const exited = (c: ChildProcess) =>
  new Promise<number | null>((r) => (c.exitCode !== null ? r(c.exitCode) : c.once('exit', (code) => r(code))));

/** The demo workload's pods, watched by polling from now on: any pod deleted or replaced is recorded. */
function watchPods(): { stop: () => Promise<{ deleted: string[]; uidsBefore: string[]; uidsAfter: string[] }> } {
  const core = coreApi(lab);
  const deleted = new Set<string>();
  let first: string[] | undefined;
  let last: string[] = [];
  let on = true;
  const loop = (async () => {
    while (on) {
      const pods = (await core.listPodForAllNamespaces().catch(() => undefined))?.items.filter(
        (p) => p.metadata?.namespace !== 'kube-system',
      );
      if (pods) {
        last = pods.map((p) => p.metadata!.uid!).sort();
        first ??= last;
        for (const p of pods) if (p.metadata?.deletionTimestamp) deleted.add(`${p.metadata.namespace}/${p.metadata.name}`);
      }
      await realClock.sleep(500);
    }
  })();
  return {
    stop: async () => {
      on = false;
      await loop;
      return { deleted: [...deleted], uidsBefore: first ?? [], uidsAfter: last };
    },
  };
}

describe(`safety on the lab (Kubernetes ${LAB_VERSION})`, () => {
  it('SIGHUP with the terminal gone: the run rolls back, exits 130, and the fault is reverted', async () => {
    const file = stopKubeletRunbook('hangup');
    const { runId } = await startRun(file, /applied stop-kubelet on node-2/);
    expect(running('node-2', 'kubelet')).toBe(false);
    // the session drops: the terminal is gone (writes fail) and the process gets SIGHUP
    child!.stdout!.destroy();
    child!.stderr!.destroy();
    child!.kill('SIGHUP');
    expect(await exited(child!)).toBe(130);
    expect(healthy('node-2', 'kubelet')).toBe(true);
    const journal = readFileSync(join(work, 'state', 'runs', `${runId}.jsonl`), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; status?: string });
    expect(journal.filter((r) => r.type === 'reverted')).toHaveLength(1);
    expect(journal.at(-1)).toMatchObject({ type: 'end', status: 'interrupted' });
  });

  it('a node rebooted with its kubelet stopped by a fault: the boot step brings the kubelet back', async () => {
    const file = stopKubeletRunbook('reboot');
    const { out } = await startRun(file, /applied stop-kubelet on node-2/);
    const netns = lab.nodes.find((n) => n.name === 'node-2')!.netns;
    expect(readdirSync(join(BOOT_ROOT, netns))).toHaveLength(1);
    const r = await labCli(['reboot', 'node-2', '--instance', INSTANCE, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { killed: number; started: string[]; down: string[]; bootScripts: string[] };
    // the fault's dead-man watcher was one of the node's processes; the kubelet was stopped, so the node left it down
    expect(report.killed).toBeGreaterThan(0);
    expect(report.down).toEqual(['kubelet']);
    expect(report.bootScripts).toHaveLength(1);
    const took = await until('the kubelet back after the reboot', () => healthy('node-2', 'kubelet'), 60_000);
    console.log(`reboot: node-2's kubelet healthy ${(took / 1000).toFixed(1)} s after the boot step started`);
    // the dead-man that fired removed its boot hook (and the node's boot directory, now empty)
    await until('the boot hook removed', () => !existsSync(join(BOOT_ROOT, netns)), 20_000);
    // the executor still runs; its rollback finds the fault reverted and says so
    child!.kill('SIGTERM');
    expect(await exited(child!)).toBe(130);
    expect(out()).toMatch(/the node-side dead-man on node-2 (had already reverted|reverted) f\d+-stop-kubelet-node-2/);
    expect(healthy('node-2', 'kubelet')).toBe(true);
  });

  it('the executor SIGKILLed with the controller-manager frozen as remediation: faults reverted by dead-men, the controller-manager restarted by its own only once every kubelet heartbeats, no pod evicted', async () => {
    const file = writeRunbook(
      'freeze-kill',
      `spec:
  safety: {allowContexts: [${JSON.stringify(lab.context)}], faultTtl: 15s, remediationTtl: 40s, maxDuration: 10m}
  guards:
    - {name: eviction forecast, probe: eviction-forecast, with: {margin: 20s}, onViolation: remediate, onUnknown: hold, unknownFor: 30s}
  steps:
    - {name: cut node-1 off, action: block-kubelet-egress, with: {nodes: {names: [node-1]}}}
    - {name: hold, wait: 5m}
  remediation:
    - {action: stop-controller-manager, with: {nodes: {role: control-plane}}}
  rollback:
    waitFor: {probe: node-leases, with: {nodes: all, staleAfter: 6s}}
    within: 3m
`,
    );
    const pods = watchPods();
    const { runId } = await startRun(file, /applied stop-controller-manager on cp-1/);
    expect(running('cp-1', 'kube-controller-manager')).toBe(false);
    child!.kill('SIGKILL');
    const killedAt = realClock.now();
    await exited(child!);
    // a kubelet the run never touched goes silent too, and stays so past remediationTtl
    expect(spawnSync(join(lab.stateDir, 'nodes', 'node-2', 'kubelet', 'stop')).status).toBe(0);

    // the fault's dead-man (faultTtl 15 s) reverts the egress block; node-1's lease is renewed again
    const egress = await until(
      'the egress block reverted by the dead-man',
      async () => {
        const r = spawnSync('ip', ['netns', 'exec', lab.nodes.find((n) => n.name === 'node-1')!.netns, 'iptables', '-w', '-S'], {
          encoding: 'utf8',
        });
        return r.status === 0 && !r.stdout.includes('KR-EGRESS');
      },
      60_000,
    );
    console.log(`dead-man: egress block reverted ${(egress / 1000).toFixed(1)} s after SIGKILL (faultTtl 15 s)`);
    // past faultTtl, and past remediationTtl while node-2's kubelet is silent, the controller-manager stays stopped:
    // its dead-man fires at remediationTtl and waits for every node Lease to be renewed
    while (realClock.now() - killedAt < 60_000) {
      expect(
        running('cp-1', 'kube-controller-manager'),
        `controller-manager restarted ${realClock.now() - killedAt} ms after SIGKILL`,
      ).toBe(false);
      await realClock.sleep(1000);
    }
    const fired = () => readdirSync(join(DEADMAN_ROOT, runId)).find((n) => n.includes('stop-controller-manager') && n.endsWith('.fired'));
    const log = () => readFileSync(join(DEADMAN_ROOT, runId, fired() ?? 'none', 'revert.log'), 'utf8');
    expect(fired(), `the controller-manager's dead-man fired (${readdirSync(join(DEADMAN_ROOT, runId)).join(', ')})`).toBeDefined();
    expect(log()).toMatch(/not starting it yet: 1 of \d+ node Lease\(s\) not renewed since the last check: node-2/);
    // node-2's kubelet is back: the controller-manager follows, after its Lease is renewed
    const kubeletBack = realClock.now();
    expect(spawnSync(join(lab.stateDir, 'nodes', 'node-2', 'kubelet', 'start')).status).toBe(0);
    const cmBack = await until('the controller-manager healthy', () => healthy('cp-1', 'kube-controller-manager'), 90_000);
    expect(log()).toMatch(/kubelets heartbeat \(all \d+ node Lease\(s\) renewed since the last check\): starting it/);
    console.log(
      `dead-man: controller-manager started ${(cmBack / 1000).toFixed(1)} s after node-2's kubelet (${((realClock.now() - killedAt) / 1000).toFixed(0)} s after SIGKILL)`,
    );
    expect(realClock.now()).toBeGreaterThan(kubeletBack);
    // recover finds everything undone by the dead-men and releases the run lock
    const r = await cli(['recover', runId], { env: env(), timeoutMs: 300_000 });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
    // past the lab's toleration (30 s) with the controller running again: nothing evicted, nothing killed
    await realClock.sleep(45_000);
    const seen = await pods.stop();
    expect(seen.deleted, 'pods deleted').toEqual([]);
    expect(seen.uidsAfter, 'pods replaced').toEqual(seen.uidsBefore);
    expect(seen.uidsBefore.length).toBeGreaterThan(0);
    for (const node of ['node-1', 'node-2'])
      expect((await readRuntime(lab.stateDir, node)).kills, `containers killed on ${node}`).toEqual([]);
  });

  it('the executor SIGKILLed with taint eviction disabled and the kubelets stopped: taint eviction comes back only after every kubelet has, no pod evicted', async () => {
    const file = writeRunbook(
      'taint-freeze-kill',
      `spec:
  safety: {allowContexts: [${JSON.stringify(lab.context)}], faultTtl: 30s, remediationTtl: 31s, maxDuration: 10m, maxUnavailable: {worker: "100%"}}
  steps:
    - {name: freeze evictions, action: disable-taint-eviction, with: {nodes: {role: control-plane}}, revertLast: true}
    - {name: stop the kubelets, action: stop-kubelet, with: {nodes: {names: [node-1, node-2]}}}
    - {name: hold, wait: 5m}
`,
    );
    const extraArgs = join(lab.stateDir, 'nodes', 'cp-1', 'kube-controller-manager', 'extra-args');
    const pods = watchPods();
    const { runId } = await startRun(file, /applied stop-kubelet on node-2/);
    expect(existsSync(extraArgs)).toBe(true);
    child!.kill('SIGKILL');
    await exited(child!);

    // every 250 ms: are both nodes Ready, and is taint eviction back (the node-side revert removes extra-args first)?
    const core = coreApi(lab);
    let allReadyAt: number | undefined;
    let restoredAt: number | undefined;
    let notReadySeen = false;
    await until(
      'taint eviction restored by the dead-man',
      async () => {
        const nodes = (await core.listNode().catch(() => undefined))?.items.filter((n) => n.metadata?.name?.startsWith('node-'));
        const ready =
          nodes?.length === 2 && nodes.every((n) => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
        if (nodes && !ready) notReadySeen = true;
        if (ready && allReadyAt === undefined) allReadyAt = realClock.now();
        if (!ready) allReadyAt = undefined;
        if (!existsSync(extraArgs)) restoredAt ??= realClock.now();
        return restoredAt !== undefined;
      },
      120_000,
      250,
    ).catch((e: unknown) => {
      const fired = join(DEADMAN_ROOT, runId, 'f01-disable-taint-eviction-cp-1.fired', 'revert.log');
      throw new Error(
        `${String(e)}; the dead-man's log:\n${existsSync(fired) ? readFileSync(fired, 'utf8') : `(none: ${readdirSync(join(DEADMAN_ROOT, runId)).join(', ')})`}`,
      );
    });
    expect(notReadySeen, 'the nodes went NotReady while their kubelets were stopped').toBe(true);
    expect(allReadyAt, 'every node Ready when taint eviction came back').toBeDefined();
    expect(restoredAt!).toBeGreaterThanOrEqual(allReadyAt!);
    const log = readFileSync(join(DEADMAN_ROOT, runId, 'f01-disable-taint-eviction-cp-1.fired', 'revert.log'), 'utf8');
    expect(log).toMatch(
      /nodes settled \(0 of \d+ node\(s\) not Ready, 0 unreachable\/not-ready NoExecute taint\(s\)\): restoring taint eviction/,
    );
    console.log(
      `dead-man: taint eviction restored ${((restoredAt! - allReadyAt!) / 1000).toFixed(1)} s after every node was Ready; it waited:\n${log
        .split('\n')
        .filter((l) => l.includes('not restoring'))
        .slice(0, 3)
        .join('\n')}`,
    );
    await until('the controller-manager healthy with taint eviction', () => healthy('cp-1', 'kube-controller-manager'), 60_000);
    // past the lab's toleration (30 s) since the nodes were tainted: nothing evicted
    await realClock.sleep(10_000);
    const seen = await pods.stop();
    expect(seen.deleted, 'pods deleted').toEqual([]);
    const r = await cli(['recover', runId], { env: env(), timeoutMs: 120_000 });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  });

  it('a remediation left in place keeps its node-side dead-man (remediationTtl), and its run the lock', async () => {
    const file = writeRunbook(
      'left-in-place',
      `spec:
  safety: {allowContexts: [${JSON.stringify(lab.context)}], faultTtl: 15s, remediationTtl: 10m, maxDuration: 10m}
  steps:
    - {name: freeze evictions, action: disable-taint-eviction, with: {nodes: {role: control-plane}}, revertLast: true}
  rollback:
    waitFor: {probe: node-leases, with: {nodes: all, staleAfter: 1ms}}
    within: 3s
`,
    );
    const r = await cli(['run', file, '-i', lab.inventoryFile, '--yes', '-o', 'text'], { env: env(), timeoutMs: 180_000 });
    expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(4);
    const runId = /run (\S+): /.exec(r.stdout)?.[1] ?? '';
    const dir = join(DEADMAN_ROOT, runId, 'f01-disable-taint-eviction-cp-1');
    // armed, not fired, touched as the run left it: it undoes the remediation 10 min from then
    expect(existsSync(join(dir, 'watch.sh')) && existsSync(join(dir, 'keepalive')), `dead-man of ${runId}`).toBe(true);
    expect(readFileSync(join(dir, 'watcher'), 'utf8').trim()).toBe('detached');
    expect(r.stdout).toMatch(/left in place on cp-1: its node-side dead-man undoes it 10m from now/);
    // and the lock stays held for it: a second run is refused, told how to clear it
    const second = await cli(['run', stopKubeletRunbook('after-left'), '-i', lab.inventoryFile, '--dry-run'], {
      env: env(),
      timeoutMs: 120_000,
    });
    expect(second.stdout).toContain(`run ${runId} (`);
    expect(second.stdout).toContain(`kube-runbook recover ${runId}`);
    const rec = await cli(['recover', runId, '--force'], { env: env(), timeoutMs: 180_000 });
    expect(rec.code, `${rec.stdout}\n${rec.stderr}`).toBe(0);
    expect(existsSync(dir)).toBe(false);
  });
});
