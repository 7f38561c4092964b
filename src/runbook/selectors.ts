import { z } from 'zod';
import { NodeRole } from '../inventory/schema.js';

/**
 * Which nodes an action or probe applies to. Strings: `all`, `workers`, `control-plane`. Objects filter by
 * `role`, `names`, `zone` and a Kubernetes label `selector` (all must match), then `count` or `percent`
 * pick that many of the matches, in name order (so a plan is repeatable).
 */
const NodeSelectorObject = z
  .strictObject({
    role: NodeRole.optional(),
    names: z.array(z.string().min(1)).min(1).optional(),
    zone: z.string().min(1).optional(),
    selector: z.string().min(1).optional().meta({ description: 'Kubernetes label selector, e.g. node-role.kubernetes.io/worker' }),
    count: z.number().int().min(1).optional(),
    percent: z.number().gt(0).max(100).optional(),
  })
  .refine((s) => !(s.count !== undefined && s.percent !== undefined), { message: 'give count or percent, not both' });

export const NodeSelector = z.union([z.enum(['all', 'workers', 'control-plane']), NodeSelectorObject]);
export type NodeSelector = z.infer<typeof NodeSelector>;
