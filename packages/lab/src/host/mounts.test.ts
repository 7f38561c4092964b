import { describe, expect, it } from 'vitest';
import { mountsUnder, parseMountPoints } from './mounts.js';

const MOUNTINFO = [
  '22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw',
  '301 22 0:60 / /run/kube-runbook/rn/rnode-1/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm rw - tmpfs shm rw,size=65536k',
  '302 22 0:61 / /run/kube-runbook/rn/rnode-1/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs rw - overlay overlay rw',
  '303 22 0:4 net:[4026532] /run/kube-runbook/rn2/rnode-1/containerd/netns/cni-1 rw - nsfs nsfs rw',
  '304 22 254:0 /root/st/rn/nodes/rnode-1/kubelet-root /root/st/rn/nodes/rnode-1/kubelet-root rw - ext4 /dev/vda rw',
  '305 304 0:62 / /root/st/rn/nodes/rnode-1/kubelet-root/pods/u/volumes/x/my\\040vol rw - tmpfs tmpfs rw',
].join('\n');

describe('mounts a real node leaves', () => {
  it('reads mount points, spaces and other escapes decoded', () => {
    expect(parseMountPoints(MOUNTINFO)).toContain('/root/st/rn/nodes/rnode-1/kubelet-root/pods/u/volumes/x/my vol');
    expect(parseMountPoints(MOUNTINFO)).toHaveLength(6);
  });

  it("finds an instance's mounts, the last mounted first, and not another instance's", () => {
    expect(mountsUnder(MOUNTINFO, ['/run/kube-runbook/rn', '/root/st/rn/'])).toEqual([
      '/root/st/rn/nodes/rnode-1/kubelet-root/pods/u/volumes/x/my vol',
      '/root/st/rn/nodes/rnode-1/kubelet-root',
      '/run/kube-runbook/rn/rnode-1/containerd/io.containerd.runtime.v2.task/k8s.io/abc/rootfs',
      '/run/kube-runbook/rn/rnode-1/containerd/io.containerd.grpc.v1.cri/sandboxes/abc/shm',
    ]);
    expect(mountsUnder(MOUNTINFO, ['/nothing/here'])).toEqual([]);
  });
});
