/** The lab: a real control plane and simulated kubelets on this machine (see `kube-runbook lab --help`). */
export { ensureLabBinaries } from './ensure.js';
export { labDown, type DownOptions, type DownReport } from './down.js';
export { readLabInfo, type LabInfo, type LabNodeInfo, type LabBinariesInfo } from './info.js';
export { installLab, canAutoInstall, MANUAL_STEPS } from './install.js';
export { labPaths, labNames, labHome, checkInstance, DEFAULT_INSTANCE, type LabPaths, type LabNames } from './paths.js';
export { readRuntime, type RuntimeState, type SimContainer, type KillRecord } from './runtime.js';
export { resolveSettings, type LabSettings, type LabUpOptions } from './settings.js';
export { labStatus, type LabStatus, type ComponentStatus } from './status.js';
export { labUp, simulatorScript, type LabUpRunOptions } from './up.js';
