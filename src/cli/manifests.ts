import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { EXIT, KrError, quote } from '../core/errors.js';
import { planAccessAnyServer, rbacRules } from '../engine/access.js';
import { contextAllowed } from '../engine/contexts.js';
import { sensitiveGrants } from '../engine/sensitive-access.js';
import { buildPlan } from '../engine/static-checks.js';
import { defaultRegistry } from '../engine/registry.js';
import { journalKeySecret } from '../journal/key.js';
import { loadRunbook } from '../runbook/load.js';
import { out } from './output.js';
import { runObservers } from '../session/observers.js';
import { inventoryFrom } from './setup.js';
import type { CommandHelp, Register } from './types.js';
import { toolVersion } from '../core/version.js';
import {
  avoidingNodes,
  EXECUTOR_RESOURCES,
  faultedNodes,
  RESTRICTED_CONTAINER,
  RESTRICTED_NAMESPACE_LABELS,
  RESTRICTED_POD,
  runDeadlines,
  shortHash,
} from './manifests-pod.js';
import { DNS_LABEL } from '../core/names.js';
import type { Plan } from '../engine/plan.js';
import type { Inventory } from '../inventory/schema.js';

interface ManifestFlags {
  inventory?: string;
  schedule?: string;
  namespace: string;
  image: string;
  sshSecret?: string;
  /** Also write the report to the ConfigMap `<name>-report` in the namespace (created here; get and patch of it granted). */
  reportConfigmap?: boolean;
}

/** Where the Job mounts the runbook and inventory (ConfigMap), the ssh key (Secret) and its journal (emptyDir; copied to a ConfigMap). */
const CONFIG_DIR = '/etc/kube-runbook';
const SSH_DIR = '/etc/kube-runbook-ssh';
const STATE_DIR = '/var/lib/kube-runbook';

/** Five fields, as CronJob takes them (or @hourly and friends); the apiserver checks the rest. */
const CRON = /^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$/;

/** The names, labels and files every object of one rendering shares. */
interface Names {
  flags: ManifestFlags;
  ns: string;
  name: string;
  labels: Record<string, string>;
  meta: (extra?: Record<string, unknown>) => Record<string, unknown>;
  subject: { kind: string; name: string; namespace: string }[];
  runbookText: string;
  inventoryText: string;
  /** The immutable ConfigMap of the runbook and inventory. */
  configName: string;
  journalName: string;
  reportName: string;
  /** The ConfigMaps of the run's own state: the journal's copy (and the report). */
  stateNames: string[];
}

/**
 * Everything a cluster needs to run a runbook by itself: a Namespace that admits only `restricted` pods,
 * ServiceAccount, the least-privilege ClusterRole (and a Role per namespace where a module reads only there) with
 * their bindings, made from the modules' own `meta.access` (the declarations preflight checks), an immutable ConfigMap
 * with the runbook and inventory, the ConfigMaps the run keeps its journal (and report) in with a Role for exactly
 * those, and a Job (or a CronJob that never runs two at once). Nothing is retried by Kubernetes: a fault injection is
 * not run twice by accident.
 */
export async function renderManifests(
  runbookFile: string,
  flags: ManifestFlags,
  nonce = randomBytes(8).toString('hex'),
): Promise<{ yaml: string; warnings: string[] }> {
  const [loaded, inv] = await Promise.all([loadRunbook(runbookFile, defaultRegistry), inventoryFrom(flags)]);
  checkFlags(flags, inv.inventory);
  const plan = await buildPlan({ runbook: loaded.runbook, file: runbookFile, inventory: inv.inventory, registry: defaultRegistry });
  const names = namesOf(plan, flags, readFileSync(runbookFile, 'utf8'), readFileSync(inv.file, 'utf8'));
  const needed = await planAccessAnyServer(plan, defaultRegistry, await runObservers());
  const rules = rbacRules(needed);
  const avoided = faultedNodes(plan);
  const docs: unknown[] = [...accessDocs(names, rules), ...stateDocs(names), runDoc(names, plan, avoided, nonce)];
  const warnings = manifestWarnings(plan, rules, avoided);
  return { yaml: docs.map((d) => stringify(d, { lineWidth: 0, aliasDuplicateObjects: false })).join('---\n'), warnings };
}

/** Refuses a namespace, schedule or Secret name the cluster would refuse, and the node agents' namespace. */
function checkFlags(flags: ManifestFlags, inventory: Inventory): void {
  if (!DNS_LABEL.test(flags.namespace))
    throw new KrError('BAD_NAMESPACE', `--namespace ${quote(flags.namespace)} is not a DNS label`, { exit: EXIT.invalid });
  if (flags.schedule !== undefined && !CRON.test(flags.schedule.trim()))
    throw new KrError('BAD_SCHEDULE', `--schedule ${quote(flags.schedule)} is not a cron schedule (five fields, or @hourly, @daily…)`, {
      exit: EXIT.invalid,
    });
  if (flags.sshSecret !== undefined && !DNS_LABEL.test(flags.sshSecret))
    throw new KrError('BAD_SECRET', `--ssh-secret ${quote(flags.sshSecret)} is not a Secret name`, { exit: EXIT.invalid });
  const agentNamespaces = new Set(
    [inventory.spec.transport, ...inventory.spec.nodes.map((n) => n.transport)].flatMap((t) => (t?.type === 'agent' ? [t.namespace] : [])),
  );
  if (agentNamespaces.has(flags.namespace))
    throw new KrError(
      'BAD_NAMESPACE',
      `--namespace ${quote(flags.namespace)} is the node agents' namespace, which must stay privileged; the executor's namespace admits only restricted pods: choose another`,
      { exit: EXIT.invalid },
    );
}

function namesOf(plan: Plan, flags: ManifestFlags, runbookText: string, inventoryText: string): Names {
  const runbookName = plan.runbook.metadata.name;
  const name = `kube-runbook-${runbookName}`.slice(0, 52).replace(/-+$/, '');
  const ns = flags.namespace;
  const labels = { 'app.kubernetes.io/name': 'kube-runbook', 'app.kubernetes.io/instance': runbookName };
  const journalName = `${name}-journal`;
  const reportName = `${name}-report`;
  return {
    flags,
    ns,
    name,
    labels,
    meta: (extra = {}) => ({ name, labels, ...extra }),
    subject: [{ kind: 'ServiceAccount', name, namespace: ns }],
    runbookText,
    inventoryText,
    // immutable, so named by its content: a changed runbook is a new ConfigMap, and a Job never reads a file edited under it
    configName: `${name}-${shortHash(runbookText, inventoryText)}`,
    journalName,
    reportName,
    stateNames: [journalName, ...(flags.reportConfigmap ? [reportName] : [])],
  };
}

/** The restricted Namespace, the ServiceAccount, and the least-privilege ClusterRole and Roles with their bindings. */
function accessDocs({ ns, name, meta, subject }: Names, { cluster, namespaced }: ReturnType<typeof rbacRules>): unknown[] {
  const docs: unknown[] = [
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns, labels: { 'app.kubernetes.io/name': 'kube-runbook', ...RESTRICTED_NAMESPACE_LABELS } },
    },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: meta({ namespace: ns }) },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: meta(), rules: cluster },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: meta(),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: subject,
    },
  ];
  for (const [where, rules] of Object.entries(namespaced).sort(([a], [b]) => a.localeCompare(b)))
    docs.push(
      { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: meta({ namespace: where }), rules },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: meta({ namespace: where }),
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
        subjects: subject,
      },
    );
  return docs;
}

/**
 * The run's own state in the cluster: the journal's copy (and the report), created here, so the ServiceAccount
 * needs no `create` (which RBAC cannot limit to a name), only get and patch of these names; no data, so
 * applying the manifests again leaves what runs wrote; and the Secret of the key that signs the journal's copy
 * (src/journal/key.ts), filled by the first run: who may write ConfigMaps here but not read Secrets cannot forge a
 * journal for `recover --from-cluster` to run. Last, the immutable ConfigMap of the runbook and inventory.
 */
function stateDocs({ ns, name, labels, subject, stateNames, journalName, configName, runbookText, inventoryText }: Names): unknown[] {
  const stateRole = `${name}-state`;
  const keyName = journalKeySecret({ namespace: ns, name: journalName }).name;
  return [
    ...stateNames.map((n) => ({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: n, namespace: ns, labels } })),
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: keyName, namespace: ns, labels }, type: 'Opaque' },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: stateRole, namespace: ns, labels },
      rules: [
        { apiGroups: [''], resources: ['configmaps'], resourceNames: stateNames, verbs: ['get', 'patch'] },
        { apiGroups: [''], resources: ['secrets'], resourceNames: [keyName], verbs: ['get', 'patch'] },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: stateRole, namespace: ns, labels },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: stateRole },
      subjects: subject,
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: configName, namespace: ns, labels },
      immutable: true,
      data: { 'runbook.yaml': runbookText, 'inventory.yaml': inventoryText },
    },
  ];
}

/** The executor's pod: restricted, kept off the nodes the runbook faults, its config, state and ssh key mounted. */
function executorPod({ flags, ns, name, configName, journalName, reportName }: Names, plan: Plan, avoided: string[]) {
  const volumes: unknown[] = [
    { name: 'config', configMap: { name: configName } },
    { name: 'state', emptyDir: {} },
    ...(flags.sshSecret ? [{ name: 'ssh', secret: { secretName: flags.sshSecret, defaultMode: 0o400 } }] : []),
  ];
  const mounts: unknown[] = [
    { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
    { name: 'state', mountPath: STATE_DIR },
    ...(flags.sshSecret ? [{ name: 'ssh', mountPath: SSH_DIR, readOnly: true }] : []),
  ];
  return {
    serviceAccountName: name,
    restartPolicy: 'Never',
    // SIGTERM (the pod deleted, the Job's deadline) starts the rollback: it gets the whole of its time
    terminationGracePeriodSeconds: runDeadlines(plan).terminationGracePeriodSeconds,
    securityContext: RESTRICTED_POD,
    ...(avoided.length ? { affinity: avoidingNodes(avoided) } : {}),
    containers: [
      {
        name: 'kube-runbook',
        image: flags.image,
        args: [
          'run',
          `${CONFIG_DIR}/runbook.yaml`,
          '--inventory',
          `${CONFIG_DIR}/inventory.yaml`,
          '--in-cluster',
          '--yes',
          '--output',
          'json',
          '--journal-configmap',
          `${ns}/${journalName}`,
          ...(flags.reportConfigmap ? ['--report-configmap', `${ns}/${reportName}`] : []),
        ],
        env: [{ name: 'KUBE_RUNBOOK_STATE_DIR', value: STATE_DIR }],
        resources: EXECUTOR_RESOURCES,
        volumeMounts: mounts,
        securityContext: RESTRICTED_CONTAINER,
      },
    ],
    volumes,
  };
}

/** The Job that runs the runbook once, or the CronJob that runs it on `--schedule`, never two at once. */
function runDoc(names: Names, plan: Plan, avoided: string[], nonce: string): unknown {
  const { flags, ns, name, labels, meta, runbookText, inventoryText } = names;
  // a run is never retried by the Job controller: its exit code is the verdict, and a fault is not applied twice
  const jobSpec = {
    backoffLimit: 0,
    activeDeadlineSeconds: runDeadlines(plan).activeDeadlineSeconds,
    template: { metadata: { labels }, spec: executorPod(names, plan, avoided) },
  };
  return flags.schedule
    ? {
        apiVersion: 'batch/v1',
        kind: 'CronJob',
        metadata: meta({ namespace: ns }),
        spec: {
          schedule: flags.schedule.trim(),
          concurrencyPolicy: 'Forbid',
          successfulJobsHistoryLimit: 3,
          failedJobsHistoryLimit: 3,
          jobTemplate: { spec: jobSpec },
        },
      }
    : // a name per rendering: applying the same output again changes nothing, rendering again starts a new run
      {
        apiVersion: 'batch/v1',
        kind: 'Job',
        metadata: { name: `${name}-${shortHash(runbookText, inventoryText, nonce)}`, namespace: ns, labels },
        spec: jobSpec,
      };
}

/** Every grant that gives more than it reads like, one line each (stdout's YAML stays as it is), and a Job that cannot run. */
function manifestWarnings(plan: Plan, rules: ReturnType<typeof rbacRules>, avoided: string[]): string[] {
  const warnings: string[] = sensitiveGrants(rules).map((g) => `grants ${g.grant}: ${g.why}`);
  if (!plan.safety.allowContexts.some((p) => contextAllowed('in-cluster', '', [p.replace(/@.*$/, '')])))
    warnings.push(
      `the runbook's spec.safety.allowContexts (${plan.safety.allowContexts.join(', ') || 'none'}) does not allow the in-cluster context: ` +
        'add `in-cluster@https://KUBERNETES_SERVICE_HOST:PORT` (see docs/in-cluster.md), or the Job is refused at preflight',
    );
  const nodes = plan.inventory.spec.nodes.map((n) => n.name);
  if (nodes.length && nodes.every((n) => avoided.includes(n)))
    warnings.push(
      `the runbook acts on every node of the inventory (${nodes.join(', ')}): the Job's pod, kept off them, runs only on a Node the inventory does not list`,
    );
  return warnings;
}

export const register: Register = (program, done) => {
  program
    .command('manifests')
    .description(
      'Print the Kubernetes objects that run a runbook in the cluster: restricted namespace, least-privilege RBAC, ConfigMaps, Job or CronJob.',
    )
    .argument('<runbook>', 'runbook file')
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option('--schedule <cron>', 'a CronJob on this schedule (concurrencyPolicy: Forbid) instead of a Job')
    .option('--namespace <ns>', 'namespace of the ServiceAccount, ConfigMap and Job', 'kube-runbook')
    .option('--image <image>', 'executor image', `ghcr.io/kube-runbook/kube-runbook:${toolVersion()}`)
    .option(
      '--report-configmap',
      'the Job also writes its report to the ConfigMap <name>-report (created empty here; the Job may get and patch that one ConfigMap)',
    )
    .option('--ssh-secret <name>', 'a Secret with the ssh key and known_hosts the inventory names, mounted at ' + SSH_DIR)
    .action(async (file: string, flags: ManifestFlags) => {
      const { yaml, warnings } = await renderManifests(file, flags);
      for (const w of warnings) out.stderr(`warning: ${w}`);
      out.stdout(yaml.trimEnd());
      done(EXIT.ok);
    });
};

/** Where `--help` lists it, and its examples. */
export const help: CommandHelp = {
  group: 'Operate',
  examples: [
    ['manifests runbook.yaml -i inventory.yaml | kubectl apply -f -', 'run a runbook once as a Job in the cluster'],
    ["manifests runbook.yaml -i inventory.yaml --schedule '0 3 * * 1'", 'every Monday at 03:00 as a CronJob'],
  ],
};
