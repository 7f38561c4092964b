import { serviceStopAction } from './parts/stop-service.js';

/** Stops the load balancer in front of the apiservers: the VIP dies while every apiserver is healthy (incident 1 on an HA cluster). */
export default serviceStopAction({
  id: 'stop-load-balancer',
  service: 'haproxy',
  kind: 'fault',
  summary: "Stop HAProxy, the load balancer serving the apiservers' VIP; the revert starts it again.",
  description:
    'Stops the load balancer on each selected node (nodes with the `load-balancer` role by default) and waits until it is ' +
    'gone. Every apiserver stays healthy, but the kubelets and clients that reach them through the VIP cannot: Leases go ' +
    'stale as in a full apiserver outage, while the controller-manager, talking to its own apiserver, still sees them go ' +
    'stale and evicts. Guard it as `apiserver-outage` is guarded. The revert starts it again and waits until it is healthy.',
  defaultNodes: { role: 'load-balancer' },
  layouts: {
    kubeadm:
      'runs `systemctl stop haproxy` on the load-balancer host (HAProxy as the distribution packages it; other load balancers are not covered)',
    k3s: 'runs `systemctl stop haproxy` on the load-balancer host, as on kubeadm',
    lab: "runs the lab's `stop` script of `haproxy` in the `lb` namespace of `lab up --control-planes 3` and waits until `status` says stopped",
  },
});
