/**
 * Where a node without systemd or cron finds what to run when it boots: `<BOOT_ROOT>/<node>/*`, each a script run
 * once in the node's network namespace. The lab's nodes use it (`kube-runbook-lab reboot` runs them), keyed by the
 * node's network namespace, since every lab node shares this machine's disk.
 */
export const BOOT_ROOT = '/var/lib/kube-runbook/boot.d';
