/** What the plans of an HA lab's (`--control-planes 3`) services share: the lab's CA and its three members. */
export const HA_LAB = {
  caFile: '/s/pki/ca.crt',
  members: [
    { name: 'cp-1', ip: '10.213.4.2' },
    { name: 'cp-2', ip: '10.213.4.203' },
    { name: 'cp-3', ip: '10.213.4.204' },
  ],
};
