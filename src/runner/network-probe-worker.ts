/**
 * The network probes' own thread: a cell on a remote target probes from here, so neither the
 * probes' sockets nor their timer run on the thread that streams and stamps the cell's requests,
 * and the probes' stamps do not wait behind that thread's work either. Started by
 * `withNetworkProbes`; not an entry point of its own. Messages in: `during` (start the timer),
 * `stop` (post the round trips and end), `abort` (stop the probes before the cell).
 */
import { parentPort, workerData } from 'node:worker_threads'
import { ServegateError } from '../errors.ts'
import { trustCa } from '../http-request.ts'
import type { NetworkProbes } from '../schema/run.ts'
import { NetworkProbeSession } from './network-probes.ts'

/** What the thread is started with. */
export interface ProbeWorkerSetup {
  origin: string
  /** Sent with each HTTP probe (the API key's `authorization`); held in memory only. */
  headers: Record<string, string>
  /** The CA (PEM) `--ca-file` names for `origin`, or null for the system's CAs. */
  ca: string | null
}

/** What the thread posts: ready after the probes before the cell, then the round trips. */
export type FromProbeWorker =
  { kind: 'ready' } | { kind: 'probes'; probes: Omit<NetworkProbes, 'adjusted'> } | { kind: 'failed'; message: string }

const port = parentPort
if (port === null)
  throw new ServegateError('INTERNAL', 'network-probe-worker.ts runs only as a worker thread (started by withNetworkProbes)')
const setup = workerData as ProbeWorkerSetup
if (setup.ca !== null) trustCa(setup.origin, setup.ca)
const post = (message: FromProbeWorker): void => port.postMessage(message)
const aborted = new AbortController()
let session: NetworkProbeSession | null = null
let stopping = false

port.on('message', (message: 'during' | 'stop' | 'abort') => {
  if (message === 'abort') aborted.abort()
  if (message === 'during') session?.during()
  if (message === 'stop') {
    stopping = true
    aborted.abort()
    void session?.stop().then((probes) => {
      post({ kind: 'probes', probes })
      port.close()
    })
  }
})

try {
  session = await NetworkProbeSession.start(setup.origin, setup.headers, aborted.signal)
  if (stopping) post({ kind: 'probes', probes: await session.stop() })
  else post({ kind: 'ready' })
} catch (error) {
  post({ kind: 'failed', message: (error as Error).message })
}
