import { describe, expect, it } from 'vitest';
import { memoryLogger } from './logger.js';
import { redact } from './redact.js';

const KEY_BODY =
  'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu';

describe('the logger', () => {
  it('the logger redacts messages and fields before the sink sees them', () => {
    const log = memoryLogger();
    log.warn('revert failed on https://u:pw@node-1/', {
      stderr: `-----BEGIN RSA PRIVATE KEY-----\n${KEY_BODY}\n-----END RSA PRIVATE KEY-----`,
      password: 'x',
    });
    expect(JSON.stringify(log.lines)).not.toMatch(/:pw@|MIIEvQ|"x"/);
    expect(log.lines[0]?.msg).toBe('revert failed on https://u:[redacted]@node-1/');
    expect(redact({ url: 'https://u:pw@h/' })).toEqual({ url: 'https://u:[redacted]@h/' });
  });
});
