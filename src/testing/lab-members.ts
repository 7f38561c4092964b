/** The three control-plane members of an HA lab (`--control-planes 3`) as the lab's plans list them. */
export const HA_MEMBERS = [
  { name: 'cp-1', ip: '10.213.4.2' },
  { name: 'cp-2', ip: '10.213.4.203' },
  { name: 'cp-3', ip: '10.213.4.204' },
];
