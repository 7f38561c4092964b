import { describe, expect, it } from 'vitest';
import { redact, redactStrings, redactText } from './redact.js';

const KEY_BODY =
  'MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\nMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu';
const JWT = 'eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJlLXBhcnQ';

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

  it('removes bearer tokens and JWTs, wherever they stand', () => {
    expect(redactText('GET /api: 401 (Authorization: Bearer abc.def-123)')).toBe('GET /api: 401 (Authorization: Bearer [redacted])');
    expect(redactText(`token ${JWT} expired`)).toBe('token [redacted] expired');
  });

  it("removes an Authorization header's credentials after its scheme, as a header, in JSON and as OTLP headers write it", () => {
    expect(redactText('Authorization: Basic dXNlcjpodW50ZXIy')).toBe('Authorization: Basic [redacted]');
    expect(redactText('{"authorization":"Basic dXNlcjpodW50ZXIy"}')).toBe('{"authorization":"Basic [redacted]"}');
    expect(redactText('authorization=Basic%20dXNlcjpodW50ZXIy,x=1')).toBe('authorization=Basic%20[redacted],x=1');
    expect(redactText('Proxy-Authorization: Digest abc123')).toBe('Proxy-Authorization: Digest [redacted]');
    // the word alone is not a header
    expect(redactText('authorization failed: basic checks')).toBe('authorization failed: basic checks');
  });

  it('removes API-key, token and cookie headers', () => {
    expect(redactText('X-Api-Key: 9f8e7d6c5b4a')).toBe('X-Api-Key: [redacted]');
    expect(redactText('headers: {"x-api-key": "9f8e7d6c5b4a", "accept": "json"}')).toBe(
      'headers: {"x-api-key": "[redacted]", "accept": "json"}',
    );
    expect(redactText('api-key=abc,x-auth-token=def')).toBe('api-key=[redacted],x-auth-token=[redacted]');
    expect(redactText('Cookie: session=abc123')).toBe('Cookie: [redacted]');
  });

  it('removes credentials from query parameters and keeps the others', () => {
    expect(redactText('GET https://prom/api?query=up&access_token=abc123&x=1 failed')).toBe(
      'GET https://prom/api?query=up&access_token=[redacted]&x=1 failed',
    );
    expect(redactText('https://h/p?token=t0k&api_key=k3y&X-Amz-Signature=5ig#frag')).toBe(
      'https://h/p?token=[redacted]&api_key=[redacted]&X-Amz-Signature=[redacted]#frag',
    );
    expect(redactText('https://h/p?key=AIzaSy123&q=up')).toBe('https://h/p?key=[redacted]&q=up');
    expect(redactText('https://h/p?monkey=1&q=a')).toBe('https://h/p?monkey=1&q=a');
  });

  it('changes nothing more when applied again', () => {
    const text = `https://u:p@h/?token=t Authorization: Basic abc X-Api-Key: k Bearer ${JWT} -----BEGIN PRIVATE KEY-----\n${KEY_BODY}`;
    const once = redactText(text);
    expect(redactText(once)).toBe(once);
    expect(once).not.toMatch(/:p@|=t\b|abc|: k\b|eyJ|MIIEvQ/);
  });

  it('drops values under secret-looking keys, at any depth, and keeps the value itself when nothing is to remove', () => {
    expect(redact({ a: [{ apiKey: 'k', headers: { Cookie: 'c' } }], privateKey: 'p' }, Infinity)).toEqual({
      a: [{ apiKey: '[redacted]', headers: { Cookie: '[redacted]' } }],
      privateKey: '[redacted]',
    });
    const clean = { nodes: ['node-1'], detail: 'ok', at: new Date(0) };
    expect(redact(clean, Infinity)).toBe(clean);
    expect(redactStrings(clean)).toBe(clean);
    const dirty = { keep: { n: 1 }, url: 'https://u:pw@h/' };
    const out = redactStrings(dirty) as typeof dirty;
    expect(out).toEqual({ keep: { n: 1 }, url: 'https://u:[redacted]@h/' });
    expect(dirty.url).toBe('https://u:pw@h/');
    expect(out.keep).toBe(dirty.keep);
  });
});
