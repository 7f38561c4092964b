import { z } from 'zod';
import type { Ctx } from '../contract/context.js';
import { KrError, messageOf } from '../core/errors.js';
import { formatDuration } from '../core/duration.js';
import { duration, httpUrl } from '../core/zod-helpers.js';
import { httpGet } from '../kube/http-get.js';
import { defineProbe, type Reading } from '../contract/probe.js';
import { polled } from '../contract/readings.js';

const Params = z.strictObject({
  url: httpUrl()
    .optional()
    .meta({ description: "the address clients use (the VIP); https://<the inventory's first spec.apiserver.endpoints> when absent" }),
  path: z
    .string()
    .regex(/^\/[^\s]*$/)
    .default('/readyz'),
  cacert: z.string().min(1).optional().meta({
    description: "CA file to check the server's certificate with; without it the certificate is not checked (no credentials are sent)",
  }),
  interval: duration().prefault('500ms').meta({ description: 'how often a request is sent, as a client retrying would' }),
  timeout: duration().prefault('2s').meta({ description: 'an answer slower than this counts as an error' }),
  maxGap: duration().prefault('10s').meta({ description: 'violated while no request has succeeded for longer than this' }),
});
type Params = z.output<typeof Params>;

export interface AvailabilityValue {
  url: string;
  requests: number;
  errors: number;
  /** The last request answered 200. */
  up: boolean;
  /** ms since the last success while requests fail; 0 while up. */
  currentGapMs: number;
  /** The longest time between two successes (or from a success to now) seen so far, ms. */
  longestGapMs: number;
  lastError?: string;
}

/** The apiserver as a client sees it through the address it uses (the VIP of an HA control plane). */
export default defineProbe({
  meta: {
    access: [
      {
        nonResourceURL: '/readyz',
        verbs: ['get'],
        why: 'asks the apiserver (through the load balancer) whether it is ready, at an interval',
      },
    ],
    id: 'apiserver-availability',
    summary: 'GET /readyz through the VIP at a short interval: errors and the longest gap without an answer.',
    description:
      'Asks `url` (the VIP: the first `spec.apiserver.endpoints` of the inventory by default) for `/readyz` every ' +
      '`interval`, from this machine, as a client behind the load balancer would, whatever the kubeconfig points at. It ' +
      'counts requests and errors (anything but 200, or no answer within `timeout`) and measures gaps: the time from ' +
      'one successful answer to the next. Ok while the current gap is within `maxGap`; violated while it is longer ' +
      '(the VIP or every apiserver behind it is down). The value carries the longest gap seen, the figure an HA game ' +
      'day reports. Polled: availability has no event stream.',
    params: Params,
  },
  start(ctx, params) {
    const url = endpointUrl(ctx, params);
    let requests = 0;
    let errors = 0;
    let lastOk: number | undefined;
    let longest = 0;
    let lastError: string | undefined;
    const check = async (): Promise<Reading<AvailabilityValue>> => {
      requests++;
      let up = false;
      try {
        const a = await httpGet(url, {
          timeoutMs: params.timeout,
          signal: ctx.signal,
          clock: ctx.clock,
          ca: params.cacert,
          insecure: !params.cacert,
          maxBytes: 4096,
        });
        up = a.status === 200;
        if (!up) lastError = `HTTP ${a.status}`;
      } catch (e) {
        lastError = messageOf(e);
      }
      const now = ctx.clock.now();
      if (!up) errors++;
      if (lastOk !== undefined) longest = Math.max(longest, now - lastOk);
      if (up) lastOk = now;
      const gap = up || lastOk === undefined ? 0 : now - lastOk;
      const value: AvailabilityValue = {
        url,
        requests,
        errors,
        up,
        currentGapMs: gap,
        longestGapMs: longest,
        ...(lastError ? { lastError } : {}),
      };
      const base = `${requests} request(s), ${errors} error(s), longest gap ${formatDuration(longest)}`;
      if (up) return { status: 'ok', at: now, value, detail: `answers; ${base}` };
      const detail = `no answer for ${formatDuration(gap)} (${lastError}); ${base}`;
      const status = lastOk === undefined || gap > params.maxGap ? 'violated' : 'ok';
      return { status, at: now, value, detail };
    };
    return polled(ctx, params.interval, check, (r) => `${r.status}|${r.value.up}|${r.value.errors}|${r.value.longestGapMs}`);
  },
});

function endpointUrl(ctx: Ctx, params: Params): string {
  const base =
    params.url ?? (ctx.inventory.spec.apiserver?.endpoints[0] ? `https://${ctx.inventory.spec.apiserver.endpoints[0]}` : undefined);
  if (!base)
    throw new KrError('PROBE_NO_URL', 'apiserver-availability: give `url`, or list the VIP in the inventory (spec.apiserver.endpoints)', {
      exit: 2,
    });
  return base.replace(/\/$/, '') + params.path;
}
