import { describe, expect, it } from 'vitest';
import { nodeIp, usedThirdOctets } from './net.js';

describe('lab subnets', () => {
  it('gives the bridge .1, cp-1 .2 and node-i .(2+i)', () => {
    expect(nodeIp(7, 'cp-1')).toBe('10.213.7.2');
    expect(nodeIp(7, 'node-1')).toBe('10.213.7.3');
    expect(nodeIp(7, 'node-200')).toBe('10.213.7.202');
    expect(() => nodeIp(7, 'node-253')).toThrow(/does not fit/);
    expect(() => nodeIp(7, 'node-201')).toThrow(/does not fit/);
  });

  it('puts the other control-plane members above the nodes and the load balancer at .250', () => {
    expect(nodeIp(7, 'cp-2')).toBe('10.213.7.203');
    expect(nodeIp(7, 'cp-3')).toBe('10.213.7.204');
    expect(nodeIp(7, 'lb')).toBe('10.213.7.250');
    expect(nodeIp(7, 'prom')).toBe('10.213.7.251');
    expect(() => nodeIp(7, 'cp-10')).toThrow(/cp-1 to cp-9/);
  });

  it('puts real nodes rnode-1..39 at .211 to .249, between the members and the load balancer', () => {
    expect(nodeIp(7, 'rnode-1')).toBe('10.213.7.211');
    expect(nodeIp(7, 'rnode-39')).toBe('10.213.7.249');
    expect(() => nodeIp(7, 'rnode-40')).toThrow(/rnode-1 to rnode-39/);
    expect(() => nodeIp(7, 'rnode-0')).toThrow(/rnode-1 to rnode-39/);
    expect(nodeIp(7, 'sd-1')).toBe('10.213.7.252');
    expect(nodeIp(7, 'sd-3')).toBe('10.213.7.254');
    expect(() => nodeIp(7, 'sd-4')).toThrow(/sd-1 to sd-3/);
  });

  it('sees which /24s of 10.213.0.0/16 are taken by addresses and routes', () => {
    const used = usedThirdOctets(
      '5: kr-lab-br    inet 10.213.0.1/24 brd 10.213.0.255 scope global kr-lab-br\n10.213.4.0/24 dev kr-t1-br proto kernel scope link src 10.213.4.1\n192.168.10.0/24 dev eth0\n',
    );
    expect([...used].sort((a, b) => a - b)).toEqual([0, 4]);
  });

  it('treats a route covering the whole range as taking every /24', () => {
    expect(usedThirdOctets('10.0.0.0/8 via 192.0.2.1 dev eth0').size).toBe(256);
  });
});
