import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { wireScript } from '../../nodes/wire.js';
import { scratchNode } from '../../testing/node-script.js';
import { eventually } from '../../testing/wait.js';
import { curlConfig, curlPace, type NodeLoadPlan, nodeLoadStartScript, nodeLoadStopScript } from './node-load.js';

const TOKEN = 'sa-token-never-on-a-command-line';

const plan = (dir: string, o: Partial<NodeLoadPlan> = {}): NodeLoadPlan => ({
  dir,
  server: 'https://10.0.0.1:6443/',
  ca: '-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n',
  insecure: false,
  userAgent: 'kubelet "like" \\ agent',
  requests: [
    { verb: 'get', resource: 'pods', namespace: 'default', name: 'web-0', weight: 3 },
    { verb: 'patch', resource: 'configmaps', namespace: null, name: null, weight: 1 },
  ],
  own: { configmaps: 'load-run-1' },
  runId: 'run-1',
  qps: 4,
  concurrency: 2,
  seconds: 60,
  ...o,
});

/** A node: a stub curl that answers 200 after a moment, and the load's directory-to-be. */
function node() {
  const n = scratchNode('kr-node-load-');
  writeFileSync(join(n.bin, 'curl'), '#!/bin/sh\nsleep 0.2\necho 200 >&2\n', { mode: 0o755 });
  return { ...n, load: join(n.dir, 'load', 'run-1', 'f1') };
}

const run = (script: string, bin: string, input?: string) =>
  spawnSync('/bin/sh', ['-s'], {
    input: wireScript(script, input),
    encoding: 'utf8',
    timeout: 15_000,
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });

/** The processes whose command line names the load's directory, and whether any command line holds the token. */
function processes(dir: string): { pids: string[]; token: boolean } {
  const pids: string[] = [];
  let token = false;
  for (const p of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${p}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    if (cmd.includes(dir)) pids.push(p);
    if (cmd.includes(TOKEN)) token = true;
  }
  return { pids, token };
}

describe('the load on a node', () => {
  it('curl config: each request with the credentials file, the CA, the user agent escaped, weights kept', () => {
    const conf = curlConfig(plan('/d'), 0);
    const entries = conf.split('next\n');
    expect(entries).toHaveLength(4);
    expect(entries.filter((e) => e.includes('url = "https://10.0.0.1:6443/api/v1/namespaces/default/pods/web-0"'))).toHaveLength(3);
    expect(conf).toContain('url = "https://10.0.0.1:6443/api/v1/namespaces/kr-load/configmaps/load-run-1"\nrequest = "PATCH"');
    expect(conf).toContain('header = "@/d/auth"');
    expect(conf).toContain('cacert = "/d/ca.crt"');
    expect(conf).toContain('user-agent = "kubelet \\"like\\" \\\\ agent"');
    expect(conf).toContain('header = "Content-Type: application/merge-patch+json"');
    expect(conf).not.toContain(TOKEN);
  });

  it("pace: the node's qps shared by its curl processes, per hour, never 0; a run of curl holds about 5 s of requests", () => {
    // 20 qps from 3 processes: 6.67/s each, 34 requests (5 s) a run, 0.15 s between two runs of curl
    expect(curlPace(20, 3, 1)).toEqual({ rate: '24000/h', gap: '0.150', reps: 34 });
    expect(curlPace(20, 3, 4)).toMatchObject({ reps: 9 });
    expect(curlPace(2000, 1, 1)).toMatchObject({ rate: '7200000/h', reps: 1000 });
    expect(curlPace(0.0001, 500, 1)).toEqual({ rate: '1/h', gap: '3600.000', reps: 1 });
    expect(curlConfig(plan('/d'), 0, 3).split('next\n')).toHaveLength(12);
  });

  it('starts detached with the token in a file only its owner reads, never on a command line; the stop kills it all', async () => {
    const n = node();
    const r = run(nodeLoadStartScript(plan(n.load), 0), n.bin, `Authorization: Bearer ${TOKEN}\n`);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^started \d+$/m);
    expect(readFileSync(join(n.load, 'auth'), 'utf8')).toBe(`Authorization: Bearer ${TOKEN}\n`);
    expect(statSync(join(n.load, 'auth')).mode & 0o777).toBe(0o600);
    // two curl loops, each running curl on the config
    expect(await eventually(() => processes(n.load).pids.length >= 3)).toBe(true);
    expect(processes(n.load).token).toBe(false);
    expect(await eventually(() => readdirSync(n.load).some((f) => f.startsWith('codes.') && statSync(join(n.load, f)).size > 0))).toBe(
      true,
    );

    const again = run(nodeLoadStartScript(plan(n.load), 0), n.bin, `Authorization: Bearer ${TOKEN}\n`);
    expect(again.status).toBe(1);
    expect(again.stderr).toContain('exists');

    const stop = run(nodeLoadStopScript(n.load), n.bin);
    expect(stop.status, stop.stderr).toBe(0);
    expect(stop.stdout).toMatch(/^answers 200=\d+$/m);
    expect(await eventually(() => processes(n.load).pids.length === 0)).toBe(true);
    expect(existsSync(n.load)).toBe(false);
    // idempotent: the dead-man after the revert, or a second revert
    expect(run(nodeLoadStopScript(n.load), n.bin).status).toBe(0);
  });

  it('ends by itself at its deadline, the token removed, even when nobody stops it', async () => {
    const n = node();
    const r = run(nodeLoadStartScript(plan(n.load, { seconds: 1 }), 0), n.bin, `Authorization: Bearer ${TOKEN}\n`);
    expect(r.status, r.stderr).toBe(0);
    expect(await eventually(() => processes(n.load).pids.length === 0)).toBe(true);
    expect(existsSync(join(n.load, 'auth'))).toBe(false);
    run(nodeLoadStopScript(n.load), n.bin);
  });

  it("the dead-man's stop deletes the run's identity with the node's token before it removes the token; the revert's does not", async () => {
    const n = node();
    // a curl that logs the config of each run and the credentials file it reads (what the apiserver would get)
    writeFileSync(
      join(n.bin, 'curl'),
      `#!/bin/sh\nif [ "$2" = "${n.load}/cleanup.conf" ]; then cat "$2" >>"${n.dir}/deleted"; cat "${n.load}/auth" >>"${n.dir}/deleted"; printf 200; exit 0; fi\nsleep 0.2\necho 200 >&2\n`,
      { mode: 0o755 },
    );
    const identityPath = '/apis/rbac.authorization.k8s.io/v1/clusterroles/kube-runbook-load-0123456789';
    expect(run(nodeLoadStartScript(plan(n.load, { identityPath }), 0), n.bin, `Authorization: Bearer ${TOKEN}\n`).status).toBe(0);
    const revert = run(nodeLoadStopScript(n.load), n.bin);
    expect(revert.stdout).not.toContain('identity');
    expect(existsSync(join(n.dir, 'deleted'))).toBe(false);

    expect(run(nodeLoadStartScript(plan(n.load, { identityPath }), 0), n.bin, `Authorization: Bearer ${TOKEN}\n`).status).toBe(0);
    const deadman = run(nodeLoadStopScript(n.load, true), n.bin);
    expect(deadman.status, deadman.stderr).toBe(0);
    expect(deadman.stdout).toMatch(/^identity 200$/m);
    const deleted = readFileSync(join(n.dir, 'deleted'), 'utf8');
    expect(deleted).toContain(`url = "https://10.0.0.1:6443${identityPath}"`);
    expect(deleted).toContain('request = "DELETE"');
    expect(deleted).toContain(`Authorization: Bearer ${TOKEN}`);
    expect(existsSync(n.load)).toBe(false);
    expect(await eventually(() => processes(n.load).pids.length === 0)).toBe(true);
    // again (the revert after the dead-man, or the other way round): nothing left to delete with
    expect(run(nodeLoadStopScript(n.load, true), n.bin).stdout).not.toContain('identity');
  });

  it('refuses to start without credentials on its input', () => {
    const n = node();
    const r = run(nodeLoadStartScript(plan(n.load), 0), n.bin, '');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('no credentials');
    expect(existsSync(n.load)).toBe(false);
  });
});
