/**
 * Reading the machine's apt sources (deb822 `.sources` and one-line `.list`) and deriving a `deb-src` entry from
 * the distribution's own entries, so `apt-get source` works without ever naming a mirror in our code.
 */
export interface AptEntry {
  types: string[];
  uris: string[];
  suites: string[];
  components: string[];
  signedBy?: string;
  enabled: boolean;
  file: string;
}

/** Parses one deb822 file (stanzas separated by blank lines; `#` comments; continuation lines start with a space). */
export function parseDeb822(text: string, file: string): AptEntry[] {
  const entries: AptEntry[] = [];
  for (const stanza of text.split(/\n[ \t]*\n/)) {
    const fields = new Map<string, string>();
    let last = '';
    for (const raw of stanza.split('\n')) {
      if (/^\s*#/.test(raw) || raw.trim() === '') continue;
      if (/^[ \t]/.test(raw) && last) {
        fields.set(last, `${fields.get(last)}\n${raw.trim()}`);
        continue;
      }
      const m = /^([A-Za-z0-9-]+):\s*(.*)$/.exec(raw);
      if (!m) continue;
      last = m[1]!.toLowerCase();
      fields.set(last, m[2]!.trim());
    }
    if (!fields.has('types') || !fields.has('uris')) continue;
    const words = (k: string) => (fields.get(k) ?? '').split(/\s+/).filter(Boolean);
    entries.push({
      types: words('types'),
      uris: words('uris'),
      suites: words('suites'),
      components: words('components'),
      signedBy: fields.get('signed-by') || undefined,
      enabled: !/^(no|false|0)$/i.test(fields.get('enabled') ?? 'yes'),
      file,
    });
  }
  return entries;
}

/** Parses a one-line-style file: `deb [opt=val ...] URI SUITE COMPONENT...`. */
export function parseOneLine(text: string, file: string): AptEntry[] {
  const entries: AptEntry[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    const m = /^(deb|deb-src)\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$/.exec(line);
    if (!m) continue;
    const options = new Map(
      (m[2] ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .map((o) => o.split('=', 2) as [string, string]),
    );
    entries.push({
      types: [m[1]!],
      uris: [m[3]!],
      suites: [m[4]!],
      components: (m[5] ?? '').split(/\s+/).filter(Boolean),
      signedBy: options.get('signed-by'),
      enabled: true,
      file,
    });
  }
  return entries;
}

/** Suites of the distribution itself: `bookworm`, `bookworm-updates`, `bookworm-security`, ... */
function isOwnSuite(suite: string, codename: string): boolean {
  return suite === codename || (suite.startsWith(`${codename}-`) && /^[a-z]+$/.test(suite.slice(codename.length + 1)));
}

const DISTRO_KEYRING = /\/usr\/share\/keyrings\/(debian|ubuntu)-archive-keyring\.gpg$/;

/**
 * An entry of the distribution itself: enabled, every suite is the codename or codename-<word>, it has the
 * `main` component, and it is signed by the distribution's archive keyring (or by the default trust store).
 * Third-party repositories (own suite names, own keyrings, components such as `stable`) are left out.
 */
export function isDistroEntry(e: AptEntry, codename: string): boolean {
  if (!e.enabled || e.suites.length === 0) return false;
  if (!e.suites.every((s) => isOwnSuite(s, codename))) return false;
  if (!e.components.includes('main')) return false;
  if (e.signedBy && !DISTRO_KEYRING.test(e.signedBy.trim())) return false;
  return true;
}

/** Whether the sources already have a deb-src entry for the distribution's release suite. */
export function hasDistroSource(entries: AptEntry[], codename: string): boolean {
  return entries.some((e) => e.types.includes('deb-src') && isDistroEntry(e, codename) && e.suites.includes(codename));
}

/**
 * A deb822 text with one `deb-src` stanza per distribution `deb` entry (same URIs, suites, components and
 * keyring). Undefined when the machine has no entry of its own distribution to derive from.
 */
export function deriveSourceEntries(entries: AptEntry[], codename: string): string | undefined {
  const own = entries.filter((e) => e.types.includes('deb') && isDistroEntry(e, codename));
  if (!own.some((e) => e.suites.includes(codename))) return undefined;
  const seen = new Set<string>();
  const stanzas: string[] = [];
  for (const e of own) {
    const key = `${e.uris.join(' ')}|${e.suites.join(' ')}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const lines = ['Types: deb-src', `URIs: ${e.uris.join(' ')}`, `Suites: ${e.suites.join(' ')}`, `Components: ${e.components.join(' ')}`];
    if (e.signedBy) lines.push(`Signed-By: ${e.signedBy.split('\n').join('\n ')}`);
    stanzas.push(lines.join('\n'));
  }
  return `# Written by kube-runbook-lab install: source packages of this machine's own apt sources (${codename}).\n${stanzas.join('\n\n')}\n`;
}

/** `VERSION_CODENAME` (or `UBUNTU_CODENAME`) and `ID`/`ID_LIKE` of /etc/os-release. */
export function parseOsRelease(text: string): { id: string; like: string[]; codename: string } {
  const get = (k: string) => new RegExp(`^${k}=("?)([^"\\n]*)\\1$`, 'm').exec(text)?.[2] ?? '';
  return { id: get('ID'), like: get('ID_LIKE').split(/\s+/).filter(Boolean), codename: get('VERSION_CODENAME') || get('UBUNTU_CODENAME') };
}
