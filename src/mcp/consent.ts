import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { type Decided, refusal, safeText } from './sink.js';

/** What came of asking, as the call log says it. */
export const ANSWERED = {
  yes: 'accepted by the person',
  no: 'declined by the person',
  late: 'not answered by the person',
  cannotAsk: 'denied: the client cannot ask',
} as const;

/** What a person answered when asked to confirm, or why nobody could be asked; `answered` as the call log says it. */
export type Consent =
  | { given: true; answered: typeof ANSWERED.yes }
  | { given: false; answered: Exclude<(typeof ANSWERED)[keyof typeof ANSWERED], typeof ANSWERED.yes>; why: string };

/** A tool's refusal for want of the person's yes: NOT_CONFIRMED, decided as the person (or the client) answered. */
export const notConfirmed = (c: Extract<Consent, { given: false }>): Decided =>
  refusal(c.why, 'NOT_CONFIRMED', { decision: c.answered, consent: c.answered });

/** How long the person has to answer before the answer is no. */
const ANSWER_WITHIN_MS = 5 * 60_000;

/**
 * Asks the person, through the client, to confirm a change (MCP elicitation: a yes/no form). Nobody is asked, and the
 * answer is no, when the client cannot show such a form: the model alone never says yes. Only an accepted form whose
 * box is ticked is a yes; declined, cancelled, unanswered in time or anything else is no.
 */
export async function askPerson(server: McpServer, message: string): Promise<Consent> {
  const caps = server.server.getClientCapabilities();
  if (!caps?.elicitation)
    return {
      given: false,
      answered: ANSWERED.cannotAsk,
      why:
        'refused: this MCP client cannot ask its user for confirmation (it did not declare the elicitation capability), ' +
        'and a change is never made on the model’s word alone; use a client that supports elicitation, or run it from a terminal',
    };
  let result;
  try {
    result = await server.server.elicitInput(
      {
        mode: 'form',
        message: safeText(message),
        requestedSchema: {
          type: 'object',
          properties: {
            confirm: { type: 'boolean', title: 'Yes, do it', description: 'Tick to confirm; anything else refuses', default: false },
          },
          required: ['confirm'],
        },
      },
      { timeout: ANSWER_WITHIN_MS },
    );
  } catch (e) {
    return {
      given: false,
      answered: ANSWERED.late,
      why: `refused: the confirmation could not be asked or was not answered (${(e as Error).message})`,
    };
  }
  if (result.action !== 'accept') return { given: false, answered: ANSWERED.no, why: `refused: the user answered ${result.action}` };
  if (result.content?.confirm !== true)
    return { given: false, answered: ANSWERED.no, why: 'refused: the user did not tick the confirmation' };
  return { given: true, answered: ANSWERED.yes };
}
