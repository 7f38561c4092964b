import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { inspect } from 'node:util';
import { EXIT, KrError, messageOf } from '../core/errors.js';
import type { ConfigMapRef } from '../kube/configmap.js';
import { ApiStatusError } from '../kube/source.js';
import type { KubeAccess } from '../kube/types.js';

/**
 * The key that authenticates a journal ConfigMap's copies: 32 random bytes in a Secret beside it, `<configmap>-key`,
 * data key `key`. Who may write ConfigMaps there but not read Secrets cannot sign a journal of their own, so
 * `recover --from-cluster` runs only what an executor holding the key wrote. `kube-runbook manifests` creates the
 * Secret empty; the first run fills it, with a patch conditional on the resourceVersion it read (never over a key).
 */
const JOURNAL_KEY_BYTES = 32;
const DATA_KEY = 'key';

/** The Secret that holds the key of a journal ConfigMap. */
export const journalKeySecret = (journal: ConfigMapRef): ConfigMapRef => ({ namespace: journal.namespace, name: `${journal.name}-key` });

const where = (ref: ConfigMapRef) => `Secret ${ref.namespace}/${ref.name}`;
const path = (ref: ConfigMapRef) => `/api/v1/namespaces/${encodeURIComponent(ref.namespace)}/secrets/${encodeURIComponent(ref.name)}`;

/**
 * The key itself, which nothing can print: not a log line, not JSON, not `util.inspect`. Its only use is `mac`.
 */
export class JournalKey {
  readonly #bytes: Buffer;

  constructor(bytes: Buffer) {
    if (bytes.length !== JOURNAL_KEY_BYTES) throw new Error(`a journal key has ${JOURNAL_KEY_BYTES} bytes, not ${bytes.length}`);
    this.#bytes = Buffer.from(bytes);
  }

  /**
   * HMAC-SHA256 (hex) of a run's journal text as kept in a ConfigMap: bound to the ConfigMap and the run, so a copy
   * moved to another key or another ConfigMap does not verify.
   */
  mac(journal: ConfigMapRef, runId: string, text: string): string {
    return createHmac('sha256', this.#bytes)
      .update(`kube-runbook journal v1\0${journal.namespace}\0${journal.name}\0${runId}\0`)
      .update(text, 'utf8')
      .digest('hex');
  }

  /** Whether `mac` is this key's MAC of the text (compared in constant time). */
  verifies(journal: ConfigMapRef, runId: string, text: string, mac: string): boolean {
    const want = Buffer.from(this.mac(journal, runId, text), 'hex');
    const got = /^[0-9a-f]{64}$/.test(mac) ? Buffer.from(mac, 'hex') : Buffer.alloc(0);
    return got.length === want.length && timingSafeEqual(got, want);
  }

  toJSON(): string {
    return '[journal key]';
  }

  toString(): string {
    return '[journal key]';
  }

  [inspect.custom](): string {
    return '[journal key]';
  }
}

interface SecretObject {
  metadata?: { resourceVersion?: string };
  data?: Record<string, string>;
}

function api(kube: KubeAccess) {
  if (!kube.json) throw new KrError('KUBE_UNAVAILABLE', 'this cluster client cannot reach Secrets', { exit: EXIT.refused });
  return kube.json.bind(kube);
}

/** The key a Secret holds; undefined when it holds none yet; KrError when what it holds is not a key. */
function keyOf(secret: SecretObject, ref: ConfigMapRef): JournalKey | undefined {
  const text = secret.data?.[DATA_KEY];
  if (text === undefined || text === '') return undefined;
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length !== JOURNAL_KEY_BYTES)
    throw new KrError(
      'JOURNAL_KEY_INVALID',
      `${where(ref)}: its "${DATA_KEY}" is not a ${JOURNAL_KEY_BYTES}-byte key (${bytes.length} bytes); delete that key from the Secret and the next run draws a new one`,
      { exit: EXIT.refused },
    );
  return new JournalKey(bytes);
}

async function getSecret(kube: KubeAccess, ref: ConfigMapRef, signal?: AbortSignal): Promise<SecretObject | undefined> {
  try {
    return await api(kube)<SecretObject>(path(ref), { timeoutMs: 15_000, signal });
  } catch (e) {
    if (e instanceof ApiStatusError && e.status === 404) return undefined;
    throw new KrError('JOURNAL_KEY_UNREADABLE', `cannot read the journal's key, ${where(ref)}: ${messageOf(e)}`, {
      exit: EXIT.refused,
      cause: e,
    });
  }
}

/**
 * `recover --from-cluster`: the key of the journal ConfigMap, or undefined when its Secret is missing or holds none
 * (journals copied by older versions). A Secret that cannot be read is a refusal naming it (exit 3).
 */
export async function readJournalKey(kube: KubeAccess, journal: ConfigMapRef, signal?: AbortSignal): Promise<JournalKey | undefined> {
  const ref = journalKeySecret(journal);
  const secret = await getSecret(kube, ref, signal);
  return secret && keyOf(secret, ref);
}

/**
 * Before a run that copies its journal to the cluster: the key in the Secret, drawn and written there when the Secret
 * holds none. The write is a merge patch carrying the resourceVersion that was read, so the apiserver refuses it
 * (409) when anyone changed the Secret meanwhile: a key already there is never replaced, and two runs starting at
 * once end with the same key. A Secret missing or not writable refuses the run (exit 3), saying how to make it.
 */
export async function ensureJournalKey(
  kube: KubeAccess,
  journal: ConfigMapRef,
  draw: () => Buffer = () => randomBytes(JOURNAL_KEY_BYTES),
): Promise<JournalKey> {
  const ref = journalKeySecret(journal);
  const how =
    `create it empty (kubectl -n ${ref.namespace} create secret generic ${ref.name}; \`kube-runbook manifests\` does) ` +
    'and let the run get and patch it';
  for (let tries = 0; tries < 2; tries++) {
    const secret = await getSecret(kube, ref);
    if (!secret)
      throw new KrError('JOURNAL_KEY_MISSING', `the journal's key, ${where(ref)}, does not exist: ${how}`, { exit: EXIT.refused });
    const key = keyOf(secret, ref);
    if (key) return key;
    const bytes = draw();
    try {
      await api(kube)(path(ref), {
        method: 'PATCH',
        contentType: 'application/merge-patch+json',
        body: { metadata: { resourceVersion: secret.metadata?.resourceVersion }, data: { [DATA_KEY]: bytes.toString('base64') } },
        timeoutMs: 15_000,
      });
      return new JournalKey(bytes);
    } catch (e) {
      // someone else wrote the Secret since it was read (another run drew a key): read it again and take theirs
      if (e instanceof ApiStatusError && e.status === 409) continue;
      throw new KrError('JOURNAL_KEY_UNWRITABLE', `cannot write the journal's key to ${where(ref)}: ${messageOf(e)}; ${how}`, {
        exit: EXIT.refused,
        cause: e,
      });
    } finally {
      bytes.fill(0);
    }
  }
  throw new KrError('JOURNAL_KEY_UNWRITABLE', `${where(ref)} changed under every attempt to write the journal's key`, {
    exit: EXIT.refused,
  });
}
