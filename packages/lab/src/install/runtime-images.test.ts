import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { productRoot } from '../host/product.js';
import { BASE, debNames, libraryDepends, runtimeImages, withLibraries } from './runtime-images.js';

/** The product's root, whose Dockerfiles and package.json the images follow. */
const root = productRoot();

/** What the last stage of a Dockerfile puts in the image, read from its instructions. */
function finalStage(file: string) {
  const text = readFileSync(join(root, file), 'utf8').replace(/\\\n/g, ' ');
  const lines = text.split('\n').filter((l) => l.trim() && !l.trimStart().startsWith('#'));
  const stage = lines.slice(lines.findLastIndex((l) => l.startsWith('FROM ')));
  const arg = (op: string) => stage.filter((l) => l.startsWith(`${op} `)).map((l) => l.slice(op.length + 1).trim());
  const runs = arg('RUN');
  const apt = runs.map((r) => /apt-get install -y --no-install-recommends ([^&]+)/.exec(r)?.[1]).find(Boolean);
  return {
    from: arg('FROM')[0],
    packages: apt?.trim().split(/\s+/) ?? [],
    copies: arg('COPY'),
    runs,
    env: Object.fromEntries(arg('ENV').map((e) => e.split('=') as [string, string])),
    user: arg('USER')[0],
    entrypoint: JSON.parse(arg('ENTRYPOINT')[0] ?? 'null') as string[] | null,
    dirs: runs.flatMap((r) =>
      [...r.matchAll(/mkdir -p (\S+) && chown (\S+) (\S+)/g)].map((m) => ({ path: m[1]!, owner: m[2]!, again: m[3]! })),
    ),
  };
}

describe('the executor and agent images built without Docker', () => {
  for (const recipe of runtimeImages('1.2.3'))
    it(`${recipe.name}: the same packages, package install, directories, environment, user and entrypoint as ${recipe.dockerfile}`, () => {
      const d = finalStage(recipe.dockerfile);
      expect(d.from).toBe(BASE.image);
      expect(recipe.packages).toEqual(d.packages);
      // the packed project from the build stage, installed globally without its devDependencies
      expect(d.copies).toContain('--from=build /tmp/kube-runbook-*.tgz /tmp/');
      expect(d.runs.some((r) => r.startsWith('npm install -g --omit=dev /tmp/kube-runbook-*.tgz'))).toBe(true);
      expect(recipe.dirs).toEqual(d.dirs.map((x) => ({ path: x.path, owner: x.owner })));
      for (const x of d.dirs) expect(x.again).toBe(x.path);
      expect(recipe.env).toEqual(d.env);
      expect(recipe.user).toBe(d.user);
      expect(recipe.entrypoint).toEqual(d.entrypoint);
      expect(recipe.ref).toMatch(/^localhost\/kube-runbook\/[a-z-]+:1\.2\.3$/);
      // the reference the Dockerfile's own build line tags it with, at this version
      const tagged = /docker build .*-t (\S+):\S+ \./.exec(readFileSync(join(root, recipe.dockerfile), 'utf8'))?.[1];
      expect(recipe.alias).toBe(`${tagged}:1.2.3`);
    });

  it("runs the Node.js major version of the Dockerfiles' base, which the project's node devDependency is", () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };
    expect(BASE.image).toBe(`node:${BASE.nodeMajor}-${BASE.debian}-slim`);
    expect(pkg.devDependencies.node).toMatch(new RegExp(`^\\^?${BASE.nodeMajor}(\\.|$)`));
  });

  it('follows library dependencies only, the first of alternatives, no virtual package', () => {
    const graph = libraryDepends(
      [
        'util-linux',
        '  PreDepends: libblkid1',
        '  Depends: libc6',
        ' |Depends: libsystemd0',
        '  Depends: libelogind0',
        '  Depends: <debconf-2.0>',
        '  Depends: adduser',
        '  Recommends: sensible-utils',
        'libblkid1',
        '  Depends: libc6',
        '  Depends: zlib1g:any',
        'libc6',
        '  Depends: libgcc-s1',
        'adduser',
        '  Depends: libfoo1',
        'libgcc-s1',
        '  Depends: gcc-12-base',
      ].join('\n'),
    );
    expect(graph.get('util-linux')).toEqual(['libblkid1', 'libc6', 'libsystemd0']);
    expect(withLibraries(['util-linux'], graph)).toEqual(['libblkid1', 'libc6', 'libgcc-s1', 'libsystemd0', 'util-linux', 'zlib1g']);
  });

  it("names the .deb files as apt-get download writes them, an epoch's colon escaped", () => {
    const show =
      'Package: libcap2\nVersion: 1:2.66-4+deb12u3+b1\nArchitecture: amd64\nFilename: pool/main/libc/libcap2/libcap2_2.66-4+deb12u3+b1_amd64.deb\n\n' +
      'Package: dash\nSource: dash\nVersion: 0.5.12-2\nArchitecture: amd64\n';
    expect(debNames(show)).toEqual(['libcap2_1%3a2.66-4+deb12u3+b1_amd64.deb', 'dash_0.5.12-2_amd64.deb']);
  });
});
