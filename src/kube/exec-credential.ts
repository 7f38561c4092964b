import { execFile } from 'node:child_process';
import { isAbsolute, join } from 'node:path';
import { messageOf, quote } from '../core/errors.js';
import { obj, str, unavailable, type Obj, type UserCtx } from './kubeconfig-values.js';

/** What an exec credential plugin answered: a token, or a client certificate and key. */
interface ExecCredential {
  token?: string;
  cert?: Buffer;
  key?: Buffer;
  /** Clock ms; undefined: valid as long as the process runs. */
  expires?: number;
}

const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'];
const EXEC_TIMEOUT_MS = 60_000;
/** A credential this close to its expiry is fetched again. */
const EXEC_EARLY_MS = 10_000;

/** An exec credential plugin, run without a shell, its answer kept until shortly before it expires. */
export function execPlugin(exec: Obj, dir: string, u: UserCtx): () => Promise<ExecCredential> {
  const apiVersion = str(exec.apiVersion) ?? '';
  if (!EXEC_API_VERSIONS.includes(apiVersion))
    throw unavailable(
      `the kubeconfig's exec plugin of context ${quote(u.contextName)} has apiVersion ${quote(apiVersion)}; kube-runbook speaks ${EXEC_API_VERSIONS.join(' and ')}`,
    );
  const command = str(exec.command);
  if (!command) throw unavailable(`the kubeconfig's exec plugin of context ${quote(u.contextName)} has no command`);
  if (exec.interactiveMode === 'Always')
    throw unavailable(
      `the kubeconfig's exec plugin ${quote(command)} needs a terminal (interactiveMode: Always); kube-runbook runs without one`,
    );
  // kubectl: a command with a path separator is relative to the kubeconfig; a bare name is looked up in PATH
  const file = command.includes('/') && !isAbsolute(command) ? join(dir, command) : command;
  const args = Array.isArray(exec.args) ? exec.args.filter((a): a is string => typeof a === 'string') : [];
  const extra = Array.isArray(exec.env) ? exec.env.map(obj).filter((e) => str(e.name)) : [];
  const spec: Obj = { interactive: false };
  if (exec.provideClusterInfo === true)
    spec.cluster = {
      server: u.server,
      'certificate-authority-data': u.tls.caData,
      'insecure-skip-tls-verify': u.tls.insecure || undefined,
      'tls-server-name': u.tls.servername,
    };
  const info = JSON.stringify({ apiVersion, kind: 'ExecCredential', spec });
  const hint = str(exec.installHint);
  let cached: ExecCredential | undefined;
  let pending: Promise<ExecCredential> | undefined;
  const run = () =>
    new Promise<ExecCredential>((resolveRun, reject) => {
      const env: Record<string, string | undefined> = { ...u.env, KUBERNETES_EXEC_INFO: info };
      for (const e of extra) env[String(e.name)] = typeof e.value === 'string' ? e.value : '';
      execFile(file, args, { env, timeout: EXEC_TIMEOUT_MS, maxBuffer: 4 * 2 ** 20, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (!err) {
          try {
            return resolveRun(parseExecCredential(stdout, apiVersion));
          } catch (e) {
            return reject(
              unavailable(
                `the kubeconfig's exec plugin ${quote(command)} answered something that is not an ExecCredential: ${messageOf(e)}`,
              ),
            );
          }
        }
        const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
        const why = missing
          ? `${quote(command)} was not found`
          : `${quote(command)} failed: ${(stderr.trim() || err.message).slice(0, 500)}`;
        reject(
          unavailable(
            `the kubeconfig's exec plugin of context ${quote(u.contextName)}: ${why}${missing && hint ? ` (${hint.trim()})` : ''}`,
          ),
        );
      });
    });
  return async () => {
    if (cached && (cached.expires === undefined || cached.expires - EXEC_EARLY_MS > u.clock.now())) return cached;
    pending ??= run().finally(() => (pending = undefined));
    cached = await pending;
    return cached;
  };
}

function parseExecCredential(stdout: string, apiVersion: string): ExecCredential {
  const doc = obj(JSON.parse(stdout));
  if (doc.kind !== 'ExecCredential') throw new Error(`kind ${quote(doc.kind)}`);
  if (doc.apiVersion !== apiVersion) throw new Error(`apiVersion ${quote(doc.apiVersion)}, not the ${apiVersion} asked for`);
  const status = obj(doc.status);
  const token = str(status.token);
  const cert = str(status.clientCertificateData);
  const key = str(status.clientKeyData);
  if (!token && !(cert && key)) throw new Error('its status has neither a token nor a client certificate and key');
  const expiry = str(status.expirationTimestamp);
  const expires = expiry ? Date.parse(expiry) : undefined;
  if (expires !== undefined && Number.isNaN(expires)) throw new Error(`expirationTimestamp ${quote(expiry)}`);
  return { token, cert: cert ? Buffer.from(cert) : undefined, key: key ? Buffer.from(key) : undefined, expires };
}
