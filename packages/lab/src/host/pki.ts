import { createPublicKey, generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { shq } from 'kube-runbook/internal/core/shell.js';
import { mustSh } from './host.js';

/** A client or server certificate the lab makes. */
interface CertSpec {
  name: string;
  cn: string;
  org?: string;
  usage: 'serverAuth' | 'clientAuth';
  dns?: string[];
  ips?: string[];
}

export interface LabPki {
  dir: string;
  caCert: string;
  caKey: string;
  cert(name: string): string;
  key(name: string): string;
  saKey: string;
  saPub: string;
  tokenFile: string;
  /** Bearer token per user name (kubelet simulators `system:node:<node>`, the fleet). */
  tokens: Record<string, string>;
}

export const SERVICE_CIDR = '10.96.0.0/16';
/** The user Prometheus scrapes as (`lab up --prometheus`): its client certificate is `prometheus.crt`. */
export const PROMETHEUS_USER = 'kube-runbook-prometheus';
/** The `kubernetes` Service's cluster IP, which pods are told the apiserver is at (KUBERNETES_SERVICE_HOST). */
export const SERVICE_IP = '10.96.0.1';

/**
 * The lab's certificate authority, serving and client certificates (ECDSA P-256, signed with openssl),
 * the service-account signing key pair, and static bearer tokens for the kubelet simulators. With `prometheus`,
 * also Prometheus's client certificate (user PROMETHEUS_USER, in no group: RBAC lets it read /metrics only).
 */
export async function makePki(
  dir: string,
  o: { instance: string; apiserverIps: string[]; nodes: string[]; prometheus?: boolean; kubelets?: { name: string; ip: string }[] },
): Promise<LabPki> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const certs: CertSpec[] = [
    {
      name: 'apiserver',
      cn: 'kube-apiserver',
      usage: 'serverAuth',
      dns: ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local', 'localhost'],
      // every member's address and the VIP: one serving certificate for each apiserver of an HA lab
      ips: [...new Set(o.apiserverIps), SERVICE_IP, '127.0.0.1'],
    },
    { name: 'admin', cn: 'kube-runbook-admin', org: 'system:masters', usage: 'clientAuth' },
    { name: 'controller-manager', cn: 'system:kube-controller-manager', usage: 'clientAuth' },
    { name: 'scheduler', cn: 'system:kube-scheduler', usage: 'clientAuth' },
    ...(o.prometheus ? [{ name: 'prometheus', cn: PROMETHEUS_USER, usage: 'clientAuth' as const }] : []),
    ...kubeletCerts(o.kubelets ?? []),
  ];
  const keyNames = ['ca', 'sa', ...certs.map((c) => c.name)];
  for (const k of keyNames) {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    await writeFile(join(dir, `${k}.key`), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    if (k === 'sa') await writeFile(join(dir, 'sa.pub'), createPublicKey(privateKey).export({ type: 'spki', format: 'pem' }));
  }
  for (const c of certs) await writeFile(join(dir, `${c.name}.ext`), extensions(c));
  await mustSh('LAB_PKI_FAILED', 'making the lab certificates with openssl', certScript(dir, o.instance, certs), { timeoutMs: 60_000 });

  const users = [...o.nodes.map((n) => `system:node:${n}`), 'kube-runbook-fleet'];
  const tokens: Record<string, string> = {};
  const lines: string[] = [];
  for (const [i, user] of users.entries()) {
    const token = randomBytes(24).toString('hex');
    tokens[user] = token;
    const groups = user === 'kube-runbook-fleet' ? 'system:masters' : 'system:nodes';
    lines.push(`${token},${user},uid-${i},"${groups}"`);
  }
  await writeFile(join(dir, 'tokens.csv'), `${lines.join('\n')}\n`, { mode: 0o600 });
  return pkiOf(dir, tokens);
}

/**
 * Real nodes (`lab up --real-nodes`): each kubelet's serving certificate (its name and address, as the apiserver
 * dials it for logs and exec), and the client certificate the apiserver shows the kubelets.
 */
function kubeletCerts(kubelets: { name: string; ip: string }[]): CertSpec[] {
  if (!kubelets.length) return [];
  return [
    ...kubelets.map((k) => ({
      name: kubeletCertName(k.name),
      cn: `system:node:${k.name}`,
      org: 'system:nodes',
      usage: 'serverAuth' as const,
      dns: [k.name],
      ips: [k.ip],
    })),
    { name: KUBELET_CLIENT, cn: 'kube-apiserver-kubelet-client', org: 'system:masters', usage: 'clientAuth' },
  ];
}

/** The apiserver's client certificate towards real kubelets: `apiserver-kubelet-client.crt`. */
export const KUBELET_CLIENT = 'apiserver-kubelet-client';
/** A real node's kubelet serving certificate: `kubelet-<node>.crt`. */
export const kubeletCertName = (node: string): string => `kubelet-${node}`;

function pkiOf(dir: string, tokens: Record<string, string> = {}): LabPki {
  return {
    dir,
    caCert: join(dir, 'ca.crt'),
    caKey: join(dir, 'ca.key'),
    cert: (name) => join(dir, `${name}.crt`),
    key: (name) => join(dir, `${name}.key`),
    saKey: join(dir, 'sa.key'),
    saPub: join(dir, 'sa.pub'),
    tokenFile: join(dir, 'tokens.csv'),
    tokens,
  };
}

/** Tokens of tokens.csv by user name. */
export async function readTokens(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const line of (await readFile(join(dir, 'tokens.csv'), 'utf8')).split('\n')) {
    const [token, user] = line.split(',');
    if (token && user) out[user] = token;
  }
  return out;
}

function extensions(c: CertSpec): string {
  const san = [...(c.dns ?? []).map((d) => `DNS:${d}`), ...(c.ips ?? []).map((ip) => `IP:${ip}`)];
  return [
    'basicConstraints = critical, CA:FALSE',
    'keyUsage = critical, digitalSignature, keyEncipherment',
    `extendedKeyUsage = ${c.usage}`,
    ...(san.length ? [`subjectAltName = ${san.join(', ')}`] : []),
    '',
  ].join('\n');
}

function certScript(dir: string, instance: string, certs: CertSpec[]): string {
  const d = shq(dir);
  const lines = [
    'set -e',
    `cd ${d}`,
    `openssl req -x509 -new -key ca.key -sha256 -days 3650 -subj ${shq(`/CN=kube-runbook-${instance}-ca`)} ` +
      `-addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=critical,keyCertSign,cRLSign,digitalSignature' -out ca.crt`,
  ];
  for (const c of certs) {
    const subj = `${c.org ? `/O=${c.org}` : ''}/CN=${c.cn}`;
    lines.push(
      `openssl req -new -key ${shq(`${c.name}.key`)} -subj ${shq(subj)} -out ${shq(`${c.name}.csr`)}`,
      `openssl x509 -req -in ${shq(`${c.name}.csr`)} -CA ca.crt -CAkey ca.key -set_serial 0x${randomBytes(8).toString('hex')} ` +
        `-days 3650 -sha256 -extfile ${shq(`${c.name}.ext`)} -out ${shq(`${c.name}.crt`)} 2>/dev/null`,
      `rm -f ${shq(`${c.name}.csr`)} ${shq(`${c.name}.ext`)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
