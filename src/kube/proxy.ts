import http from 'node:http';
import https from 'node:https';
import { HttpProxyAgent, HttpsProxyAgent } from 'hpagent';
import { SocksProxyAgent } from 'socks-proxy-agent';
import { KrError, quote } from '../core/errors.js';
import { redactText } from '../core/redact.js';

/*
 * A kubeconfig cluster's `proxy-url`, as kubectl reads it: the apiserver reached through an HTTP or HTTPS proxy
 * (CONNECT) or a SOCKS5 one, common behind a bastion. The tunnels are hpagent's and socks-proxy-agent's (the ones
 * @kubernetes/client-node uses); TLS to the apiserver runs inside them with the kubeconfig's CA, client certificate
 * and server name, as without a proxy.
 */

const PROTOCOLS = new Set(['http:', 'https:', 'socks5:', 'socks5h:']);

/** A cluster's proxy-url, checked; `where` names the kubeconfig and cluster for errors. */
export function parseProxyUrl(value: string, where: string): URL {
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new KrError('KUBE_PROXY_URL', `${where}: proxy-url ${quote(value.replace(/:[^:@/]*@/, ':***@'))} is not a URL`, { exit: 2 });
  }
  if (!PROTOCOLS.has(u.protocol))
    throw new KrError(
      'KUBE_PROXY_URL',
      `${where}: proxy-url ${quote(redactText(u.href))} is not http://, https:// or socks5:// (as kubectl takes them)`,
      { exit: 2 },
    );
  return u;
}

/** TLS to the apiserver: on the agent without a proxy, on each request through a SOCKS tunnel (which reads them there). */
export interface ServerTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

/** What each request carries of the TLS options: all of them through a SOCKS tunnel, none otherwise (the agent has them). */
export const requestTls = (secure: boolean, tls: ServerTls, proxy?: URL): Partial<ServerTls> =>
  secure && proxy?.protocol.startsWith('socks') ? tls : {};

/** The keep-alive agent requests to the apiserver go through: directly, or through the proxy. */
export function agentFor(secure: boolean, tls: ServerTls, proxy?: URL): http.Agent {
  const keep = { keepAlive: true };
  if (!proxy) return secure ? new https.Agent({ ...keep, ...tls }) : new http.Agent(keep);
  if (proxy.protocol.startsWith('socks')) return new SocksProxyAgent(proxy, keep);
  return secure ? new HttpsProxyAgent({ ...keep, ...tls, proxy }) : new HttpProxyAgent({ ...keep, proxy });
}
