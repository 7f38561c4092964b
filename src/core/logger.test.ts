import { describe, expect, it } from 'vitest';
import { memoryLogger, redact, redactText } from './logger.js';

const KEY_BODY =
  'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu';

describe('redaction', () => {
  it('removes a PEM private key of any kind, also inside JSON and when cut short, and keeps certificates', () => {
    for (const kind of ['', 'RSA ', 'EC ', 'ENCRYPTED ', 'OPENSSH ']) {
      const pem = `-----BEGIN ${kind}PRIVATE KEY-----\n${KEY_BODY}\n-----END ${kind}PRIVATE KEY-----`;
      const out = redactText(`key: ${pem} (done)`);
      expect(out).toBe(`key: -----BEGIN ${kind}PRIVATE KEY-----[redacted]-----END ${kind}PRIVATE KEY----- (done)`);
      expect(redactText(JSON.stringify({ stderr: pem }))).not.toContain('MIIEvQIBADAN');
    }
    expect(redactText(`ssh: -----BEGIN OPENSSH PRIVATE KEY-----\n${KEY_BODY.slice(0, 40)}`)).toBe(
      'ssh: -----BEGIN OPENSSH PRIVATE KEY-----[redacted]-----END OPENSSH PRIVATE KEY-----',
    );
    const cert = `-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----`;
    expect(redactText(cert)).toBe(cert);
  });

  it("removes the password of a URL's user:password@ and keeps the user and host", () => {
    expect(redactText('cannot query https://admin:s3cr%40t@prom.example:9090/api/v1/query: 401')).toBe(
      'cannot query https://admin:[redacted]@prom.example:9090/api/v1/query: 401',
    );
    expect(redactText('git clone http://ci:hunter2@git.local/repo.git')).toBe('git clone http://ci:[redacted]@git.local/repo.git');
    expect(redactText('ssh ops@10.0.0.5 and https://prom.example/?q=a:b@c')).toBe('ssh ops@10.0.0.5 and https://prom.example/?q=a:b@c');
  });

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
