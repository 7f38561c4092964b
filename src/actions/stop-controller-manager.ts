import { serviceStopAction } from './parts/stop-service.js';

/** Stops kube-controller-manager: no node lifecycle controller, so no NotReady taints and no evictions. */
export default serviceStopAction({
  id: 'stop-controller-manager',
  service: 'kube-controller-manager',
  kind: 'remediation',
  stopsEvictions: 'controller-manager',
  // its dead-man must not bring the node lifecycle controller back while kubelets are still silent
  leasesRenewedFirst: true,
  summary: 'Stop kube-controller-manager to freeze evictions; the revert starts it and waits for /healthz.',
  description:
    'Stops the controller-manager on each selected node (control-plane nodes by default). Without it the node lifecycle ' +
    'controller neither taints nodes whose Leases went stale nor evicts their pods: the remediation that freezes an eviction ' +
    'cascade while kubelets cannot heartbeat. Undo it only once the Leases are fresh again (`rollback.waitFor`), since ' +
    'restarting it earlier is the cascade. The revert starts it and waits until it is healthy.',
  defaultNodes: 'control-plane',
  layouts: {
    kubeadm:
      'moves `/etc/kubernetes/manifests/kube-controller-manager.yaml` to `/etc/kubernetes/kube-runbook-parked/` and waits until the container (crictl) or process (pgrep) is gone',
    k3s: "runs `systemctl stop k3s`: k3s has no separate controller-manager, so this stops the apiserver, scheduler and the server's kubelet as well",
    lab: "runs the lab's `stop` script of `kube-controller-manager` on cp-1 and waits until `status` says stopped",
  },
  k3sWarning: 'k3s has no separate controller-manager: stopping it stops the whole k3s server (apiserver, scheduler, kubelet) on this node',
});
