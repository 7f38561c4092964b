import { EXIT, KrError } from '../core/errors.js';
import { applyConfigMapData, type ConfigMapRef, readConfigMapData } from '../kube/configmap.js';
import type { KubeAccess } from '../kube/types.js';

/** The key of the report in its ConfigMap. */
const REPORT_KEY = 'report.json';

/** The report as `report.json` of a ConfigMap (run --report-configmap), replacing what was there. */
export async function writeReportConfigMap(kube: KubeAccess, ref: ConfigMapRef, report: unknown): Promise<void> {
  await applyConfigMapData(kube, ref, { [REPORT_KEY]: JSON.stringify(report, null, 2) });
}

/**
 * `report --from-configmap`: the text of a run's report kept in a ConfigMap, and the name its problems are told
 * under; KrError exit 3 when the ConfigMap cannot be read, exit 2 when it holds no report.
 */
export async function readReportConfigMap(kube: KubeAccess, ref: ConfigMapRef): Promise<{ text: string; name: string }> {
  const text = (await readConfigMapData(kube, ref, 'report'))[REPORT_KEY];
  const name = `configmap ${ref.namespace}/${ref.name}`;
  if (text === undefined)
    throw new KrError('REPORT_SOURCE', `${name} has no ${REPORT_KEY} key (is it a run's --report-configmap?)`, { exit: EXIT.invalid });
  return { text, name: `${name} ${REPORT_KEY}` };
}
