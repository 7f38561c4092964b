import { describe, expect, it } from 'vitest';
import { deriveSourceEntries, hasDistroSource, isDistroEntry, parseDeb822, parseOneLine, parseOsRelease } from './apt-sources.js';

const DEBIAN = `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
`;

const NODESOURCE = `Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
Architectures: amd64
Signed-By: /usr/share/keyrings/nodesource.gpg
`;

const DOCKER = `Types: deb
URIs: https://download.docker.com/linux/debian
Suites: bookworm
Components: stable
Signed-By: /etc/apt/keyrings/docker.asc
`;

const OWN_KEY_MAIN = `Types: deb
URIs: https://example.org/apt
Suites: bookworm
Components: main
Signed-By: /etc/apt/keyrings/example.gpg
`;

const all = () => [
  ...parseDeb822(DEBIAN, 'debian.sources'),
  ...parseDeb822(NODESOURCE, 'nodesource.sources'),
  ...parseDeb822(DOCKER, 'docker.sources'),
  ...parseDeb822(OWN_KEY_MAIN, 'example.sources'),
  ...parseOneLine('deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n', 'google.list'),
];

describe('apt sources', () => {
  it('reads deb822 stanzas, skipping comments', () => {
    const e = parseDeb822(DEBIAN, 'debian.sources');
    expect(e).toHaveLength(2);
    expect(e[0]).toMatchObject({
      types: ['deb'],
      uris: ['http://deb.debian.org/debian'],
      suites: ['bookworm', 'bookworm-updates'],
      components: ['main'],
    });
    expect(e[0]!.signedBy).toBe('/usr/share/keyrings/debian-archive-keyring.gpg');
  });

  it('reads one-line entries with options', () => {
    const e = parseOneLine(
      '# comment\ndeb [arch=amd64 signed-by=/usr/share/keyrings/ubuntu-archive-keyring.gpg] http://archive.ubuntu.com/ubuntu noble main universe\n',
      'x.list',
    );
    expect(e).toEqual([
      {
        types: ['deb'],
        uris: ['http://archive.ubuntu.com/ubuntu'],
        suites: ['noble'],
        components: ['main', 'universe'],
        signedBy: '/usr/share/keyrings/ubuntu-archive-keyring.gpg',
        enabled: true,
        file: 'x.list',
      },
    ]);
  });

  it('treats only the distribution entries as its own, not third-party ones', () => {
    const own = all().filter((e) => isDistroEntry(e, 'bookworm'));
    expect(own.map((e) => e.file)).toEqual(['debian.sources', 'debian.sources']);
  });

  it('derives deb-src stanzas from the distribution entries only', () => {
    const text = deriveSourceEntries(all(), 'bookworm')!;
    expect(text).toContain('Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: bookworm bookworm-updates\nComponents: main');
    expect(text).toContain('URIs: http://deb.debian.org/debian-security\nSuites: bookworm-security');
    expect(text).toContain('Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg');
    for (const foreign of ['nodesource', 'docker', 'example.org', 'google']) expect(text).not.toContain(foreign);
    const reparsed = parseDeb822(text, 'derived.sources');
    expect(reparsed.every((e) => e.types.join() === 'deb-src')).toBe(true);
    expect(hasDistroSource(reparsed, 'bookworm')).toBe(true);
  });

  it('knows when a deb-src entry already exists, and when there is nothing to derive from', () => {
    expect(hasDistroSource(all(), 'bookworm')).toBe(false);
    const src = parseDeb822(DEBIAN.replace(/Types: deb\n/g, 'Types: deb deb-src\n'), 'd.sources');
    expect(hasDistroSource(src, 'bookworm')).toBe(true);
    expect(deriveSourceEntries(parseDeb822(NODESOURCE, 'n.sources'), 'bookworm')).toBeUndefined();
  });

  it('ignores disabled stanzas', () => {
    const e = parseDeb822(`${DEBIAN.split('\n\n')[0]}\nEnabled: no\n`, 'd.sources');
    expect(isDistroEntry(e[0]!, 'bookworm')).toBe(false);
  });

  it('reads the codename from os-release', () => {
    expect(parseOsRelease('ID=debian\nVERSION_CODENAME=bookworm\n')).toEqual({ id: 'debian', like: [], codename: 'bookworm' });
    expect(parseOsRelease('ID=ubuntu\nID_LIKE=debian\nVERSION_CODENAME=noble\n')).toMatchObject({
      id: 'ubuntu',
      like: ['debian'],
      codename: 'noble',
    });
    expect(parseOsRelease('ID="linuxmint"\nUBUNTU_CODENAME=jammy\nID_LIKE="ubuntu debian"\n')).toMatchObject({
      codename: 'jammy',
      like: ['ubuntu', 'debian'],
    });
  });
});
