import type { HostFiles } from '../nodes/agent-memory.js';

/** A node's files in memory, as an agent's memory writes them (src/nodes/agent-memory.ts); `broken` fails every call. */
export class FakeHostFiles implements HostFiles {
  readonly files = new Map<string, string>();
  broken = false;

  async read(path: string): Promise<string | undefined> {
    await Promise.resolve();
    if (this.broken) throw new Error('no space left on device');
    return this.files.get(path);
  }

  async write(path: string, text: string): Promise<void> {
    await Promise.resolve();
    if (this.broken) throw new Error('no space left on device');
    this.files.set(path, text);
  }

  async remove(dir: string): Promise<void> {
    await Promise.resolve();
    if (this.broken) throw new Error('no space left on device');
    for (const p of [...this.files.keys()]) if (p.startsWith(`${dir}/`)) this.files.delete(p);
  }
}
