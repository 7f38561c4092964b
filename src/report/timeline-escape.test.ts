import { type DefaultTreeAdapterMap, parse } from 'parse5';
import { describe, expect, it } from 'vitest';
import { parseReport } from './load.js';
import { renderTimeline } from './timeline.js';

type Node = DefaultTreeAdapterMap['node'];
type Element = DefaultTreeAdapterMap['element'];

/** What a report.json anyone may have written can hold where a name, a time or a detail belongs. */
const EVIL = `"><img src=x onerror=alert(1)></script><script>alert(2)</script>' x="`;
const T = '2026-11-22T10:00:00.000Z';
const at = (s: number) => new Date(Date.parse(T) + s * 1000).toISOString();
const reading = (s: number, status: string, value: unknown = null, numbers?: Record<string, number>) => ({
  at: at(s),
  status,
  detail: `detail ${EVIL}`,
  value,
  ...(numbers ? { numbers } : {}),
});

/** A report.json with the text above in every field a person or a cluster can choose: names, times, details, messages. */
const hostile = (startedAt = T) =>
  JSON.stringify({
    reportVersion: 1,
    runId: `r-${EVIL}`,
    runbook: `book ${EVIL}`,
    context: `ctx ${EVIL}`,
    status: 'failed',
    reason: `reason ${EVIL}`,
    startedAt,
    endedAt: at(30),
    durationMs: 30_000,
    preflight: [{ check: `check ${EVIL}`, ok: false, detail: `pre ${EVIL}` }],
    steps: [
      {
        index: '1',
        name: `step ${EVIL}`,
        kind: 'expect',
        startedAt: at(1),
        endedAt: EVIL,
        status: 'failed',
        detail: `step detail ${EVIL}`,
        readings: [
          reading(2, EVIL, { series: [{ labels: { [`l${EVIL}`]: EVIL }, value: 3 }] }, { [`{l${EVIL}="${EVIL}"}`]: 3 }),
          reading(3, 'ok', { met: 1, total: 2, objects: [] }, { met: 1, total: 2 }),
        ],
      },
    ],
    guardFirings: [{ at: EVIL, guard: `guard ${EVIL}`, response: EVIL, detail: `fired ${EVIL}` }],
    guardTransitions: [{ at: at(4), guard: `guard ${EVIL}`, status: EVIL, detail: `changed ${EVIL}` }],
    guardReadings: { [`guard ${EVIL}`]: [reading(4, 'violated', { ready: 1, wanted: 2, items: [] }, { ready: 1, wanted: 2 })] },
    faults: [
      {
        faultId: `f ${EVIL}`,
        action: `act ${EVIL}`,
        node: `node ${EVIL}`,
        step: `in ${EVIL}`,
        remediation: false,
        manualRevert: `revert ${EVIL}`,
        appliedAt: at(5),
        revertedAt: EVIL,
        status: 'revert-failed',
        error: `error ${EVIL}`,
        retried: [EVIL],
        attempts: 2,
      },
    ],
    attempts: [{ op: 'revert', attempt: 1, error: `attempt ${EVIL}`, at: EVIL, faultId: `f ${EVIL}`, what: EVIL, node: EVIL }],
    remaining: [
      { faultId: `f ${EVIL}`, action: `act ${EVIL}`, node: `node ${EVIL}`, step: `in ${EVIL}`, remediation: false, manualRevert: EVIL },
    ],
    recoverCommand: `kube-runbook recover ${EVIL}`,
    observations: {
      [`obs ${EVIL}`]: {
        history: [
          reading(6, EVIL, { deletions: [{ at: Date.parse(at(7)), pod: `pod ${EVIL}`, node: `node ${EVIL}`, cause: EVIL }] }),
          reading(8, 'ok', { earliestEviction: { at: EVIL, pod: EVIL, node: EVIL } }),
        ],
      },
    },
    nodes: [
      {
        node: `node ${EVIL}`,
        lease: [
          { at: at(1), ageMs: 100, stale: false },
          { at: EVIL, ageMs: 200, stale: true },
        ],
        ready: [{ at: at(1), status: EVIL }],
        taints: [{ at: at(9), keys: [EVIL] }],
        deleted: [{ at: EVIL, pod: `pod ${EVIL}`, cause: EVIL }],
      },
    ],
    objectives: [
      { name: `objective ${EVIL}`, status: 'missed', withinMs: 1000, startedAt: at(2), endedAt: EVIL, detail: `missed ${EVIL}` },
    ],
  });

function* walk(n: Node): Generator<Node> {
  yield n;
  for (const c of 'childNodes' in n ? n.childNodes : []) yield* walk(c);
  if ('content' in n && n.content) yield* walk(n.content as Node);
}

const elements = (doc: Node) => [...walk(doc)].filter((n): n is Element => 'tagName' in n);
const text = (doc: Node) =>
  [...walk(doc)]
    .filter((n) => n.nodeName === '#text')
    .map((n) => (n as DefaultTreeAdapterMap['textNode']).value)
    .join('');

/** The elements the page is made of; anything else came from the report's text. */
const PAGE_TAGS = new Set(
  'html head meta title style body h1 h2 p br code span section svg g text line rect path polyline table tbody tr th td ul li b pre'.split(
    ' ',
  ),
);

/** The attributes the page writes (and `data-*`); an `on…`, `src` or `style` would be the report's doing. */
const PAGE_ATTRS = new Set('lang charset class x y x1 y1 x2 y2 width height viewBox d points fill stroke role aria-label xmlns'.split(' '));

describe('HTML timeline of a report.json someone else wrote', () => {
  for (const [what, startedAt] of [
    ['hostile names, times and details', T],
    ['a start that is no time', EVIL],
  ] as const)
    it(`shows ${what} as text: no element or attribute comes from it`, () => {
      const page = renderTimeline(parseReport(hostile(startedAt), 'report.json'));
      const doc = parse(page);
      const els = elements(doc);
      expect(els.filter((e) => !PAGE_TAGS.has(e.tagName)).map((e) => e.tagName)).toEqual([]);
      const attrs = els.flatMap((e) => e.attrs.map((a) => a.name));
      expect(attrs.filter((a) => !PAGE_ATTRS.has(a) && !a.startsWith('data-'))).toEqual([]);
      // no value can add a class: the page's classes are its own words
      const classes = els.flatMap((e) => e.attrs.filter((a) => a.name === 'class').flatMap((a) => a.value.split(/\s+/)));
      expect(classes.filter((c) => !/^[\w-]+$/.test(c))).toEqual([]);
      // and the text is there to read, whole
      const shown = text(doc);
      for (const t of [
        `step ${EVIL}`,
        `step detail ${EVIL}`,
        `pre ${EVIL}`,
        `fired ${EVIL}`,
        `revert ${EVIL}`,
        `missed ${EVIL}`,
        `pod ${EVIL}`,
        `{l${EVIL}="${EVIL}"}`,
      ])
        expect(shown).toContain(t);
      expect(doc.childNodes.filter((n) => n.nodeName === '#documentType')).toHaveLength(1);
    });

  it('keeps the times a lane names in its data attributes as they were written', () => {
    const doc = parse(renderTimeline(parseReport(hostile(), 'report.json')));
    const polyline = elements(doc).find((e) => e.tagName === 'polyline')!;
    expect(polyline.attrs.find((a) => a.name === 'data-points')?.value).toBe(`${at(1)}=100 ${EVIL}=200`);
    const deleted = elements(doc).find((e) => e.attrs.some((a) => a.name === 'data-kind' && a.value === 'deleted'))!;
    expect(deleted.attrs.find((a) => a.name === 'data-at')?.value).toBe(EVIL);
  });
});
