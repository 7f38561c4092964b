import { describe, expect, it } from 'vitest';
import { pauseTagOf, WORKLOAD_IMAGE } from './images.js';

describe('lab images', () => {
  it("tags the pause image as the release's build/pause/Makefile does", () => {
    expect(pauseTagOf('# comment\nTAG ?= 3.10.2\nREV = $(shell git describe)\n')).toBe('3.10.2');
    expect(pauseTagOf('no tag here')).toBeUndefined();
  });

  it('names images under localhost/, which no registry serves', () => {
    expect(WORKLOAD_IMAGE.startsWith('localhost/')).toBe(true);
  });
});
