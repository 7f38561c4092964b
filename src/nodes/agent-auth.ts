import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createHmac,
  hkdfSync,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
  sign,
  timingSafeEqual,
  verify,
} from 'node:crypto';

/**
 * Who may drive a node agent, and whose answers the executor believes. Anyone allowed to write ConfigMaps in the
 * agent namespace can write a request or a result; neither is trusted for what it is, only for who signed it:
 *
 * - **requests** carry an Ed25519 signature by the executor's key, made when it starts (one per process, never written
 *   anywhere). Its public half is in the agent pod's arguments, fixed when the executor created the pod, so an agent
 *   believes only the executor that started it. Reading the pod spec gives nothing to sign with.
 * - **results** carry an HMAC by a key the executor draws for each node and hands to that node's agent only, through a
 *   Secret the pod's environment reads (kubelet-resolved; the agent's ServiceAccount has no access to Secrets). Another
 *   node's agent, or whoever writes ConfigMaps, cannot answer for this node.
 *
 * - **renewals** of the run Lease carry an Ed25519 signature by the same executor key over the run, the Lease's
 *   namespace, holder and renewTime, and a sequence number that grows with each renewal the key signs: an agent counts
 *   a renewal only when it verifies and its number is higher than the last one it counted, so whoever may write Leases
 *   neither renews the run nor replays one of its old renewals.
 *
 * What is signed is every field the other side acts on, in a fixed order (`claims`): a copy renamed, sent to another
 * node or run, or with another script, deadline, exit code or output, does not verify.
 */

/** What an executor's request says, all of it signed. */
export interface RequestClaims {
  run: string;
  node: string;
  namespace: string;
  name: string;
  script: string;
  timeoutMs: number;
  deadline: number;
  /** The script's input, sealed for the node (sealInput); absent when it has none. */
  input?: string;
}

/** What a renewal of the run Lease says, all of it signed. */
export interface RenewalClaims {
  run: string;
  namespace: string;
  holder: string;
  renewTime: string;
  /** Higher with each renewal the key signs. */
  seq: number;
}

/** What an agent's result says, all of it signed. */
export interface ResultClaims {
  run: string;
  node: string;
  request: string;
  agent: string;
  state: 'running' | 'done';
  code?: number;
  stdout?: string;
  stderr?: string;
  timedOut?: boolean;
}

const requestBytes = (c: RequestClaims) =>
  Buffer.from(
    JSON.stringify(['kube-runbook/request/v1', c.run, c.node, c.namespace, c.name, c.script, c.timeoutMs, c.deadline, c.input ?? null]),
  );

const renewalBytes = (c: RenewalClaims) =>
  Buffer.from(JSON.stringify(['kube-runbook/renewal/v1', c.run, c.namespace, c.holder, c.renewTime, c.seq]));

const resultBytes = (c: ResultClaims) =>
  Buffer.from(
    JSON.stringify([
      'kube-runbook/result/v1',
      c.run,
      c.node,
      c.request,
      c.agent,
      c.state,
      c.code ?? null,
      c.stdout ?? null,
      c.stderr ?? null,
      c.timedOut === true,
    ]),
  );

/** The executor's keys for one process: the request-signing key pair, and a result key per node drawn on first use. */
export interface AgentKeys {
  /** The public half, as the agent's `--executor-key` (base64 of its SPKI DER). */
  readonly publicKey: string;
  /** Eight hex characters naming the key pair: agent pods of different keys get different names. */
  readonly fingerprint: string;
  signRequest(c: RequestClaims): string;
  /** Signs a renewal of the run Lease under the next sequence number of this key (never one given before). */
  signRenewal(c: Omit<RenewalClaims, 'seq'>): { seq: number; signature: string };
  /** The key `node`'s agent signs its results with (32 random bytes). */
  resultKey(node: string): Buffer;
}

export function newAgentKeys(): AgentKeys {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const spki = publicKey.export({ format: 'der', type: 'spki' });
  const perNode = new Map<string, Buffer>();
  let seq = 0;
  return {
    publicKey: spki.toString('base64'),
    fingerprint: createHash('sha256').update(spki).digest('hex').slice(0, 8),
    signRequest: (c) => sign(null, requestBytes(c), privateKey).toString('base64'),
    signRenewal(c) {
      seq++;
      return { seq, signature: sign(null, renewalBytes({ ...c, seq }), privateKey).toString('base64') };
    },
    resultKey(node) {
      let k = perNode.get(node);
      if (!k) perNode.set(node, (k = randomBytes(32)));
      return k;
    },
  };
}

/** The executor's public key from `--executor-key`; undefined when it is not an Ed25519 SPKI in base64. */
export function executorKey(base64: string): KeyObject | undefined {
  try {
    const key = createPublicKey({ key: Buffer.from(base64, 'base64'), format: 'der', type: 'spki' });
    return key.asymmetricKeyType === 'ed25519' ? key : undefined;
  } catch {
    return undefined;
  }
}

export function verifyRequest(key: KeyObject, c: RequestClaims, signature: string | undefined): boolean {
  return verifies(key, requestBytes(c), signature);
}

export function verifyRenewal(key: KeyObject, c: RenewalClaims, signature: string | undefined): boolean {
  return verifies(key, renewalBytes(c), signature);
}

function verifies(key: KeyObject, bytes: Buffer, signature: string | undefined): boolean {
  if (!signature) return false;
  try {
    return verify(null, bytes, key, Buffer.from(signature, 'base64'));
  } catch {
    return false;
  }
}

/** The fingerprint of an executor's public key, as AgentKeys.fingerprint gives it. */
export const keyFingerprint = (key: KeyObject): string =>
  createHash('sha256')
    .update(key.export({ format: 'der', type: 'spki' }))
    .digest('hex')
    .slice(0, 8);

export const signResult = (key: Buffer, c: ResultClaims): string => createHmac('sha256', key).update(resultBytes(c)).digest('base64');

export function verifyResult(key: Buffer, c: ResultClaims, signature: string | undefined): boolean {
  if (!signature) return false;
  const want = createHmac('sha256', key).update(resultBytes(c)).digest();
  const got = Buffer.from(signature, 'base64');
  return got.length === want.length && timingSafeEqual(got, want);
}

/**
 * A script's input, sealed for one node's agent: AES-256-GCM under a key derived (HKDF-SHA256) from the node's result
 * key, which only that agent and the executor hold, bound to the run, node and request it travels in. A request
 * ConfigMap is readable by whoever may read ConfigMaps in the agent namespace; what the input carries (load-apiserver's
 * token) is not. Base64 of nonce, ciphertext and tag.
 */
export function sealInput(resultKey: Buffer, to: { run: string; node: string; name: string }, input: string): string {
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', inputKey(resultKey), nonce);
  cipher.setAAD(inputAad(to));
  const sealed = Buffer.concat([cipher.update(input, 'utf8'), cipher.final()]);
  return Buffer.concat([nonce, sealed, cipher.getAuthTag()]).toString('base64');
}

/** The input sealInput sealed for this run, node and request; undefined when it was not, or was changed. */
export function openInput(resultKey: Buffer, to: { run: string; node: string; name: string }, sealed: string): string | undefined {
  const bytes = Buffer.from(sealed, 'base64');
  if (bytes.length < 28) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', inputKey(resultKey), bytes.subarray(0, 12));
    decipher.setAAD(inputAad(to));
    decipher.setAuthTag(bytes.subarray(bytes.length - 16));
    return Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

const inputKey = (resultKey: Buffer) => Buffer.from(hkdfSync('sha256', resultKey, Buffer.alloc(0), 'kube-runbook/input/v1', 32));
const inputAad = (to: { run: string; node: string; name: string }) =>
  Buffer.from(JSON.stringify(['kube-runbook/input/v1', to.run, to.node, to.name]));
