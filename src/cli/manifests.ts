import { readFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { EXIT, KrError, quote } from '../core/errors.js';
import { planAccessAnyServer, rbacRules } from '../engine/access.js';
import { contextAllowed } from '../engine/preflight.js';
import { buildPlan } from '../engine/plan.js';
import { defaultRegistry } from '../engine/registry.js';
import { loadRunbook } from '../runbook/load.js';
import { out } from './output.js';
import { runObservers } from './run.js';
import { inventoryFrom } from './setup.js';
import type { Register } from './types.js';
import { toolVersion } from '../core/version.js';

interface ManifestFlags {
  inventory?: string;
  schedule?: string;
  namespace: string;
  image: string;
  sshSecret?: string;
  /** Also write the report to the ConfigMap `<name>-report` in the namespace (and grant exactly that). */
  reportConfigmap?: boolean;
}

/** Where the Job mounts the runbook and inventory (ConfigMap), the ssh key (Secret) and its journal (emptyDir). */
const CONFIG_DIR = '/etc/kube-runbook';
const SSH_DIR = '/etc/kube-runbook-ssh';
const STATE_DIR = '/var/lib/kube-runbook';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** Five fields, as CronJob takes them (or @hourly and friends); the apiserver checks the rest. */
const CRON = /^(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|(\S+\s+){4}\S+)$/;


/**
 * Everything a cluster needs to run a runbook by itself: Namespace, ServiceAccount, the least-privilege ClusterRole
 * (and a Role per namespace where a module reads only there) with their bindings, made from the modules' own
 * `meta.access` (the declarations preflight checks), a ConfigMap with the runbook and inventory, and a Job (or a
 * CronJob that never runs two at once). Nothing is retried by Kubernetes: a fault injection is not run twice by accident.
 */
export async function renderManifests(runbookFile: string, flags: ManifestFlags): Promise<{ yaml: string; warnings: string[] }> {
  const [loaded, inv] = await Promise.all([loadRunbook(runbookFile, defaultRegistry), inventoryFrom(flags)]);
  if (!DNS_LABEL.test(flags.namespace)) throw new KrError('BAD_NAMESPACE', `--namespace ${quote(flags.namespace)} is not a DNS label`, { exit: EXIT.invalid });
  if (flags.schedule !== undefined && !CRON.test(flags.schedule.trim()))
    throw new KrError('BAD_SCHEDULE', `--schedule ${quote(flags.schedule)} is not a cron schedule (five fields, or @hourly, @daily…)`, { exit: EXIT.invalid });
  if (flags.sshSecret !== undefined && !DNS_LABEL.test(flags.sshSecret))
    throw new KrError('BAD_SECRET', `--ssh-secret ${quote(flags.sshSecret)} is not a Secret name`, { exit: EXIT.invalid });
  const plan = await buildPlan({ runbook: loaded.runbook, file: runbookFile, inventory: inv.inventory, registry: defaultRegistry });
  const runbookName = plan.runbook.metadata.name;
  const name = `kube-runbook-${runbookName}`.slice(0, 52).replace(/-+$/, '');
  const ns = flags.namespace;
  const needed = await planAccessAnyServer(plan, defaultRegistry, await runObservers());
  // server-side apply of the report's ConfigMap: patch, and create the first time
  if (flags.reportConfigmap) needed.push({ by: 'run --report-configmap', access: { apiGroup: '', resource: 'configmaps', verbs: ['create', 'patch'], namespace: ns } });
  const { cluster, namespaced } = rbacRules(needed);
  const labels = { 'app.kubernetes.io/name': 'kube-runbook', 'app.kubernetes.io/instance': runbookName };
  const meta = (extra: Record<string, unknown> = {}) => ({ name, labels, ...extra });
  const subject = [{ kind: 'ServiceAccount', name, namespace: ns }];

  const docs: unknown[] = [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns, labels: { 'app.kubernetes.io/name': 'kube-runbook' } } },
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
  docs.push({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: meta({ namespace: ns }),
    data: { 'runbook.yaml': readFileSync(runbookFile, 'utf8'), 'inventory.yaml': readFileSync(inv.file, 'utf8') },
  });

  const volumes: unknown[] = [
    { name: 'config', configMap: { name } },
    { name: 'state', emptyDir: {} },
    ...(flags.sshSecret ? [{ name: 'ssh', secret: { secretName: flags.sshSecret, defaultMode: 0o400 } }] : []),
  ];
  const mounts: unknown[] = [
    { name: 'config', mountPath: CONFIG_DIR, readOnly: true },
    { name: 'state', mountPath: STATE_DIR },
    ...(flags.sshSecret ? [{ name: 'ssh', mountPath: SSH_DIR, readOnly: true }] : []),
  ];
  const podSpec = {
    serviceAccountName: name,
    restartPolicy: 'Never',
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
          ...(flags.reportConfigmap ? ['--report-configmap', `${ns}/${name}-report`] : []),
        ],
        env: [{ name: 'KUBE_RUNBOOK_STATE_DIR', value: STATE_DIR }],
        volumeMounts: mounts,
        securityContext: { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
      },
    ],
    volumes,
  };
  // a run is never retried by the Job controller: its exit code is the verdict, and a fault is not applied twice
  const jobSpec = { backoffLimit: 0, activeDeadlineSeconds: Math.ceil(plan.safety.maxDuration / 1000) + 600, template: { metadata: { labels }, spec: podSpec } };
  docs.push(
    flags.schedule
      ? {
          apiVersion: 'batch/v1',
          kind: 'CronJob',
          metadata: meta({ namespace: ns }),
          spec: { schedule: flags.schedule.trim(), concurrencyPolicy: 'Forbid', successfulJobsHistoryLimit: 3, failedJobsHistoryLimit: 3, jobTemplate: { spec: jobSpec } },
        }
      : { apiVersion: 'batch/v1', kind: 'Job', metadata: meta({ namespace: ns }), spec: jobSpec },
  );

  const warnings: string[] = [];
  if (!plan.safety.allowContexts.some((p) => contextAllowed('in-cluster', '', [p.replace(/@.*$/, '')])))
    warnings.push(
      `the runbook's spec.safety.allowContexts (${plan.safety.allowContexts.join(', ') || 'none'}) does not allow the in-cluster context: ` +
        'add `in-cluster@https://KUBERNETES_SERVICE_HOST:PORT` (see docs/in-cluster.md), or the Job is refused at preflight',
    );
  return { yaml: docs.map((d) => stringify(d, { lineWidth: 0 })).join('---\n'), warnings };
}

export const register: Register = (program, done) => {
  program
    .command('manifests')
    .description('Print the Kubernetes objects that run a runbook in the cluster: namespace, least-privilege RBAC, ConfigMap, Job or CronJob.')
    .argument('<runbook>', 'runbook file')
    .option('-i, --inventory <file>', 'inventory file (default: $KUBE_RUNBOOK_INVENTORY)')
    .option('--schedule <cron>', 'a CronJob on this schedule (concurrencyPolicy: Forbid) instead of a Job')
    .option('--namespace <ns>', 'namespace of the ServiceAccount, ConfigMap and Job', 'kube-runbook')
    .option('--image <image>', 'executor image', `ghcr.io/kube-runbook/kube-runbook:${toolVersion()}`)
    .option('--report-configmap', 'the Job also writes its report to the ConfigMap <name>-report (grants create and patch of ConfigMaps in --namespace)')
    .option('--ssh-secret <name>', 'a Secret with the ssh key and known_hosts the inventory names, mounted at ' + SSH_DIR)
    .action(async (file: string, flags: ManifestFlags) => {
      const { yaml, warnings } = await renderManifests(file, flags);
      for (const w of warnings) out.stderr(`warning: ${w}`);
      out.stdout(yaml.trimEnd());
      done(EXIT.ok);
    });
};
