// A stand-in apiserver for bench/probes-memory.bench.js: N nodes in 3 zones, their Leases, and P pods bound to them,
// served over plain HTTP as a 1.37 apiserver serves them (paged JSON lists, newline-delimited JSON watch streams with
// bookmarks, watch-lists), and the churn of a large cluster: every Lease renewed every `renewSeconds`, every Node's status
// posted every minute, and from `churn(K)` K pod deletions per second (each pod replaced by a new one); `lagMs` plays a
// cluster whose watchers hear of each renewal and status that long after the kubelet wrote it (a lab behind its fleet:
// thousands of Leases stale when seen, each renewal of one a change). Objects are
// made from their index when asked for, with the fields a real apiserver returns (managedFields included), so the
// server holds little itself.
/* global URL */
import { createServer } from 'node:http';
import { performance } from 'node:perf_hooks';
import { clearInterval, setInterval } from 'node:timers';

const ZONES = ['zone-a', 'zone-b', 'zone-c'];
const epochMs = () => performance.timeOrigin + performance.now();
/** RFC 3339 with microseconds, as Lease renewTime is written. */
const micro = (ms) => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
const seconds = (ms) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export function fakeApiServer({ nodes, pods, renewSeconds = 10, lagMs = 0 }) {
  let rv = 1000;
  const born = seconds(epochMs() - 3_600_000);
  const nodeName = (i) => `fleet-${String(i).padStart(5, '0')}`;
  const renewedAt = new Float64Array(nodes).fill(epochMs() - lagMs);
  /** Nodes whose kubelet stopped (silence()): no Lease renewal, no status. */
  const silent = new Uint8Array(nodes);
  const heartbeatAt = new Float64Array(nodes).fill(epochMs() - lagMs);
  /** Live pods by index; a deleted pod's index is reused by no one, its replacement takes the next one. */
  const live = [];
  for (let i = 0; i < pods; i++) live.push(i);
  let nextPod = pods;
  const podRv = new Map();

  const node = (i) => ({
    kind: 'Node',
    apiVersion: 'v1',
    metadata: {
      name: nodeName(i),
      uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      resourceVersion: String(rv),
      creationTimestamp: born,
      labels: {
        'kubernetes.io/hostname': nodeName(i),
        'kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'topology.kubernetes.io/region': 'bench',
        'topology.kubernetes.io/zone': ZONES[i % ZONES.length],
        'lab.kube-runbook.dev/fleet': 'bench',
      },
      annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
    },
    spec: { podCIDR: `10.${(i >> 8) & 255}.${i & 255}.0/24` },
    status: {
      capacity: { cpu: '8', memory: '32Gi', pods: '110' },
      allocatable: { cpu: '8', memory: '32Gi', pods: '110' },
      conditions: [
        ['MemoryPressure', 'False', 'KubeletHasSufficientMemory'],
        ['DiskPressure', 'False', 'KubeletHasNoDiskPressure'],
        ['PIDPressure', 'False', 'KubeletHasSufficientPID'],
        ['Ready', 'True', 'KubeletReady'],
      ].map(([type, status, reason]) => ({
        type,
        status,
        lastHeartbeatTime: seconds(heartbeatAt[i]),
        lastTransitionTime: born,
        reason,
        message: `kubelet ${reason}`,
      })),
      addresses: [
        { type: 'InternalIP', address: `10.250.${(i >> 8) & 255}.${i & 255}` },
        { type: 'Hostname', address: nodeName(i) },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        kubeletVersion: 'v1.37.2',
        kubeProxyVersion: 'v1.37.2',
        operatingSystem: 'linux',
        architecture: 'amd64',
        containerRuntimeVersion: 'containerd://2.1.0',
      },
    },
  });
  const lease = (i) => ({
    kind: 'Lease',
    apiVersion: 'coordination.k8s.io/v1',
    metadata: {
      name: nodeName(i),
      namespace: 'kube-node-lease',
      uid: `00000000-0000-4000-9000-${String(i).padStart(12, '0')}`,
      resourceVersion: String(rv),
      creationTimestamp: born,
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Node', name: nodeName(i), uid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}` },
      ],
    },
    spec: { holderIdentity: nodeName(i), leaseDurationSeconds: 40, renewTime: micro(renewedAt[i]) },
  });
  const pod = (i) => ({
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: {
      name: `p-${i}`,
      namespace: `ns-${i % 200}`,
      uid: `00000000-0000-4000-a000-${String(i).padStart(12, '0')}`,
      resourceVersion: String(podRv.get(i) ?? 500),
      creationTimestamp: born,
      labels: { app: `app-${i % 50}`, 'pod-template-hash': `h${i % 50}` },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `app-${i % 50}-h${i % 50}`,
          uid: `00000000-0000-4000-b000-${String(i % 50).padStart(12, '0')}`,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      managedFields: [
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: born,
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': { 'f:labels': { '.': {}, 'f:app': {} } },
            'f:spec': { 'f:containers': { 'k:{"name":"c"}': { '.': {}, 'f:image': {}, 'f:name': {} } } },
          },
        },
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'v1',
          time: born,
          fieldsType: 'FieldsV1',
          subresource: 'status',
          fieldsV1: { 'f:status': { 'f:conditions': {}, 'f:containerStatuses': {}, 'f:phase': {}, 'f:podIP': {} } },
        },
      ],
    },
    spec: {
      containers: [
        {
          name: 'c',
          image: 'registry.example/app:1.0',
          resources: { requests: { cpu: '10m', memory: '16Mi' } },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
        },
      ],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      nodeName: nodeName(i % nodes),
      securityContext: {},
      schedulerName: 'default-scheduler',
      tolerations: [
        { key: 'node.kubernetes.io/not-ready', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
        { key: 'node.kubernetes.io/unreachable', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 },
      ],
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
    },
    status: {
      phase: 'Running',
      conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
        type,
        status: 'True',
        lastProbeTime: null,
        lastTransitionTime: born,
      })),
      hostIP: `10.250.${((i % nodes) >> 8) & 255}.${(i % nodes) & 255}`,
      podIP: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      startTime: born,
      containerStatuses: [
        {
          name: 'c',
          state: { running: { startedAt: born } },
          ready: true,
          restartCount: 0,
          image: 'registry.example/app:1.0',
          imageID: 'registry.example/app@sha256:0',
          containerID: `containerd://${String(i).padStart(64, '0')}`,
          started: true,
        },
      ],
      qosClass: 'Burstable',
    },
  });

  const collections = {
    '/api/v1/nodes': { count: () => nodes, item: (k) => node(k), kind: 'NodeList' },
    '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases': { count: () => nodes, item: (k) => lease(k), kind: 'LeaseList' },
    '/api/v1/pods': { count: () => live.length, item: (k) => pod(live[k]), kind: 'PodList' },
  };
  const watchers = new Map(Object.keys(collections).map((p) => [p, new Set()]));
  const unknownPaths = new Set();
  const send = (path, type, object) => {
    const line = `${JSON.stringify({ type, object })}\n`;
    for (const res of watchers.get(path)) res.write(line);
  };

  const initialEventsEnd = () =>
    `${JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Bookmark', apiVersion: 'v1', metadata: { resourceVersion: String(rv), annotations: { 'k8s.io/initial-events-end': 'true' } } } })}\n`;
  const server = createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    const path = url.pathname;
    const json = (status, body) => {
      res.writeHead(status, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (path === '/version') return json(200, { major: '1', minor: '37', gitVersion: 'v1.37.2' });
    const c = collections[path];
    if (!c) {
      unknownPaths.add(path);
      // every other collection is empty; anything else is not found
      if (req.method === 'GET' && /^\/(api|apis)\/.+s$/.test(path) && !url.searchParams.get('watch'))
        return json(200, { kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: String(rv) }, items: [] });
      if (req.method === 'GET' && url.searchParams.get('watch')) {
        // a watch of nothing: open (headers sent at once, as the apiserver does) and silent, after the end of its
        // (no) initial events when asked for them
        res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
        res.flushHeaders();
        if (url.searchParams.get('sendInitialEvents') === 'true') res.write(initialEventsEnd());
        return;
      }
      return json(404, {
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        reason: 'NotFound',
        code: 404,
        message: `${path} not found`,
      });
    }
    if (url.searchParams.get('watch')) {
      res.writeHead(200, { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked' });
      res.flushHeaders();
      // a watch-list (1.37 streams them): every object as ADDED, then the bookmark that ends them, then the changes
      if (url.searchParams.get('sendInitialEvents') === 'true') {
        for (let k = 0; k < c.count(); k++) res.write(`${JSON.stringify({ type: 'ADDED', object: c.item(k) })}\n`);
        res.write(initialEventsEnd());
      }
      watchers.get(path).add(res);
      res.on('close', () => watchers.get(path).delete(res));
      return;
    }
    const limit = Number(url.searchParams.get('limit') || 0) || c.count();
    const from = Number(url.searchParams.get('continue') || 0);
    const to = Math.min(c.count(), from + limit);
    const items = [];
    for (let k = from; k < to; k++) items.push(c.item(k));
    json(200, {
      kind: c.kind,
      apiVersion: 'v1',
      metadata: { resourceVersion: String(rv), ...(to < c.count() ? { continue: String(to) } : {}) },
      items,
    });
  });

  const timers = [];
  /** Calls `each(i)` for every node i that is not silent once every `seconds`, spread over ticks of 100 ms. */
  const everyNode = (seconds, each) => {
    let next = 0;
    return setInterval(() => {
      const n = Math.ceil(nodes / (seconds * 10));
      for (let j = 0; j < n; j++) {
        const i = next++ % nodes;
        if (!silent[i]) each(i);
      }
    }, 100);
  };
  // lease renewals: every node every renewSeconds
  timers.push(
    everyNode(renewSeconds, (i) => {
      renewedAt[i] = epochMs() - lagMs;
      rv++;
      send('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', 'MODIFIED', lease(i));
    }),
  );
  // node status: every node every 60 s
  timers.push(
    everyNode(60, (i) => {
      heartbeatAt[i] = epochMs() - lagMs;
      rv++;
      send('/api/v1/nodes', 'MODIFIED', node(i));
    }),
  );
  // pod churn, from churn(): the oldest pod deleted, a new one added
  let deletions = 0;
  /** When each deleted pod's DELETED event was sent, by ns/name. */
  const deletedAt = new Map();
  const churn = (perSecond) =>
    timers.push(
      setInterval(() => {
        const i = live.shift();
        rv++;
        podRv.set(i, rv);
        const gone = pod(i);
        send('/api/v1/pods', 'DELETED', gone);
        deletedAt.set(`${gone.metadata.namespace}/${gone.metadata.name}`, epochMs());
        podRv.delete(i);
        deletions++;
        const j = nextPod++;
        live.push(j);
        rv++;
        podRv.set(j, rv);
        send('/api/v1/pods', 'ADDED', pod(j));
      }, 1000 / perSecond),
    );
  // bookmarks every 10 s, as a watch cache sends them (the reflector restarts a watch silent for 90 s)
  timers.push(
    setInterval(() => {
      for (const path of Object.keys(collections))
        send(path, 'BOOKMARK', { kind: 'Bookmark', apiVersion: 'v1', metadata: { resourceVersion: String(rv) } });
    }, 10_000),
  );

  return {
    listen: () => new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${server.address().port}`))),
    /** Starts `perSecond` pod deletions per second, each pod replaced by a new one. */
    churn,
    /** Stops the kubelets of `count` nodes spread over the zones (every k-th node): their Leases and status go stale. */
    silence(count) {
      const step = Math.max(1, Math.floor(nodes / count));
      for (let i = 0, n = 0; i < nodes && n < count; i += step, n++) silent[i] = 1;
    },
    stats: () => ({ deletions, unknownPaths: [...unknownPaths].sort() }),
    /** When each deleted pod's DELETED event was sent (ms since the epoch), by ns/name. */
    deletedAt,
    close: () => {
      for (const t of timers) clearInterval(t);
      for (const set of watchers.values()) for (const res of set) res.destroy();
      server.close();
    },
  };
}
