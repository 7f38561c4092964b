import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';

/** What `npm pack` puts in the tarball (dry run; dist/ built by `npm run build` first). */
const root = fileURLToPath(new URL('..', import.meta.url));
let files: Set<string>;

beforeAll(async () => {
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, maxBuffer: 16 * 1024 * 1024 }, (err, out) =>
      err ? reject(err) : resolve(out),
    ),
  );
  const [pack] = JSON.parse(stdout) as { files: { path: string }[] }[];
  files = new Set(pack!.files.map((f) => f.path));
}, 60_000);

describe('the npm package', () => {
  it('ships every file its source maps point at', () => {
    const maps = [...files].filter((f) => f.endsWith('.js.map'));
    expect(maps.length).toBeGreaterThan(50);
    const missing: string[] = [];
    for (const map of maps) {
      const { sources, sourceRoot = '' } = JSON.parse(readFileSync(join(root, map), 'utf8')) as { sources: string[]; sourceRoot?: string };
      for (const s of sources) {
        const target = posix.join(posix.dirname(map), sourceRoot, s);
        if (!files.has(target)) missing.push(`${map} → ${target}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('ships the sources of the code it runs, but no tests', () => {
    expect(files).toContain('src/cli/main.ts');
    expect([...files].filter((f) => /\.test\.ts$|^src\/testing\//.test(f))).toEqual([]);
  });

  it('ships no lab: neither the workspace package (packages/lab) nor its build, nor the test helpers the lab builds on', () => {
    expect(files).toContain('dist/inventory/lab-home.js');
    const lab = /^packages\/|(^|\/)lab\/|^(src|dist)\/cli\/(lab|demo)\.|kubelet-sim|^dist\/testing\/|\.d\.ts$/;
    expect([...files].filter((f) => lab.test(f))).toEqual([]);
  });

  it('ships the Apache-2.0 LICENSE that package.json names', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { license: string; scripts: Record<string, string> };
    expect(pkg.license).toBe('Apache-2.0');
    expect(files).toContain('LICENSE');
    const text = readFileSync(join(root, 'LICENSE'), 'utf8');
    expect(text).toMatch(/^\s+Apache License\n\s+Version 2\.0, January 2004\n/);
    expect(text).toContain('END OF TERMS AND CONDITIONS');
    expect(pkg.scripts.prepack).toBe('npm run build');
  });
});
