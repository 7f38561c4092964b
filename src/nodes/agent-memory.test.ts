import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentMemory, REMEMBER_MS, agentStateDir, hostFiles } from './agent-memory.js';

/** The host, as `sh -s` on this machine. */
const sh = async (wired: string) => {
  const r = spawnSync('sh', ['-s'], { input: wired, encoding: 'utf8' });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
};

let root: string | undefined;
afterEach(() => {
  if (root) rmSync(root, { recursive: true, force: true });
  root = undefined;
});

describe("an agent's memory on its node", () => {
  it('is written to files on the host (mode 0600 in a 0700 directory) that a new agent reads back, pruned by deadline', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-agent-memory-'));
    const dir = agentStateDir(root, 'run-1', 'a1b2c3', 'deadbeef');
    let now = 1_000_000;
    const first = new AgentMemory(hostFiles(sh), dir, () => now);
    await first.load();
    expect(first.taken.size).toBe(0);
    await first.take('kr-exec-a', now + 15_000);
    await first.take('kr-exec-b', now + 1_000);
    await first.renewed(7);
    expect(statSync(join(dir, 'taken')).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(readdirSync(dir).sort()).toEqual(['renewal', 'taken']);
    now += 1_000 + REMEMBER_MS + 1;
    const second = new AgentMemory(hostFiles(sh), dir, () => now);
    await second.load();
    expect([...second.taken.keys()]).toEqual(['kr-exec-a']);
    expect(second.renewal).toBe(7);
    await second.forget();
    expect(readdirSync(root)).toEqual([]);
  });

  it('puts nothing it is given into a shell unquoted: paths are checked, and names that are no request names are refused', async () => {
    root = mkdtempSync(join(tmpdir(), 'kr-agent-memory-'));
    expect(() => agentStateDir(root!, 'run; rm -rf /', 'a1', 'b2')).toThrow(/invalid run id/);
    expect(() => agentStateDir(root!, 'run-1', '$(id)', 'b2')).toThrow(/invalid node or key/);
    const m = new AgentMemory(hostFiles(sh), agentStateDir(root, 'run-1', 'a1', 'b2'), () => 0);
    await expect(m.take('x\n99999999 kr-exec-forged', 1)).rejects.toThrow(/not a request name/);
  });
});
