import type { Register } from './types.js';

export const register: Register = (_program, _done) => {};
