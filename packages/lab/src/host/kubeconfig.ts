import { readFile, writeFile } from 'node:fs/promises';
import { stringify } from 'yaml';

export type KubeconfigUser = { certFile: string; keyFile: string } | { token: string };

export interface KubeconfigSpec {
  context: string;
  server: string;
  caFile: string;
  userName: string;
  user: KubeconfigUser;
}

/** A kubeconfig with the CA and client credentials embedded (so it can be copied elsewhere); written mode 0600. */
export async function writeKubeconfig(file: string, spec: KubeconfigSpec): Promise<void> {
  const b64 = async (f: string) => (await readFile(f)).toString('base64');
  const user =
    'token' in spec.user
      ? { token: spec.user.token }
      : { 'client-certificate-data': await b64(spec.user.certFile), 'client-key-data': await b64(spec.user.keyFile) };
  const doc = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: spec.context, cluster: { server: spec.server, 'certificate-authority-data': await b64(spec.caFile) } }],
    users: [{ name: spec.userName, user }],
    contexts: [{ name: spec.context, context: { cluster: spec.context, user: spec.userName } }],
    'current-context': spec.context,
    preferences: {},
  };
  await writeFile(file, stringify(doc), { mode: 0o600 });
}
