import { shq } from '../core/shell.js';
import type { ExecResult } from './types.js';
import { wireScript } from './wire.js';

/** Where node agents keep what they must remember across a restart, one directory per run, node and executor key. */
export const AGENT_STATE_ROOT = '/var/lib/kube-runbook/agent';

/** How long a request's name is remembered after its deadline: a copy written again later is refused as expired anyway. */
export const REMEMBER_MS = 60_000;

/** Small files on the host (not in the agent's container, which a restart replaces). */
export interface HostFiles {
  /** The file's text, or undefined when there is none. */
  read(path: string): Promise<string | undefined>;
  /** Replaces the file's text, on disk (fsynced) before it returns. */
  write(path: string, text: string): Promise<void>;
  /** Removes a directory and all in it, and its parent when that is left empty. */
  remove(dir: string): Promise<void>;
}

const RUN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;
const PART = /^[a-f0-9]{1,64}$/;
/** A request's name as the agent writes it into its file: a ConfigMap name has no space nor newline. */
const LINE = /^(\d{1,16}) ([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$/;

/** The directory of one agent's memory (run, node label, key fingerprint: all checked, nothing unquoted reaches a shell). */
export function agentStateDir(root: string, runId: string, node: string, fingerprint: string): string {
  if (!RUN.test(runId)) throw new Error(`invalid run id for the agent's memory: ${JSON.stringify(runId)}`);
  if (!PART.test(node) || !PART.test(fingerprint)) throw new Error(`invalid node or key for the agent's memory: ${node}, ${fingerprint}`);
  return `${root}/${runId}/${node}-${fingerprint}`;
}

/**
 * HostFiles through the agent's way onto the host (`run`: a wired script on the host, as the dead-men's keepalives
 * are touched): each write goes to a temporary file, fsynced, renamed over the file, and the directory fsynced.
 */
export function hostFiles(run: (wired: string, timeoutMs: number) => Promise<ExecResult>): HostFiles {
  const check = async (what: string, r: Promise<ExecResult>) => {
    const out = await r;
    if (out.code !== 0) throw new Error(`${what}: exit ${out.code}: ${out.stderr.trim().slice(0, 300)}`);
    return out.stdout;
  };
  return {
    async read(path) {
      const out = await check(
        `cannot read ${path}`,
        run(wireScript(`f=${shq(path)}; if [ -f "$f" ]; then printf 'present\\n'; cat -- "$f"; fi`), 15_000),
      );
      return out.startsWith('present\n') ? out.slice('present\n'.length) : undefined;
    },
    async write(path, text) {
      const dir = path.slice(0, path.lastIndexOf('/'));
      const script = [
        'set -e',
        `d=${shq(dir)}; f=${shq(path)}`,
        'umask 077',
        'mkdir -p -- "$d"',
        'cat >"$f.new"',
        'sync -- "$f.new" 2>/dev/null || sync',
        'mv -f -- "$f.new" "$f"',
        'sync -- "$d" 2>/dev/null || sync',
      ].join('\n');
      await check(`cannot write ${path}`, run(wireScript(script, text), 15_000));
    },
    async remove(dir) {
      const parent = dir.slice(0, dir.lastIndexOf('/'));
      await check(`cannot remove ${dir}`, run(wireScript(`rm -rf -- ${shq(dir)}\nrmdir -- ${shq(parent)} 2>/dev/null; exit 0`), 15_000));
    },
  };
}

/**
 * What an agent remembers on its node: the requests it took (name and deadline, until REMEMBER_MS past it), so a copy
 * written again is refused after a restart as before it; and the sequence number of the last run Lease renewal it
 * counted, so an old renewal written back is not counted again after a restart.
 */
export class AgentMemory {
  readonly taken = new Map<string, number>();
  renewal = 0;
  private writes: Promise<void> = Promise.resolve();

  constructor(
    private readonly files: HostFiles,
    readonly dir: string,
    private readonly now: () => number,
  ) {}

  /** Reads both files; lines it cannot read are left out (a file cut short loses its last line only). */
  async load(): Promise<void> {
    const taken = (await this.files.read(`${this.dir}/taken`)) ?? '';
    for (const line of taken.split('\n')) {
      const m = LINE.exec(line);
      if (m) this.taken.set(m[2]!, Number(m[1]));
    }
    this.prune();
    const renewal = Number(((await this.files.read(`${this.dir}/renewal`)) ?? '').trim());
    if (Number.isSafeInteger(renewal) && renewal > 0) this.renewal = renewal;
  }

  /** Remembers a request taken, on disk before it returns (throws when it cannot: then the request must not run). */
  async take(name: string, deadline: number): Promise<void> {
    if (!LINE.test(`0 ${name}`)) throw new Error(`not a request name: ${JSON.stringify(name)}`);
    this.taken.set(name, deadline);
    this.prune();
    await this.save('taken', () => [...this.taken].map(([n, d]) => `${d} ${n}\n`).join(''));
  }

  /** Remembers the last renewal counted, on disk before it returns. */
  async renewed(seq: number): Promise<void> {
    const renewal = Math.max(this.renewal, seq);
    await this.save('renewal', () => `${renewal}\n`);
    this.renewal = Math.max(this.renewal, renewal);
  }

  /** Forgets everything (the run is over on this node). */
  async forget(): Promise<void> {
    await this.writes.catch(() => undefined);
    await this.files.remove(this.dir);
  }

  prune(): void {
    for (const [name, deadline] of this.taken) if (deadline + REMEMBER_MS < this.now()) this.taken.delete(name);
  }

  /** One write at a time, each of the whole file as it stands when its turn comes (so the last one holds everything). */
  private save(file: string, text: () => string): Promise<void> {
    const p = this.writes.catch(() => undefined).then(() => this.files.write(`${this.dir}/${file}`, text()));
    this.writes = p;
    return p;
  }
}
