import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { runCli } from './main.js';
import { out } from './output.js';

let printed: string[] = [];
beforeEach(() => {
  printed = [];
  vi.spyOn(out, 'stdout').mockImplementation((t: string) => printed.push(t) > 0);
});
afterEach(() => vi.restoreAllMocks());

const version = async (...args: string[]) => {
  printed = [];
  expect(await runCli(['node', 'kube-runbook', ...args])).toBe(0);
  return printed.join('');
};
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };

describe('kube-runbook version', () => {
  it('says the version, the commit (unknown to an npm build), the Node and platform, in json, yaml and text', async () => {
    const info = JSON.parse(await version('version', '-o', 'json')) as Record<string, unknown>;
    expect(info).toEqual({
      version: pkg.version,
      commit: null,
      node: process.version,
      platform: `${process.platform}/${process.arch}`,
      singleExecutable: false,
    });
    expect(parse(await version('version', '--output', 'yaml'))).toEqual(info);
    expect((await version('version')).split('\n')).toEqual([
      `kube-runbook ${pkg.version}`,
      'commit:            unknown (not recorded by this build)',
      `node:              ${process.version}`,
      `platform:          ${process.platform}/${process.arch}`,
      'single executable: no (the npm package)',
    ]);
  });

  it('leaves --version the bare version, for scripts', async () => {
    expect(await version('--version')).toBe(`${pkg.version}\n`);
  });

  it('refuses another format (exit 2)', async () => {
    vi.spyOn(out, 'stderr').mockImplementation(() => true);
    expect(await runCli(['node', 'kube-runbook', 'version', '-o', 'xml'])).toBe(2);
  });
});
