import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { FakeClock } from '../testing/fake-clock.js';
import { loadClientConfig } from './kubeconfig.js';
import { krThrown } from '../testing/kr-failure.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'kr-kubeconfig-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const write = (name: string, doc: unknown) => {
  const f = join(dir, name);
  mkdirSync(join(f, '..'), { recursive: true });
  writeFileSync(f, typeof doc === 'string' ? doc : stringify(doc));
  return f;
};
const config = (o: { clusters?: unknown[]; users?: unknown[]; contexts?: unknown[]; current?: string }) => ({
  apiVersion: 'v1',
  kind: 'Config',
  clusters: o.clusters ?? [],
  users: o.users ?? [],
  contexts: o.contexts ?? [],
  ...(o.current ? { 'current-context': o.current } : {}),
});
const env = (e: Record<string, string> = {}) => ({ HOME: dir, PATH: process.env.PATH ?? '', ...e });
const b64 = (s: string) => Buffer.from(s).toString('base64');

describe('loadClientConfig', () => {
  it('reads the current context: server, CA relative to the file, client certificate', async () => {
    write('conf/ca.pem', 'CA PEM');
    const file = write(
      'conf/config',
      config({
        clusters: [
          { name: 'c', cluster: { server: 'https://10.0.0.1:6443', 'certificate-authority': 'ca.pem', 'tls-server-name': 'api.internal' } },
        ],
        users: [{ name: 'u', user: { 'client-certificate-data': b64('CERT'), 'client-key-data': b64('KEY') } }],
        contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
        current: 'ctx',
      }),
    );
    const c = loadClientConfig({ file, env: env() });
    expect([c.contextName, c.server]).toEqual(['ctx', 'https://10.0.0.1:6443']);
    const creds = await c.credentials();
    expect(creds.ca?.toString()).toBe('CA PEM');
    expect([creds.cert?.toString(), creds.key?.toString(), creds.servername, creds.insecure]).toEqual([
      'CERT',
      'KEY',
      'api.internal',
      false,
    ]);
    expect(creds.headers).toEqual({});
  });

  it('--context picks another context; an unknown one is exit 2 naming the known ones', async () => {
    const file = write(
      'config',
      config({
        clusters: [
          { name: 'a', cluster: { server: 'https://a:6443', 'insecure-skip-tls-verify': true } },
          { name: 'b', cluster: { server: 'https://b:6443' } },
        ],
        users: [{ name: 'u', user: { token: 'sekret' } }],
        contexts: [
          { name: 'one', context: { cluster: 'a', user: 'u' } },
          { name: 'two', context: { cluster: 'b', user: 'u' } },
        ],
        current: 'one',
      }),
    );
    const two = loadClientConfig({ file, context: 'two', env: env() });
    expect(two.server).toBe('https://b:6443');
    expect((await two.credentials()).headers).toEqual({ Authorization: 'Bearer sekret' });
    expect((await loadClientConfig({ file, env: env() }).credentials()).insecure).toBe(true);
    const e = krThrown(() => loadClientConfig({ file, context: 'three', env: env() }));
    expect([e.code, e.exit, e.message]).toEqual(['KUBE_CONTEXT_UNKNOWN', 2, 'no context "three" in the kubeconfig (known: one, two)']);
    expect(e.details[0]).toMatch(
      /^it read .*; name one of its contexts with --context, or another kubeconfig with --kubeconfig \(kubectl config get-contexts lists them\)$/,
    );
  });

  it('merges KUBECONFIG as kubectl does: the first file to name an entry wins, paths relative to the file naming them', async () => {
    write('a/ca.pem', 'CA OF A');
    write('b/ca.pem', 'CA OF B');
    write('b/token', 'token-from-b\n');
    const a = write(
      'a/config',
      config({ clusters: [{ name: 'c', cluster: { server: 'https://first:6443', 'certificate-authority': 'ca.pem' } }], current: 'ctx' }),
    );
    const b = write(
      'b/config',
      config({
        clusters: [{ name: 'c', cluster: { server: 'https://second:6443', 'certificate-authority': 'ca.pem' } }],
        users: [{ name: 'u', user: { tokenFile: 'token' } }],
        contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
        current: 'other',
      }),
    );
    const c = loadClientConfig({ env: env({ KUBECONFIG: `${a}:${join(dir, 'missing')}:${b}` }) });
    expect([c.contextName, c.server]).toEqual(['ctx', 'https://first:6443']);
    const creds = await c.credentials();
    expect([creds.ca?.toString(), creds.headers.Authorization]).toEqual(['CA OF A', 'Bearer token-from-b']);
  });

  it('reads a token file again once a minute (a projected token rotates)', async () => {
    const token = write('token', 'one');
    const file = write(
      'config',
      config({
        clusters: [{ name: 'c', cluster: { server: 'https://c' } }],
        users: [{ name: 'u', user: { tokenFile: token } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        current: 'x',
      }),
    );
    const clock = new FakeClock();
    const c = loadClientConfig({ file, clock, env: env() });
    expect((await c.credentials()).headers.Authorization).toBe('Bearer one');
    writeFileSync(token, 'two');
    await clock.advance(30_000);
    expect((await c.credentials()).headers.Authorization).toBe('Bearer one');
    await clock.advance(30_000);
    expect((await c.credentials()).headers.Authorization).toBe('Bearer two');
  });

  it('sends basic auth when the user has a username and password', async () => {
    const file = write(
      'config',
      config({
        clusters: [{ name: 'c', cluster: { server: 'https://c' } }],
        users: [{ name: 'u', user: { username: 'admin', password: 'p:w' } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        current: 'x',
      }),
    );
    expect((await loadClientConfig({ file, env: env() }).credentials()).headers).toEqual({ Authorization: `Basic ${b64('admin:p:w')}` });
  });

  it('hands a legacy auth-provider user to @kubernetes/client-node', async () => {
    const expiry = new Date(Date.UTC(2099, 0, 1)).toISOString();
    const file = write(
      'config',
      config({
        clusters: [{ name: 'c', cluster: { server: 'https://c', 'certificate-authority-data': b64('CA') } }],
        users: [{ name: 'u', user: { 'auth-provider': { name: 'gcp', config: { 'access-token': 'gcp-token', expiry } } } }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        current: 'x',
      }),
    );
    const creds = await loadClientConfig({ file, env: env() }).credentials();
    expect([creds.headers.Authorization, creds.ca?.toString()]).toEqual(['Bearer gcp-token', 'CA']);
  });

  it("takes a cluster's proxy-url as kubectl does, and refuses one it would not (exit 2, no password shown)", () => {
    const ctx = [{ name: 'x', context: { cluster: 'c', user: 'u' } }];
    const load = (proxy: string) =>
      loadClientConfig({
        file: write(
          'config',
          config({
            clusters: [{ name: 'c', cluster: { server: 'https://c', 'proxy-url': proxy } }],
            users: [{ name: 'u', user: {} }],
            contexts: ctx,
            current: 'x',
          }),
        ),
        env: env(),
      });
    for (const proxy of ['http://proxy:3128', 'https://user:pw@proxy:443', 'socks5://127.0.0.1:1080', 'socks5h://bastion:1080'])
      expect(load(proxy).proxyUrl?.href).toBe(new URL(proxy).href);
    for (const proxy of ['ftp://user:hunter2@proxy:21', 'not a url :hunter2@']) {
      const e = krThrown(() => load(proxy));
      expect([e.code, e.exit]).toEqual(['KUBE_PROXY_URL', 2]);
      expect(e.message).toMatch(/the kubeconfig's cluster "c" \(.*config.*\): proxy-url/);
      expect(e.message).not.toContain('hunter2');
    }
  });

  it('says what is wrong with a kubeconfig it cannot use, exit 3', () => {
    const ctx = [{ name: 'x', context: { cluster: 'c', user: 'u' } }];
    const cases: [unknown, RegExp][] = [
      [
        config({ clusters: [{ name: 'c', cluster: { server: 'https://c' } }], users: [{ name: 'u', user: {} }], contexts: ctx }),
        /has no current-context; give --context/,
      ],
      [config({ users: [{ name: 'u', user: {} }], contexts: ctx, current: 'x' }), /context "x" names no cluster that exists/],
      [
        config({ clusters: [{ name: 'c', cluster: { server: 'https://c' } }], contexts: ctx, current: 'x' }),
        /names user "u", which it does not define/,
      ],
      [
        config({ clusters: [{ name: 'c', cluster: {} }], users: [{ name: 'u', user: {} }], contexts: ctx, current: 'x' }),
        /cluster "c" has no server/,
      ],
      [
        config({
          clusters: [{ name: 'c', cluster: { server: 'https://c' } }],
          users: [{ name: 'u', user: { 'client-certificate-data': b64('C') } }],
          contexts: ctx,
          current: 'x',
        }),
        /client certificate without its key/,
      ],
      [
        config({
          clusters: [{ name: 'c', cluster: { server: 'https://c', 'certificate-authority': 'nope.pem' } }],
          users: [{ name: 'u', user: {} }],
          contexts: ctx,
          current: 'x',
        }),
        /cannot read certificate-authority ".*nope\.pem"/,
      ],
      ['clusters: [unclosed', /cannot load the kubeconfig ".*config"/],
    ];
    for (const [doc, message] of cases) {
      const e = krThrown(() => loadClientConfig({ file: write('config', doc), env: env() }));
      expect([e.code, e.exit]).toEqual(['KUBE_UNAVAILABLE', 3]);
      expect(e.message).toMatch(message);
    }
  });

  it('a kubeconfig named that does not exist is bad input (exit 2) naming where the name came from', () => {
    const missing = (o: Parameters<typeof loadClientConfig>[0]) => {
      const e = krThrown(() => loadClientConfig(o));
      expect([e.code, e.exit]).toEqual(['KUBECONFIG_MISSING', 2]);
      return e.message;
    };
    expect(missing({ file: join(dir, 'absent'), env: env() })).toBe(
      `the kubeconfig "${join(dir, 'absent')}" (from --kubeconfig) does not exist`,
    );
    expect(missing({ file: join(dir, 'absent'), env: env(), origin: "the inventory's spec.kubeconfig at inv.yaml:7:15" })).toBe(
      `the kubeconfig "${join(dir, 'absent')}" (from the inventory's spec.kubeconfig at inv.yaml:7:15) does not exist`,
    );
    expect(missing({ env: env({ KUBECONFIG: join(dir, 'absent') }) })).toBe(
      `$KUBECONFIG names no file that exists (got "${join(dir, 'absent')}")`,
    );
    expect(missing({ env: env() })).toBe(
      `no kubeconfig: ~/.kube/config ("${join(dir, '.kube', 'config')}") does not exist; give --kubeconfig or set KUBECONFIG`,
    );
  });

  it('lists the files it read in full, however long their paths, and where they came from', () => {
    const long = join('a'.repeat(70), 'b'.repeat(70), 'config');
    const file = write(
      long,
      config({
        clusters: [{ name: 'c', cluster: { server: 'https://c' } }],
        contexts: [{ name: 'one', context: { cluster: 'c' } }],
        current: 'one',
      }),
    );
    const e = krThrown(() => loadClientConfig({ file, context: 'two', env: env() }));
    expect(e.details[0]).toContain(`it read ${JSON.stringify(file)} (from --kubeconfig);`);
    const merged = krThrown(() => loadClientConfig({ context: 'two', env: env({ KUBECONFIG: `${file}:${file}` }) }));
    expect(merged.details[0]).toContain(`it read ${JSON.stringify(file)}, ${JSON.stringify(file)} (from $KUBECONFIG);`);
  });

  describe('exec credential plugins', () => {
    /** A plugin that records each call (its args and KUBERNETES_EXEC_INFO) and answers with `answer`. */
    function plugin(answer: string, exit = 0): string {
      const f = write(
        'bin/plugin',
        `#!/bin/sh\nprintf '%s\\n' "$#" "$@" "$KUBERNETES_EXEC_INFO" "$EXTRA" >> "${dir}/calls"\necho '${answer}'\necho 'plugin says no' >&2\nexit ${exit}\n`,
      );
      chmodSync(f, 0o755);
      return f;
    }
    const calls = () => readFileSync(join(dir, 'calls'), 'utf8').trim().split('\n');
    const withExec = (exec: Record<string, unknown>) =>
      write(
        'config',
        config({
          clusters: [{ name: 'c', cluster: { server: 'https://c:6443', 'certificate-authority-data': b64('CA') } }],
          users: [{ name: 'u', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', ...exec } } }],
          contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
          current: 'x',
        }),
      );
    const credential = (status: Record<string, unknown>) =>
      JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status });

    it('runs the plugin without a shell, with its args and env, and keeps the token until shortly before it expires', async () => {
      const clock = new FakeClock();
      const expiry = new Date(clock.now() + 60_000).toISOString();
      plugin(credential({ token: 'tok-1', expirationTimestamp: expiry }));
      const file = withExec({
        command: './bin/plugin',
        args: ['get-token', '$(touch pwned)', 'a b;c'],
        env: [{ name: 'EXTRA', value: 'x y' }],
        provideClusterInfo: true,
      });
      const c = loadClientConfig({ file, clock, env: env() });
      expect((await c.credentials()).headers).toEqual({ Authorization: 'Bearer tok-1' });
      expect((await c.credentials()).headers).toEqual({ Authorization: 'Bearer tok-1' });
      const first = calls();
      expect(first.slice(0, 4)).toEqual(['3', 'get-token', '$(touch pwned)', 'a b;c']);
      expect(JSON.parse(first[4]!)).toEqual({
        apiVersion: 'client.authentication.k8s.io/v1',
        kind: 'ExecCredential',
        spec: { interactive: false, cluster: { server: 'https://c:6443', 'certificate-authority-data': b64('CA') } },
      });
      expect(first[5]).toBe('x y');
      expect(first).toHaveLength(6);
      await clock.advance(45_000);
      await c.credentials();
      expect(calls()).toHaveLength(6);
      await clock.advance(6_000);
      await c.credentials();
      expect(calls()).toHaveLength(12);
      expect(() => readFileSync(join(dir, 'pwned'))).toThrow();
    });

    it('takes a client certificate from the plugin', async () => {
      plugin(credential({ clientCertificateData: 'CERT PEM', clientKeyData: 'KEY PEM' }));
      const creds = await loadClientConfig({ file: withExec({ command: './bin/plugin' }), env: env() }).credentials();
      expect([creds.cert?.toString(), creds.key?.toString(), creds.headers]).toEqual(['CERT PEM', 'KEY PEM', {}]);
    });

    it('says why a plugin gave no credential, without echoing its answer', async () => {
      plugin(credential({ token: 'tok' }), 1);
      await expect(loadClientConfig({ file: withExec({ command: './bin/plugin' }), env: env() }).credentials()).rejects.toThrow(
        /exec plugin of context "x": "\.\/bin\/plugin" failed: plugin says no/,
      );
      plugin(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'Other', status: { token: 'secret-token' } }));
      const wrong = loadClientConfig({ file: withExec({ command: './bin/plugin' }), env: env() }).credentials();
      await expect(wrong).rejects.toThrow(/answered something that is not an ExecCredential: kind "Other"/);
      await expect(wrong).rejects.not.toThrow(/secret-token/);
      await expect(
        loadClientConfig({
          file: withExec({ command: 'kr-no-such-plugin', installHint: 'install it with: brew install kr-plugin' }),
          env: env(),
        }).credentials(),
      ).rejects.toThrow(/"kr-no-such-plugin" was not found \(install it with: brew install kr-plugin\)/);
      expect(krThrown(() => loadClientConfig({ file: withExec({ command: 'x', interactiveMode: 'Always' }), env: env() })).message).toMatch(
        /needs a terminal/,
      );
      expect(
        krThrown(() =>
          loadClientConfig({ file: withExec({ command: 'x', apiVersion: 'client.authentication.k8s.io/v1alpha1' }), env: env() }),
        ).message,
      ).toMatch(/apiVersion "client.authentication.k8s.io\/v1alpha1"/);
    });
  });
});
