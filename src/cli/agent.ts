import { readlinkSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import { realClock } from '../core/clock.js';
import { parseDuration } from '../core/duration.js';
import { EXIT, KrError, isKrError, messageOf, quote } from '../core/errors.js';
import { createLogger } from '../core/logger.js';
import { agentTargets } from '../engine/agents.js';
import { sensitiveGrants } from '../engine/sensitive-access.js';
import { createKubeAccess } from '../kube/client.js';
import { DNS_LABEL } from '../core/names.js';
import { HALT_NAME, HALT_NAMESPACE } from '../kube/halt.js';
import { executorKey } from '../nodes/agent-auth.js';
import { RESULT_KEY_ENV } from '../nodes/agent-protocol.js';
import { agentNeeds, checkAgentAccess, hostArgv, serveAgent } from '../nodes/agent-server.js';
import { runProcess } from '../nodes/exec-process.js';
import { out } from './output.js';
import { inventoryFrom } from './setup.js';
import type { CommandHelp, Register } from './types.js';

interface AgentFlags {
  node: string;
  namespace: string;
  runId: string;
  enter: string;
  executorKey: string;
  faultTtl: string;
  haltNamespace?: string[];
}

/** Where Kubernetes reads a container's last words (terminationMessagePath's default). */
const TERMINATION_LOG = '/dev/termination-log';

/** Output kept per script and stream: a result ConfigMap holds both within its 1 MiB. */
const MAX_OUTPUT_BYTES = 256 * 1024;

const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

/**
 * The process whose namespaces scripts enter: the host's first process; where even root may not open its namespaces
 * (a machine whose init is sandboxed, as in a microVM: this project's lab machine), the agent's parent, which in a
 * pod sharing the host's PID namespace is its container runtime's shim (containerd's, CRI-O's conmon), a process of
 * the host's namespaces. Checked by reading the mount namespace's link, which is what nsenter opens.
 */
function defaultHostPid(): number {
  try {
    readlinkSync('/proc/1/ns/mnt');
    return 1;
  } catch {
    return process.ppid > 1 ? process.ppid : 1;
  }
}

/** The agent in its pod: the in-cluster client, the scripts run on the host, until SIGTERM (the pod deleted). */
async function runAgent(flags: AgentFlags): Promise<void> {
  if (!NAME.test(flags.node)) throw new KrError('BAD_NODE', `--node ${quote(flags.node)} is not a Node name`, { exit: EXIT.invalid });
  if (!NAME.test(flags.namespace))
    throw new KrError('BAD_NAMESPACE', `--namespace ${quote(flags.namespace)} is not a namespace name`, { exit: EXIT.invalid });
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/.test(flags.runId))
    throw new KrError('BAD_RUN_ID', `--run-id ${quote(flags.runId)} is not a run id`, { exit: EXIT.invalid });
  if (flags.enter !== 'host' && flags.enter !== 'mount')
    throw new KrError('BAD_ENTER', `--enter is host or mount (got ${quote(flags.enter)})`, { exit: EXIT.invalid });
  const key = executorKey(flags.executorKey);
  if (!key) throw new KrError('BAD_EXECUTOR_KEY', `--executor-key is not an Ed25519 public key (base64 SPKI)`, { exit: EXIT.invalid });
  for (const ns of flags.haltNamespace ?? [])
    if (!DNS_LABEL.test(ns))
      throw new KrError('BAD_NAMESPACE', `--halt-namespace ${quote(ns)} is not a namespace name`, { exit: EXIT.invalid });
  const faultTtlMs = parseDuration(flags.faultTtl);
  if (faultTtlMs === undefined || faultTtlMs <= 0)
    throw new KrError('BAD_FAULT_TTL', `--fault-ttl ${quote(flags.faultTtl)} is not a duration`, { exit: EXIT.invalid });
  const resultKey = Buffer.from(process.env[RESULT_KEY_ENV] ?? '', 'base64');
  if (resultKey.length < 32)
    throw new KrError(
      'NO_RESULT_KEY',
      `${RESULT_KEY_ENV} is not set to the node's result key (the executor gives it through a Secret in the pod's environment)`,
      {
        exit: EXIT.invalid,
      },
    );
  // the lab's simulated nodes name their stand-in (the node's anchor process, as a pod's pause container)
  const hostPid = Number(process.env.KUBE_RUNBOOK_AGENT_HOST_PID ?? defaultHostPid());
  if (!Number.isInteger(hostPid) || hostPid < 1)
    throw new KrError('BAD_HOST_PID', `KUBE_RUNBOOK_AGENT_HOST_PID is not a pid (got ${quote(process.env.KUBE_RUNBOOK_AGENT_HOST_PID)})`, {
      exit: EXIT.invalid,
    });
  const log = createLogger(
    (level, msg) => process.stderr.write(`${new Date(realClock.now()).toISOString()} ${level} agent ${flags.node}: ${msg}\n`),
    'info',
  );
  const kube = createKubeAccess({ inCluster: true, clock: realClock, log });
  const api = { json: kube.json!.bind(kube) };
  const o = {
    node: flags.node,
    namespace: flags.namespace,
    runId: flags.runId,
    agent: process.env.POD_NAME ?? `agent-${flags.node}`,
    executorKey: key,
    resultKey,
    faultTtlMs,
    ...(flags.haltNamespace?.length ? { haltNamespaces: flags.haltNamespace } : {}),
  };
  await checkAgentAccess(o, api);
  const stop = new AbortController();
  for (const s of ['SIGTERM', 'SIGINT'] as const) process.once(s, () => stop.abort());
  const argv = hostArgv(flags.enter, hostPid);
  log.info(
    `serving run ${flags.runId} from ${flags.namespace}; scripts run in the namespaces of pid ${hostPid} (${flags.enter === 'host' ? 'all' : 'mount only'})`,
  );
  const end = await serveAgent(o, {
    api,
    clock: realClock,
    log,
    signal: stop.signal,
    run: (wired, timeoutMs) =>
      runProcess(
        { argv, stdin: wired, node: flags.node, transport: 'agent', timeoutMs },
        { clock: realClock, log, maxOutputBytes: MAX_OUTPUT_BYTES },
      ),
  });
  kube.close?.();
  log.info(end === 'run gone' ? 'the run is gone; stopped (the pod completes)' : 'stopped');
}

/** The agents' one right outside their namespace: `get` on the halt, by name, where it is (once per namespace). */
function haltReadRbac(ns: string, accounts: { namespace: string; serviceAccount: string }[], labels: Record<string, string>): unknown[] {
  const meta = { name: 'kube-runbook-agent-halt', namespace: ns, labels };
  return [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: meta,
      rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], resourceNames: [HALT_NAME], verbs: ['get'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: meta,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: meta.name },
      subjects: accounts.map((a) => ({ kind: 'ServiceAccount', name: a.serviceAccount, namespace: a.namespace })),
    },
  ];
}

/**
 * The objects the agents of an inventory need: per agent namespace, the Namespace (privileged), ServiceAccount, Role
 * and RoleBinding; and a warning per privileged namespace and per sensitive grant (none today), for stderr.
 */
export async function agentManifests(flags: {
  inventory?: string;
  haltNamespace?: string[];
}): Promise<{ yaml: string; warnings: string[] }> {
  const inv = await inventoryFrom(flags);
  const targets = agentTargets(inv.inventory, inv.inventory.spec.nodes);
  if (!targets.length)
    throw new KrError(
      'NO_AGENT_NODES',
      `the inventory ${quote(inv.inventory.metadata.name)} reaches no node through an agent (spec.transport type agent)`,
      {
        exit: EXIT.invalid,
      },
    );
  const accounts = new Map<string, { namespace: string; serviceAccount: string }>();
  for (const t of targets) accounts.set(`${t.config.namespace}/${t.config.serviceAccount}`, t.config);
  const labels = { 'app.kubernetes.io/name': 'kube-runbook-agent', 'app.kubernetes.io/managed-by': 'kube-runbook' };
  const docs: unknown[] = [];
  const warnings: string[] = [];
  for (const ns of [...new Set([...accounts.values()].map((a) => a.namespace))].sort()) {
    warnings.push(
      `namespace ${ns} admits privileged pods: whoever may create pods, exec into them or read Secrets there is root on the nodes (see docs/security.md)`,
    );
    docs.push({
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: {
        name: ns,
        // the agents are privileged pods in the host's PID and network namespaces: only this level admits them
        labels: {
          ...labels,
          'pod-security.kubernetes.io/enforce': 'privileged',
          'pod-security.kubernetes.io/audit': 'privileged',
          'pod-security.kubernetes.io/warn': 'privileged',
        },
      },
    });
  }
  for (const a of [...accounts.values()].sort((x, y) =>
    `${x.namespace}/${x.serviceAccount}`.localeCompare(`${y.namespace}/${y.serviceAccount}`),
  )) {
    const meta = { name: a.serviceAccount, namespace: a.namespace, labels };
    // what the agent itself checks when it starts (agentNeeds): read its node's scripts, write their results, read the run Lease
    const rules = new Map<string, Set<string>>();
    for (const n of agentNeeds(a.namespace, 'run')) {
      const key = `${n.group ?? ''}/${n.resource}`;
      rules.set(key, (rules.get(key) ?? new Set()).add(n.verb));
    }
    const policy = [...rules.entries()].map(([key, verbs]) => {
      const [group, resource] = key.split('/');
      return { apiGroups: [group!], resources: [resource!], verbs: [...verbs].sort() };
    });
    for (const g of sensitiveGrants({ cluster: [], namespaced: { [a.namespace]: policy } }))
      warnings.push(`Role ${a.namespace}/${a.serviceAccount} grants ${g.grant}: ${g.why}`);
    docs.push(
      { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: meta,
        rules: policy,
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta,
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: a.serviceAccount },
        subjects: [{ kind: 'ServiceAccount', name: a.serviceAccount, namespace: a.namespace }],
      },
    );
  }
  for (const ns of new Set([HALT_NAMESPACE, ...(flags.haltNamespace ?? [])])) {
    if (!DNS_LABEL.test(ns))
      throw new KrError('BAD_NAMESPACE', `--halt-namespace ${quote(ns)} is not a namespace name`, { exit: EXIT.invalid });
    docs.push(...haltReadRbac(ns, [...accounts.values()], labels));
  }
  return { yaml: docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n'), warnings };
}

const collect = (v: string, all: string[] = []) => [...all, v];

export const register: Register = (program, done) => {
  const agent = program
    .command('agent')
    .description("The node agent, as its pod runs it: takes the run's scripts for one node through the API and runs them on the host.")
    .option('--node <name>', 'the node it runs on')
    .option('--namespace <ns>', 'where the requests and the run Lease are')
    .option('--run-id <id>', 'the run it serves')
    .option('--enter <where>', "host: scripts run in PID 1's namespaces (nsenter); mount: in its mount namespace only (the lab)", 'host')
    .option(
      '--executor-key <base64>',
      "the public key of the executor that starts it: it runs only requests signed with the key's private half",
    )
    .option('--fault-ttl <duration>', "the run's faultTtl: this long without a renewal of the run Lease, the agent ends")
    .option(
      '--halt-namespace <ns>',
      "where a halt that stops its run is (the cluster's, kube-system, and the run lock's namespace): followed; repeatable",
      collect,
    )
    .action(async (flags: Partial<AgentFlags>) => {
      const names = { node: 'node', namespace: 'namespace', runId: 'run-id', executorKey: 'executor-key', faultTtl: 'fault-ttl' } as const;
      for (const [f, name] of Object.entries(names))
        if (!flags[f as keyof typeof names])
          throw new KrError(
            'MISSING_OPTION',
            `kube-runbook agent needs --${name} (the executor starts agents; see kube-runbook agent manifests)`,
            { exit: EXIT.invalid },
          );
      try {
        await runAgent(flags as AgentFlags);
      } catch (e) {
        // the pod's status shows why the agent could not serve (the executor's preflight reads it); the kubelet makes
        // the file, so nothing is written where there is none (outside a pod)
        await writeFile(
          TERMINATION_LOG,
          `${isKrError(e) ? `${e.message}${e.details.length ? `; ${e.details.join('; ')}` : ''}` : messageOf(e)}\n`,
          { flag: 'r+' },
        ).catch(() => undefined);
        throw e;
      }
      done(EXIT.ok);
    });
  agent
    .command('manifests')
    .description("Print the Namespace (Pod Security level privileged), ServiceAccount and least RBAC of the inventory's node agents.")
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option(
      '--halt-namespace <ns>',
      "a run lock's namespace (runbooks' spec.safety.lockNamespace) whose halt the agents also read; repeatable (the cluster's, in kube-system, always)",
      collect,
    )
    .action(async (flags: { inventory?: string; haltNamespace?: string[] }) => {
      const { yaml, warnings } = await agentManifests(flags);
      for (const w of warnings) out.stderr(`warning: ${w}`);
      out.stdout(yaml.trimEnd());
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Operate',
  examples: [['agent manifests -i inventory.yaml | kubectl apply -f -', 'the namespace and RBAC of the node agents of managed nodes']],
};
