import { serviceStopAction } from './parts/stop-service.js';

/** Stops the kubelet: containers keep running, nobody kills them when the node reconnects later. */
export default serviceStopAction({
  id: 'stop-kubelet',
  service: 'kubelet',
  kind: 'remediation',
  summary: 'Stop the kubelet on nodes (containers keep running); the revert starts it and waits for /healthz.',
  description:
    'Stops the kubelet on each selected node (workers by default) and waits until it is gone; the containers it started keep ' +
    'running. As a fault it makes the node stop heartbeating; as a remediation it keeps running containers alive while the ' +
    'control plane is unreliable: a kubelet that is not running cannot kill the containers of pods deleted meanwhile when the ' +
    'node reconnects (incident 1). The revert starts it and waits until it is healthy.',
  defaultNodes: 'workers',
  layouts: {
    kubeadm: 'runs `systemctl stop kubelet`; the revert `systemctl start kubelet` and waits for `http://127.0.0.1:10248/healthz`',
    k3s: 'runs `systemctl stop k3s-agent` on agents (containerd and the containers keep running); on a server node the kubelet is part of `k3s`, so the whole server stops',
    lab: "runs the lab's `stop` script of the kubelet simulator on the node; its simulated containers keep running",
  },
  k3sWarning: 'on a k3s server the kubelet is part of the k3s unit: stopping it stops the whole control plane on this node',
});
