import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A machine as `lab up --real-nodes` looks at it, under DIR: a cgroup v1 hierarchy of these controllers and a
 * /proc/filesystems of this text; returned as the paths the checks are told to read.
 */
export async function cgroupV1Machine(
  dir: string,
  controllers: string[],
  filesystems: string,
): Promise<{ cgroupBase: string; filesystemsFile: string }> {
  const cgroupBase = join(dir, 'cgroup');
  for (const c of controllers) {
    await mkdir(join(cgroupBase, c), { recursive: true });
    await writeFile(join(cgroupBase, c, 'cgroup.procs'), '');
  }
  const filesystemsFile = join(dir, 'filesystems');
  await writeFile(filesystemsFile, filesystems);
  return { cgroupBase, filesystemsFile };
}
