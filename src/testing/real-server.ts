import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { realClock } from '../core/clock.js';
import type { Reading } from '../contract/probe.js';
import { flush } from './fake-clock.js';
import type { ProbeRun, ProbeTester } from './probe-tester.js';

/** A real HTTP server on 127.0.0.1 for probes that talk HTTP: the test decides each answer. */
export class TestServer {
  private server: Server | undefined;

  /** Starts serving with `handler`; its base URL. */
  async start(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
    const server = (this.server = createServer(handler));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (server) await new Promise((r) => server.close(r));
  }
}

/**
 * Waits until `run` yielded a reading matching `pred`, for a probe that talks to a real server: real time passes for
 * the server's answers (`realMs`) and the fake clock moves (`fakeMs`) in turns, `tries` times at most.
 */
export async function readingFromServer(
  t: ProbeTester,
  run: ProbeRun,
  pred: (r: Reading) => boolean,
  o: { tries: number; realMs: number; fakeMs: number },
): Promise<Reading> {
  for (let i = 0; i < o.tries; i++) {
    const r = run.readings.find(pred);
    if (r) return r;
    await realClock.sleep(o.realMs);
    await t.advance(o.fakeMs);
    await flush();
  }
  throw new Error('no reading');
}
