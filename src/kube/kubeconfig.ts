import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { parse } from 'yaml';
import { type Clock, realClock } from '../core/clock.js';
import { KrError, messageOf, quote } from '../core/errors.js';
import { parseProxyUrl } from './proxy.js';
import { execPlugin } from './exec-credential.js';
import { obj, str, unavailable, type Obj, type Tls, type UserCtx } from './kubeconfig-values.js';

/**
 * The kubeconfig, read as kubectl reads it: `--kubeconfig`, else every file of KUBECONFIG merged (the first to name a
 * cluster, user or context wins; paths are relative to the file that names them), else ~/.kube/config, else the
 * pod's ServiceAccount. Credentials: client certificates, bearer tokens and token files (read again every minute),
 * basic auth, and exec plugins (client.authentication.k8s.io v1 and v1beta1, their credential kept until it expires).
 *
 * Why not @kubernetes/client-node's KubeConfig: importing it loads the library's whole generated API, a large share
 * of the executor's resident memory on a large cluster (bench/probes-memory.bench.js measures the executor without it). The legacy `auth-provider`
 * users (oidc, gcp, azure, removed from kubectl since 1.26) are still served by it, loaded only for them.
 */

/** What one request needs: the server's address and trust, and the credentials to send. */
export interface Credentials {
  headers: Record<string, string>;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  /** insecure-skip-tls-verify. */
  insecure: boolean;
  servername?: string;
}

export interface ClientConfig {
  /** The context in use (`in-cluster` for the pod's ServiceAccount). */
  readonly contextName: string;
  readonly server: string;
  /** The cluster's proxy-url: the apiserver is reached through it. */
  readonly proxyUrl?: URL;
  /** Headers and TLS material for the next request; exec plugins run here when their credential is due. */
  credentials(): Promise<Credentials>;
}

export interface LoadOptions {
  /** A kubeconfig file; KUBECONFIG, ~/.kube/config or the in-cluster ServiceAccount when absent. */
  file?: string;
  context?: string;
  /** The pod's ServiceAccount, whatever kubeconfig exists. */
  inCluster?: boolean;
  clock?: Clock;
  /** The environment (tests give their own). */
  env?: Record<string, string | undefined>;
  /**
   * Where FILE came from, for messages (`--kubeconfig`, `the inventory's spec.kubeconfig at FILE:LINE:COL`); without
   * FILE, where KUBECONFIG came from. `--kubeconfig` when FILE is given and this is absent.
   */
  origin?: string;
}

const SERVICE_ACCOUNT = '/var/run/secrets/kubernetes.io/serviceaccount';
/** The context name of the pod's own ServiceAccount config, as `spec.safety.allowContexts` matches it. */
const IN_CLUSTER_CONTEXT = 'in-cluster';
const TOKEN_FILE_REREAD_MS = 60_000;

interface Named {
  /** The file that named it: its relative paths are relative to this file's directory. */
  dir: string;
  value: Obj;
}
interface Merged {
  clusters: Map<string, Named>;
  users: Map<string, Named>;
  contexts: Map<string, Named>;
  current?: string;
  files: string[];
}

function readKubeconfig(file: string, into: Merged): void {
  let doc: Obj;
  try {
    doc = obj(parse(readFileSync(file, 'utf8')));
  } catch (e) {
    throw unavailable(`cannot load the kubeconfig ${quotePath(file)}: ${messageOf(e)}`, e);
  }
  const dir = dirname(resolve(file));
  for (const [list, field] of [
    [into.clusters, 'cluster'],
    [into.users, 'user'],
    [into.contexts, 'context'],
  ] as const)
    for (const entry of Array.isArray(doc[`${field}s`]) ? (doc[`${field}s`] as unknown[]) : []) {
      const e = obj(entry);
      const name = str(e.name);
      if (name && !list.has(name)) list.set(name, { dir, value: obj(e[field]) });
    }
  into.current ??= str(doc['current-context']);
  into.files.push(file);
}

/** A kubeconfig named that does not exist: bad input (exit 2), naming where the name came from. */
function missing(message: string): KrError {
  return new KrError('KUBECONFIG_MISSING', message, {
    exit: 2,
    details: ["the kubeconfig is the first of: --kubeconfig, $KUBECONFIG, the inventory's spec.kubeconfig, ~/.kube/config"],
  });
}

/** A path quoted whole: a message that lists the files read must show each one in full. */
const quotePath = (path: string) => quote(path, Infinity);

/** The files to read, as kubectl picks them; undefined when only the in-cluster ServiceAccount is left. */
function kubeconfigFiles(file: string | undefined, env: Record<string, string | undefined>, origin = '--kubeconfig'): string[] | undefined {
  if (file) {
    if (!existsSync(file)) throw missing(`the kubeconfig ${quotePath(file)} (from ${origin}) does not exist`);
    return [file];
  }
  const listed = (env.KUBECONFIG ?? '').split(':').filter(Boolean);
  if (listed.length) {
    const present = listed.filter((f) => existsSync(f));
    if (!present.length) throw missing(`$KUBECONFIG names no file that exists (got ${quotePath(env.KUBECONFIG ?? '')})`);
    return present;
  }
  const home = join(env.HOME || homedir(), '.kube', 'config');
  return existsSync(home) ? [home] : undefined;
}

/** Where the files read came from, for messages. */
function originOf(file: string | undefined, env: Record<string, string | undefined>, origin: string | undefined): string {
  if (file) return origin ?? '--kubeconfig';
  if ((env.KUBECONFIG ?? '').split(':').some(Boolean)) return origin ?? '$KUBECONFIG';
  return '~/.kube/config';
}

/**
 * The context names of the kubeconfig kubectl would read (FILE, else KUBECONFIG's files, else ~/.kube/config),
 * sorted; none when there is no kubeconfig or it cannot be read. For shell completion, which must not fail.
 */
export function kubeconfigContexts(file: string | undefined, env: Record<string, string | undefined> = process.env): string[] {
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map(), files: [] };
  // a missing or broken file adds nothing rather than failing
  const attempt = (read: () => void) => {
    try {
      read();
    } catch {
      /* nothing to add */
    }
  };
  let files: string[] = [];
  attempt(() => (files = kubeconfigFiles(file, env) ?? []));
  for (const f of files) attempt(() => readKubeconfig(f, merged));
  return [...merged.contexts.keys()].sort();
}

/**
 * The contexts (in the order the files list them) and the current-context of the kubeconfig kubectl would read:
 * FILE (from ORIGIN), else KUBECONFIG's files, else ~/.kube/config; undefined when there is none. A file named that
 * does not exist throws KUBECONFIG_MISSING (exit 2), one that cannot be read KUBE_UNAVAILABLE.
 */
export function kubeconfigContextList(
  file: string | undefined,
  env: Record<string, string | undefined> = process.env,
  origin?: string,
): { names: string[]; current?: string } | undefined {
  const files = kubeconfigFiles(file, env, origin);
  if (!files) return undefined;
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map(), files: [] };
  for (const f of files) readKubeconfig(f, merged);
  return { names: [...merged.contexts.keys()], current: merged.current };
}

/** Loads the kubeconfig (or the ServiceAccount) and picks the context. Bad input throws KrError with exit 2 or 3. */
export function loadClientConfig(o: LoadOptions = {}): ClientConfig {
  const env = o.env ?? process.env;
  const clock = o.clock ?? realClock;
  if (o.inCluster) return inClusterConfig(env, clock);
  const files = kubeconfigFiles(o.file, env, o.origin);
  if (!files) {
    if (env.KUBERNETES_SERVICE_HOST && existsSync(`${SERVICE_ACCOUNT}/token`)) return inClusterConfig(env, clock);
    throw missing(
      `no kubeconfig: ~/.kube/config (${quotePath(join(env.HOME || homedir(), '.kube', 'config'))}) does not exist; give --kubeconfig or set KUBECONFIG`,
    );
  }
  const merged: Merged = { clusters: new Map(), users: new Map(), contexts: new Map(), files: [] };
  for (const f of files) readKubeconfig(f, merged);
  const where = merged.files.map(quotePath).join(', ');
  const contextName = o.context ?? merged.current;
  if (o.context && !merged.contexts.has(o.context))
    throw new KrError(
      'KUBE_CONTEXT_UNKNOWN',
      `no context ${quote(o.context)} in the kubeconfig (known: ${[...merged.contexts.keys()].join(', ') || 'none'})`,
      {
        exit: 2,
        details: [
          `it read ${where} (from ${originOf(o.file, env, o.origin)}); name one of its contexts with --context, or another kubeconfig with --kubeconfig (kubectl config get-contexts lists them)`,
        ],
      },
    );
  if (!contextName) throw unavailable(`the kubeconfig ${where} has no current-context; give --context`);
  const context = merged.contexts.get(contextName);
  if (!context) throw unavailable(`the kubeconfig's current-context ${quote(contextName)} is not among its contexts (${where})`);
  const clusterName = str(context.value.cluster);
  const cluster = clusterName ? merged.clusters.get(clusterName) : undefined;
  if (!cluster) throw unavailable(`the kubeconfig's context ${quote(contextName)} names no cluster that exists (${where})`);
  const userName = str(context.value.user);
  const user = userName ? merged.users.get(userName) : undefined;
  if (userName && !user)
    throw unavailable(`the kubeconfig's context ${quote(contextName)} names user ${quote(userName)}, which it does not define (${where})`);
  const server = str(cluster.value.server);
  if (!server) throw unavailable(`the kubeconfig's cluster ${quote(clusterName)} has no server (${where})`);
  const proxy = str(cluster.value['proxy-url']);
  const tls = clusterTls(cluster);
  const config =
    user && Object.keys(obj(user.value['auth-provider'])).length
      ? authProviderConfig(files, contextName, server, tls)
      : { contextName, server, credentials: userCredentials(user ?? { dir: '', value: {} }, { server, tls, clock, env, contextName }) };
  // the route to the server last: its address and trust, and the credentials, are the context's own
  return { ...config, proxyUrl: proxy ? parseProxyUrl(proxy, `the kubeconfig's cluster ${quote(clusterName)} (${where})`) : undefined };
}

/** A `*-data` field (base64) or the file its sibling names, relative to the kubeconfig that names it. */
function material(n: Named, field: string): Buffer | undefined {
  const data = str(n.value[`${field}-data`]);
  if (data) return Buffer.from(data, 'base64');
  const file = str(n.value[field]);
  if (!file) return undefined;
  const path = isAbsolute(file) ? file : join(n.dir, file);
  try {
    return readFileSync(path);
  } catch (e) {
    throw unavailable(`cannot read ${field} ${quotePath(path)} named in the kubeconfig: ${messageOf(e)}`, e);
  }
}

function clusterTls(c: Named): Tls {
  const ca = material(c, 'certificate-authority');
  return {
    ca,
    insecure: c.value['insecure-skip-tls-verify'] === true,
    servername: str(c.value['tls-server-name']),
    caData: ca?.toString('base64'),
  };
}

function userCredentials(user: Named, u: UserCtx): () => Promise<Credentials> {
  const base = { ca: u.tls.ca, insecure: u.tls.insecure, servername: u.tls.servername };
  const cert = material(user, 'client-certificate');
  const key = material(user, 'client-key');
  if (Boolean(cert) !== Boolean(key))
    throw unavailable(
      `the kubeconfig's user of context ${quote(u.contextName)} has a client certificate without its key, or a key without its certificate`,
    );
  const token = str(user.value.token);
  const tokenFile = str(user.value.tokenFile);
  const username = str(user.value.username);
  const password = str(user.value.password);
  const fromFile = tokenFile ? rereadEvery(isAbsolute(tokenFile) ? tokenFile : join(user.dir, tokenFile), u.clock) : undefined;
  const exec = obj(user.value.exec);
  if (Object.keys(exec).length) {
    const plugin = execPlugin(exec, user.dir, u);
    return async (): Promise<Credentials> => {
      const c = await plugin();
      const headers: Record<string, string> = c.token ? { Authorization: `Bearer ${c.token}` } : {};
      return { ...base, headers, cert: c.cert ?? cert, key: c.key ?? key };
    };
  }
  return async () => {
    const bearer = token ?? fromFile?.();
    const headers: Record<string, string> = {};
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    else if (username) headers.Authorization = `Basic ${Buffer.from(`${username}:${password ?? ''}`).toString('base64')}`;
    return { ...base, headers, cert, key };
  };
}

/** A token file's content, read again once a minute (a projected ServiceAccount token rotates). */
function rereadEvery(path: string, clock: Clock): () => string {
  let value = '';
  let readAt = -Infinity;
  return () => {
    if (clock.now() - readAt >= TOKEN_FILE_REREAD_MS) {
      try {
        value = readFileSync(path, 'utf8').trim();
      } catch (e) {
        throw unavailable(`cannot read the token file ${quotePath(path)}: ${messageOf(e)}`, e);
      }
      readAt = clock.now();
    }
    return value;
  };
}

/** The pod's ServiceAccount: the apiserver's in-cluster address, the mounted CA, the token (re-read as it rotates). */
function inClusterConfig(env: Record<string, string | undefined>, clock: Clock): ClientConfig {
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) throw unavailable('not in a pod: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set');
  for (const f of ['token', 'ca.crt'])
    if (!existsSync(`${SERVICE_ACCOUNT}/${f}`))
      throw unavailable(`no ServiceAccount ${f} at ${SERVICE_ACCOUNT}/${f} (automountServiceAccountToken off?)`);
  const ca = readFileSync(`${SERVICE_ACCOUNT}/ca.crt`);
  const token = rereadEvery(`${SERVICE_ACCOUNT}/token`, clock);
  return {
    contextName: IN_CLUSTER_CONTEXT,
    server: `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    credentials: async () => ({ headers: { Authorization: `Bearer ${token()}` }, ca, insecure: false }),
  };
}

/**
 * A legacy auth-provider user: @kubernetes/client-node applies it (loaded here only). Its config module, not the
 * package's index: the index brings the whole generated API along (a single executable's bundle 3 MB larger).
 */
function authProviderConfig(files: string[], contextName: string, server: string, tls: Tls): ClientConfig {
  let applying: Promise<(o: Obj) => Promise<void>> | undefined;
  const load = async () => {
    const { KubeConfig } = await import('@kubernetes/client-node/dist/config.js');
    const kc = new KubeConfig();
    if (files.length === 1) kc.loadFromFile(files[0]!);
    else kc.loadFromDefault();
    kc.setCurrentContext(contextName);
    return (o: Obj) => kc.applyToHTTPSOptions(o as never);
  };
  return {
    contextName,
    server,
    async credentials() {
      applying ??= load();
      const o: { headers?: Record<string, unknown>; cert?: Buffer; key?: Buffer } = { headers: {} };
      await (
        await applying
      )(o);
      const headers = Object.fromEntries(Object.entries(o.headers ?? {}).map(([k, v]) => [k, String(v)]));
      return { headers, ca: tls.ca, cert: o.cert, key: o.key, insecure: tls.insecure, servername: tls.servername };
    },
  };
}
