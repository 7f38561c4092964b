import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { safeText } from './sink.js';

/** What a person answered when asked to confirm, or why nobody could be asked. */
export type Consent = { given: true } | { given: false; why: string };

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
    return { given: false, why: `refused: the confirmation could not be asked or was not answered (${(e as Error).message})` };
  }
  if (result.action !== 'accept') return { given: false, why: `refused: the user answered ${result.action}` };
  if (result.content?.confirm !== true) return { given: false, why: 'refused: the user did not tick the confirmation' };
  return { given: true };
}
