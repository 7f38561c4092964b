import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { actions } from '../src/actions/index.js';
import { probes } from '../src/probes/index.js';
import { renderReference } from '../src/cli/docs.js';

const NOT_MODULES = new Set(['index.ts', 'types.ts']);
const modulesIn = (dir: string) =>
  readdirSync(dir)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts') && !NOT_MODULES.has(f) && statSync(join(dir, f)).isFile())
    .map((f) => f.replace(/\.ts$/, ''))
    .sort();

function yamlFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? yamlFiles(join(dir, e.name)) : /\.ya?ml$/.test(e.name) ? [join(dir, e.name)] : [],
  );
}
const examples = [...yamlFiles('examples'), ...yamlFiles('runbooks')].map((f) => readFileSync(f, 'utf8')).join('\n');

for (const [kind, dir, registry, key] of [
  ['action', 'src/actions', actions, 'action'],
  ['probe', 'src/probes', probes, 'probe'],
] as const) {
  describe(`${kind} parity`, () => {
    const files = modulesIn(dir);

    it(`the registry is sorted and lists exactly the files in ${dir}`, () => {
      const ids = Object.keys(registry);
      expect(ids, `keep ${dir}/index.ts sorted`).toEqual([...ids].sort());
      for (const f of files) expect(ids, `add ${f} to ${dir}/index.ts`).toContain(f);
      for (const id of ids) expect(files, `${dir}/index.ts lists ${id}, but there is no ${dir}/${id}.ts`).toContain(id);
    });

    for (const id of files) {
      it(`${id}: id = file name, summary, description, a test beside it, used in an example`, async () => {
        const mod = await registry[id]!();
        expect(mod.meta.id, `meta.id of ${dir}/${id}.ts`).toBe(id);
        expect(mod.meta.summary.length, `add meta.summary to ${dir}/${id}.ts`).toBeGreaterThan(10);
        expect(mod.meta.description.length, `add meta.description to ${dir}/${id}.ts`).toBeGreaterThan(10);
        expect(existsSync(join(dir, `${id}.test.ts`)), `add ${dir}/${id}.test.ts`).toBe(true);
        expect(new RegExp(`${key}:\\s*${id}\\b`).test(examples), `use ${kind} ${id} in some file under examples/ or runbooks/`).toBe(true);
      });
    }
  });
}

describe('generated reference', () => {
  it('docs/actions.md and docs/probes.md match the modules (run `npm run docs`)', async () => {
    const files = await renderReference();
    for (const [name, text] of Object.entries(files))
      expect(readFileSync(join('docs', name), 'utf8'), `docs/${name} is stale: run npm run docs`).toBe(text);
  });
});
