import { z } from 'zod';
import { isKrError, messageOf } from '../../core/errors.js';
import { parseLabelSelector } from '../../kube/labels.js';

/** A label selector param, parsed when the runbook is validated; an error points at the bad key inside it. */
export const labelSelectorParam = () =>
  z
    .string()
    .min(1)
    .superRefine((s, ctx) => {
      try {
        parseLabelSelector(s);
      } catch (e) {
        if (!isKrError(e)) throw e;
        const bad = /is not a label key/.test(e.message) ? /: "(.*)" is not a label key$/.exec(e.message)?.[1] : undefined;
        const at = bad !== undefined ? s.indexOf(bad) : -1;
        ctx.addIssue({ code: 'custom', message: messageOf(e), params: { offset: at < 0 ? 0 : at } });
      }
    });
