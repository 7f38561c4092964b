import { z } from 'zod';
import { parseDuration } from './duration.js';

const DURATION_MESSAGE = 'expected a duration such as 500ms, 10s, 5m or 1h';

/** A duration string (`500ms`, `10s`, `5m`); parsed value is milliseconds. JSON Schema shows it as a string. */
export const duration = () =>
  z
    .string({ error: DURATION_MESSAGE })
    .regex(/^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/, { message: DURATION_MESSAGE })
    .transform((s) => parseDuration(s)!)
    .meta({ description: 'duration: 500ms, 10s, 5m, 1h, 1m30s' });
