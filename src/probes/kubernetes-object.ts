import { z } from 'zod';
import { reactive, watching } from '../contract/readings.js';
import { collectionPath, discoverResource } from '../kube/discovery.js';
import { parseLabelSelector } from '../kube/labels.js';
import { objectsSpec } from '../kube/objects.js';
import { CEL_COST_LIMIT, type CelBudget, type CelVerdict, celCondition, compileCondition } from './parts/cel.js';
import { labelSelectorParam } from './parts/label-selector.js';
import { defineProbe } from '../contract/probe.js';

const Aggregate = z.union([
  z.enum(['all', 'any']),
  z.strictObject({ atLeast: z.number().int().min(1).meta({ description: 'at least this many objects meet the condition' }) }),
]);

const Params = z.strictObject({
  apiVersion: z
    .string()
    .min(1)
    .meta({ description: 'the resource’s apiVersion: v1, apps/v1, a CRD’s group/version', examples: ['apps/v1'] }),
  kind: z
    .string()
    .min(1)
    .meta({ description: 'the resource’s kind: Deployment, ConfigMap, a CRD’s kind', examples: ['Deployment'] }),
  namespace: z.string().min(1).optional().meta({ description: 'only objects in this namespace (all namespaces when absent)' }),
  name: z.string().min(1).optional().meta({ description: 'only the object of this name' }),
  selector: labelSelectorParam().optional().meta({ description: 'only objects matching this label selector' }),
  fieldSelector: z.string().min(1).optional().meta({ description: 'only objects matching this field selector (the apiserver applies it)' }),
  condition: celCondition().meta({
    description:
      'a CEL expression on `object` (the object as the apiserver sends it) that must be true, e.g. `object.status.availableReplicas >= object.spec.replicas - 1`',
    examples: ['object.status.availableReplicas >= object.spec.replicas - 1'],
  }),
  aggregate: Aggregate.default('all').meta({ description: 'all objects, any of them, or {atLeast: N} must meet the condition' }),
  whenNone: z.enum(['violated', 'ok']).default('violated').meta({ description: 'the reading when no object is selected' }),
});

/**
 * What one judgement may spend on conditions (a few hundred milliseconds at most): objects left over are judged in the next one, after
 * the event loop has had its turn (keepalives, other probes). Each object's verdict is kept until it changes.
 */
const JUDGEMENT_COST = 2 * CEL_COST_LIMIT;

export interface ObjectVerdict {
  object: string;
  ok: boolean;
  error?: string;
}

/** Any Kubernetes object, judged by a CEL condition on every watch event. */
export default defineProbe({
  meta: {
    id: 'kubernetes-object',
    summary: 'Any Kubernetes resource, selected by namespace, name or selectors, judged by a CEL condition per object.',
    description:
      'Finds `kind` in the apiserver’s discovery document of `apiVersion`, watches the selected objects through the ' +
      'shared watch and evaluates `condition` (CEL, as Kubernetes uses it in admission policies: the object is the ' +
      'variable `object`, whole numbers are ints) on every event. An object whose condition cannot be evaluated (a ' +
      'field it reads is absent: use `has(object.status.x)`) does not meet it, and the reading says why. `aggregate` ' +
      'says how many must meet it: `all`, `any` or `{atLeast: N}`. The condition is type-checked by `validate`, which ' +
      'points inside the expression at what is wrong. `matches()` takes RE2 patterns and runs in time linear in the ' +
      'text. One evaluation may cost at most 1,000,000 (each step 1, a list 1 per element, text 1 per 10 characters): ' +
      'past that the object does not meet the condition and the reading says so. A judgement spends at most 2,000,000 on ' +
      'objects whose verdict it does not know (a verdict is kept until its object changes); the rest are judged in the ' +
      'next one, the reading unknown meanwhile. `validate` refuses a condition that ' +
      'costs more even on the smallest object. The CEL library is @marcbachmann/cel-js (no dependencies, maintained, ' +
      'with a checker and source positions). Unknown while the apiserver cannot be watched or does not serve the resource.',
    params: Params,
    // Discovery (/api, /apis/...) is readable by every authenticated user (Kubernetes' system:discovery role).
    access: [
      {
        apiGroup: '(group of `apiVersion`)',
        resource: '(plural of `kind`)',
        of: { apiVersion: 'apiVersion', kind: 'kind' },
        verbs: ['list', 'watch'],
        namespace: { param: 'namespace' },
        why: 'watches the selected objects of `kind` (in `namespace`, or every namespace)',
      },
    ],
    numbers: {
      what: '`met`, the selected objects that meet the condition, and `total`, all those selected',
      of: (v: { met: number; total: number }) => ({ met: v.met, total: v.total }),
    },
  },
  start(ctx, params) {
    const fieldSelector =
      [params.name ? `metadata.name=${params.name}` : undefined, params.fieldSelector].filter(Boolean).join(',') || undefined;
    const specs = async () => {
      const r = await discoverResource(ctx.kube, params.apiVersion, params.kind, ctx.signal);
      return { objects: objectsSpec(collectionPath(r, params.namespace), params.selector, fieldSelector) };
    };
    const matches = params.selector ? parseLabelSelector(params.selector) : () => true;
    const condition = compileCondition(params.condition);
    const agg = params.aggregate;
    const need = (total: number) => (agg === 'all' ? total : agg === 'any' ? 1 : agg.atLeast);
    const what = agg === 'all' ? 'all' : agg === 'any' ? 'any' : `at least ${agg.atLeast}`;
    // by object version: a stored object is replaced, never changed, when the apiserver sends a new one
    const judged = new WeakMap<object, CelVerdict>();
    return watching(ctx, specs, ({ objects }, watches) =>
      reactive(ctx, {
        watches,
        judge(now) {
          const verdicts: ObjectVerdict[] = [];
          const budget: CelBudget = { left: JUDGEMENT_COST };
          let waiting = 0;
          for (const o of objects.store.values()) {
            if (
              (params.namespace && o.namespace && o.namespace !== params.namespace) ||
              (params.name && o.name !== params.name) ||
              !matches(o.labels)
            )
              continue;
            let v = judged.get(o.raw);
            if (!v) {
              if (budget.left < CEL_COST_LIMIT) {
                waiting++;
                continue;
              }
              v = condition(o.raw, budget);
              judged.set(o.raw, v);
            }
            verdicts.push({ object: o.namespace ? `${o.namespace}/${o.name}` : o.name, ok: v.ok, ...(v.error ? { error: v.error } : {}) });
          }
          if (waiting > 0) {
            const detail = `${waiting} of ${waiting + verdicts.length} ${params.kind} not judged yet: the condition costs more than ${JUDGEMENT_COST.toLocaleString('en')} over them, judging on`;
            return {
              status: 'unknown',
              value: { met: verdicts.filter((v) => v.ok).length, total: verdicts.length, objects: [] },
              detail,
              recheckAt: now,
            };
          }
          verdicts.sort((a, b) => a.object.localeCompare(b.object));
          const met = verdicts.filter((v) => v.ok).length;
          const total = verdicts.length;
          const failing = verdicts.filter((v) => !v.ok);
          const status = total === 0 ? params.whenNone : met >= need(total) ? 'ok' : 'violated';
          const list = failing
            .slice(0, 3)
            .map((v) => (v.error ? `${v.object} (${v.error})` : v.object))
            .join(', ');
          const detail =
            total === 0
              ? `no ${params.kind} selected`
              : `${met}/${total} ${params.kind} meet the condition (${what} must)${failing.length ? `; not: ${list}${failing.length > 3 ? ', …' : ''}` : ''}`;
          return { status, value: { met, total, objects: verdicts.slice(0, 50) }, detail };
        },
      }),
    );
  },
});
