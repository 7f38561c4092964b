import { EXIT, KrError, quote } from '../core/errors.js';
import { DNS_LABEL } from '../core/names.js';
import type { ConfigMapRef } from '../kube/configmap.js';

/** `namespace/name` of a ConfigMap flag (`--journal-configmap`, `--from-cluster`), checked before anything runs. */
export function configMapRef(flag: string, ref: string): ConfigMapRef {
  const [namespace = '', name = '', ...rest] = ref.split('/');
  if (rest.length || !DNS_LABEL.test(namespace) || !DNS_LABEL.test(name))
    throw new KrError('BAD_CONFIGMAP', `${flag} ${quote(ref)} is not namespace/name`, { exit: EXIT.invalid });
  return { namespace, name };
}
