import { serviceStopAction } from './parts/stop-service.js';

/** Stops kube-apiserver on the selected control-plane nodes: the outage of incident 1. */
export default serviceStopAction({
  id: 'stop-apiserver',
  service: 'kube-apiserver',
  kind: 'fault',
  summary: 'Stop kube-apiserver on control-plane nodes; the revert starts it and waits for /readyz.',
  description:
    'Stops the API server on each selected node (control-plane nodes by default) and waits until its process is gone. ' +
    'With every apiserver stopped, kubelets cannot renew their Leases and the cluster cannot be read or changed, ' +
    'which is the outage behind an eviction cascade. The revert starts it and waits until it is healthy again. ' +
    'Preflight checks that the node has the tools and permissions and that the apiserver is found there.',
  defaultNodes: 'control-plane',
  stopsApiserver: true,
  layouts: {
    kubeadm:
      'moves `/etc/kubernetes/manifests/kube-apiserver.yaml` to `/etc/kubernetes/kube-runbook-parked/` and waits until the container (crictl) or process (pgrep) is gone',
    k3s: "runs `systemctl stop k3s`: on a k3s server this stops the controller-manager, scheduler, embedded etcd and the node's kubelet too (containers keep running)",
    lab: "runs the lab's `stop` script of `kube-apiserver` on cp-1 and waits until `status` says stopped",
  },
  k3sWarning:
    'k3s runs the whole control plane in one unit: stopping the apiserver stops k3s (controller-manager, scheduler, kubelet) on this server',
});
