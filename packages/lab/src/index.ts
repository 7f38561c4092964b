/** The lab: a real control plane and simulated kubelets on this machine (see `kube-runbook-lab --help`). */
export { ensureLabBinaries } from './install/ensure.js';
export { DEFAULT_MINOR, SUPPORTED_MINORS } from './install/binaries.js';
export { labDown } from './lifecycle/down.js';
export { FLEET_LABEL } from './sim/fleet.js';
export { readLabInfo, type LabInfo } from './host/info.js';
export { labPaths, labNames } from './host/paths.js';
export { readRuntime } from './sim/runtime.js';
export { type LabUpOptions } from './host/settings.js';
export { rebootLabNode } from './lifecycle/reboot.js';
export { labStatus } from './lifecycle/status.js';
export { labUp } from './lifecycle/up.js';
export { chooseNodes, type NodeChoice } from './lifecycle/node-choice.js';
export { readRealRuntime, runtimeChange, type RealContainer, type RealRuntimeState } from './lifecycle/real-runtime.js';
