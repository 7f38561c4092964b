import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * The kube-runbook package the lab serves (its root: bin/, dist/, runbooks/), found as Node finds the package the lab
 * imports: the workspace's link in a checkout, or wherever npm installed it.
 */
export function productRoot(): string {
  return dirname(createRequire(import.meta.url).resolve('kube-runbook/package.json'));
}

/** The product's CLI (bin/kube-runbook.js), which the lab runs as a child: the demo's runs, the node agents' pods. */
export const productCli = (): string => join(productRoot(), 'bin', 'kube-runbook.js');
