/** The lab: a real control plane and simulated kubelets on this machine (see `kube-runbook lab --help`). */
export { ensureLabBinaries } from './install/ensure.js';
export { DEFAULT_MINOR, SUPPORTED_MINORS } from './install/binaries.js';
export { labDown, type DownOptions, type DownReport } from './lifecycle/down.js';
export { readLabInfo, type LabInfo, type LabNodeInfo, type LabBinariesInfo } from './host/info.js';
export { installLab, canAutoInstall, MANUAL_STEPS } from './install/install.js';
export { labPaths, labNames, labHome, checkInstance, DEFAULT_INSTANCE, type LabPaths, type LabNames } from './host/paths.js';
export { readRuntime, type RuntimeState, type SimContainer, type KillRecord } from './sim/runtime.js';
export { resolveSettings, type LabSettings, type LabUpOptions } from './host/settings.js';
export { labStatus, type LabStatus, type ComponentStatus } from './lifecycle/status.js';
export { labUp, simulatorScript, type LabUpRunOptions } from './lifecycle/up.js';
