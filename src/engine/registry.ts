import { actions } from '../actions/index.js';
import { registryFrom } from '../contract/registry.js';
import { probes } from '../probes/index.js';

/** Every shipped action and probe, loaded on first use. */
export const defaultRegistry = registryFrom(actions, probes);
