import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KrError } from 'kube-runbook/internal/core/errors.js';
import type { Logger } from 'kube-runbook/internal/core/logger.js';
import {
  deriveSourceEntries,
  hasDistroSource,
  isDistroEntry,
  parseDeb822,
  parseOneLine,
  parseOsRelease,
  type AptEntry,
} from './apt-sources.js';
import { must, run } from '../host/host.js';

/**
 * Options of every apt-get that installs: wait up to 10 minutes for dpkg's and apt's locks instead of failing at
 * once when another apt-get (a person's, or a test's) holds them.
 */
export const APT_WAIT = ['-o', 'DPkg::Lock::Timeout=600'];

/** Debian packages the lab and its build need. */
export const APT_PACKAGES = [
  'etcd-server',
  'iproute2',
  'iptables',
  'nftables',
  'conntrack',
  'openssl',
  'curl',
  // the forwarder of each simulated node to the apiserver, inside the node's network namespace
  'socat',
  'ca-certificates',
  'golang-go',
  'make',
  'rsync',
  'jq',
  'dpkg-dev',
  'xz-utils',
];

const SOURCE_LIST_FILE = '/etc/apt/sources.list.d/kube-runbook-src.sources';

export async function missingPackages(names: string[]): Promise<string[]> {
  const r = await run('dpkg-query', ['-W', '-f', '${Package} ${db:Status-Abbrev}\n', ...names]);
  const installed = new Set(
    r.stdout
      .split('\n')
      .filter((l) => /^\S+ ii/.test(l))
      .map((l) => l.split(' ')[0]!.split(':')[0]!),
  );
  return names.filter((n) => !installed.has(n));
}

/** Reads every enabled apt source of the machine. */
async function readAptSources(): Promise<AptEntry[]> {
  const entries: AptEntry[] = [];
  const list = await readFile('/etc/apt/sources.list', 'utf8').catch(() => '');
  entries.push(...parseOneLine(list, '/etc/apt/sources.list'));
  const dir = '/etc/apt/sources.list.d';
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    const text = await readFile(join(dir, name), 'utf8').catch(() => '');
    if (name.endsWith('.sources')) entries.push(...parseDeb822(text, join(dir, name)));
    else if (name.endsWith('.list')) entries.push(...parseOneLine(text, join(dir, name)));
  }
  return entries;
}

/** Adds a deb-src entry derived from the distribution's own entries when there is none; returns whether it wrote one. */
export async function ensureSourceEntry(log: Logger, signal?: AbortSignal): Promise<boolean> {
  const os = parseOsRelease(await readFile('/etc/os-release', 'utf8'));
  if (!os.codename) throw new KrError('LAB_APT_SOURCES', '/etc/os-release names no VERSION_CODENAME');
  const entries = await readAptSources();
  if (hasDistroSource(entries, os.codename)) return false;
  const text = deriveSourceEntries(entries, os.codename);
  if (!text)
    throw new KrError('LAB_APT_SOURCES', `no apt entry of ${os.codename} itself to derive a deb-src entry from`, {
      details: ['Add a deb-src line for your distribution (same mirror as its deb line) and run `apt-get update`.'],
    });
  await writeFile(SOURCE_LIST_FILE, text, { mode: 0o644 });
  log.info(`added ${SOURCE_LIST_FILE} (deb-src of this machine's ${os.codename} sources)`);
  await must('LAB_APT_FAILED', 'apt-get', [...APT_WAIT, 'update'], { timeoutMs: 600_000, signal });
  return true;
}

/** This machine's distribution suite and the mirror its own apt entries use (for a root filesystem of the same release). */
export async function distroMirror(): Promise<{ suite: string; mirror: string }> {
  const os = parseOsRelease(await readFile('/etc/os-release', 'utf8'));
  if (!os.codename) throw new KrError('LAB_APT_SOURCES', '/etc/os-release names no VERSION_CODENAME');
  const entry = (await readAptSources()).find(
    (e) => e.enabled && e.types.includes('deb') && isDistroEntry(e, os.codename) && e.suites.includes(os.codename),
  );
  const mirror = entry?.uris.find((u) => /^https?:\/\//.test(u));
  if (!mirror)
    throw new KrError('LAB_APT_SOURCES', `no http(s) apt entry of ${os.codename} itself to build a root filesystem from`, {
      details: [`Add a deb line for ${os.codename} (its mirror) to /etc/apt/sources.list.d and run \`apt-get update\`.`],
    });
  return { suite: os.codename, mirror };
}
