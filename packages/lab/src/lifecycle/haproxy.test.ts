import { describe, expect, it } from 'vitest';
import { haproxyConfig, haproxyService, parseShowStat } from './haproxy.js';
import { HA_LAB } from '../testing/ha-lab.js';

const plan = {
  instance: 'ha1',
  dir: '/s/nodes/lb/haproxy',
  netns: 'kr-ha1-lb',
  vip: '10.213.4.250',
  ...HA_LAB,
  haproxyBinary: '/usr/sbin/haproxy',
};

describe('the HA lab load balancer', () => {
  it('serves the VIP and checks every member /readyz over TLS against the lab CA', () => {
    const cfg = haproxyConfig(plan);
    expect(cfg).toContain('bind 10.213.4.250:6443');
    expect(cfg).toContain('http-check send meth GET uri /readyz');
    expect(cfg).toMatch(/default-server check check-ssl verify required ca-file \/s\/pki\/ca\.crt/);
    expect(cfg.match(/^ {2}server /gm)).toHaveLength(3);
    expect(cfg).toContain('server cp-3 10.213.4.204:6443');
    expect(cfg).toContain('stats socket /s/nodes/lb/haproxy/stats.sock');
    // a member going away: its refused connections go to another member, not back to it
    expect(cfg).toMatch(/^ {2}option redispatch\n {2}retries 1$/m);
  });

  it('runs haproxy in the foreground in the lb namespace, healthy while its monitor URI answers', () => {
    const s = haproxyService(plan);
    expect(s).toMatchObject({ node: 'lb', service: 'haproxy', netns: 'kr-ha1-lb' });
    expect(s.command).toEqual(['/usr/sbin/haproxy', '-db', '-f', '/s/nodes/lb/haproxy/haproxy.cfg']);
    expect(s.health).toContain('http://10.213.4.250:8404/healthz');
  });

  it('reads each backend server state from show stat', () => {
    const csv = [
      '# pxname,svname,qcur,status,lastchg,check_status,check_code',
      'apiserver,FRONTEND,,OPEN,,,',
      'apiservers,cp-1,0,UP,120,L7OK,200',
      'apiservers,cp-2,0,DOWN,3,L4CON,',
      'apiservers,cp-3,0,UP 1/2,1,L7STS,500',
      'apiservers,BACKEND,0,UP,120,,',
      '',
    ].join('\n');
    expect(parseShowStat(csv)).toEqual([
      { server: 'cp-1', status: 'UP', check: 'L7OK/200', lastChangeS: 120 },
      { server: 'cp-2', status: 'DOWN', check: 'L4CON', lastChangeS: 3 },
      { server: 'cp-3', status: 'UP 1/2', check: 'L7STS/500', lastChangeS: 1 },
    ]);
  });
});
