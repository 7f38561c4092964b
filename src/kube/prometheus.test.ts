import { describe, expect, it } from 'vitest';
import { delta, histogram, quantile, sample } from './prometheus.js';

const scrape = (counts: number[]) =>
  [
    '# HELP etcd_disk_wal_fsync_duration_seconds The latency distributions of fsync called by WAL.',
    '# TYPE etcd_disk_wal_fsync_duration_seconds histogram',
    ...['0.001', '0.002', '0.004', '0.008', '0.016', '+Inf'].map(
      (le, i) => `etcd_disk_wal_fsync_duration_seconds_bucket{le="${le}"} ${counts[i]}`,
    ),
    `etcd_disk_wal_fsync_duration_seconds_sum 1.5`,
    `etcd_disk_wal_fsync_duration_seconds_count ${counts[5]}`,
    'etcd_server_has_leader 1',
  ].join('\n');

describe('prometheus histograms', () => {
  it('reads cumulative buckets and interpolates quantiles like histogram_quantile', () => {
    const h = histogram(scrape([50, 90, 95, 99, 100, 100]), 'etcd_disk_wal_fsync_duration_seconds');
    expect(h.get(0.001)).toBe(50);
    expect(quantile(0.5, h)).toBeCloseTo(0.001);
    expect(quantile(0.99, h)).toBeCloseTo(0.008);
    expect(quantile(0.995, h)).toBeCloseTo(0.012);
    expect(sample(scrape([0, 0, 0, 0, 0, 0]), 'etcd_server_has_leader')).toBe(1);
  });

  it('takes the quantile of what happened between two scrapes, and caps at the largest finite bucket', () => {
    const before = histogram(scrape([1000, 1000, 1000, 1000, 1000, 1000]), 'etcd_disk_wal_fsync_duration_seconds');
    const after = histogram(scrape([1000, 1000, 1000, 1000, 1000, 1010]), 'etcd_disk_wal_fsync_duration_seconds');
    expect(quantile(0.99, after)).toBeCloseTo(0.001);
    expect(quantile(0.99, delta(after, before))).toBe(0.016);
    expect(quantile(0.99, delta(before, before))).toBeUndefined();
  });
});
