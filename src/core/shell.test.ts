import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { shCommand, shq } from './shell.js';
import { hostileValues, markerExists, markerPath } from '../testing/hostile.js';

/** Runs a command line with dash, the way a node's /bin/sh would. */
const dash = (line: string) => spawnSync('dash', ['-c', line], { encoding: 'utf8' });

describe('shq', () => {
  it('makes every hostile value a single word that dash reads back byte for byte', () => {
    const marker = markerPath();
    for (const v of hostileValues(marker)) {
      const r = dash(`printf '%s|' ${shq(v)} && set -- ${shq(v)} && printf '%s|%s' "$#" "$1"`);
      expect(r.stdout, JSON.stringify(v)).toBe(`${v}|1|${v}`);
    }
    expect(markerExists(marker)).toBe(false);
  });

  it('leaves plain words bare and quotes the rest', () => {
    expect(shq('kube-apiserver')).toBe('kube-apiserver');
    expect(shq('/etc/kubernetes/manifests/etcd.yaml')).toBe('/etc/kubernetes/manifests/etcd.yaml');
    expect(shq(6443)).toBe('6443');
    expect(shq('')).toBe("''");
    expect(shq("it's")).toBe(`'it'\\''s'`);
  });

  it('refuses a NUL byte', () => {
    expect(() => shq('a\0b')).toThrow(/NUL/);
  });
});

describe('shCommand', () => {
  it('quotes each word so the command runs with exactly those arguments', () => {
    const marker = markerPath();
    const args = ['a b', `$(touch ${marker})`, "'", '*'];
    const r = dash(`${shCommand('printf', '<%s>', ...args)}`);
    expect(r.stdout).toBe(args.map((a) => `<${a}>`).join(''));
    expect(markerExists(marker)).toBe(false);
  });
});
