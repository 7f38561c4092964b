import { serviceStopAction } from './parts/stop-service.js';

/** Stops kube-scheduler: new pods stay Pending, running ones are untouched. */
export default serviceStopAction({
  id: 'stop-scheduler',
  service: 'kube-scheduler',
  kind: 'fault',
  summary: 'Stop kube-scheduler on control-plane nodes; the revert starts it and waits for /healthz.',
  description:
    'Stops the scheduler on each selected node (control-plane nodes by default) and waits until its process is gone. ' +
    'Pods created meanwhile stay Pending; running pods are not touched. The revert starts it and waits until it is healthy.',
  defaultNodes: 'control-plane',
  layouts: {
    kubeadm:
      'moves `/etc/kubernetes/manifests/kube-scheduler.yaml` to `/etc/kubernetes/kube-runbook-parked/` and waits until the container (crictl) or process (pgrep) is gone',
    k3s: "runs `systemctl stop k3s`: k3s has no separate scheduler, so this stops the apiserver, controller-manager and the server's kubelet as well",
    lab: "runs the lab's `stop` script of `kube-scheduler` on cp-1 and waits until `status` says stopped",
  },
  k3sWarning: 'k3s has no separate scheduler: stopping it stops the whole k3s server (apiserver, controller-manager, kubelet) on this node',
});
