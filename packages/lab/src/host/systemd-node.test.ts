import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { SYSTEMD_NODE_BOOT, systemdNodeArgv } from './systemd-node.js';

const node = {
  name: 'sd-1',
  cgroup: 'kube-runbook-lab-sd-1',
  netns: 'sd-1',
  rootfs: '/cache/rootfs',
  dir: '/state/sd-1',
  binds: { '/cache/k8s': '/opt/k8s' },
};

describe('booting a systemd node', () => {
  it('enters the node network namespace and makes the others new, systemd as the PID 1 of its own', () => {
    const argv = systemdNodeArgv(node);
    expect(argv.slice(0, 3)).toEqual(['nsenter', '--net=/run/netns/sd-1', 'unshare']);
    for (const ns of ['--pid', '--fork', '--mount', '--uts', '--ipc', '--cgroup']) expect(argv).toContain(ns);
    expect(SYSTEMD_NODE_BOOT).toMatch(/exec env -i container=kube-runbook TERM=dumb \/lib\/systemd\/systemd --system\n$/);
  });

  it('refuses a name that is not a host name', () => {
    for (const name of ["x'; touch /tmp/pwned; '", 'a b', '-x', 'A', ''])
      expect(() => systemdNodeArgv({ ...node, name })).toThrow(expect.objectContaining({ code: 'LAB_SYSTEMD_NODE' }));
  });

  it('passes every path as an argument of its own, never in the script', () => {
    const hostile = { ...node, dir: '/state/$(reboot)', rootfs: '/c/`id`' };
    const argv = systemdNodeArgv(hostile);
    const script = argv.indexOf(SYSTEMD_NODE_BOOT);
    expect(script).toBeGreaterThan(0);
    expect(argv.slice(script + 1)).toEqual([
      'sh',
      'sd-1',
      '/c/`id`',
      '/state/$(reboot)/upper',
      '/state/$(reboot)/work',
      '/state/$(reboot)/root',
      '/cache/k8s=/opt/k8s',
    ]);
  });

  it('is a script sh parses', () => {
    const r = spawnSync('sh', ['-n', '-c', SYSTEMD_NODE_BOOT], { encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('refuses a bind that is not one absolute path to another', () => {
    const bad: Record<string, string>[] = [{ 'rel/dir': '/opt/x' }, { '/a=b': '/opt/x' }, { '/a': 'opt' }];
    for (const binds of bad)
      expect(() => systemdNodeArgv({ ...node, binds })).toThrow(expect.objectContaining({ code: 'LAB_SYSTEMD_NODE' }));
  });
});
