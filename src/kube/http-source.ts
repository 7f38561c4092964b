import type { KubeHttp } from './http.js';
import { statusFromBody } from './http.js';
import type { ListPage, ListRequest, ListWatchSource, RawObject, WatchEvent, WatchRequest } from './source.js';
import { parseKubeVersion, traitsOf } from './versions.js';

/** The list+watch source of a real apiserver: JSON lists in pages, newline-delimited JSON watch streams. */
export function httpSource(kube: KubeHttp, options: { listTimeoutMs?: number; connectTimeoutMs?: number } = {}): ListWatchSource {
  const listTimeoutMs = options.listTimeoutMs ?? 30_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 10_000;
  let streams: Promise<boolean> | undefined;
  return {
    async list(req: ListRequest): Promise<ListPage> {
      const body = await kube.json<{ metadata?: { resourceVersion?: string; continue?: string }; items?: RawObject[] }>(req.path, {
        query: { limit: req.limit, continue: req.continue, labelSelector: req.labelSelector, fieldSelector: req.fieldSelector },
        timeoutMs: listTimeoutMs,
        signal: req.signal,
      });
      return { items: body.items ?? [], resourceVersion: body.metadata?.resourceVersion ?? '', continue: body.metadata?.continue };
    },

    async watch(req: WatchRequest): Promise<AsyncIterable<WatchEvent>> {
      const res = await kube.open(req.path, {
        query: {
          watch: 1,
          resourceVersion: req.resourceVersion,
          sendInitialEvents: req.sendInitialEvents,
          resourceVersionMatch: req.sendInitialEvents ? 'NotOlderThan' : undefined,
          allowWatchBookmarks: req.allowWatchBookmarks,
          timeoutSeconds: req.timeoutSeconds,
          labelSelector: req.labelSelector,
          fieldSelector: req.fieldSelector,
        },
        timeoutMs: connectTimeoutMs,
        signal: req.signal,
      });
      if (res.statusCode !== 200) {
        res.setEncoding('utf8');
        let body = '';
        for await (const chunk of res) body += chunk as string;
        throw statusFromBody(res.statusCode ?? 0, body);
      }
      res.setEncoding('utf8');
      return (async function* () {
        let buffered = '';
        try {
          for await (const chunk of res) {
            buffered += chunk as string;
            let nl: number;
            while ((nl = buffered.indexOf('\n')) >= 0) {
              const line = buffered.slice(0, nl).trim();
              buffered = buffered.slice(nl + 1);
              if (line) yield JSON.parse(line) as WatchEvent;
            }
          }
        } finally {
          res.destroy();
        }
      })();
    },

    /** Asked once per source, by the server's version (a failed answer is asked again). */
    streamsInitialEvents(signal: AbortSignal): Promise<boolean> {
      streams ??= kube.request('/version', { signal }).then((a) => {
        if (a.status !== 200) throw statusFromBody(a.status, a.body);
        return traitsOf(parseKubeVersion((JSON.parse(a.body) as { gitVersion?: string }).gitVersion)).knowsSendInitialEvents;
      });
      return streams.catch((e: unknown) => {
        streams = undefined;
        throw e;
      });
    },

    async ping(signal: AbortSignal): Promise<void> {
      const a = await kube.request('/version', { signal });
      if (a.status !== 200) throw statusFromBody(a.status, a.body);
    },
  };
}
