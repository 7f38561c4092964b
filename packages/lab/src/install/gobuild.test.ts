import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDirEach } from 'kube-runbook/internal/testing/temp-dir.js';
import { buildModuleText, etcdVersionOf, goEnv, goRunner, parseGoVersion } from './gobuild.js';

const kubeGoMod = `module k8s.io/kubernetes

go 1.25.0

godebug default=go1.25

require (
\tgithub.com/foo/bar v1.2.3
\tk8s.io/api v0.0.0
\tk8s.io/client-go v0.0.0
)

require k8s.io/kms v0.0.0 // indirect

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tk8s.io/kms => ./staging/src/k8s.io/kms
\tk8s.io/unused => ./staging/src/k8s.io/unused
)
`;

describe('the Go-module build of a Kubernetes release', () => {
  it("writes a build module from the release's own go.mod: its go and godebug lines, a replace per required staging module", () => {
    const b = buildModuleText(kubeGoMod, '1.37.2');
    expect(b.goVersion).toBe('1.25.0');
    expect(b.staging).toEqual(['k8s.io/api', 'k8s.io/client-go', 'k8s.io/kms']);
    expect(b.text).toContain('require k8s.io/kubernetes v1.37.2');
    expect(b.text).toContain('godebug default=go1.25');
    expect(b.text).toContain('\tk8s.io/client-go => k8s.io/client-go v0.37.2');
    expect(b.text).not.toContain('k8s.io/unused');
  });

  it('reads the etcd version kubeadm pins, and Go versions', () => {
    expect(etcdVersionOf('\tDefaultEtcdVersion = "3.6.5-0"\n')).toBe('3.6.5');
    expect(etcdVersionOf('nothing here')).toBeUndefined();
    expect(parseGoVersion('go version go1.26.8 linux/amd64')).toEqual([1, 26, 8]);
    expect(parseGoVersion('go1.25')).toEqual([1, 25, 0]);
  });

  it("keeps none of this machine's GO variables but GOPROXY, and pins the toolchain and caches under the cache", () => {
    const env = goEnv('/c', {
      PATH: '/usr/bin',
      GOROOT: '/usr/local/go',
      GOFLAGS: '-mod=vendor',
      GOTOOLCHAIN: 'auto',
      GOPROXY: 'https://proxy.example',
      CGO_CFLAGS: '-O0',
    });
    expect(env).toMatchObject({
      PATH: '/usr/bin',
      GOPROXY: 'https://proxy.example',
      GOTOOLCHAIN: 'local',
      GOFLAGS: '-mod=mod',
      GOMODCACHE: '/c/go/mod',
      GOCACHE: '/c/go/build',
      GOENV: 'off',
    });
    expect(env.GOROOT).toBeUndefined();
    expect(env.CGO_CFLAGS).toBeUndefined();
  });
});

describe('go, run for a build', () => {
  let dir: string;
  tempDirEach('kr-gorun-', (d) => (dir = d));

  it('gives its output, and a failure as LAB_BUILD_FAILED naming the build, the step and what go said', async () => {
    const go = join(dir, 'go');
    await writeFile(go, '#!/bin/sh\n[ "$1" = build ] && { echo "cannot find module" >&2; exit 1; }\npwd\n', { mode: 0o755 });
    const run = goRunner(go, { env: { PATH: '/usr/bin:/bin' }, label: 'containerd 2.4.0' });
    expect((await run(dir, ['list'], 'listing')).trim()).toBe(dir);
    await expect(run(dir, ['build'], 'building')).rejects.toMatchObject({
      code: 'LAB_BUILD_FAILED',
      message: expect.stringMatching(/^containerd 2\.4\.0: building: .*cannot find module/) as unknown,
    });
    await expect(goRunner(go, { env: {} })(dir, ['build'], 'building etcd')).rejects.toThrow(/^building etcd: /);
  });
});
