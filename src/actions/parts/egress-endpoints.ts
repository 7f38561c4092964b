import type { ActionCtx } from '../../contract/context.js';
import { EXIT, KrError, messageOf, quote } from '../../core/errors.js';

export interface Endpoint {
  host: string;
  port: number;
}

const HOST = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*\.?$/;
const IPV6 = /^[0-9A-Fa-f:.]+$/;

/** `host:port`, `[v6]:port` or an https URL; the port is required except in URLs (443 there). */
export function parseEndpoint(text: string): Endpoint {
  const bad = () =>
    new KrError('BAD_ENDPOINT', `an apiserver endpoint is host:port, [IPv6]:port or https://host:port (got ${quote(text)})`, {
      exit: EXIT.invalid,
    });
  let host: string;
  let port: string;
  if (/^https?:\/\//.test(text)) {
    let u: URL;
    try {
      u = new URL(text);
    } catch {
      throw bad();
    }
    host = u.hostname.replace(/^\[|\]$/g, '');
    port = u.port || (u.protocol === 'https:' ? '443' : '80');
  } else {
    const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:[\]]+):(\d+)$/.exec(text);
    if (!m) throw bad();
    host = m[1]!;
    port = m[2]!;
  }
  const n = Number(port);
  if (!Number.isInteger(n) || n < 1 || n > 65535) throw bad();
  if (!(HOST.test(host) || (host.includes(':') && IPV6.test(host)))) throw bad();
  return { host, port: n };
}

interface EndpointsObject {
  subsets?: { addresses?: { ip?: string }[]; ports?: { name?: string; port?: number }[] }[];
}

/**
 * The apiserver endpoints kubelets talk to: `given` (a runbook param), else the inventory's
 * `spec.apiserver.endpoints`, else the kubeconfig's server plus the addresses of the `kubernetes` Endpoints.
 */
export async function apiserverEndpoints(ctx: ActionCtx, given?: string[]): Promise<Endpoint[]> {
  const listed = given ?? ctx.inventory.spec.apiserver?.endpoints;
  if (listed) return dedupe(listed.map(parseEndpoint));
  const found: Endpoint[] = [];
  try {
    found.push(parseEndpoint(ctx.kube.server));
    const r = await ctx.kube.raw('/api/v1/namespaces/default/endpoints/kubernetes', { timeoutMs: 10_000, signal: ctx.signal });
    if (r.status === 200) {
      const eps = JSON.parse(r.body) as EndpointsObject;
      for (const s of eps.subsets ?? [])
        for (const a of s.addresses ?? [])
          for (const p of s.ports ?? [])
            if (a.ip && p.port && (!p.name || p.name === 'https'))
              found.push(parseEndpoint(a.ip.includes(':') ? `[${a.ip}]:${p.port}` : `${a.ip}:${p.port}`));
    }
  } catch (e) {
    if (!found.length)
      throw new KrError(
        'NO_APISERVER_ENDPOINTS',
        `no apiserver endpoints: give them in the inventory (spec.apiserver.endpoints) or the runbook (with.endpoints); ${messageOf(e)}`,
      );
  }
  return dedupe(found);
}

function dedupe(list: Endpoint[]): Endpoint[] {
  return list.filter((e, i) => list.findIndex((x) => x.host === e.host && x.port === e.port) === i);
}
